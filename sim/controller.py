"""Operational-space (Cartesian impedance) control of the simulated Panda at physics rate.

The controller drives the tool centre point (TCP) site toward a target pose given in the
world (= robot base) frame:

    tau = J^T Lambda (Kp e - Kd v) + N^T (kp_null (q_home - q) - kd_null qd) + bias(q, qd)

with e the 6-D pose error (metres, radians), v the TCP twist, Lambda the operational-space
inertia, N the dynamically consistent null-space projector and bias the Coriolis and gravity
torques; the posture term is in N m. Call :meth:`torques` between ``mj_step1`` and ``mj_step2`` so that every quantity
belongs to the same instant.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from .scene import ARM_TORQUE_LIMITS


@dataclass
class ControllerGains:
    """Task stiffness as acceleration gains (1/s^2); damping ratio 1 is critical damping."""

    kp_pos: float = 600.0
    kp_rot: float = 300.0
    kp_null: float = 10.0  # posture stiffness (N m / rad)
    damping_ratio: float = 1.0


class OperationalSpaceController:
    """Tracks a TCP pose target with the 7 arm joints of the scene's Panda."""

    n_arm = 7

    def __init__(self, model: mujoco.MjModel, gains: ControllerGains, home_qpos: np.ndarray):
        self.model = model
        self.tcp_site = model.site("tcp").id
        arm_dofs = [model.joint(f"joint{i + 1}").dofadr[0] for i in range(self.n_arm)]
        if arm_dofs != list(range(self.n_arm)):
            raise ValueError("the Panda's arm joints must be the first 7 degrees of freedom of the model")
        self.arm_qpos = np.array([model.joint(f"joint{i + 1}").qposadr[0] for i in range(self.n_arm)])
        self.actuators = np.array([model.actuator(f"torque{i + 1}").id for i in range(self.n_arm)])
        self.torque_limits = np.array(ARM_TORQUE_LIMITS)
        self.home_qpos = np.asarray(home_qpos, dtype=float)
        self.set_gains(gains)
        self.target_pos = np.zeros(3)
        self.target_quat = np.array([1.0, 0.0, 0.0, 0.0])
        self._jac = np.zeros((6, model.nv))
        self._minv_jt = np.zeros((6, model.nv))
        self._quat = np.zeros(4)
        self._rot_err_local = np.zeros(3)
        self._error = np.zeros(6)

    def set_gains(self, gains: ControllerGains) -> None:
        self.gains = gains
        self.kp = np.array([gains.kp_pos] * 3 + [gains.kp_rot] * 3)
        self.kd = 2.0 * gains.damping_ratio * np.sqrt(self.kp)
        self.kd_null = 2.0 * gains.damping_ratio * np.sqrt(gains.kp_null)

    def set_target(self, pos: np.ndarray, rot: np.ndarray) -> None:
        """Target TCP position (m, world frame) and orientation (3x3, TCP to world)."""
        self.target_pos = np.array(pos, dtype=float)
        mujoco.mju_mat2Quat(self.target_quat, np.asarray(rot, dtype=float).ravel())

    def torques(self, data: mujoco.MjData) -> np.ndarray:
        """Arm joint torques (N m) for the current state, clipped to the Panda's limits.

        Needs positions, the mass matrix factor and the bias forces of ``data`` to be current
        (after ``mj_step1`` or ``mj_forward``).
        """
        model, n = self.model, self.n_arm
        jac = self._jac
        mujoco.mj_jacSite(model, data, jac[:3], jac[3:], self.tcp_site)
        mujoco.mj_solveM(model, data, self._minv_jt, jac)  # rows: (M^-1 J^T)^T over all dofs
        lam = np.linalg.inv(jac @ self._minv_jt.T + 1e-6 * np.eye(6))

        # Pose error in the world frame: position, then the rotation vector of R_target R^T.
        site_rot = data.site_xmat[self.tcp_site]
        mujoco.mju_mat2Quat(self._quat, site_rot)
        mujoco.mju_subQuat(self._rot_err_local, self.target_quat, self._quat)
        self._error[:3] = self.target_pos - data.site_xpos[self.tcp_site]
        self._error[3:] = site_rot.reshape(3, 3) @ self._rot_err_local
        qvel = data.qvel[:n]
        jac_arm = jac[:, :n]
        accel = self.kp * self._error - self.kd * (jac_arm @ qvel)
        tau_task = jac_arm.T @ (lam @ accel)

        # Posture torque (N m) projected into the task's dynamically consistent null space.
        jac_bar = self._minv_jt[:, :n].T @ lam
        q_err = self.home_qpos - data.qpos[self.arm_qpos]
        posture = self.gains.kp_null * q_err - self.kd_null * qvel
        tau_null = posture - jac_arm.T @ (jac_bar.T @ posture)

        tau = tau_task + tau_null + data.qfrc_bias[:n]
        return np.clip(tau, -self.torque_limits, self.torque_limits)

    def apply(self, data: mujoco.MjData) -> None:
        data.ctrl[self.actuators] = self.torques(data)
