"""A task's declared start region: the box its reset draws a start from, and the test of whether a scene is in it.

One object serves both directions of a task: the forward reset samples from it and the backward (reset) task's
success reads it, so the two cannot drift apart. Coordinates in metres, base frame; the box may have any number of
axes (xy for an object on the table, xyz for a held object or the TCP).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StartRegion:
    """The axis-aligned box ``[low, high]`` (m, base frame) a reset draws from; ``slack`` (m) widens it for
    :meth:`contains` only, where a box of zero width (a fixed start) would otherwise accept nothing put back."""

    low: np.ndarray
    high: np.ndarray
    slack: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "low", np.asarray(self.low, dtype=float))
        object.__setattr__(self, "high", np.asarray(self.high, dtype=float))
        if self.low.shape != self.high.shape or np.any(self.low > self.high):
            raise ValueError(f"start region needs low <= high per axis; got low={self.low}, high={self.high}")

    @property
    def centre(self) -> np.ndarray:
        return (self.low + self.high) / 2

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """A point drawn uniformly from the box."""
        return rng.uniform(self.low, self.high)

    def distance(self, point: np.ndarray) -> float:
        """Euclidean distance (m) from ``point`` (its first axes, as many as the box has) to the box widened by
        ``slack``; 0 inside."""
        point = np.asarray(point, dtype=float)[: self.low.size]
        outside = np.maximum(self.low - self.slack - point, 0.0) + np.maximum(point - self.high - self.slack, 0.0)
        return float(np.linalg.norm(outside))

    def contains(self, point: np.ndarray) -> bool:
        """Whether ``point`` lies in the box widened by ``slack``."""
        return self.distance(point) == 0.0

    def inner_point(self, point: np.ndarray, margin: float) -> np.ndarray:
        """The point of the box shrunk by ``margin`` (m) nearest to ``point``: where to put an object back so that
        it lands inside despite a placing error up to ``margin``. An axis narrower than ``2 margin`` gives its
        centre."""
        low, high = self.low + margin, self.high - margin
        narrow = low > high
        low[narrow] = high[narrow] = self.centre[narrow]
        return np.clip(np.asarray(point, dtype=float)[: self.low.size], low, high)
