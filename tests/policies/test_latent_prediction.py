"""The self-supervised latent-prediction loss on the camera encoder (issue 54 item 4, ssl=latent)."""

import numpy as np
import pytest
import torch

from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.data.batches import Batch
from robot_rl.policies.latent_prediction import LatentPredictor, latent_prediction_loss
from robot_rl.policies.sac import SACAgent, SACConfig
from tests.policies.batches import batch_of

SHAPES = {"state": (4,), "front": (3, 32, 32)}


def test_the_loss_is_zero_for_the_targets_direction_and_four_for_the_opposite():
    predictor = LatentPredictor(8, 2)
    features, action = torch.randn(5, 8), torch.randn(5, 2)
    guess = predictor(features, action).detach()
    assert latent_prediction_loss(predictor, features, action, 3.0 * guess).item() == pytest.approx(0.0, abs=1e-5)
    assert latent_prediction_loss(predictor, features, action, -guess).item() == pytest.approx(4.0, abs=1e-5)


def pixel_batch(rng: np.random.Generator) -> Batch:
    """Frames whose next frame is the same frame shifted by the action's sign: something to predict."""
    frames = rng.integers(0, 255, (16, 3, 32, 32), dtype=np.uint8)
    action = np.sign(rng.normal(size=(16, 3))).astype(np.float32)
    following = np.stack([np.roll(frame, int(a[0]) * 4, axis=2) for frame, a in zip(frames, action)])
    state = rng.normal(size=(16, 4)).astype(np.float32)
    return batch_of(
        {
            "obs": {"state": state, "front": frames},
            "next_obs": {"state": state, "front": following},
            "action": action,
            "reward": np.zeros(16, np.float32),
            "discount": np.full(16, 0.97, np.float32),
            "is_demo": np.zeros(16, bool),
        }
    )


def test_with_ssl_the_critic_step_trains_the_predictor_and_the_loss_falls():
    config = SACConfig(ssl="latent", utd=1, critic_actor_ratio=1, camera_strides=[2], hidden=[64], device="cpu")
    agent = SACAgent(SHAPES, 3, config, seed=0)
    rng = np.random.default_rng(0)
    losses = [float(agent.update(lambda: pixel_batch(rng))["ssl_loss"]) for _ in range(60)]
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10]), (losses[:10], losses[-10:])
    clone = SACAgent(SHAPES, 3, config, seed=1)
    clone.load_state_dict(agent.state_dict())  # the predictor is checkpointed with the agent
    probe = torch.randn(2, agent.encoder.output_dim)
    assert torch.equal(clone.ssl_predictor(probe, torch.zeros(2, 3)), agent.ssl_predictor(probe, torch.zeros(2, 3)))


def test_ssl_needs_a_camera_and_the_group_sets_it():
    with pytest.raises(ConfigError, match="agent.ssl"):
        SACAgent({"state": (4,)}, 3, SACConfig(ssl="latent"), seed=0)
    cfg = load_config(["ssl=latent", "task.cameras=[front]"])
    assert cfg.agent.ssl == "latent" and cfg.agent.ssl_weight == 1.0
