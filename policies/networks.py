"""Building blocks of the agents: MLPs, critic ensembles and the tanh-Gaussian actor."""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


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
    """LayerNorm with separate scale and shift per ensemble member."""

    def __init__(self, width: int, members: int):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(members, 1, width))
        self.shift = nn.Parameter(torch.zeros(members, 1, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:]) * self.scale + self.shift


class CriticEnsemble(nn.Module):
    """E Q-networks Q_e(features, action) with LayerNorm in every hidden layer (RLPD)."""

    def __init__(self, feature_dim: int, action_dim: int, hidden: list[int], members: int):
        super().__init__()
        self.members = members
        layers: list[nn.Module] = []
        in_dim = feature_dim + action_dim
        for width in hidden:
            layers += [EnsembleLinear(in_dim, width, members), EnsembleLayerNorm(width, members), nn.ReLU()]
            in_dim = width
        layers.append(EnsembleLinear(in_dim, 1, members))
        self.net = nn.Sequential(*layers)

    def forward(self, features: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """(E, B) Q values."""
        x = torch.cat([features, action], dim=-1)
        return self.net(x.unsqueeze(0).expand(self.members, *x.shape)).squeeze(-1)


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

    def sample(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised action and its log-probability (with the tanh correction)."""
        mean, log_std = self(features)
        std = log_std.exp()
        pre_tanh = mean + std * torch.randn_like(mean)
        action = torch.tanh(pre_tanh)
        log_prob = (-0.5 * ((pre_tanh - mean) / std) ** 2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        log_prob = log_prob - (2 * (math.log(2) - pre_tanh - F.softplus(-2 * pre_tanh))).sum(-1)
        return action, log_prob

    def mode(self, features: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self(features)[0])
