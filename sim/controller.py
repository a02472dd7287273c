"""Cartesian impedance control of the simulated Panda, evaluated by MuJoCo at physics rate.

The control law is the one of the Franka Cartesian impedance controller used by SERL and
HIL-SERL:

    tau = J^T (K e - D v) + g(q)

with e the pose error of the TCP relative to the target frame (metres; radians about the
target's axes), v the TCP twist, K and D diagonal stiffness (N/m, N m/rad) and damping
(N s/m, N m s/rad), and g the gravity torques. MuJoCo computes it inside every physics step:
the scene has six position actuators with site transmission from the ``tcp`` site to the
``tcp_target`` mocap frame (their length is e, their moment arm is J), and gravity
compensation on every robot body. Joint torques are clamped to the Panda's limits by
``actuatorfrcrange``. Null-space motion is damped by the joint damping.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from robot_rl.sim.scene import CARTESIAN_ACTUATORS


@dataclass
class ImpedanceGains:
    """Stiffness and damping of the TCP, per axis of the target frame."""

    kp_pos: float = 3000.0  # N/m
    kp_rot: float = 200.0  # N m/rad
    kd_pos: float = 300.0  # N s/m
    kd_rot: float = 15.0  # N m s/rad


class CartesianImpedanceController:
    """Owns the impedance target (mocap frame) and the gains of the six Cartesian actuators."""

    def __init__(self, model: mujoco.MjModel, data: mujoco.MjData, gains: ImpedanceGains):
        self.model, self.data = model, data
        self.actuators = np.array([model.actuator(name).id for name, _ in CARTESIAN_ACTUATORS])
        self.mocap = model.body("tcp_target").mocapid[0]
        self.set_gains(gains)

    def set_gains(self, gains: ImpedanceGains) -> None:
        self.gains = gains
        kp = np.array([gains.kp_pos] * 3 + [gains.kp_rot] * 3)
        kd = np.array([gains.kd_pos] * 3 + [gains.kd_rot] * 3)
        # position actuator: force = gain * ctrl + bias1 * length + bias2 * velocity, with ctrl = 0
        self.model.actuator_gainprm[self.actuators, 0] = kp
        self.model.actuator_biasprm[self.actuators, 1] = -kp
        self.model.actuator_biasprm[self.actuators, 2] = -kd

    def set_target(self, pos: np.ndarray, rot: np.ndarray) -> None:
        """Target TCP position (m, base frame) and orientation (3x3, TCP to base)."""
        self.data.mocap_pos[self.mocap] = pos
        quat = np.empty(4)
        mujoco.mju_mat2Quat(quat, np.asarray(rot, dtype=float).ravel())
        self.data.mocap_quat[self.mocap] = quat
        self.data.ctrl[self.actuators] = 0.0

    @property
    def target_pos(self) -> np.ndarray:
        """Target TCP position (m, base frame)."""
        return self.data.mocap_pos[self.mocap].copy()

    @property
    def target_rot(self) -> np.ndarray:
        """Target TCP orientation (3x3, TCP to base frame)."""
        rot = np.empty(9)
        mujoco.mju_quat2Mat(rot, self.data.mocap_quat[self.mocap])
        return rot.reshape(3, 3)
