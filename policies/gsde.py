"""Generalized state-dependent exploration (gSDE, Raffin et al. 2021) for the tanh-Gaussian actor.

Instead of fresh white noise every step, the exploration noise is a linear function of the
actor's last hidden features z(s): eps(s) = z(s)^T theta, with theta ~ N(0, sigma^2) held fixed
for a sample interval. Nearby states get nearby noise, so the executed actions are smooth.

- z(s) = tanh(LayerNorm(.)) of the last hidden layer: features in (-1, 1), centred per state, so
  one theta pushes different states in different directions (a ReLU latent, z >= 0, gives every
  state nearly the same push)
- u = mu(s) + z(s).detach()^T theta, a = tanh(u); the noise term and its std read the features
  detached (as SB3's ``learn_features=False``): the features learn only through the mean
- mu is not clamped: :meth:`GSDEActor.mean_penalty` (added to SAC's actor loss) pulls |mu| back
  below ``mean_bound`` with a quadratic penalty, so a saturated mean still gets a gradient
- sigma = exp(log_std) (or "expln": exp(x) for x <= 0, log1p(x) + 1 above), one per (i, j) with
  ``full_std``, one per feature i otherwise; log_std is learned. With d_z features of typical
  size ~0.6 the initial std of u is ~0.6 sqrt(d_z) exp(log_std_init): ~0.18 at d_z = 256 and -4,
  the Gaussian actor's initial ~0.22 (a larger one, held for 8 steps, drifts the arm ~6 cm per draw)
- log pi(a|s) uses the marginal Gaussian of u given s: var_j = sum_i z_i^2 sigma_ij^2 (+1e-6),
  with the tanh correction
- the learner draws one theta per sample of each batch (reparameterised, so sigma gets gradients;
  the same marginal as one shared theta, with less variance across the batch); the actor holds one
  theta per sample interval (:class:`NoiseSchedule`), by default 8 env steps (0.8 s at 10 Hz)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from robot_rl.policies.networks import gaussian_entropy, mlp, squashed_log_prob

VARIANCE_EPSILON = 1e-6
DEFAULT_SAMPLE_FREQ = 8  # env steps per noise draw: 0.8 s at 10 Hz


class GSDEActor(nn.Module):
    """pi(a|s) = tanh(mu(s) + z(s)^T theta), actions in [-1, 1]^A."""

    mean_bound = 2.0  # |mu| beyond this is penalised (tanh(2) = 0.96)
    mean_penalty_weight = 1.0

    def __init__(
        self,
        feature_dim: int,
        action_dim: int,
        hidden: list[int],
        log_std_init: float = -4.0,
        full_std: bool = True,
        use_expln: bool = False,
    ):
        super().__init__()
        self.latent = mlp(feature_dim, hidden[:-1], hidden[-1])
        self.latent.append(nn.LayerNorm(hidden[-1]))
        self.latent.append(nn.Tanh())
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

    def exploration_matrix(self, generator: torch.Generator | None = None, batch: int | None = None) -> torch.Tensor:
        """theta ~ N(0, sigma^2), reparameterised: (latent_dim, action_dim), or one per sample
        (batch, latent_dim, action_dim) when ``batch`` is given."""
        sigma = self.std()
        shape = sigma.shape if batch is None else (batch, *sigma.shape)
        return sigma * torch.randn(shape, generator=generator, device=sigma.device, dtype=sigma.dtype)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean of u, unclamped; latent features z in (-1, 1))."""
        latent = self.latent(features)
        return self.mean(latent), latent

    def mean_penalty(self, features: torch.Tensor) -> torch.Tensor:
        """weight * mean over the batch of sum_j max(|mu_j| - mean_bound, 0)^2: keeps mu where tanh has a slope."""
        excess = F.relu(self(features)[0].abs() - self.mean_bound)
        return self.mean_penalty_weight * excess.pow(2).sum(-1).mean()

    def marginal_std(self, latent: torch.Tensor) -> torch.Tensor:
        """Standard deviation of u given s: sqrt(sum_i z_i^2 sigma_ij^2 + 1e-6), (B, action_dim); z is detached."""
        return torch.sqrt(latent.detach().pow(2) @ self.std().pow(2) + VARIANCE_EPSILON)

    def sample(
        self,
        features: torch.Tensor,
        exploration_matrix: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """An action and its log-probability: with the given theta for the whole batch, else a fresh
        theta per sample (from ``generator``)."""
        mean, latent = self(features)
        latent = latent.detach()
        if exploration_matrix is None:
            theta = self.exploration_matrix(generator, batch=latent.shape[0])
            noise = torch.bmm(latent.unsqueeze(1), theta).squeeze(1)
        else:
            noise = latent @ exploration_matrix
        pre_tanh = mean + noise
        return torch.tanh(pre_tanh), squashed_log_prob(pre_tanh, mean, self.marginal_std(latent))

    def noise_entropy(self, features: torch.Tensor) -> torch.Tensor:
        """Entropy of u = mu(s) + z(s)^T theta given s, before the tanh, nats, (B,): what the temperature steers
        (:meth:`TanhGaussianActor.noise_entropy <robot_rl.policies.networks.TanhGaussianActor.noise_entropy>`)."""
        return gaussian_entropy(self.marginal_std(self(features)[1]))

    def explore(self, features: torch.Tensor, exploration_matrix: torch.Tensor) -> torch.Tensor:
        """The acting side's action tanh(mu(s) + z(s)^T theta), without the log-probability: a few
        tensor ops per step (each one waits for the GIL while the learner thread runs). One theta
        (latent_dim, action_dim) for every row, or one per row (batch, latent_dim, action_dim)."""
        mean, latent = self(features)
        if exploration_matrix.dim() == 2:
            return torch.tanh(mean + latent @ exploration_matrix)
        return torch.tanh(mean + torch.bmm(latent.unsqueeze(1), exploration_matrix).squeeze(1))

    def mode(self, features: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self(features)[0])


class NoiseSchedule:
    """When the acting side draws a new theta: every ``sample_freq`` steps, or once per episode (-1)."""

    def __init__(self, sample_freq: int = DEFAULT_SAMPLE_FREQ):
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
