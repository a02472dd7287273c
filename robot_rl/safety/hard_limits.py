"""The hard safety layer: pure functions, no learning, always the last step before an arm.

``enforce(limits, latch, arm, command, previous, now)`` turns whatever was proposed (by a
policy, a human, a learned safety filter) into a command that is inside every limit, and
reports each change it made as a :class:`Violation` flag:

1. an e-stop latches until :meth:`EStopLatch.reset`; while latched the arm holds its pose
2. stale state (older than ``state_timeout``) holds the last command sent; a stale command
   (older than ``command_timeout``) or any NaN/inf holds the measured pose
3. force or torque above the limit: stop and retreat ``retreat_distance`` along the force
4. the target position is clipped to the workspace box, the tool axis to a cone around
   ``cone_axis``, then the step from the previous command is limited in translation,
   rotation and gripper change per tick
5. with ``max_lead``, the target position is pulled to within ``max_lead`` of the measured TCP position: an
   impedance controller keeps its last target when commands stop (this node killed), so the arm then goes at most
   that far on its own, and its pull stays below stiffness x ``max_lead`` (SERL's controller clips its error so);
   keep it at least ``retreat_distance``

Frames and units: positions in metres in the robot base frame, orientations as 3x3 matrices
from the TCP frame to the base frame, forces in N and torques in N m in the base frame,
times in seconds of one monotonic clock, gripper command in [-1 (open), 1 (closed)].
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from robot_rl.core.geometry import matrix_from_rotvec, rotvec_from_matrix


class Violation(enum.IntFlag):
    NONE = 0
    NONFINITE = enum.auto()
    STALE_COMMAND = enum.auto()
    STALE_STATE = enum.auto()
    ESTOP = enum.auto()
    FORCE = enum.auto()
    WORKSPACE = enum.auto()
    ORIENTATION = enum.auto()
    TRANSLATION_STEP = enum.auto()
    ROTATION_STEP = enum.auto()
    GRIPPER_STEP = enum.auto()
    FOREIGN_PUBLISHER = enum.auto()  # set by the safety node: a node not allowed publishes to the arm or its inputs
    INACTIVE = enum.auto()  # set by the safety node: its lifecycle state is inactive, it holds the arm
    RISK_FILTERED = enum.auto()  # set by the safety node: its fast-loop critic changed the command (risk too high)
    RISK_BYPASSED = enum.auto()  # set by the safety node: its fast-loop critic was not used (no model, stale state,
    #                             a missed deadline, NaN or an error): the hard layer alone applied
    RISK_MODEL_REJECTED = enum.auto()  # set by the safety node: the newest fast-critic weights were refused, it runs on
    #                                   its last good model
    ARM_ERROR = enum.auto()  # set by the safety node: the arm reports an error (a reflex, a protective stop) on
    #                         arm/error; it holds the measured pose until the error is recovered
    LEAD = enum.auto()  # the target led the measured TCP by more than max_lead: pulled back toward the arm


#: The flags of a tick that holds the arm where it is instead of moving it toward a command: no command (stale), no
#: state, the e-stop latch, a non-finite command, the safety node inactive or the arm in error.
HOLDS = (
    Violation.NONFINITE
    | Violation.STALE_COMMAND
    | Violation.STALE_STATE
    | Violation.ESTOP
    | Violation.INACTIVE
    | Violation.ARM_ERROR
)


@dataclass(frozen=True)
class SafetyLimits:
    workspace_low: tuple[float, float, float] = (0.25, -0.35, 0.005)  # m, base frame
    workspace_high: tuple[float, float, float] = (0.75, 0.35, 0.45)
    cone_axis: tuple[float, float, float] = (0.0, 0.0, -1.0)  # allowed tool z direction (base frame)
    cone_half_angle: float = 0.8  # rad
    max_translation_step: float = 0.002  # m per tick
    max_rotation_step: float = 0.02  # rad per tick
    max_gripper_step: float = 0.2  # command units per tick
    max_force: float = 40.0  # N
    max_torque: float = 8.0  # N m
    retreat_distance: float = 0.01  # m
    command_timeout: float = 0.1  # s
    state_timeout: float = 0.01  # s
    max_lead: float | None = None  # m the target may lead the measured TCP position; None: no bound

    def __post_init__(self) -> None:
        low, high = np.asarray(self.workspace_low, float), np.asarray(self.workspace_high, float)
        checks = {
            "workspace_low": low.shape == (3,) and np.all(np.isfinite(low)) and np.all(low < high),
            "cone_axis": np.isfinite(np.linalg.norm(self.cone_axis)) and np.linalg.norm(self.cone_axis) > 0,
            "cone_half_angle": 0 < self.cone_half_angle < np.pi / 2,
        }
        for name in (
            "max_translation_step",
            "max_rotation_step",
            "max_gripper_step",
            "max_force",
            "max_torque",
            "command_timeout",
            "state_timeout",
        ):
            checks[name] = np.isfinite(getattr(self, name)) and getattr(self, name) > 0
        checks["retreat_distance"] = np.isfinite(self.retreat_distance) and self.retreat_distance >= 0
        checks["max_lead"] = self.max_lead is None or (np.isfinite(self.max_lead) and self.max_lead > 0)
        for name, ok in checks.items():
            if not ok:
                from robot_rl.core.config import ConfigError

                raise ConfigError(f"safety.{name}", getattr(self, name), "a finite value in range (see SafetyLimits)")

    @cached_property
    def corners(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """The workspace corners as Python floats (m, base frame), converted once for the fast loop."""
        return tuple(map(float, self.workspace_low)), tuple(map(float, self.workspace_high))

    @cached_property
    def unit_cone_axis(self) -> np.ndarray:
        return np.asarray(self.cone_axis, float) / np.linalg.norm(self.cone_axis)

    @cached_property
    def cosine_pretests(self) -> tuple[float, float, float, float, float]:
        """Python floats for the fast loop's cheap tests: the unit cone axis, cos(cone_half_angle)
        (a tool axis with a smaller cosine may be outside the cone) and cos(max_rotation_step)
        (a turn with a smaller cosine may be too large); the exact tests run only past these."""
        x, y, z = self.unit_cone_axis.tolist()
        return x, y, z, math.cos(self.cone_half_angle) + 1e-12, math.cos(self.max_rotation_step) + 1e-12


@dataclass
class ArmState:
    """Measured TCP pose and wrench, with the time they were measured."""

    pos: np.ndarray
    rot: np.ndarray
    stamp: float
    force: np.ndarray = field(default_factory=lambda: np.zeros(3))
    torque: np.ndarray = field(default_factory=lambda: np.zeros(3))


@dataclass
class Command:
    """Target TCP pose and gripper command, with the time it was issued."""

    pos: np.ndarray
    rot: np.ndarray
    gripper: float
    stamp: float

    def is_finite(self) -> bool:
        # one sum is finite exactly when every term is, unless finite terms overflow: check those one by one
        if math.isfinite(sum(self.pos.tolist()) + sum(self.rot.ravel().tolist()) + self.gripper + self.stamp):
            return True
        return bool(
            np.isfinite(self.pos).all()
            and np.isfinite(self.rot).all()
            and math.isfinite(self.gripper)
            and math.isfinite(self.stamp)
        )


@dataclass
class EStopLatch:
    """Once triggered, stays triggered until reset explicitly; ``reason`` says what triggered it first (empty while
    not latched), ``triggers`` counts the triggers since the start (a hold another trigger joined is not one's own)."""

    latched: bool = False
    reason: str = ""
    triggers: int = 0

    def trigger(self, reason: str = "e-stop") -> None:
        if not self.latched:
            self.reason = reason
        self.latched = True
        self.triggers += 1

    def reset(self) -> None:
        self.latched, self.reason = False, ""


def enforce(
    limits: SafetyLimits, latch: EStopLatch, arm: ArmState, command: Command, previous: Command, now: float
) -> tuple[Command, Violation]:
    """The command to send (inside every limit) and what was changed. ``previous`` is the last
    command sent, which must itself satisfy the limits (start from :func:`hold`)."""
    if latch.latched:
        return _hold_pose(arm, previous, now), Violation.ESTOP
    if not (math.isfinite(arm.stamp) and now - arm.stamp <= limits.state_timeout):
        return Command(previous.pos.copy(), previous.rot.copy(), previous.gripper, now), Violation.STALE_STATE
    if not command.is_finite():
        return _hold_pose(arm, previous, now), Violation.NONFINITE
    if now - command.stamp > limits.command_timeout:
        return _hold_pose(arm, previous, now), Violation.STALE_COMMAND

    flags = 0  # Violation bits as a plain int: IntFlag arithmetic costs a microsecond an operation
    target_rot, gripper = command.rot.astype(float), float(command.gripper)
    x, y, z = command.pos.tolist()
    force_norm, torque_norm = math.hypot(*arm.force.tolist()), math.hypot(*arm.torque.tolist())
    if not math.isfinite(force_norm + torque_norm):  # a NaN reading counts as 0, inf as the largest float
        force_norm, torque_norm = _norm(np.nan_to_num(arm.force)), _norm(np.nan_to_num(arm.torque))
    if force_norm > limits.max_force or torque_norm > limits.max_torque:
        flags |= Violation.FORCE.value
        force = np.nan_to_num(arm.force)
        direction = force / force_norm if force_norm > 1e-9 else np.zeros(3)
        x, y, z = (arm.pos + limits.retreat_distance * direction).tolist()  # move with the push, away from contact
        target_rot = previous.rot
        gripper = previous.gripper

    (low_x, low_y, low_z), (high_x, high_y, high_z) = limits.corners
    clipped = min(max(x, low_x), high_x), min(max(y, low_y), high_y), min(max(z, low_z), high_z)
    if clipped != (x, y, z):
        flags |= Violation.WORKSPACE.value
    x, y, z = clipped

    target_rot = _orthonormal(target_rot)
    tool_x, tool_y, tool_z = target_rot[:, 2].tolist()
    axis_x, axis_y, axis_z, cone_cosine, turn_step_cosine = limits.cosine_pretests
    if tool_x * axis_x + tool_y * axis_y + tool_z * axis_z < cone_cosine:  # outside the cone (or on its edge)
        target_rot, turned = project_to_cone(target_rot, limits.unit_cone_axis, limits.cone_half_angle)
        if turned:
            flags |= Violation.ORIENTATION.value

    previous_x, previous_y, previous_z = previous.pos.tolist()
    distance = math.sqrt((x - previous_x) ** 2 + (y - previous_y) ** 2 + (z - previous_z) ** 2)
    if distance > limits.max_translation_step:
        flags |= Violation.TRANSLATION_STEP.value
        fraction = limits.max_translation_step / distance
        x = previous_x + (x - previous_x) * fraction
        y = previous_y + (y - previous_y) * fraction
        z = previous_z + (z - previous_z) * fraction

    if limits.max_lead is not None:  # a target far ahead of the arm: pulled back to max_lead from the measured TCP
        arm_x, arm_y, arm_z = arm.pos.tolist()
        lead = math.sqrt((x - arm_x) ** 2 + (y - arm_y) ** 2 + (z - arm_z) ** 2)
        if lead > limits.max_lead:
            flags |= Violation.LEAD.value
            fraction = limits.max_lead / lead
            x, y, z = arm_x + (x - arm_x) * fraction, arm_y + (y - arm_y) * fraction, arm_z + (z - arm_z) * fraction

    # cos(turn angle) = (trace(R_target R_previous^T) - 1) / 2, and the trace is the sum of the entrywise products
    turn_cosine = (float(np.vdot(target_rot, previous.rot)) - 1.0) / 2.0
    if turn_cosine < turn_step_cosine:  # the turn may exceed the step limit: measure it exactly
        turn = rotvec_from_matrix(target_rot @ previous.rot.T)
        angle = _norm(turn)
        if angle > limits.max_rotation_step:
            flags |= Violation.ROTATION_STEP.value
            target_rot = matrix_from_rotvec(turn * (limits.max_rotation_step / angle)) @ previous.rot
            if tool_angle(target_rot, limits.unit_cone_axis) > limits.cone_half_angle:
                target_rot = previous.rot  # the shortest turn left the cone: keep the last orientation

    gripper = min(max(gripper, -1.0), 1.0)
    change = gripper - previous.gripper
    if abs(change) > limits.max_gripper_step:
        flags |= Violation.GRIPPER_STEP.value
        gripper = previous.gripper + math.copysign(limits.max_gripper_step, change)
    return Command(np.array((x, y, z)), target_rot, gripper, now), Violation(flags)


def hold(arm: ArmState, gripper: float, now: float) -> Command:
    """A command that holds the measured pose (a valid ``previous`` to start from)."""
    return Command(arm.pos.astype(float).copy(), _orthonormal(arm.rot), float(np.clip(gripper, -1, 1)), now)


def _hold_pose(arm: ArmState, previous: Command, now: float) -> Command:
    if np.all(np.isfinite(arm.pos)) and np.all(np.isfinite(arm.rot)):
        return Command(arm.pos.astype(float).copy(), _orthonormal(arm.rot), previous.gripper, now)
    return Command(previous.pos.copy(), previous.rot.copy(), previous.gripper, now)


def tool_angle(rot: np.ndarray, cone_axis: np.ndarray) -> float:
    """Angle (rad) between the TCP z axis and the cone axis."""
    cosine = float(rot[:, 2] @ cone_axis) / _norm(cone_axis)
    return math.acos(min(max(cosine, -1.0), 1.0))


def project_to_cone(rot: np.ndarray, cone_axis: np.ndarray, half_angle: float) -> tuple[np.ndarray, bool]:
    """Turn ``rot`` by the smallest rotation that brings its z axis within ``half_angle`` of the cone axis."""
    axis = cone_axis / _norm(cone_axis)
    angle = tool_angle(rot, axis)
    if angle <= half_angle:
        return rot, False
    tool_z = rot[:, 2]
    normal = np.cross(tool_z, axis)
    if np.linalg.norm(normal) < 1e-9:  # pointing exactly away: any perpendicular works
        normal = np.cross(axis, [1.0, 0.0, 0.0] if abs(axis[0]) < 0.9 else [0.0, 1.0, 0.0])
    normal = normal / np.linalg.norm(normal)
    turned = matrix_from_rotvec(normal * (angle - half_angle + 1e-9)) @ rot
    return turned, True


def _norm(vector: np.ndarray) -> float:
    """Euclidean norm of a short vector (without ``np.linalg.norm``'s per-call overhead)."""
    return math.sqrt(float(vector @ vector))


def _orthonormal(rot: np.ndarray) -> np.ndarray:
    """The nearest rotation matrix (SVD), so a slightly off matrix never reaches the arm.
    A matrix that already is one (R^T R = I to 1e-9, determinant +1) passes unchanged."""
    rot = np.asarray(rot, float)
    (a, b, c), (d, e, f), (g, h, i) = rot.tolist()
    if (
        abs(a * a + d * d + g * g - 1.0) < 1e-9
        and abs(b * b + e * e + h * h - 1.0) < 1e-9
        and abs(c * c + f * f + i * i - 1.0) < 1e-9
        and abs(a * b + d * e + g * h) < 1e-9
        and abs(a * c + d * f + g * i) < 1e-9
        and abs(b * c + e * f + h * i) < 1e-9
        and a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g) > 0
    ):
        return rot.copy()
    u, _, vt = np.linalg.svd(rot)
    fixed = u @ vt
    if np.linalg.det(fixed) < 0:
        u[:, -1] *= -1
        fixed = u @ vt
    return fixed
