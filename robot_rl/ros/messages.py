"""Conversions between geometry_msgs and the numpy pose convention of robot_rl.

Positions in metres, orientations as 3x3 rotation matrices from the TCP frame to the base frame;
ROS quaternions are (x, y, z, w), robot_rl's (w, x, y, z).
"""

from __future__ import annotations

import numpy as np

from ..geometry import matrix_from_quat, quat_from_matrix


def pose_to_numpy(pose) -> tuple[np.ndarray, np.ndarray]:
    """geometry_msgs/Pose -> (position (3,), rotation (3, 3))."""
    p, q = pose.position, pose.orientation
    return np.array([p.x, p.y, p.z]), matrix_from_quat(np.array([q.w, q.x, q.y, q.z]))


def numpy_to_pose(pose, position: np.ndarray, rotation: np.ndarray):
    """Fill geometry_msgs/Pose ``pose`` in place; returns it."""
    w, x, y, z = quat_from_matrix(rotation)
    pose.position.x, pose.position.y, pose.position.z = map(float, position)
    pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z = map(float, (w, x, y, z))
    return pose
