"""The bang-bang SAC actor (issue 54 item 2): Bernoulli math, hard actions with a gradient, and SAC with it."""

import math

import numpy as np
import pytest
import torch

from robot_rl.policies.bang_bang import BernoulliActor, default_target_entropy
from robot_rl.policies.sac import SACAgent, SACConfig
from tests.policies.batches import batch_of


def test_the_log_probability_and_entropy_are_the_bernoullis():
    logits = torch.tensor([[0.0, 2.0, -1.0]])
    action = torch.tensor([[1.0, -1.0, -1.0]])
    p = torch.sigmoid(logits)[0]
    expected = math.log(p[0]) + math.log(1 - p[1]) + math.log(1 - p[2])
    assert BernoulliActor.log_prob(logits, action).item() == pytest.approx(expected, rel=1e-6)
    entropy = sum(-(q * math.log(q) + (1 - q) * math.log(1 - q)) for q in p.tolist())
    assert BernoulliActor.entropy(logits).item() == pytest.approx(entropy, rel=1e-6)
    assert BernoulliActor.entropy(torch.zeros(1, 4)).item() == pytest.approx(4 * math.log(2))  # the maximum
    assert default_target_entropy(4) == pytest.approx(math.log(2))


def test_samples_are_extremes_with_the_policys_frequencies_and_a_gradient():
    torch.manual_seed(0)
    actor = BernoulliActor(5, 3, [16])
    features = torch.randn(1, 5).expand(20000, 5)
    generator = torch.Generator().manual_seed(1)
    action, minus_entropy = actor.sample(features, generator=generator)
    assert set(torch.unique(action).tolist()) <= {-1.0, 1.0}
    p = torch.sigmoid(actor(features[:1]))[0]
    np.testing.assert_allclose((action > 0).float().mean(0).detach().numpy(), p.detach().numpy(), atol=0.02)
    action.sum().backward()  # straight through: d(2p - 1)/d logits reaches the net
    assert all(parameter.grad is not None and parameter.grad.abs().sum() > 0 for parameter in actor.parameters())
    assert minus_entropy.shape == (20000,)
    mode = actor.mode(features[:1])
    assert torch.equal(mode.detach(), torch.where(p >= 0.5, 1.0, -1.0)[None])


def test_sac_with_the_bang_bang_actor_acts_at_the_extremes_and_updates():
    agent = SACAgent({"state": (6,)}, 3, SACConfig(exploration="bang_bang", utd=2, critic_actor_ratio=1), seed=0)
    assert agent.target_entropy == pytest.approx(default_target_entropy(3))
    rng = np.random.default_rng(0)
    obs = {"state": rng.normal(size=6).astype(np.float32)}
    agent.begin_episode()
    for explore in (True, False):
        assert set(np.abs(agent.act(obs, explore=explore)).tolist()) == {1.0}
    batch = batch_of(
        {
            "obs": {"state": rng.normal(size=(16, 6)).astype(np.float32)},
            "next_obs": {"state": rng.normal(size=(16, 6)).astype(np.float32)},
            "action": np.sign(rng.normal(size=(16, 3))).astype(np.float32),
            "reward": -np.ones(16, np.float32),
            "discount": np.full(16, 0.97, np.float32),
            "is_demo": np.arange(16) >= 8,
        }
    )
    metrics = agent.update(lambda: batch)
    assert all(np.isfinite(float(value)) for value in metrics.values())
    assert 0.0 < float(metrics["entropy"]) <= 3 * math.log(2) + 1e-6


def test_bang_bang_steps_through_the_safety_tick_stay_within_the_hard_limits():
    """Every control substep of pick_cube runs the safety node's tick (robot_rl.sim.fast_critic_loop): full +-1 steps on every
    axis, the policy's, stay inside the workspace box and under the speed limit the hard layer enforces."""
    from robot_rl.core.composed_config import load_config
    from robot_rl.runtime.envs import make_env
    from robot_rl.safety.robot_limits import safety_limits
    from robot_rl.sim.fast_critic_loop import SimFastLoop, attach_fast_loop

    cfg = load_config(["task=pick_cube"])
    max_speed, rate = 0.05, 500.0  # m/s: 5 mm per 0.1 s policy step, well below the task's 2 cm steps
    limits = {**dict(cfg.robot.limits), "max_speed": max_speed}
    env = make_env(cfg.task)
    attach_fast_loop(env, SimFastLoop(safety_limits(limits, rate), rate))
    obs, _ = env.reset(seed=0)
    shapes = {key: tuple(space.shape) for key, space in env.observation_space.spaces.items()}
    agent = SACAgent(shapes, env.action_space.shape[0], SACConfig(exploration="bang_bang"), seed=3)
    agent.begin_episode()
    (low, high), previous, clipped = np.asarray(cfg.robot.limits.workspace), env.unwrapped.tcp_pos.copy(), 0
    for _ in range(40):
        action = agent.act(obs, explore=True)
        assert set(np.abs(action).tolist()) == {1.0}
        obs, _, terminated, truncated, info = env.step(action)
        position = env.unwrapped.tcp_pos.copy()
        assert np.all(position >= low - 2e-3) and np.all(position <= high + 2e-3)
        assert np.linalg.norm(position - previous) <= max_speed * 0.1 + 2e-3  # the hard layer's speed limit
        clipped += int(info["fast_loop"].flags.any())
        previous = position
        if terminated or truncated:
            break
    assert clipped > 0  # the limit was in play, not idle
    env.close()
