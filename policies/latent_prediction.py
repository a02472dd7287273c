"""A self-supervised auxiliary loss for pixel encoders: latent prediction (as SPR and BYOL-style RL losses do).

From the online encoder's features of an observation and the action taken, a small predictor guesses the *target*
encoder's features of the next observation (the slow copy SAC keeps for its TD target, no gradient); the loss is
2 - 2 cos(prediction, target). Added to the critic's loss with ``agent.ssl_weight``, it trains the camera encoder on
the dynamics as well as on TD errors (``ssl=latent``; the encoder must train: cameras with the CNN).

What the seed paper (Li et al. 2022, "Does Self-supervised Learning Really Improve Reinforcement Learning from
Pixels?") predicts: with the same data and augmentation, joint SSL + RL gives no meaningful gain over augmentation alone
(DrQ's random shift, which every camera batch gets here anyway), and no single SSL loss wins across environments.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from robot_rl.policies.networks import mlp


class LatentPredictor(nn.Module):
    """(features of o_t, a_t) -> a guess of the target encoder's features of o_t+1."""

    def __init__(self, feature_dim: int, action_dim: int, hidden: int = 256):
        super().__init__()
        self.net = mlp(feature_dim + action_dim, [hidden], feature_dim)

    def forward(self, features: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([features, action.to(features.dtype)], dim=-1))


def latent_prediction_loss(
    predictor: LatentPredictor, features: torch.Tensor, action: torch.Tensor, target_next_features: torch.Tensor
) -> torch.Tensor:
    """Mean of 2 - 2 cos(predictor(features, action), target_next_features) over the batch (0: a perfect guess of the
    direction, 4: the opposite one); the target carries no gradient."""
    prediction = F.normalize(predictor(features, action).float(), dim=-1)
    target = F.normalize(target_next_features.detach().float(), dim=-1)
    return (2 - 2 * (prediction * target).sum(-1)).mean()
