"""gSDE: noise held over the sample interval, marginal-Gaussian log-probability, detached centred features,
a mean penalty instead of a clamp."""

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from robot_rl.policies.gsde import GSDEActor, NoiseSchedule
from robot_rl.policies.sac import SACAgent, SACConfig


def test_log_prob_equals_the_marginal_gaussian_computed_separately():
    torch.manual_seed(0)
    actor = GSDEActor(feature_dim=6, action_dim=3, hidden=[16, 8], log_std_init=-1.0)
    with torch.no_grad():
        actor.log_std.add_(0.3 * torch.randn_like(actor.log_std))
    features = torch.randn(5, 6)
    theta = actor.exploration_matrix().detach()
    action, log_prob = actor.sample(features, theta)
    with torch.no_grad():
        latent = actor.latent(features).numpy().astype(np.float64)
        mean = actor.mean(actor.latent(features)).numpy().astype(np.float64)
    sigma = np.exp(actor.log_std.detach().numpy().astype(np.float64))
    u = mean + latent @ theta.numpy().astype(np.float64)
    var = (latent**2) @ (sigma**2) + 1e-6
    gaussian = (-0.5 * (u - mean) ** 2 / var - 0.5 * np.log(2 * np.pi * var)).sum(-1)
    expected = gaussian - np.log(1 - np.tanh(u) ** 2).sum(-1)
    np.testing.assert_allclose(log_prob.detach().numpy(), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(action.detach().numpy(), np.tanh(u), atol=1e-5)
    # and the marginal is the actual distribution of u over draws of theta
    draws = torch.stack([actor.exploration_matrix().detach() for _ in range(4000)])
    u_draws = mean[0] + np.einsum("i,nij->nj", latent[0], draws.numpy())
    np.testing.assert_allclose(u_draws.std(0), np.sqrt(var[0]), rtol=0.06)


def test_expln_and_per_feature_sigma():
    actor = GSDEActor(4, 2, [8], log_std_init=0.5, full_std=False, use_expln=True)
    assert actor.log_std.shape == (8, 1)
    torch.testing.assert_close(actor.std(), torch.full((8, 2), math.log1p(0.5) + 1.0))


def test_noise_is_constant_within_a_sample_interval():
    actor = GSDEActor(4, 2, [8])
    schedule = NoiseSchedule(sample_freq=3)
    schedule.begin_episode()
    matrices = [schedule.current(actor) for _ in range(7)]
    assert matrices[0] is matrices[1] is matrices[2]
    assert matrices[3] is matrices[4] is matrices[5] and matrices[3] is not matrices[2]
    assert matrices[6] is not matrices[5]
    per_episode = NoiseSchedule(sample_freq=-1)
    first = [per_episode.current(actor) for _ in range(50)]
    assert all(m is first[0] for m in first)
    per_episode.begin_episode()
    assert per_episode.current(actor) is not first[0]
    with pytest.raises(ValueError, match="sde_sample_freq"):
        NoiseSchedule(0)


def test_the_agent_repeats_its_noise_for_the_same_state_within_an_interval():
    agent = SACAgent(
        {"state": (5,)}, 3, SACConfig(exploration="gsde", sde_sample_freq=4, sde_log_std_init=-1.0), seed=0
    )
    obs = {"state": np.linspace(-1, 1, 5).astype(np.float32)}
    agent.begin_episode()
    actions = [agent.act(obs, explore=True) for _ in range(5)]
    for a in actions[1:4]:
        np.testing.assert_array_equal(a, actions[0])
    assert not np.allclose(actions[4], actions[0])  # a new draw at step 5
    assert not np.allclose(actions[0], agent.act(obs, explore=False))  # the noise is not zero


def test_latent_features_are_centred_so_one_theta_pushes_states_apart():
    torch.manual_seed(0)
    actor = GSDEActor(feature_dim=20, action_dim=4, hidden=[256, 256])
    with torch.no_grad():
        latent = actor(torch.randn(512, 20))[1]
    assert latent.min() < -0.5 and latent.max() < 1.0  # both signs (a ReLU latent is >= 0)
    assert latent.mean(-1).abs().max() < 0.1  # per state, about as much push as pull (ReLU: ~0.4)


def test_the_noise_and_its_std_do_not_train_the_features():
    """SB3 (learn_features=False): z(s) is detached in z^T theta and in the marginal std, so the
    features learn through the mean only."""
    torch.manual_seed(0)
    actor = GSDEActor(feature_dim=6, action_dim=3, hidden=[16, 8], log_std_init=-1.0)
    with torch.no_grad():
        actor.mean.weight.zero_()  # the mean ignores the features: any feature gradient comes from the noise
    features = torch.randn(32, 6)
    for theta in (None, actor.exploration_matrix().detach()):
        actor.zero_grad()
        action, log_prob = actor.sample(features, theta)
        (action.sum() + log_prob.sum()).backward()
        assert all(p.grad is None or not p.grad.any() for p in actor.latent.parameters())
        assert actor.log_std.grad.abs().sum() > 0 and actor.mean.bias.grad.abs().sum() > 0


def test_a_mean_beyond_the_bound_still_gets_a_gradient_back():
    agent = SACAgent({"state": (5,)}, 3, SACConfig(exploration="gsde"), seed=0)
    with torch.no_grad():
        agent.actor.mean.bias.fill_(5.0)  # far beyond tanh's slope: the old hardtanh(+-2) gave no gradient
    features = torch.randn(8, 5)
    mean = agent.actor(features)[0]
    assert mean.min() > 2.0  # not clamped
    penalty = agent.actor.mean_penalty(features)
    penalty.backward()
    assert (agent.actor.mean.bias.grad > 0).all()  # descent lowers the mean
    with torch.no_grad():
        agent.actor.mean.bias.zero_()
        agent.actor.mean.weight.mul_(0.01)
    assert agent.actor.mean_penalty(features).item() == 0.0  # nothing inside the bound
    # the SAC actor loss carries it: one actor step pulls a saturated mean back
    with torch.no_grad():
        agent.actor.mean.bias.fill_(5.0)
    before = agent.actor.mean.bias.detach().clone()
    metrics = agent._update_actor(features, {"state": features})
    assert np.isfinite(metrics["actor_loss"])
    assert (agent.actor.mean.bias.detach() < before).all()


def test_by_default_the_noise_is_redrawn_every_few_steps_not_once_per_episode():
    """Held for an episode (100 steps), the noise was a near-constant push; by default it is redrawn
    every 8 steps (0.8 s at 10 Hz), from the config file as from SACConfig."""
    from omegaconf import OmegaConf

    config = OmegaConf.load(Path(__file__).resolve().parents[2] / "configs" / "exploration" / "gsde.yaml")
    assert config.sde_sample_freq == SACConfig().sde_sample_freq == 8
    agent = SACAgent({"state": (5,)}, 3, SACConfig(exploration="gsde"), seed=0)
    agent.begin_episode()
    obs = {"state": np.zeros(5, np.float32)}
    actions = np.array([agent.act(obs, explore=True) for _ in range(100)])
    changes = np.flatnonzero(np.abs(np.diff(actions, axis=0)).max(-1) > 0) + 1
    np.testing.assert_array_equal(changes, np.arange(8, 100, 8))
    # over an episode the pushes average out: the mean noise is well below its per-draw size
    noise = actions - agent.act(obs, explore=False)
    assert np.abs(noise.mean(0)).max() < 0.6 * noise.std(0).min()


def test_acting_gives_the_sampled_action_without_its_log_probability():
    torch.manual_seed(0)
    actor = GSDEActor(feature_dim=6, action_dim=3, hidden=[16, 8], log_std_init=-1.0)
    features, theta = torch.randn(4, 6), actor.exploration_matrix().detach()
    torch.testing.assert_close(actor.explore(features, theta), actor.sample(features, theta)[0])
