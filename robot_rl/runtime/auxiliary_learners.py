"""What the learner trains beside the agent: the safety critic and the fast-loop critic, behind one protocol.

An :class:`AuxiliaryLearner` sees every transition the learner stores, demos too (:meth:`~AuxiliaryLearner.observe`),
takes a step after each agent update (:meth:`~AuxiliaryLearner.update`), adds its models to the weights the actor
receives (:meth:`~AuxiliaryLearner.weights`) and writes and reads its part of a checkpoint
(:meth:`~AuxiliaryLearner.save`, :meth:`~AuxiliaryLearner.load`). The learner holds them by name, in the order
they update.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from robot_rl.core.checkpoint import load_tensors
from robot_rl.data import ReplayBuffer
from robot_rl.data.transition import Transition
from robot_rl.safety.fast_critic import FAST_CRITIC_KEY, FastCriticModel, FastCriticSettings

FAST_CRITIC_FILE = "fast_risk.npz"  # in a checkpoint: the fast-loop critic the learner published last


class AuxiliaryLearner(Protocol):
    def observe(self, t: Transition) -> None:
        """A transition the learner has just stored (online or demo)."""

    def update(self, online: ReplayBuffer, online_received: int) -> dict[str, float]:
        """One step after the agent's update; its metrics (none when it did nothing)."""

    def weights(self, online_received: int) -> dict[str, Any]:
        """Its models for the actor, when they are ready (none before)."""

    def save(self, folder: Path) -> dict[str, Any]:
        """Write its files into ``folder`` (a checkpoint's, being made); its plain state for ``counters.json``."""

    def load(self, folder: Path, state: dict[str, Any], key: str) -> None:
        """What :meth:`save` wrote and returned; a file that is no robot_rl file of tensors is refused naming ``key``."""


class SafetyCriticLearning:
    """The policy-rate safety critic (:class:`~robot_rl.runtime.safety_learning.SafetyLearner`), fitted on the online
    buffer's costs after each agent update; it learns from the buffer, not per transition."""

    def __init__(self, learner):
        self.learner = learner

    def observe(self, t: Transition) -> None:
        pass

    def update(self, online: ReplayBuffer, online_received: int) -> dict[str, float]:
        return self.learner.update(online)

    def weights(self, online_received: int) -> dict[str, Any]:
        return self.learner.weights(online_received)

    def save(self, folder: Path) -> dict[str, Any]:
        torch.save(self.learner.critic.state_dict(), folder / "safety_critic.pt")
        return {}

    def load(self, folder: Path, state: dict[str, Any], key: str) -> None:
        if (folder / "safety_critic.pt").exists():
            self.learner.critic.load_state_dict(load_tensors(key, folder / "safety_critic.pt"))


class FastCriticLearning:
    """The fast-loop critic learned online (``safety.fast_critic.learn``) from the ticks the transitions carry: each
    actor's episode of ticks goes to its :class:`~robot_rl.policies.fast_critic.FastCriticLearner` once the
    episode is over (labels look ahead); every ``learn_every`` online steps it is fitted ``learn_updates`` steps and
    the new model, with the next version number, becomes the one published."""

    def __init__(self, learner, settings: FastCriticSettings):
        self.learner, self.settings = learner, settings
        self.ticks: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}  # per actor stream: the open episode's
        self.refused_ticks = 0  # ticks of another width than the critic's rows
        self.published: tuple[FastCriticModel, int] | None = None  # the newest fit's model and version
        self.fitted_at = 0  # online steps at the newest fit

    def observe(self, t: Transition) -> None:
        ticks = self.ticks.setdefault(t.origin.actor, [])
        if t.first:
            ticks.clear()
        streams = t.streams or {}
        if "fast_features" in streams and "fast_violation" in streams:
            ticks.append((streams["fast_features"][0], streams["fast_violation"][0]))
        if (t.terminated or t.truncated) and ticks:
            features, violation = np.concatenate([f for f, _ in ticks]), np.concatenate([v for _, v in ticks])
            ticks.clear()
            try:
                self.learner.add_episode(features, violation)
            except ValueError:  # ticks of another width (another task context) than the critic learns: not learned
                self.refused_ticks += len(features)

    def update(self, online: ReplayBuffer, online_received: int) -> dict[str, float]:
        if not self.learner.size or online_received - self.fitted_at < self.settings.learn_every:
            return {}
        self.fitted_at = online_received
        loss = self.learner.train(self.settings.learn_updates)
        version = 1 if self.published is None else self.published[1] + 1
        self.published = (self.learner.model(), version)
        return {
            "fast_risk_loss": loss,
            "fast_risk_ticks": float(self.learner.size),
            "fast_risk_refused_ticks": float(self.refused_ticks),
        }

    def weights(self, online_received: int) -> dict[str, Any]:
        return {} if self.published is None else {FAST_CRITIC_KEY: self.published}

    def save(self, folder: Path) -> dict[str, Any]:
        torch.save(self.learner.state_dict(), folder / "fast_risk_learner.pt")
        if self.published is not None:
            self.published[0].save(folder / FAST_CRITIC_FILE, self.published[1])
        return {"fast_fitted_at": self.fitted_at}

    def load(self, folder: Path, state: dict[str, Any], key: str) -> None:
        if (folder / "fast_risk_learner.pt").exists():
            self.learner.load_state_dict(load_tensors(key, folder / "fast_risk_learner.pt"))
            if (folder / FAST_CRITIC_FILE).exists():
                self.published = FastCriticModel.load(folder / FAST_CRITIC_FILE)
            self.fitted_at = state.get("fast_fitted_at", 0)
