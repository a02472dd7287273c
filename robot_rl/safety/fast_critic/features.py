"""The fast loop's features: what the safety node feeds its risk model from the arm alone (the layout in the
package's docstring, :mod:`robot_rl.safety.fast_critic`); every vector in the robot base frame."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from robot_rl.core.geometry import matrix_from_rotvec, rotvec_from_matrix

from ..hard_limits import ArmState, Command

LAYOUT_VERSION = 1
STATE_FEATURES = (  # (name, width, unit), in order
    ("tcp_position", 3, "m"),
    ("tcp_rotvec", 3, "rad"),
    ("tcp_linear", 3, "m/s"),
    ("tcp_angular", 3, "rad/s"),
    ("force", 3, "N"),
    ("torque", 3, "N m"),
    ("gripper", 1, "command units"),
)
DELTA_FEATURES = (("delta_position", 3, "m"), ("delta_rotvec", 3, "rad"), ("delta_gripper", 1, "command units"))
STATE_WIDTH = sum(width for _, width, _ in STATE_FEATURES)  # 19
DELTA_WIDTH = sum(width for _, width, _ in DELTA_FEATURES)  # 7
INPUT_WIDTH = STATE_WIDTH + DELTA_WIDTH  # 26
FORCE = slice(12, 15)  # where the force sits in the state
ACTIVATIONS = ("relu", "tanh")
MAX_LAYERS = 8
MAX_WIDTH = 1024
MAX_CONTEXT = 64  # task-context columns after the 26
MAX_PARAMETERS = 250_000  # 2 x 128 hidden is 20,000: a model this size still fits a 1 kHz tick
MAX_BYTES = 16 * 2**20  # an .npz file or weights message, also unpacked
MIN_TWIST_DT = 2e-4  # s: poses closer together than this (two received in one burst) are not differenced


def feature_slices(layout: Sequence[tuple[str, int, str]]) -> dict[str, slice]:
    """``{name: slice}`` of a feature layout (:data:`STATE_FEATURES` or :data:`DELTA_FEATURES`)."""
    slices, start = {}, 0
    for name, width, _ in layout:
        slices[name] = slice(start, start + width)
        start += width
    return slices


class TcpMotion:
    """The measured TCP pose as features, and its twist by finite difference: position (m), rotation vector (rad),
    linear (m/s) and angular (rad/s) velocity, base frame, as :attr:`features` (12,) (the state's first 12 values).

    A pose closer than ``MIN_TWIST_DT`` to the one the twist was last differenced from (two poses of one burst of
    received messages) updates the pose but keeps the twist, measured over the longer span at the next pose."""

    def __init__(self) -> None:
        self.features = np.zeros(12)
        self._reference: tuple[np.ndarray, np.ndarray, float] | None = None  # (position, rotation, time s)

    def update(self, pos: np.ndarray, rot: np.ndarray, t: float) -> None:
        """A measured pose: position (3,) m and rotation (3, 3) TCP -> base, measured at ``t`` s (one clock)."""
        features = self.features.copy()
        features[0:3], features[3:6] = pos, rotvec_from_matrix(rot)
        if self._reference is None:
            self._reference = (pos, rot, t)
        else:
            before, turned_from, then = self._reference
            dt = t - then
            if dt >= MIN_TWIST_DT:
                features[6:9] = (pos - before) / dt
                features[9:12] = turn_between(rot, turned_from)
                features[9:12] /= dt
                self._reference = (pos, rot, t)
            elif dt < 0:  # a clock that went back (a restarted sim): start again
                features[6:12] = 0.0
                self._reference = (pos, rot, t)
        self.features = features  # one assignment: a reader sees the old features or the new, never half of each


def fast_state(
    motion: np.ndarray, force: np.ndarray, torque: np.ndarray, gripper: float, context: np.ndarray | tuple = ()
) -> np.ndarray:
    """The state of :data:`STATE_FEATURES` (19,) float32 from :attr:`TcpMotion.features` (12,), the external force
    (N) and torque (N m) and the gripper command last sent (-1 open .. 1 closed), all base frame; then ``context``
    (C,) when given (the model's input before the delta: one numpy call for both)."""
    return np.concatenate((motion, force, torque, (gripper,), context), dtype=np.float32)


def command_delta(arm: ArmState, command: Command, gripper: float) -> np.ndarray:
    """The delta of :data:`DELTA_FEATURES` (7,) from the measured ``arm`` to ``command`` (m, rad, gripper units
    from ``gripper``, the command last sent), base frame."""
    (tx, ty, tz), (mx, my, mz) = command.pos.tolist(), arm.pos.tolist()
    return np.array((tx - mx, ty - my, tz - mz, *turn_between(command.rot, arm.rot), command.gripper - gripper))


def tick_features(state: np.ndarray, arm: ArmState, handed: Command, gripper: float, context: np.ndarray) -> np.ndarray:
    """A tick's row as it is recorded (26 + C,) float32: the fast ``state`` (:func:`fast_state`), the delta of the
    command the hard layer was ``handed`` from the measured ``arm`` (:func:`command_delta`, ``gripper`` the command
    last sent), then the task ``context`` (C,): what a fast critic learns from, labelled by what followed."""
    features = np.empty(INPUT_WIDTH + context.size, np.float32)
    features[:STATE_WIDTH] = state
    features[STATE_WIDTH:INPUT_WIDTH] = command_delta(arm, handed, gripper)
    features[INPUT_WIDTH:] = context
    return features


def turn_between(target: np.ndarray, measured: np.ndarray) -> tuple[float, float, float]:
    """The rotation vector (rad, base frame) of R_target R_measured^T, as :func:`rotvec_from_matrix` gives it, on
    Python floats: the fast loop computes it every tick, where numpy's per-call overhead on 3x3 arrays dominates."""
    (a0, a1, a2), (a3, a4, a5), (a6, a7, a8) = target.tolist()
    (b0, b1, b2), (b3, b4, b5), (b6, b7, b8) = measured.tolist()
    trace = a0 * b0 + a1 * b1 + a2 * b2 + a3 * b3 + a4 * b4 + a5 * b5 + a6 * b6 + a7 * b7 + a8 * b8
    # the antisymmetric part of M = A B^T, M[i][j] = (row i of A) . (row j of B): axis * sin(angle)
    x = 0.5 * ((a6 * b3 + a7 * b4 + a8 * b5) - (a3 * b6 + a4 * b7 + a5 * b8))
    y = 0.5 * ((a0 * b6 + a1 * b7 + a2 * b8) - (a6 * b0 + a7 * b1 + a8 * b2))
    z = 0.5 * ((a3 * b0 + a4 * b1 + a5 * b2) - (a0 * b3 + a1 * b4 + a2 * b5))
    angle = math.acos(min(max((trace - 1.0) / 2.0, -1.0), 1.0))
    if angle < 1e-6:
        return x, y, z
    if math.pi - angle < 1e-4:  # sin(angle) ~ 0: the axis from the symmetric part
        x, y, z = rotvec_from_matrix(target @ measured.T).tolist()
        return x, y, z
    scale = angle / math.sin(angle)
    return x * scale, y * scale, z * scale


def command_from_delta(arm: ArmState, delta: np.ndarray, gripper: float, stamp: float) -> Command:
    """The command a pose delta (m, rad; base frame) from the measured ``arm`` stands for, with ``gripper`` and
    ``stamp`` (s) passed through."""
    dx, dy, dz, rx, ry, rz = np.asarray(delta).tolist()[:6]  # on Python floats: fewer numpy calls in the tick
    px, py, pz = arm.pos.tolist()
    return Command(np.array((px + dx, py + dy, pz + dz)), matrix_from_rotvec((rx, ry, rz)) @ arm.rot, gripper, stamp)
