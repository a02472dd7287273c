"""SAC's temperature (issue 72 item 6): it steers the exploration noise before the tanh towards the target entropy.

Demonstrations command saturated actions (the scripted expert's moves are clipped to +-1, its gripper is -1 or +1), and
the behaviour-cloning pull drives the policy's mean towards them, where the squashed action's entropy has no floor: a
temperature chasing the target there rises whatever the noise. In the main job it climbed for 6,000 steps and made the
training actions noisier and noisier (takeovers rose from 0.03 to 0.2 while the evaluation stayed at 1.0)."""

import math

import numpy as np
import pytest
import torch

from robot_rl.data.batches import Batch
from robot_rl.policies.networks import TanhGaussianActor
from robot_rl.policies.sac import SACAgent, SACConfig
from tests.policies.batches import batch_of

ACTIONS = 4
NOISE_ABOVE_TARGET = 0.1  # nats per dimension above the target's -1/2


def batch(rng: np.random.Generator) -> Batch:
    obs = rng.normal(size=(32, 6)).astype(np.float32)
    return batch_of(
        {
            "obs": {"state": obs},
            "next_obs": {"state": obs + 0.01},
            "action": rng.uniform(-1, 1, (32, ACTIONS)).astype(np.float32),
            "reward": -np.ones(32, np.float32),
            "discount": np.full(32, 0.97, np.float32),
        }
    )


def agent_with_a_fixed_policy(mean: float) -> SACAgent:
    """A SAC agent whose actor outputs the pre-tanh ``mean`` on every dimension and state, with a std whose Gaussian
    entropy is NOISE_ABOVE_TARGET per dimension above the default target -|A|/2."""
    agent = SACAgent({"state": (6,)}, ACTIONS, SACConfig(utd=1, critic_actor_ratio=1), seed=0)
    log_std = -0.5 + NOISE_ABOVE_TARGET - 0.5 * math.log(2 * math.pi * math.e)
    span = TanhGaussianActor.log_std_max - TanhGaussianActor.log_std_min
    raw = math.atanh(
        2 * (log_std - TanhGaussianActor.log_std_min) / span - 1
    )  # the actor's log-std squashing, inverted
    output = agent.actor.net[-1]
    with torch.no_grad():
        output.weight.zero_()
        output.bias.copy_(torch.tensor([mean] * ACTIONS + [raw] * ACTIONS))
    return agent


@pytest.mark.parametrize("mean", [0.0, 4.0], ids=["centred", "saturated"])
def test_noise_above_the_target_lowers_the_temperature_wherever_the_mean_sits(mean):
    agent = agent_with_a_fixed_policy(mean)
    features = agent.encoder({"state": torch.zeros(1, 6)})
    with torch.no_grad():
        assert float(agent.actor.noise_entropy(features)) == pytest.approx(
            agent.target_entropy + ACTIONS * NOISE_ABOVE_TARGET, abs=1e-4
        )
    initial = float(agent.alpha)
    rng = np.random.default_rng(0)
    for _ in range(20):
        metrics = agent.update(lambda: batch(rng))
    # old code, saturated: the squashed action's entropy (-19 nats here) is far below the target, and the temperature
    # rose at every update
    assert float(agent.alpha) < initial, (mean, float(agent.alpha), initial)
    assert float(metrics["entropy"]) > agent.target_entropy  # the entropy logged is the one the temperature steers
    if mean:
        assert float(metrics["squashed_entropy"]) < agent.target_entropy - 10


def test_the_noise_entropy_is_the_gaussians_before_the_squash():
    agent = SACAgent({"state": (6,)}, ACTIONS, SACConfig(), seed=0)
    features = agent.encoder({"state": torch.zeros(3, 6)})
    with torch.no_grad():
        log_std = agent.actor(features)[1]
        expected = (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)
        assert torch.allclose(agent.actor.noise_entropy(features), expected)
