"""Constrained SAC (issue 54 item 1): the cost critic learns the violations, the multiplier follows the limit."""

import numpy as np
import pytest
import torch

from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.data.batches import Batch
from robot_rl.policies.sac_lagrangian import SACLagrangianAgent, SACLagrangianConfig, discounted_limit
from tests.policies.batches import batch_of


def batch(rng: np.random.Generator, cost: float) -> Batch:
    obs = rng.normal(size=(32, 6)).astype(np.float32)
    return batch_of(
        {
            "obs": {"state": obs},
            "next_obs": {"state": obs + 0.01},
            "action": rng.uniform(-1, 1, (32, 3)).astype(np.float32),
            "reward": np.zeros(32, np.float32),
            "cost": np.full(32, cost, np.float32),
            "discount": np.full(32, 0.9, np.float32),
            "is_demo": np.zeros(32, bool),
        }
    )


def agent_for_the_limit() -> SACLagrangianAgent:
    config = SACLagrangianConfig(utd=1, critic_actor_ratio=1, discount=0.9, cost_limit=1.0, episode_steps=100)
    return SACLagrangianAgent({"state": (6,)}, 3, config, seed=0)


def test_the_multiplier_rises_above_the_limit_and_falls_below_it():
    limit = discounted_limit(1.0, 100, 0.9)  # 0.01 per step, discounted: ~0.1
    assert limit == pytest.approx(0.01 * (1 - 0.9**100) / 0.1)
    for expected_cost, direction in ((limit + 0.5, 1), (limit - 0.05, -1)):
        agent = agent_for_the_limit()
        assert agent.limit == pytest.approx(limit)
        before = float(agent.multiplier.detach())
        for _ in range(50):
            agent.step_multiplier(torch.tensor(expected_cost))
        assert np.sign(float(agent.multiplier.detach()) - before) == direction


def test_the_cost_critic_learns_the_violations_and_the_policy_pays_for_them():
    agent = agent_for_the_limit()
    rng = np.random.default_rng(0)
    for _ in range(200):
        metrics = agent.update(lambda: batch(rng, 1.0))  # every step violates: Q_c heads for 1 / (1 - 0.9) = 10
    assert float(metrics["cost_q_mean"]) > 2.0 and float(metrics["policy_cost_q"]) > agent.limit
    assert float(metrics["multiplier"]) > 1.2  # the policy's expected cost stayed above the limit: lambda rose


def test_the_multiplier_and_cost_critic_are_checkpointed():
    config = SACLagrangianConfig(utd=1, critic_actor_ratio=1)
    agent = SACLagrangianAgent({"state": (6,)}, 3, config, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(20):
        agent.update(lambda: batch(rng, 1.0))
    clone = SACLagrangianAgent({"state": (6,)}, 3, config, seed=1)
    clone.load_state_dict(agent.state_dict())
    assert torch.equal(clone.log_multiplier, agent.log_multiplier)
    probe = {"state": torch.ones(2, 6)}
    features = agent.encoder(probe)
    action = torch.zeros(2, 3)
    assert torch.equal(clone.cost_critic(features, action), agent.cost_critic(features, action))


def test_the_composed_config_gives_the_tasks_episode_length_and_checks_the_limit():
    cfg = load_config(["agent=sac_lagrangian", "task=pick_cube_hazard"])
    assert cfg.agent.episode_steps == cfg.task.episode_steps and cfg.agent.name == "sac_lagrangian"
    with pytest.raises(ConfigError, match="cost_limit"):
        SACLagrangianAgent({"state": (6,)}, 3, SACLagrangianConfig(cost_limit=-1.0))
