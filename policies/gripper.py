"""Discrete gripper critic (HIL-SERL): DQN over {open, stay, close} with a grasp penalty.

A continuous actor is poor at the gripper, whose useful commands are "open", "close" and "leave
it". With ``gripper_critic`` the SAC actor drives the arm dimensions and this critic the last
action dimension, an absolute gripper command in [-1, 1] (-1 open, +1 closed):

- execution: open -> -1, close -> +1, stay -> the previous executed command (the episode starts at
  ``initial_command``; after a human's or the safety filter's step, the command they executed: "stay" means what
  the labels read it as, the gripper kept as it is)
- labels of stored actions (demos, interventions, own steps): a command >= 0.5 after a previous
  command < 0.5 is "close", <= -0.5 after > -0.5 is "open", anything else "stay"
- reward: the task reward minus ``grasp_penalty`` per open/close toggle
- target: double DQN, r_g + discount * Q_target(s', argmax_a' Q(s', a')) over an ensemble of
  ``members`` heads (minimum over members in the target)
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from robot_rl.policies.networks import CriticEnsemble

OPEN, STAY, CLOSE = 0, 1, 2


def gripper_labels(command: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
    """Class of each executed gripper command given the command before it, (B,) long."""
    labels = torch.full_like(command, STAY, dtype=torch.long)
    labels = torch.where((command >= 0.5) & (previous < 0.5), CLOSE, labels)
    return torch.where((command <= -0.5) & (previous > -0.5), OPEN, labels)


class GripperCritic(nn.Module):
    """Q(s, .) for the three gripper classes: an ensemble of LayerNorm MLPs on the features."""

    def __init__(self, feature_dim: int, hidden: list[int], members: int = 2):
        super().__init__()
        self.net = CriticEnsemble(feature_dim, 0, hidden, members, outputs=3)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """(E, B, 3) Q values."""
        return self.net(features, features[:, :0])


class GripperPolicy:
    """Acting side: epsilon-greedy class choice and the held command (the last executed, :meth:`follow`)."""

    def __init__(self, initial_command: float = -1.0, epsilon: float = 0.0, seed: int = 0):
        self.initial_command, self.epsilon = initial_command, epsilon
        self.command = initial_command
        self.rng = np.random.default_rng(seed)

    def begin_episode(self) -> None:
        self.command = self.initial_command

    def follow(self, executed: float) -> None:
        """The gripper command the env executed this step (a take-over's, the safety filter's): "stay" holds it."""
        self.command = executed

    def __call__(self, q_values: torch.Tensor, explore: bool) -> float:
        """The gripper command for Q values (E, 1, 3) of one observation."""
        choice = int(q_values.mean(0)[0].argmax())
        if explore and self.rng.random() < self.epsilon:
            choice = int(self.rng.integers(3))
        if choice != STAY:
            self.command = -1.0 if choice == OPEN else 1.0
        return self.command


def gripper_loss(
    critic: GripperCritic,
    target_critic: GripperCritic,
    features: torch.Tensor,
    next_features: torch.Tensor,
    command: torch.Tensor,
    previous: torch.Tensor,
    reward: torch.Tensor,
    discount: torch.Tensor,
    grasp_penalty: float,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Double-DQN TD loss of the gripper critic on one batch, and its metrics (0-d tensors)."""
    labels = gripper_labels(command, previous)
    with torch.no_grad():
        best_next = critic(next_features).mean(0).argmax(-1)
        next_q = target_critic(next_features).gather(-1, best_next.expand(critic.net.members, -1)[..., None])
        penalised = reward - grasp_penalty * (labels != STAY).float()
        target = penalised + discount * next_q.squeeze(-1).min(0).values
    q = critic(features).gather(-1, labels.expand(critic.net.members, -1)[..., None]).squeeze(-1)
    loss = F.mse_loss(q, target.expand_as(q))
    return loss, {"gripper_loss": loss.detach(), "gripper_toggle_rate": (labels != STAY).float().mean()}
