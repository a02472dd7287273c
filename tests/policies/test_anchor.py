"""The warm start's policy anchor: a pull towards the pretrained policy that decays to nothing, keeps a fine-tuned
SAC policy near its start while the critic disagrees with it, and survives a checkpoint."""

import numpy as np
import pytest
import torch

from robot_rl.policies.anchor import PolicyAnchor
from robot_rl.policies.sac import SACAgent, SACConfig
from tests.policies.batches import batch_of

SHAPES = {"state": (3,)}


def agent(seed: int = 0) -> SACAgent:
    return SACAgent(SHAPES, 2, SACConfig(hidden=[64, 64], utd=2, critic_actor_ratio=1, device="cpu"), seed=seed)


def batches(seed: int = 0):
    """Batches whose reward pays for actions at -0.8: a critic that learns them pulls the policy there."""
    rng = np.random.default_rng(seed)

    def sample():
        state = rng.normal(size=(64, 3)).astype(np.float32)
        action = rng.uniform(-1, 1, (64, 2)).astype(np.float32)
        return batch_of(
            {
                "obs": {"state": state},
                "next_obs": {"state": state},
                "action": action,
                "reward": (-np.abs(action + 0.8).sum(-1)).astype(np.float32),
                "discount": np.zeros(64, np.float32),
            }
        )

    return sample


@torch.no_grad()
def modes(learner: SACAgent, states: np.ndarray) -> torch.Tensor:
    return learner.actor.mode(learner.encoder(learner.obs_tensors({"state": states})))


def test_the_weight_decays_linearly_over_the_actor_updates_of_the_anchor_steps():
    learner = agent()  # utd 2, one actor update per critic update: 2 actor updates per online step
    learner.anchor_policy(10.0, env_steps=5)
    assert learner.anchor.updates == 10 and learner.anchor.current_weight == 10.0
    weights = []
    sample = batches()
    for _ in range(6):
        metrics = learner.update(sample)
        weights.append(float(metrics.get("anchor_weight", 0.0)))
    assert weights == pytest.approx([9.0, 7.0, 5.0, 3.0, 1.0, 0.0])  # the last of each call's two actor updates
    assert learner.anchor.done
    learner.anchor_policy(0.0, env_steps=5)
    assert learner.anchor is None


def test_an_anchored_policy_stays_near_its_start_where_the_critic_pulls_it_away():
    states = np.random.default_rng(9).normal(size=(256, 3)).astype(np.float32)
    drift = {}
    for weight in (0.0, 100.0):
        learner = agent()
        start = modes(learner, states)
        learner.anchor_policy(weight, env_steps=1_000)
        sample = batches()
        for _ in range(150):
            learner.update(sample)
        drift[weight] = float((modes(learner, states) - start).abs().mean())
    assert drift[100.0] < 0.05 and drift[0.0] > 0.3, drift


def test_a_checkpoint_keeps_the_anchor_and_its_schedule_until_it_is_spent():
    learner = agent()
    learner.anchor_policy(10.0, env_steps=5)
    sample = batches()
    learner.update(sample)
    anchored_start = {k: v.clone() for k, v in learner.anchor.actor.state_dict().items()}
    for _ in range(3):
        learner.update(sample)  # the live actor moves away from the anchor
    restored = agent(seed=1)
    restored.load_state_dict(learner.state_dict())
    assert restored.anchor.made == learner.anchor.made == 8 and restored.anchor.current_weight == pytest.approx(2.0)
    for key, value in restored.anchor.actor.state_dict().items():
        assert torch.equal(value, anchored_start[key]), key
    assert not any(p.requires_grad for p in restored.anchor.actor.parameters())
    learner.update(sample)  # spent: a checkpoint made now has no anchor, and loading it clears one
    assert learner.anchor.done and "anchor" not in learner.state_dict()["extra"]
    restored.load_state_dict(learner.state_dict())
    assert restored.anchor is None


def test_a_moving_anchor_follows_the_policy_by_tau_per_actor_update():
    learner = agent()
    learner.anchor_policy(1.0, env_steps=100, tau=0.1)
    start = {k: v.clone() for k, v in learner.anchor.actor.state_dict().items()}
    anchor = PolicyAnchor(learner.actor, 1.0, 10, tau=0.25)
    with torch.no_grad():
        for parameter in learner.actor.parameters():
            parameter.add_(1.0)
    anchor.follow(learner.actor)
    for key, value in anchor.actor.state_dict().items():
        torch.testing.assert_close(value, start[key] + 0.25)  # a quarter of the way to the moved actor
    learner.update(batches())  # SAC moves its own anchor after each actor update
    assert any(not torch.equal(v, start[k]) for k, v in learner.anchor.actor.state_dict().items())
    fixed = agent()
    fixed.anchor_policy(1.0, env_steps=100)  # tau 0: the pretrained policy stays the anchor
    fixed.update(batches())
    assert all(torch.equal(v, start[k]) for k, v in fixed.anchor.actor.state_dict().items())
    restored = agent(seed=1)
    restored.load_state_dict(learner.state_dict())
    assert restored.anchor.tau == 0.1
