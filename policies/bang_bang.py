"""A bang-bang policy for SAC (Seyde et al., "Is Bang-Bang Control All You Need?", 2021): each action dimension is
one of its two extremes, -1 or +1, drawn from a Bernoulli.

- pi(a|s) = prod_i Bernoulli(a_i = +1; p_i(s)), p_i = sigmoid(logit_i(s)) from an MLP on the features.
- Sampling gives the hard action in {-1, 1}^A with a straight-through gradient through its mean 2p - 1 (the value is
  the hard action, the gradient that of the mean), so SAC's actor loss -Q(s, a) reaches the logits as it does a
  Gaussian's reparameterised sample.
- The log-probability handed to SAC is the expected one, minus the analytic entropy sum_i H(p_i) (as SAC-discrete
  uses exact expectations): the temperature and the entropy bonus see no sampling noise.
- Acting deterministically takes the likelier extreme per dimension.

The paper trains it with the algorithms' own machinery (MPO, DMPO, D4PG); here SAC's critics, replay and human
takeovers stay as they are. Entropy lies in [0, A ln 2], so SAC's default target (-A/2) would let the temperature fall
to 0 and the policy freeze: the agent's default target for this actor is :data:`TARGET_ENTROPY_SHARE` of the maximum.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from robot_rl.policies.networks import mlp

TARGET_ENTROPY_SHARE = 0.25  # default target entropy: this share of A ln 2 (nats)


def default_target_entropy(action_dim: int) -> float:
    """SAC's target entropy for a bang-bang actor of ``action_dim`` dimensions (nats)."""
    return TARGET_ENTROPY_SHARE * action_dim * math.log(2.0)


class BernoulliActor(nn.Module):
    """Actions in {-1, 1}^A: one Bernoulli per dimension on an MLP's logits of the features."""

    def __init__(self, feature_dim: int, action_dim: int, hidden: list[int]):
        super().__init__()
        self.net = mlp(feature_dim, hidden, action_dim)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """The logits of P(a_i = +1), (B, A)."""
        return self.net(features)

    @staticmethod
    def straight_through(hard: torch.Tensor, probability: torch.Tensor) -> torch.Tensor:
        """``hard`` as value, the gradient of the mean action 2p - 1."""
        mean = 2.0 * probability - 1.0
        return hard + (mean - mean.detach())  # exactly hard in value: mean - mean is 0

    def sample(
        self, features: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A hard action (straight-through gradient) and the expected log-probability, minus the entropy, (B,)."""
        logits = self(features)
        probability = torch.sigmoid(logits)
        uniform = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=logits.dtype)
        hard = torch.where(uniform < probability, 1.0, -1.0).to(logits.dtype)
        return self.straight_through(hard, probability), -self.entropy(logits)

    def mode(self, features: torch.Tensor) -> torch.Tensor:
        """The likelier extreme per dimension (+1 when p >= 0.5), with the straight-through gradient of the mean (the
        behaviour-cloning pull reaches the logits)."""
        logits = self(features)
        hard = torch.where(logits >= 0, 1.0, -1.0).to(logits.dtype)
        return self.straight_through(hard, torch.sigmoid(logits))

    def noise_entropy(self, features: torch.Tensor) -> torch.Tensor:
        """The policy's entropy (no squashing here), nats, (B,): what the temperature steers."""
        return self.entropy(self(features))

    @staticmethod
    def entropy(logits: torch.Tensor) -> torch.Tensor:
        """sum_i H(Bernoulli(sigmoid(logit_i))), nats, (B,)."""
        probability = torch.sigmoid(logits)
        return -(probability * F.logsigmoid(logits) + (1 - probability) * F.logsigmoid(-logits)).sum(-1)

    @staticmethod
    def log_prob(logits: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """log pi(a|s) of actions in {-1, 1}^A (a value >= 0 counts as +1), (B,)."""
        return torch.where(action >= 0, F.logsigmoid(logits), F.logsigmoid(-logits)).sum(-1)
