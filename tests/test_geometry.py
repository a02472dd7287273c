"""Rotation helpers against independent constructions."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_rl.core.geometry import (
    matrix_from_quat,
    matrix_from_rotvec,
    orientation_error,
    quat_from_matrix,
    rotvec_from_matrix,
    yaw_matrix,
)

vectors = st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3).map(np.array)


@settings(max_examples=200, deadline=None)
@given(axis=vectors, angle=st.floats(0.0, np.pi - 1e-3))
def test_rotvec_round_trip(axis, angle):
    if np.linalg.norm(axis) < 1e-3:
        axis = np.array([1.0, 0.0, 0.0])
    rotvec = axis / np.linalg.norm(axis) * angle
    rot = matrix_from_rotvec(rotvec)
    np.testing.assert_allclose(rot @ rot.T, np.eye(3), atol=1e-9)
    np.testing.assert_allclose(rotvec_from_matrix(rot), rotvec, atol=1e-6)
    np.testing.assert_allclose(matrix_from_quat(quat_from_matrix(rot)), rot, atol=1e-9)


def test_half_turn_and_yaw():
    np.testing.assert_allclose(matrix_from_rotvec(np.array([np.pi, 0, 0])), np.diag([1.0, -1.0, -1.0]), atol=1e-12)
    np.testing.assert_allclose(np.abs(rotvec_from_matrix(np.diag([1.0, -1.0, -1.0]))), [np.pi, 0, 0], atol=1e-9)
    np.testing.assert_allclose(yaw_matrix(np.pi / 2) @ [1.0, 0, 0], [0, 1.0, 0], atol=1e-12)


def test_orientation_error_is_the_world_frame_rotation_between_poses():
    current = matrix_from_rotvec(np.array([0.3, -0.2, 0.1]))
    turn = np.array([0.0, 0.0, 0.4])
    target = matrix_from_rotvec(turn) @ current
    np.testing.assert_allclose(orientation_error(target, current), turn, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(axis=vectors, below_pi=st.floats(0.0, 1e-4))
def test_rotvec_of_near_half_turns_gives_the_rotation_back(axis, below_pi):
    """A tool pointing down is a half turn: the branch that reads the axis off the symmetric part (exact at pi, off by
    about the distance to pi within the 1e-4 rad it covers)."""
    if np.linalg.norm(axis) < 1e-3:
        axis = np.array([0.0, 1.0, 0.0])
    angle = np.pi - below_pi
    rot = matrix_from_rotvec(axis / np.linalg.norm(axis) * angle)
    rotvec = rotvec_from_matrix(rot)
    np.testing.assert_allclose(np.linalg.norm(rotvec), angle, atol=1e-9)
    np.testing.assert_allclose(matrix_from_rotvec(rotvec), rot, atol=1e-6 + 2 * below_pi)
