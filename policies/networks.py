"""Building blocks of the agents: MLPs, critic ensembles and the tanh-Gaussian actor."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

GAUSSIAN_ENTROPY_PER_DIM = 0.5 * math.log(2 * math.pi * math.e)  # entropy of N(0, 1), nats; N(m, s^2) adds log s


def gaussian_entropy(std: torch.Tensor) -> torch.Tensor:
    """Entropy of N(mean, diag(std^2)) summed over the last dimension, nats, (B,)."""
    return (torch.log(std) + GAUSSIAN_ENTROPY_PER_DIM).sum(-1)


def squashed_log_prob(pre_tanh: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """log-density of tanh(u) for u ~ N(mean, diag(std^2)): the Gaussian log-density of u summed
    over the last dimension minus log|d tanh(u)/du| = log(1 - tanh(u)^2), computed stably."""
    gaussian = (-0.5 * ((pre_tanh - mean) / std) ** 2 - torch.log(std) - 0.5 * math.log(2 * math.pi)).sum(-1)
    return gaussian - (2 * (math.log(2) - pre_tanh - F.softplus(-2 * pre_tanh))).sum(-1)


def float32_head(head: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """``head(hidden)`` in float32 whatever autocast the caller runs under: the trunk may compute in bfloat16 (faster
    on a CPU with bf16 units), the values it outputs (Q, C51 logits) keep float32's resolution. A bf16 Q near -20 steps
    by 0.06-0.125, coarser than the differences of one step's reward the TD targets carry."""
    with torch.autocast(hidden.device.type, enabled=False):
        return head(hidden.float())


def mlp(in_dim: int, hidden: list[int], out_dim: int, layer_norm: bool = True) -> nn.Sequential:
    """Linear -> LayerNorm -> ReLU per hidden layer, then a linear output."""
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width)] + ([nn.LayerNorm(width)] if layer_norm else []) + [nn.ReLU()]
        in_dim = width
    layers.append(nn.Linear(in_dim, out_dim))
    return nn.Sequential(*layers)


class EnsembleLinear(nn.Module):
    """``members`` independent linear layers applied to (members, batch, in) in one bmm."""

    def __init__(self, in_dim: int, out_dim: int, members: int):
        super().__init__()
        bound = 1.0 / math.sqrt(in_dim)
        self.weight = nn.Parameter(torch.empty(members, in_dim, out_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(members, 1, out_dim).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm with separate scale and shift per ensemble member, in the dtype of its input.

    Under a CPU's bfloat16 autocast the normalisation comes out in bf16; float32 scale and shift would promote the
    (E, B, width) activations to float32 and the next layer cast them back, forward and backward (~8% of a SAC
    update's time on a CPU): the scale and shift are cast instead. On a GPU autocast's LayerNorm returns float32,
    and nothing changes."""

    def __init__(self, width: int, members: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(members, 1, width))
        self.shift = nn.Parameter(torch.zeros(members, 1, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = F.layer_norm(x, x.shape[-1:])
        return torch.addcmul(self.shift.to(normed.dtype), normed, self.scale.to(normed.dtype))


class CriticEnsemble(nn.Module):
    """E Q-networks Q_e(features, action) with LayerNorm in every hidden layer (RLPD); ``outputs``
    values per member (one Q value, or one per discrete action), in float32 (:func:`float32_head`)."""

    def __init__(self, feature_dim: int, action_dim: int, hidden: list[int], members: int, outputs: int = 1):
        super().__init__()
        self.members, self.outputs = members, outputs
        layers: list[nn.Module] = []
        in_dim = feature_dim + action_dim
        for width in hidden:
            layers += [EnsembleLinear(in_dim, width, members), EnsembleLayerNorm(width, members), nn.ReLU()]
            in_dim = width
        layers.append(EnsembleLinear(in_dim, outputs, members))
        self.net = nn.Sequential(*layers)

    def forward(self, features: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """(E, B) Q values, or (E, B, outputs) when ``outputs`` > 1."""
        x = torch.cat([features, action], dim=-1)
        hidden = self.net[:-1](x.unsqueeze(0).expand(self.members, *x.shape))
        q = float32_head(self.net[-1], hidden)
        return q.squeeze(-1) if self.outputs == 1 else q


class TanhGaussianActor(nn.Module):
    """pi(a|s) = tanh(N(mu(s), sigma(s))), actions in [-1, 1]^A."""

    log_std_min, log_std_max = -5.0, 2.0

    def __init__(self, feature_dim: int, action_dim: int, hidden: list[int]):
        super().__init__()
        self.net = mlp(feature_dim, hidden, 2 * action_dim)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.net(features).chunk(2, dim=-1)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (torch.tanh(log_std) + 1)
        return mean, log_std

    def sample(
        self, features: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised action and its log-probability (with the tanh correction); the noise
        comes from ``generator`` (the agent's own) when given."""
        mean, log_std = self(features)
        std = log_std.exp()
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        pre_tanh = mean + std * noise
        return torch.tanh(pre_tanh), squashed_log_prob(pre_tanh, mean, std)

    def noise_entropy(self, features: torch.Tensor) -> torch.Tensor:
        """Entropy of the Gaussian before the tanh, nats, (B,): the exploration noise the temperature steers. The
        squashed action's entropy falls without bound as the mean saturates (demos command +-1), a target there can be
        out of reach whatever the noise; this one the policy reaches by its std alone."""
        return gaussian_entropy(self(features)[1].exp())

    def mode(self, features: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self(features)[0])
