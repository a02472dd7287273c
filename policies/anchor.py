"""A trust region for fine-tuning a warm-started policy: a pull towards a slow copy of itself, starting at the
pretrained policy.

A pretrained actor that learned with a behaviour-cloning term (``pretrain.bc_weight``, TD3+BC style) sits where the
data's actions are, not at its Q-function's maximum, and it is nearly deterministic; a Q-function pretrained on
offline data has never ranked the actions around it, and the policy's own online data (WSRL's warm-up) covers only
a narrow band of them. Fine-tuning without the offline data drops the cloning term at once, the actor climbs the
uncalibrated Q-function and a policy that succeeded collapses (measured on pick_cube, seed 0, success of 10
episodes: 1.0 to 0.3 within 112 online steps after WSRL's 500-step warm-up; with a fixed anchor that decayed over
2,000 steps, 1.0 throughout, then 0.2 within 300 steps of its end; with this moving anchor, tau 0.001, 1.0 at every
evaluation up to 5,000 steps). The anchor adds to the actor loss

    weight(t) * || mode(s) - mode_anchor(s) ||^2,    weight(t) = weight * max(0, 1 - t / updates)

over the batch's (online) states, ``t`` the actor updates since the warm start, and after each update the anchor
moves ``tau`` of the way to the policy (Polyak averaging; ``tau`` 0 keeps the pretrained policy): the policy moves
only as fast as the anchor follows, so the critic learns the actions around it from the data it collects before it
goes further. No offline data is kept: the anchor is the policy's own past, as PROTO (Li et al. 2023, iterative
policy regularization towards the previous policy, with a decaying weight) fine-tunes offline-pretrained agents.
It is part of the agent's checkpoint while it acts, so a resumed run keeps its schedule and its anchor.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from robot_rl.policies.base import soft_update
from robot_rl.policies.conservative import behaviour_cloning


class PolicyAnchor:
    """A frozen copy of ``actor`` and the weight of the pull towards it, decaying to 0 over ``updates`` actor
    updates. ``actor.mode(features)`` is the policy's deterministic action in [-1, 1]^A."""

    def __init__(self, actor: nn.Module, weight: float, updates: int, made: int = 0, tau: float = 0.0):
        self.actor = copy.deepcopy(actor).requires_grad_(False)
        self.weight, self.updates, self.made, self.tau = float(weight), int(updates), int(made), float(tau)

    @property
    def current_weight(self) -> float:
        """The weight of the next actor update's anchor term (0 once ``updates`` were made)."""
        return self.weight * max(0.0, 1.0 - self.made / self.updates) if self.updates else 0.0

    @property
    def done(self) -> bool:
        return self.current_weight == 0.0

    def loss(self, actor: nn.Module, features: torch.Tensor) -> torch.Tensor:
        """The weighted squared distance between the two policies' modes at ``features`` (B, F); counts one update."""
        with torch.no_grad():
            anchored = self.actor.mode(features)
        weight = self.current_weight
        self.made += 1
        return weight * behaviour_cloning(actor.mode(features), anchored)

    def follow(self, actor: nn.Module) -> None:
        """After an actor update: the anchor moves ``tau`` of the way to ``actor`` (0: it stays the pretrained one)."""
        if self.tau:
            soft_update(actor, self.actor, self.tau)

    def state(self) -> dict[str, Any]:
        return {
            "actor": self.actor.state_dict(),
            "weight": self.weight,
            "updates": self.updates,
            "made": self.made,
            "tau": self.tau,
        }

    @classmethod
    def from_state(cls, actor: nn.Module, state: dict[str, Any]) -> PolicyAnchor:
        """The anchor a checkpoint saved; ``actor``: a module of the same shape (its weights are replaced)."""
        anchor = cls(actor, state["weight"], state["updates"], state["made"], state["tau"])
        anchor.actor.load_state_dict(state["actor"])
        return anchor
