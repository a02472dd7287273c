"""Learned safety critic (Recovery RL / SQRL / Bresa): the risk of a constraint violation.

Q_risk(s, a) is the discounted probability that a constraint is violated from state s after
action a: the target is y = c + (1 - c) (1 - terminated) gamma_risk max(Q1', Q2')(s', a') with
c = 1 on a violation, two heads and the pessimistic max in the target, a' the action taken next
in the data (an on-policy estimate that follows the behaviour as online data replaces old data).
It bootstraps through a time limit, as the task critic does: only termination ends the risk (a
violation-free episode cut by its time limit has not shown that nothing can go wrong after it).
Where no next action was taken (the last step of a truncated or closed episode), a' is the action
a itself: the behaviour at s' is unknown, and the action just taken is its best stand-in at 10 Hz.
Batches are class-balanced: ``violation_fraction`` of the rows are violations when the buffer has
any. Trained with binary cross-entropy on sigmoid outputs, offline from recorded episodes
(``safety_flags`` in the episode store) and online from new transitions.

The critic sees the ``state`` vector only (proprioception and object state), never images, so
that its inference fits a fast control loop: :meth:`SafetyCritic.risk_model` exports the weights
to :class:`RiskModel`, a numpy-only forward pass.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from robot_rl.core.config import is_integer, is_number, require_all, yaml_defaults
from robot_rl.policies.base import soft_update
from robot_rl.policies.networks import CriticEnsemble
from robot_rl.safety.risk_model import RiskModel


@yaml_defaults("settings/safety.yaml", "safety.critic")
class SafetyCriticConfig:
    hidden: list[int]  # small: it runs in the 1 kHz filter loop
    discount: float  # gamma_risk: how far ahead a violation counts
    lr: float
    tau: float
    batch_size: int
    violation_fraction: float  # share of violations in each batch (when there are any)

    def validate(self) -> None:
        number = {key: is_number(getattr(self, key)) for key in ("discount", "lr", "tau", "violation_fraction")}
        checks = {
            "discount": (number["discount"] and 0.0 <= self.discount < 1.0, "a number in [0, 1)"),
            "lr": (number["lr"] and self.lr > 0, "a positive number"),
            "tau": (number["tau"] and 0.0 < self.tau <= 1.0, "a number in (0, 1]"),
            "batch_size": (is_integer(self.batch_size) and self.batch_size >= 2, "an integer >= 2"),
            "violation_fraction": (
                number["violation_fraction"] and 0.0 < self.violation_fraction < 1.0,
                "a number in (0, 1)",
            ),
        }
        require_all("safety.critic", self, checks)


@dataclasses.dataclass(frozen=True)
class RiskBatch:
    """What the safety critic learns from (:meth:`SafetyCritic.sample`): B rows of CPU tensors."""

    state: torch.Tensor  # (B, S) float32: the state vector
    action: torch.Tensor  # (B, A) float32: the action executed
    cost: torch.Tensor  # (B,) float32: 1 where a constraint was violated
    next_state: torch.Tensor  # (B, S) float32: the state one step on
    next_action: torch.Tensor  # (B, A) float32: the action taken there (``action`` again where none was)
    terminated: torch.Tensor  # (B,) bool

    @classmethod
    def joined(cls, parts: list[RiskBatch]) -> RiskBatch:
        """The rows of ``parts`` one after the other."""
        return cls(**{f.name: torch.cat([getattr(part, f.name) for part in parts]) for f in dataclasses.fields(cls)})


class SafetyCritic:
    """Twin-head risk critic over (state, action)."""

    def __init__(self, state_dim: int, action_dim: int, config: SafetyCriticConfig | None = None, seed: int = 0):
        self.config = config or SafetyCriticConfig()
        self.config.validate()
        torch.manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.state_dim, self.action_dim = state_dim, action_dim
        self.critic = CriticEnsemble(state_dim, action_dim, self.config.hidden, members=2)
        self.target = copy.deepcopy(self.critic).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.critic.parameters(), lr=self.config.lr)
        self.updates = 0

    def risk(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Pessimistic (max over heads) risk in [0, 1], (B,)."""
        return torch.sigmoid(self.critic(state, action)).max(0).values

    def sample(self, buffer, size: int | None = None) -> RiskBatch:
        """A class-balanced batch (``size`` rows, default ``batch_size``) with the next action of
        each row, from ``buffer`` (a ReplayBuffer, whose tensors may live on a GPU)."""
        valid = buffer.valid_indices().cpu().numpy()
        if not len(valid):
            raise ValueError("the safety critic's buffer is empty")
        violating = valid[buffer.cost[valid].cpu().numpy() > 0]
        size = size or self.config.batch_size
        take = round(self.config.violation_fraction * size) if len(violating) else 0
        index = np.concatenate(
            [
                violating[self.rng.integers(0, len(violating), take)] if take else np.zeros(0, int),
                valid[self.rng.integers(0, len(valid), size - take)],
            ]
        )
        actions, mask = (tensor.cpu() for tensor in buffer.action_sequences(index, 2))
        slots = torch.from_numpy(index).to(buffer.storage_device)
        next_slots = torch.from_numpy((index + 1) % buffer.capacity).to(buffer.storage_device)  # the next observations
        action = buffer.action[slots].cpu()
        return RiskBatch(
            state=buffer.obs["state"][slots].cpu(),
            action=action,
            cost=buffer.cost[slots].cpu(),
            next_state=buffer.obs["state"][next_slots].cpu(),
            next_action=torch.where(mask[:, 1:], actions[:, 1], action),  # no next step: the same action again
            terminated=buffer.terminated[slots].cpu(),
        )

    def targets(self, batch: RiskBatch) -> torch.Tensor:
        """y = c + (1 - c) (1 - terminated) gamma_risk max(Q1', Q2')(s', a'), (B,) in [0, 1]."""
        cost = (batch.cost > 0).float()
        with torch.no_grad():
            next_risk = torch.sigmoid(self.target(batch.next_state, batch.next_action)).max(0).values
            return cost + (1 - cost) * (~batch.terminated).float() * self.config.discount * next_risk

    def update(self, batch: RiskBatch) -> dict[str, float]:
        cost = (batch.cost > 0).float()
        target = self.targets(batch)
        logits = self.critic(batch.state, batch.action)
        loss = F.binary_cross_entropy_with_logits(logits, target.expand_as(logits))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        soft_update(self.critic, self.target, self.config.tau)
        self.updates += 1
        with torch.no_grad():
            risk = torch.sigmoid(logits).max(0).values
            violation = cost > 0
            gap = (risk[violation].mean() - risk[~violation].mean()).item() if violation.any() else float("nan")
        return {"safety_loss": loss.item(), "safety_risk_mean": risk.mean().item(), "safety_risk_gap": gap}

    def risk_model(self) -> RiskModel:
        return RiskModel.from_critic(self.critic, self.state_dim)

    def state_dict(self) -> dict[str, Any]:
        return {
            "critic": self.critic.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.critic.load_state_dict(state["critic"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = state["updates"]
        self.rng.bit_generator.state = state["rng"]
