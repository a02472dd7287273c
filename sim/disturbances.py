"""Sudden disturbances of the MuJoCo tasks: hazards that appear between two policy steps.

``pushes`` (task key): random shoves on the robot's hand, as a person or a swinging cable gives them. Pushes start
at random times (a Poisson process of ``per_second`` pushes per second of sim time), last ``duration`` s and push
with ``force`` N in a random horizontal direction (base frame). A push that starts inside a 0.1 s policy step is over
before the policy sees its result: only a loop that runs at the physics rate (the safety node's, or the sim's fast
loop, :mod:`robot_rl.sim.fast_critic_loop`) can react within it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_rl.core.config import ConfigError


@dataclass(frozen=True)
class Push:
    """One push: from ``start`` to ``end`` (s of sim time), ``force`` (3,) N in the base frame."""

    start: float
    end: float
    force: np.ndarray


@dataclass(frozen=True)
class Pushes:
    force: float  # N
    duration: float  # s
    per_second: float  # expected pushes per second of sim time

    @classmethod
    def from_config(cls, config: dict[str, Any] | None) -> Pushes | None:
        """The ``pushes`` task key (None or an empty mapping: no pushes); a bad value raises ConfigError."""
        if not config:
            return None
        config = dict(config)
        known = ("force", "duration", "per_second")
        for key in config:
            if key not in known:
                raise ConfigError(f"pushes.{key}", config[key], "one of " + ", ".join(known))
        for key in known:
            value = config.get(key)
            if not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
                raise ConfigError(f"pushes.{key}", value, "a positive number (N, s, pushes per s)")
        return cls(float(config["force"]), float(config["duration"]), float(config["per_second"]))

    def schedule(self, rng: np.random.Generator, start: float, span: float) -> list[Push]:
        """The pushes that start in [start, start + span) s, drawn from ``rng``."""
        pushes, t = [], start
        while True:
            t += rng.exponential(1.0 / self.per_second)
            if t >= start + span:
                return pushes
            angle = rng.uniform(0.0, 2 * np.pi)
            direction = np.array([np.cos(angle), np.sin(angle), 0.0])
            pushes.append(Push(t, t + self.duration, self.force * direction))
