"""CQL / Cal-QL: the conservative term pushes unsupported actions' values down, Cal-QL never below the data's
Monte-Carlo return, for the SAC and CQN families."""

import numpy as np
import pytest
import torch

from robot_rl.core.config import ConfigError
from robot_rl.data import ReplayBuffer
from robot_rl.policies.conservative import ConservativeConfig, continuous_penalty, discrete_penalty
from robot_rl.policies.cqn import CQNAgent, CQNConfig
from robot_rl.policies.sac import SACAgent, SACConfig

SHAPES = {"state": (3,)}


def test_cal_ql_lifts_policy_values_below_the_return_and_cql_does_not():
    rows = torch.zeros(4, 2)
    q_low = lambda rows, actions: torch.full((2, len(rows)), -5.0)
    policy = lambda rows: (torch.zeros(len(rows), 1), torch.zeros(len(rows)))
    generator = torch.Generator().manual_seed(0)
    returns = torch.full((4,), 3.0)
    q_data = torch.full((2, 4), -5.0)
    cql, _ = continuous_penalty(ConservativeConfig("cql"), q_low, policy, rows, rows, rows, q_data, None, generator)
    calql, metrics = continuous_penalty(
        ConservativeConfig("calql"), q_low, policy, rows, rows, rows, q_data, returns, generator
    )
    assert calql > cql + 5 * 7  # the policy's values count at the return (3), not at -5: a gap of ~8 per unit alpha
    assert float(metrics["calql_bound_rate"]) == 1.0
    with pytest.raises(ValueError, match="mc_return"):
        continuous_penalty(ConservativeConfig("calql"), q_low, policy, rows, rows, rows, q_data, None, generator)
    bins = torch.tensor([[[0.0, 1.0, 2.0]]])  # (B=1, M=1, bins=3), the data chose bin 0
    low, _ = discrete_penalty(ConservativeConfig("cql", alpha=1.0), bins, bins[..., 0], torch.ones(1, 1), None)
    lifted, _ = discrete_penalty(
        ConservativeConfig("calql", alpha=1.0), bins, bins[..., 0], torch.ones(1, 1), torch.tensor([5.0])
    )
    assert float(low) == pytest.approx(float(torch.logsumexp(bins[0, 0], 0)))
    assert float(lifted) == pytest.approx(5.0 + np.log(3.0))


def test_bad_settings_are_named():
    with pytest.raises(ConfigError, match="pretrain.algorithm"):
        ConservativeConfig("iqlx").validate()
    with pytest.raises(ConfigError, match="pretrain.actions"):
        ConservativeConfig(actions=0).validate()


def offline_buffer(seed: int = 0) -> ReplayBuffer:
    """Episodes whose actions are always near +0.5 (a narrow behaviour policy), reward 1 - |a - 0.5|."""
    rng = np.random.default_rng(seed)
    buffer = ReplayBuffer(2_000, {"state": ((3,), np.float32)}, 2)
    for _ in range(40):
        state = rng.normal(size=3).astype(np.float32)
        for t in range(10):
            action = np.clip(0.5 + 0.05 * rng.normal(size=2), -1, 1).astype(np.float32)
            next_state = (state + 0.1 * rng.normal(size=3)).astype(np.float32)
            reward = float(1.0 - np.abs(action - 0.5).mean())
            buffer.add({"state": state}, action, reward, {"state": next_state}, False, t == 9)
            state = next_state
    buffer.set_returns_to_go(0.9)
    return buffer


@pytest.mark.slow
@pytest.mark.parametrize("family", ["sac", "cqn"])
def test_conservative_pretraining_values_unseen_actions_below_the_datas(family):
    """Offline on a narrow behaviour policy: without the term the critic's values of actions the data never took
    stay where initialisation and bootstrapping put them; with CQL / Cal-QL they fall below the data's."""
    buffer = offline_buffer()
    gaps = {}
    for algorithm in ("none", "calql"):
        torch.manual_seed(0)
        if family == "sac":
            agent = SACAgent(SHAPES, 2, SACConfig(hidden=[64, 64], utd=1, discount=0.9, device="cpu"), seed=0)
        else:
            agent = CQNAgent(SHAPES, 2, CQNConfig(hidden=64, utd=1, discount=0.9, device="cpu"), seed=0)
        agent.conservative = ConservativeConfig(algorithm, alpha=5.0, actions=4)
        rng = np.random.default_rng(0)

        def sample(rng=rng):
            return buffer.sample(64, rng, gamma=0.9)

        for _ in range(150):
            agent.update(sample)
        batch = buffer.sample(256, rng, gamma=0.9)
        obs = agent.obs_tensors(batch.obs)
        unseen = -torch.ones(256, 2)  # the far corner of the action box
        gaps[algorithm] = float(q_values(agent, obs, unseen) - q_values(agent, obs, batch.action))
    assert gaps["calql"] < gaps["none"] - 0.1, gaps
    assert gaps["calql"] < 0, gaps


@torch.no_grad()
def q_values(agent, obs, action) -> torch.Tensor:
    features = agent.encoder(obs)
    if isinstance(agent, SACAgent):
        return agent.critic(agent.critic_input(features, obs), action).mean()
    from robot_rl.policies.cqn import encode_action, pick

    indices, centres = encode_action(action, agent.config.levels, agent.config.bins)
    logits = agent.all_levels(agent.critic, features, centres)
    return (pick(logits, indices).softmax(-1) * agent.support).sum(-1).mean()


def test_a_behaviour_cloning_weight_pulls_the_pretrained_policy_to_the_datas_actions():
    buffer = offline_buffer()
    distance = {}
    for weight in (0.0, 10.0):
        torch.manual_seed(0)
        agent = SACAgent(SHAPES, 2, SACConfig(hidden=[64, 64], utd=1, critic_actor_ratio=1, device="cpu"), seed=0)
        agent.conservative = ConservativeConfig("none", bc_weight=weight)
        rng = np.random.default_rng(0)

        def sample(rng=rng):
            return buffer.sample(64, rng, gamma=0.9)

        for _ in range(100):
            agent.update(sample)
        batch = buffer.sample(256, rng)
        with torch.no_grad():
            mode = agent.actor.mode(agent.encoder(agent.obs_tensors(batch.obs)))
        distance[weight] = float((mode - batch.action).abs().mean())
    assert distance[10.0] < 0.1 < distance[0.0], distance
