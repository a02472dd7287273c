"""Generalized state-dependent exploration (gSDE, Raffin et al. 2021) for the tanh-Gaussian actor.

Instead of fresh white noise every step, the exploration noise is a linear function of the
actor's last hidden features z(s): eps(s) = z(s)^T theta, with theta ~ N(0, sigma^2) held fixed
for a sample interval. Nearby states get nearby noise, so the executed actions are smooth.

- u = clamp(mu(s), -2, 2) + z(s)^T theta, a = tanh(u)
- sigma = exp(log_std) (or "expln": exp(x) for x <= 0, log1p(x) + 1 above), one per (i, j) with
  ``full_std``, one per feature i otherwise; log_std is learned
- log pi(a|s) uses the marginal Gaussian of u given s: var_j = sum_i z_i^2 sigma_ij^2 (+1e-6),
  with the tanh correction
- the learner draws one theta per gradient step (reparameterised, so sigma gets gradients); the
  actor holds one theta per sample interval (:class:`NoiseSchedule`)
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .networks import mlp, squashed_log_prob

VARIANCE_EPSILON = 1e-6


class GSDEActor(nn.Module):
    mean_clip = 2.0

    def __init__(self, feature_dim: int, action_dim: int, hidden: list[int], log_std_init: float = -3.0,
                 full_std: bool = True, use_expln: bool = False):
        super().__init__()
        self.latent = mlp(feature_dim, hidden[:-1], hidden[-1])
        self.latent.append(nn.LayerNorm(hidden[-1]))
        self.latent.append(nn.ReLU())
        self.mean = nn.Linear(hidden[-1], action_dim)
        self.latent_dim, self.action_dim, self.full_std, self.use_expln = hidden[-1], action_dim, full_std, use_expln
        self.log_std = nn.Parameter(torch.full((hidden[-1], action_dim if full_std else 1), float(log_std_init)))

    def std(self) -> torch.Tensor:
        """sigma, (latent_dim, action_dim)."""
        if self.use_expln:
            sigma = torch.where(self.log_std <= 0, self.log_std.exp(), torch.log1p(self.log_std.clamp(min=0)) + 1.0)
        else:
            sigma = self.log_std.exp()
        return sigma.expand(self.latent_dim, self.action_dim)

    def exploration_matrix(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """theta ~ N(0, sigma^2), reparameterised: (latent_dim, action_dim)."""
        sigma = self.std()
        return sigma * torch.randn(sigma.shape, generator=generator, device=sigma.device, dtype=sigma.dtype)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(clamped mean of u, latent features z)."""
        latent = self.latent(features)
        return F.hardtanh(self.mean(latent), -self.mean_clip, self.mean_clip), latent

    def marginal_std(self, latent: torch.Tensor) -> torch.Tensor:
        """Standard deviation of u given s: sqrt(sum_i z_i^2 sigma_ij^2 + 1e-6), (B, action_dim)."""
        return torch.sqrt(latent.pow(2) @ self.std().pow(2) + VARIANCE_EPSILON)

    def sample(self, features: torch.Tensor, exploration_matrix: torch.Tensor | None = None,
               generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """An action and its log-probability; a fresh theta (from ``generator``) for the whole batch unless given."""
        mean, latent = self(features)
        theta = self.exploration_matrix(generator) if exploration_matrix is None else exploration_matrix
        pre_tanh = mean + latent @ theta
        return torch.tanh(pre_tanh), squashed_log_prob(pre_tanh, mean, self.marginal_std(latent))

    def mode(self, features: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self(features)[0])


class NoiseSchedule:
    """When the acting side draws a new theta: every ``sample_freq`` steps, or once per episode (-1)."""

    def __init__(self, sample_freq: int):
        if sample_freq == 0 or sample_freq < -1:
            raise ValueError(f"sde_sample_freq={sample_freq}; expected -1 (once per episode) or a positive step count")
        self.sample_freq = sample_freq
        self.steps = 0
        self.matrix: torch.Tensor | None = None

    def begin_episode(self) -> None:
        self.matrix = None

    def current(self, actor: GSDEActor, generator: torch.Generator | None = None) -> torch.Tensor:
        """The theta to act with at this step."""
        if self.matrix is None or (self.sample_freq > 0 and self.steps % self.sample_freq == 0):
            with torch.no_grad():
                self.matrix = actor.exploration_matrix(generator)
            self.steps = 0
        self.steps += 1
        return self.matrix
