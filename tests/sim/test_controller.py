"""The Cartesian impedance controller tracks commanded poses of the simulated Panda."""

import numpy as np
import pytest

from robot_rl.core.geometry import matrix_from_rotvec, orientation_error
from robot_rl.sim.scene import ARM_TORQUE_LIMITS
from robot_rl.sim.tasks import ReachEnv


@pytest.mark.parametrize(
    "offset, turn",
    [
        ([0.05, -0.04, 0.03], [0.2, -0.1, 0.3]),
        ([-0.08, 0.1, -0.1], [0.0, 0.0, -0.6]),
        ([0.0, 0.0, 0.12], [0.3, 0.3, 0.0]),
    ],
)
def test_tracks_commanded_pose_within_5mm_and_0_05rad(offset, turn):
    env = ReachEnv(tcp_init_noise=0.0)
    env.reset(seed=0)
    target_pos = env.tcp_pos + offset
    target_rot = env.tcp_rot @ matrix_from_rotvec(np.array(turn))
    env.controller.set_target(target_pos, target_rot)
    env.simulate(500)  # 1 s at 500 Hz
    assert np.linalg.norm(env.tcp_pos - target_pos) < 0.005
    assert np.linalg.norm(orientation_error(target_rot, env.tcp_rot)) < 0.05


def test_joint_torques_stay_within_panda_limits_on_a_far_target():
    env = ReachEnv()
    env.reset(seed=0)
    env.controller.set_target(env.tcp_pos + [0.3, 0.3, -0.2], env.tcp_rot @ matrix_from_rotvec(np.array([1.0, 0, 0])))
    peak = np.zeros(7)
    for _ in range(100):
        env.simulate(5)
        peak = np.maximum(peak, np.abs(env.data.qfrc_actuator[:7]))
    assert np.all(peak <= np.array(ARM_TORQUE_LIMITS) + 1e-6)
    assert np.any(peak > 0.9 * np.array(ARM_TORQUE_LIMITS))  # the far target does saturate


def test_holds_pose_with_gravity_compensation():
    env = ReachEnv()
    env.reset(seed=3)
    start = env.tcp_pos
    env.step(np.zeros(4, dtype=np.float32))
    for _ in range(9):
        env.step(np.zeros(4, dtype=np.float32))
    assert np.linalg.norm(env.tcp_pos - start) < 0.002
