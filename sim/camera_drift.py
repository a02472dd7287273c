"""What a real camera adds to its frames over a session, for the emulated cell (``robot_rl/ros/emulation/cell_node.py``).

- :class:`CameraDrift`: exposure and white balance that wander as a RealSense's auto exposure and auto white balance
  follow a lab's light (daylight through a window, people passing, a lamp switched on): a gain on the whole image and
  one per colour channel, each the exponential of an Ornstein-Uhlenbeck process in time (stationary std in log gain,
  correlation time in seconds), drawn from its stationary law at the first frame, so two sessions start apart.
- :func:`offset_camera`: where a camera sits in this session against where it sat in the one before, a few millimetres
  (a camera re-clamped, a mount bumped between the demonstrations and training).
"""

from __future__ import annotations

import mujoco
import numpy as np


class CameraDrift:
    """Exposure and white-balance drift of one camera: ``exposure`` and ``white_balance`` are the stationary stds of the
    log gains (whole image; each of R, G, B), ``period`` their correlation time (s). Zero stds: frames unchanged."""

    def __init__(self, exposure: float, white_balance: float, period: float, rng: np.random.Generator):
        self.std = np.array([exposure, white_balance, white_balance, white_balance])
        self.period, self.rng = period, rng
        self.log_gains: np.ndarray | None = None  # exposure, then R, G, B
        self.last: float | None = None  # the time of the last frame (s)

    def gains(self, now: float) -> np.ndarray:
        """The R, G, B gains at time ``now`` (s, monotonic), the process advanced from the last frame's time."""
        if self.log_gains is None:
            self.log_gains = self.std * self.rng.standard_normal(4)
        else:
            keep = np.exp(-max(now - self.last, 0.0) / self.period)
            self.log_gains = keep * self.log_gains + self.std * np.sqrt(1.0 - keep**2) * self.rng.standard_normal(4)
        self.last = now
        return np.exp(self.log_gains[0] + self.log_gains[1:])

    def __call__(self, frame: np.ndarray, now: float) -> np.ndarray:
        """The HxWx3 uint8 RGB ``frame`` exposed at ``now`` as this camera shows it."""
        if not self.std.any():
            return frame
        return np.clip(frame * self.gains(now), 0, 255).astype(np.uint8)


def offset_camera(model: mujoco.MjModel, name: str, error: float, rng: np.random.Generator) -> np.ndarray:
    """Move camera ``name`` of ``model`` by a draw of N(0, error^2) per axis (m, in its parent body's frame); returns
    the offset."""
    offset = rng.normal(0.0, error, 3)
    model.cam_pos[model.camera(name).id] += offset
    return offset
