"""gSDE: noise held over the sample interval, marginal-Gaussian log-probability."""

import math

import numpy as np
import pytest
import torch

from policies.gsde import GSDEActor, NoiseSchedule
from policies.sac import SACAgent, SACConfig


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
        mean = np.clip(actor.mean(actor.latent(features)).numpy().astype(np.float64), -2, 2)
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
    agent = SACAgent({"state": (5,)}, 3, SACConfig(exploration="gsde", sde_sample_freq=4, sde_log_std_init=-1.0), seed=0)
    obs = {"state": np.linspace(-1, 1, 5).astype(np.float32)}
    agent.begin_episode()
    actions = [agent.act(obs, explore=True) for _ in range(5)]
    for a in actions[1:4]:
        np.testing.assert_array_equal(a, actions[0])
    assert not np.allclose(actions[4], actions[0])  # a new draw at step 5
    assert not np.allclose(actions[0], agent.act(obs, explore=False))  # the noise is not zero
