"""Rotation helpers shared by the sim, the controllers and the hardware bridges.

Conventions: rotation matrices map vectors from the child frame to the parent frame,
quaternions are (w, x, y, z), rotation vectors are axis * angle in radians.
"""

from __future__ import annotations

import math

import numpy as np


def matrix_from_rotvec(rotvec: np.ndarray) -> np.ndarray:
    """Rodrigues' formula: the rotation of ``|rotvec|`` radians about ``rotvec``.

    Written out on Python floats: the safety layer calls it every control tick, and numpy's
    per-call overhead on 3-vectors dominates there."""
    x, y, z = np.asarray(rotvec, float).tolist()
    angle = math.sqrt(x * x + y * y + z * z)
    if angle < 1e-12:
        return np.array([[1.0, -z, y], [z, 1.0, -x], [-y, x, 1.0]])
    x, y, z = x / angle, y / angle, z / angle
    s, c = math.sin(angle), 1.0 - math.cos(angle)
    return np.array(
        [
            [1.0 + c * (x * x - 1.0), c * x * y - s * z, c * x * z + s * y],
            [c * x * y + s * z, 1.0 + c * (y * y - 1.0), c * y * z - s * x],
            [c * x * z - s * y, c * y * z + s * x, 1.0 + c * (z * z - 1.0)],
        ]
    )


def rotvec_from_matrix(rot: np.ndarray) -> np.ndarray:
    """Inverse of :func:`matrix_from_rotvec`, angle in [0, pi] (NaN in, NaN out).

    On Python floats, as :func:`matrix_from_rotvec`: the safety node's fast loop turns every measured pose (1 kHz)
    into a rotation vector, and a tool pointing down is a half turn, the branch numpy made slowest."""
    (r00, r01, r02), (r10, r11, r12), (r20, r21, r22) = np.asarray(rot, float).tolist()
    angle = math.acos(min(max((r00 + r11 + r22 - 1.0) / 2.0, -1.0), 1.0))
    sx, sy, sz = 0.5 * (r21 - r12), 0.5 * (r02 - r20), 0.5 * (r10 - r01)  # axis * sin(angle)
    if angle < 1e-6:
        return np.array((sx, sy, sz))
    if math.pi - angle < 1e-4:
        # sin(angle) ~ 0: read the axis off (R + I) / 2 = a a^T, its row with the largest diagonal value
        rows = (
            ((r00 + 1.0) / 2.0, r01 / 2.0, r02 / 2.0),
            (r10 / 2.0, (r11 + 1.0) / 2.0, r12 / 2.0),
            (r20 / 2.0, r21 / 2.0, (r22 + 1.0) / 2.0),
        )
        diagonal = (rows[0][0], rows[1][1], rows[2][2])
        ax, ay, az = rows[diagonal.index(max(diagonal))]
        scale = angle / math.sqrt(ax * ax + ay * ay + az * az)
        if ax * sx + ay * sy + az * sz < 0:
            scale = -scale
        return np.array((ax * scale, ay * scale, az * scale))
    scale = angle / math.sin(angle)
    return np.array((sx * scale, sy * scale, sz * scale))


def orientation_error(target: np.ndarray, current: np.ndarray) -> np.ndarray:
    """Rotation vector (world frame) that turns ``current`` into ``target`` (both 3x3)."""
    return rotvec_from_matrix(target @ current.T)


def quat_from_matrix(rot: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) with w >= 0."""
    m = rot
    trace = np.trace(m)
    if trace > 0:
        s = 2.0 * np.sqrt(trace + 1.0)
        q = np.array([0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s])
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
        q = np.empty(4)
        q[0] = (m[k, j] - m[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (m[j, i] + m[i, j]) / s
        q[1 + k] = (m[k, i] + m[i, k]) / s
    q = q / np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def matrix_from_quat(quat: np.ndarray) -> np.ndarray:
    """Rotation matrix of a (w, x, y, z) quaternion (normalised first)."""
    w, x, y, z = np.asarray(quat, dtype=float) / np.linalg.norm(quat)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def yaw_matrix(yaw: float) -> np.ndarray:
    """Rotation of ``yaw`` radians about +z."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def delta_target(
    pos: np.ndarray,
    rot: np.ndarray,
    action: np.ndarray,
    pos_step: float,
    rot_step: float,
    workspace: np.ndarray,
    held_rot: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The TCP target a delta action asks for (the robot_rl action contract).

    ``action`` in [-1, 1]^D is (dx, dy, dz, [drx, dry, drz,] gripper) in the TCP frame: the target
    position is ``pos + rot @ (action[:3] * pos_step)`` (m, base frame) clipped to ``workspace``
    ([[x, y, z] min, max]); with D = 7 the target orientation is ``rot`` turned by
    ``action[3:6] * rot_step`` radians about TCP axes, with D = 4 it is ``held_rot``.
    """
    target_pos = np.clip(pos + rot @ (np.asarray(action[:3]) * pos_step), workspace[0], workspace[1])
    target_rot = rot @ matrix_from_rotvec(np.asarray(action[3:6]) * rot_step) if len(action) == 7 else held_rot
    return target_pos, target_rot
