"""Safety constraints of the MuJoCo tasks: what counts as a violation, checked after every step.

The hazards a learned safety critic learns to avoid, all optional (``constraints`` task key):

- ``table_force`` (N): the robot pushes on the table harder than this (normal force summed
  over the robot's contacts with the table)
- ``keep_out`` ([[x, y, z], [x, y, z]], m, base frame): a box the TCP must not enter (a fragile
  zone, drawn translucent red)
- ``max_tcp_speed`` (m/s): TCP linear speed
- ``joint_margin`` (rad): an arm joint closer than this to its limit

``info["violation"]`` is the bit mask of :class:`Constraint` flags violated at the end of the
step (0 = none); it is what the episode store records as ``safety_flags``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from robot_rl.config import ConfigError


class Constraint(enum.IntFlag):
    NONE = 0
    TABLE_FORCE = enum.auto()
    KEEP_OUT = enum.auto()
    TCP_SPEED = enum.auto()
    JOINT_LIMIT = enum.auto()


@dataclass(frozen=True)
class Constraints:
    table_force: float | None = None
    keep_out: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    max_tcp_speed: float | None = None
    joint_margin: float | None = None

    @classmethod
    def from_config(cls, config: dict[str, Any] | None) -> Constraints:
        config = dict(config or {})
        known = ("table_force", "keep_out", "max_tcp_speed", "joint_margin")
        for key in config:
            if key not in known:
                raise ConfigError(f"constraints.{key}", config[key], "one of " + ", ".join(known))
        for key in ("table_force", "max_tcp_speed", "joint_margin"):
            if config.get(key) is not None and not config[key] > 0:
                raise ConfigError(f"constraints.{key}", config[key], "a positive number or null")
        if config.get("keep_out") is not None:
            box = np.asarray(config["keep_out"], float)
            if box.shape != (2, 3) or np.any(box[0] >= box[1]):
                raise ConfigError(
                    "constraints.keep_out",
                    config["keep_out"],
                    "[[x_min, y_min, z_min], [x_max, y_max, z_max]] with min < max (m, base frame)",
                )
            config["keep_out"] = tuple(map(tuple, box.tolist()))
        return cls(**config)

    def keep_out_mjcf(self) -> str:
        """A translucent, non-colliding box that shows the keep-out zone."""
        if self.keep_out is None:
            return ""
        low, high = np.asarray(self.keep_out)
        centre, half = (low + high) / 2, (high - low) / 2
        return (
            f'<geom name="keep_out" type="box" pos="{centre[0]} {centre[1]} {centre[2]}" '
            f'size="{half[0]} {half[1]} {half[2]}" rgba="1 0.1 0.1 0.25" contype="0" conaffinity="0"/>'
        )


class ConstraintMonitor:
    """Evaluates :class:`Constraints` on a Panda task's MuJoCo state."""

    def __init__(
        self, constraints: Constraints, model: mujoco.MjModel, robot_bodies: set[int], joint_ranges: np.ndarray
    ):
        self.constraints, self.model = constraints, model
        self.table = model.geom("table").id
        self.robot_geoms = {g for g in range(model.ngeom) if model.geom_bodyid[g] in robot_bodies}
        self.joint_ranges = joint_ranges
        self._force = np.zeros(6)

    def table_force(self, data: mujoco.MjData) -> float:
        """Normal force (N) of the robot on the table."""
        total = 0.0
        for i in range(data.ncon):
            contact = data.contact[i]
            pair = {contact.geom1, contact.geom2}
            if self.table in pair and pair & self.robot_geoms:
                mujoco.mj_contactForce(self.model, data, i, self._force)
                total += abs(self._force[0])
        return total

    def check(self, data: mujoco.MjData, tcp_pos: np.ndarray, tcp_speed: float, arm_qpos: np.ndarray) -> int:
        c, flags = self.constraints, Constraint.NONE
        if c.table_force is not None and self.table_force(data) > c.table_force:
            flags |= Constraint.TABLE_FORCE
        if c.keep_out is not None and np.all(tcp_pos >= c.keep_out[0]) and np.all(tcp_pos <= c.keep_out[1]):
            flags |= Constraint.KEEP_OUT
        if c.max_tcp_speed is not None and tcp_speed > c.max_tcp_speed:
            flags |= Constraint.TCP_SPEED
        if c.joint_margin is not None:
            low, high = self.joint_ranges[:, 0] + c.joint_margin, self.joint_ranges[:, 1] - c.joint_margin
            if np.any(arm_qpos < low) or np.any(arm_qpos > high):
                flags |= Constraint.JOINT_LIMIT
        return int(flags)
