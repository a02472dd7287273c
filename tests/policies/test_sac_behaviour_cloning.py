"""SAC's online behaviour-cloning pull (agent.bc_weight, issue 49): the policy's mode moves towards the actions of
the batch's demonstration and intervention rows, and only theirs."""

import numpy as np
import pytest
import torch

from robot_rl.core.config import ConfigError
from robot_rl.data.batches import Batch
from robot_rl.policies.sac import SACAgent, SACConfig
from tests.policies.batches import batch_of

DEMO_ACTION = np.array([0.8, -0.6, 0.5], np.float32)


def batch(rng: np.random.Generator, marked: bool = True) -> Batch:
    """16 rows: the first 8 online (random actions), the last 8 demonstrations (always DEMO_ACTION), as the
    MixedSampler orders them; demonstration states are shifted so the two kinds are told apart. ``marked`` False:
    the same rows, none marked as a demonstration."""
    obs = rng.normal(size=(16, 6)).astype(np.float32)
    obs[8:, 0] += 3.0
    action = rng.uniform(-1, 1, (16, 3)).astype(np.float32)
    action[8:] = DEMO_ACTION
    return batch_of(
        {
            "obs": {"state": obs},
            "next_obs": {"state": obs + 0.01},
            "action": action,
            "reward": -np.ones(16, np.float32),
            "discount": np.full(16, 0.97, np.float32),
            "is_demo": (np.arange(16) >= 8) & marked,
        }
    )


def distance_to_the_demos(bc_weight: float, marked: bool = True) -> float:
    """After 300 updates: the mean distance of the policy's mode to DEMO_ACTION on demonstration states."""
    agent = SACAgent({"state": (6,)}, 3, SACConfig(bc_weight=bc_weight, utd=1, critic_actor_ratio=1), seed=0)
    rng = np.random.default_rng(0)
    for _ in range(300):
        metrics = agent.update(lambda: batch(rng, marked))
    assert np.isfinite(float(metrics["actor_loss"]))
    probe = batch(np.random.default_rng(1)).obs["state"]
    with torch.no_grad():
        mode = agent.actor.mode(agent.encoder({"state": torch.as_tensor(probe)})).numpy()
    return float(np.linalg.norm(mode - DEMO_ACTION, axis=-1)[8:].mean())


def test_the_pull_brings_the_mode_to_the_demonstrated_actions_on_their_states():
    pulled, free = distance_to_the_demos(1.0), distance_to_the_demos(0.0)
    unmarked = distance_to_the_demos(1.0, marked=False)  # the same actions in online rows are not cloned
    assert pulled < 0.25 < min(free, unmarked), (pulled, free, unmarked)


def test_a_negative_weight_is_refused():
    with pytest.raises(ConfigError, match="bc_weight"):
        SACAgent({"state": (6,)}, 3, SACConfig(bc_weight=-1.0), seed=0)
