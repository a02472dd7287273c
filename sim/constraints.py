"""Safety constraints of the MuJoCo tasks: what counts as a violation, checked after every step.

The hazards a learned safety critic learns to avoid, all optional (``constraints`` task key):

- ``table_force`` (N): the robot pushes on the table harder than this (normal force summed
  over the robot's contacts with the table)
- ``keep_out`` ([[x, y, z], [x, y, z]], m, base frame): a box the TCP must not enter (a fragile
  zone, drawn translucent red)
- ``max_tcp_speed`` (m/s): TCP linear speed
- ``joint_margin`` (rad): an arm joint closer than this to its limit
- ``keep_out_velocity`` ([vx, vy, vz], m/s, base frame) with ``keep_out_period`` (s): the keep-out box slides back
  and forth, offset(t) = velocity * period / (2 pi) * sin(2 pi t / period) on the sim clock (peak speed
  ``velocity``): an obstacle that moves into the arm's path between two policy steps
- ``fragile_force`` (N) with ``fragile_body`` (default ``cube``): the summed normal force of the contacts on that
  body exceeds this (a fragile object crushed or knocked within a few milliseconds)

``info["violation"]`` is the bit mask of :class:`Constraint` flags violated at the end of the
step (0 = none), or on any tick of it when the fast loop runs (:mod:`robot_rl.sim.fast_critic_loop`); it is what the
episode store records as ``safety_flags``.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from robot_rl.core.config import ConfigError


class Constraint(enum.IntFlag):
    NONE = 0
    TABLE_FORCE = enum.auto()
    KEEP_OUT = enum.auto()
    TCP_SPEED = enum.auto()
    JOINT_LIMIT = enum.auto()
    FRAGILE_FORCE = enum.auto()


@dataclass(frozen=True)
class Constraints:
    table_force: float | None = None
    keep_out: tuple[tuple[float, ...], tuple[float, ...]] | None = None
    max_tcp_speed: float | None = None
    joint_margin: float | None = None
    keep_out_velocity: tuple[float, float, float] | None = None
    keep_out_period: float = 2.0
    fragile_force: float | None = None
    fragile_body: str = "cube"

    @classmethod
    def from_config(cls, config: dict[str, Any] | None) -> Constraints:
        config = dict(config or {})
        known = [field.name for field in dataclasses.fields(cls)]
        for key in config:
            if key not in known:
                raise ConfigError(f"constraints.{key}", config[key], "one of " + ", ".join(known))
        for key in ("table_force", "max_tcp_speed", "joint_margin", "fragile_force"):
            if config.get(key) is not None and not config[key] > 0:
                raise ConfigError(f"constraints.{key}", config[key], "a positive number or null")
        if not config.get("keep_out_period", 2.0) > 0:
            raise ConfigError("constraints.keep_out_period", config["keep_out_period"], "a positive number of seconds")
        if not isinstance(config.get("fragile_body", "cube"), str):
            raise ConfigError("constraints.fragile_body", config["fragile_body"], "the name of a body of the scene")
        if config.get("keep_out_velocity") is not None:
            velocity = np.asarray(config["keep_out_velocity"], float)
            if velocity.shape != (3,) or not np.all(np.isfinite(velocity)) or config.get("keep_out") is None:
                raise ConfigError(
                    "constraints.keep_out_velocity",
                    config["keep_out_velocity"],
                    "[vx, vy, vz] m/s of a keep_out box that is also given",
                )
            config["keep_out_velocity"] = tuple(velocity.tolist())
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
        self._keep_out_geom = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "keep_out")
        self.fragile_geoms: set[int] = set()
        if constraints.fragile_force is not None:
            body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, constraints.fragile_body)
            if body < 0:
                raise ConfigError(
                    "constraints.fragile_body", constraints.fragile_body, "the name of a body of the scene"
                )
            self.fragile_geoms = {g for g in range(model.ngeom) if model.geom_bodyid[g] == body}

    def keep_out_at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """The keep-out box (low, high corners, m, base frame) at sim time ``t`` s."""
        c = self.constraints
        low, high = np.asarray(c.keep_out[0]), np.asarray(c.keep_out[1])
        if c.keep_out_velocity is None:
            return low, high
        omega = 2 * np.pi / c.keep_out_period
        offset = np.asarray(c.keep_out_velocity) / omega * np.sin(omega * t)
        return low + offset, high + offset

    def keep_out_velocity_at(self, t: float) -> np.ndarray:
        """The keep-out box's velocity (3,) m/s, base frame, at sim time ``t`` s (zero for a box that stays put)."""
        c = self.constraints
        if c.keep_out_velocity is None:
            return np.zeros(3)
        return np.asarray(c.keep_out_velocity) * np.cos(2 * np.pi * t / c.keep_out_period)

    def contact_force(self, data: mujoco.MjData, geoms: set[int], others: set[int] | None = None) -> float:
        """Summed normal force (N) of the contacts between ``geoms`` and ``others`` (None: anything)."""
        total = 0.0
        for i in range(data.ncon):
            contact = data.contact[i]
            pair = {contact.geom1, contact.geom2}
            if pair & geoms and (others is None or pair & others):
                mujoco.mj_contactForce(self.model, data, i, self._force)
                total += abs(self._force[0])
        return total

    def table_force(self, data: mujoco.MjData) -> float:
        """Normal force (N) of the robot on the table."""
        return self.contact_force(data, {self.table}, self.robot_geoms)

    def check(self, data: mujoco.MjData, tcp_pos: np.ndarray, tcp_speed: float, arm_qpos: np.ndarray) -> int:
        c, flags = self.constraints, Constraint.NONE
        if c.table_force is not None and self.table_force(data) > c.table_force:
            flags |= Constraint.TABLE_FORCE
        if c.keep_out is not None:
            low, high = self.keep_out_at(data.time)
            if c.keep_out_velocity is not None and self._keep_out_geom >= 0:  # drawn where it is now
                self.model.geom_pos[self._keep_out_geom] = (low + high) / 2
            if np.all(tcp_pos >= low) and np.all(tcp_pos <= high):
                flags |= Constraint.KEEP_OUT
        if c.fragile_force is not None and self.contact_force(data, self.fragile_geoms) > c.fragile_force:
            flags |= Constraint.FRAGILE_FORCE
        if c.max_tcp_speed is not None and tcp_speed > c.max_tcp_speed:
            flags |= Constraint.TCP_SPEED
        if c.joint_margin is not None:
            low, high = self.joint_ranges[:, 0] + c.joint_margin, self.joint_ranges[:, 1] - c.joint_margin
            if np.any(arm_qpos < low) or np.any(arm_qpos > high):
                flags |= Constraint.JOINT_LIMIT
        return int(flags)
