"""The env contract of the MuJoCo tasks: spaces, action mapping, clipping, seeding, rewards."""

import numpy as np
import pytest

from robot_rl.core.config import ConfigError
from robot_rl.core.geometry import orientation_error, rotvec_from_matrix
from robot_rl.sim.tasks import PegInsertEnv, PickCubeEnv, ReachEnv
from robot_rl.sim.tasks.backward import PegInsertResetEnv, PickCubeResetEnv

TASKS = [ReachEnv, PickCubeEnv, PegInsertEnv, PickCubeResetEnv, PegInsertResetEnv]


@pytest.mark.parametrize("env_class", TASKS)
@pytest.mark.parametrize("action_dim", [4, 7])
def test_observation_and_action_spaces(env_class, action_dim):
    env = env_class(action_dim=action_dim, force_torque=True)
    obs, info = env.reset(seed=0)
    assert env.action_space.shape == (action_dim,) and env.action_space.dtype == np.float32
    assert np.all(env.action_space.low == -1) and np.all(env.action_space.high == 1)
    assert obs["state"].dtype == np.float32 and env.observation_space.contains(obs)
    assert isinstance(info["success"], bool)
    layout = env.state_layout
    assert sum(size for _, size in layout.values()) == obs["state"].shape[0]
    assert {"tcp_pos", "tcp_rotvec", "tcp_linvel", "tcp_angvel", "gripper", "force", "torque"} <= set(layout)
    offset, _ = layout["tcp_pos"]
    np.testing.assert_allclose(obs["state"][offset : offset + 3], env.tcp_pos, atol=1e-6)
    for _ in range(3):
        obs, reward, _terminated, _truncated, info = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs) and isinstance(info["success"], bool)
        assert np.isfinite(reward)


def test_translation_is_in_the_tcp_frame():
    # At home the TCP points down: TCP x = base x, TCP y = -base y, TCP z = -base z.
    env = ReachEnv(tcp_init_noise=0.0, pos_step=0.02)
    for axis, expected in ((1, np.array([0, -1, 0])), (2, np.array([0, 0, -1]))):
        env.reset(seed=0)
        start = env.tcp_pos
        action = np.zeros(4, dtype=np.float32)
        action[axis] = 1.0
        for _ in range(3):
            env.step(action)
        moved = env.tcp_pos - start
        assert np.dot(moved, expected) > 0.03  # 3 x 2 cm commanded; the impedance lags
        assert np.linalg.norm(moved - np.dot(moved, expected) * expected) < 0.005


def test_rotation_action_turns_about_the_tcp_axis():
    env = ReachEnv(action_dim=7, tcp_init_noise=0.0, rot_step=0.1)
    env.reset(seed=0)
    start = env.tcp_rot
    action = np.zeros(7, dtype=np.float32)
    action[5] = 1.0  # about TCP z
    for _ in range(3):
        env.step(action)
    turn = rotvec_from_matrix(start.T @ env.tcp_rot)
    assert turn[2] > 0.15 and np.linalg.norm(turn[:2]) < 0.03  # 0.3 rad commanded; the impedance lags


def test_four_d_actions_hold_the_reset_orientation():
    env = PickCubeEnv()
    env.reset(seed=1)
    for _ in range(20):
        env.step(env.action_space.sample())
    assert np.linalg.norm(orientation_error(env.home_rot, env.tcp_rot)) < 0.05


def test_out_of_range_actions_are_clipped_and_counted():
    env = ReachEnv()
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.array([3.0, -2.0, 0.5, 1.0], dtype=np.float32))
    assert info["action_clipped"] == 2 and info["clipped_actions_total"] == 2
    _, _, _, _, info = env.step(np.array([0.0, 0.0, 1.5, 0.0], dtype=np.float32))
    assert info["action_clipped"] == 1 and info["clipped_actions_total"] == 3
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.zeros(4, dtype=np.float32))
    assert info["clipped_actions_total"] == 0


def test_clipped_action_moves_like_the_limit():
    moves = []
    for scale in (1.0, 5.0):
        env = ReachEnv(tcp_init_noise=0.0)
        env.reset(seed=0)
        start = env.tcp_pos
        env.step(np.array([scale, 0, 0, 0], dtype=np.float32))
        moves.append(env.tcp_pos - start)
    np.testing.assert_allclose(moves[0], moves[1], atol=1e-9)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_action_raises_a_clear_error(bad):
    env = PickCubeEnv()
    env.reset(seed=0)
    qpos = env.data.qpos.copy()
    with pytest.raises(ValueError, match=r"non-finite values at indices \[1\]"):
        env.step(np.array([0.0, bad, 0.0, 0.0], dtype=np.float32))
    np.testing.assert_array_equal(env.data.qpos, qpos)  # nothing moved


def test_wrong_action_shape_raises():
    env = ReachEnv()
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"expects \(4,\)"):
        env.step(np.zeros(7, dtype=np.float32))


@pytest.mark.parametrize("env_class", TASKS)
def test_seeded_reset_is_reproducible(env_class):
    env = env_class()
    first, _ = env.reset(seed=42)
    actions = [env.action_space.sample() for _ in range(5)]
    states = [env.step(a)[0]["state"] for a in actions]
    other = env_class()
    second, _ = other.reset(seed=42)
    np.testing.assert_array_equal(first["state"], second["state"])
    np.testing.assert_array_equal(states, [other.step(a)[0]["state"] for a in actions])
    third, _ = other.reset(seed=43)
    assert not np.array_equal(first["state"], third["state"])


def test_resets_randomize_object_pose_inside_the_configured_box():
    env = PickCubeEnv(cube_low=(0.4, -0.1), cube_high=(0.5, 0.1))
    positions = np.array([(env.reset(seed=s), env.cube_pos)[1] for s in range(30)])
    assert np.all(positions[:, 0] >= 0.4 - 1e-3) and np.all(positions[:, 0] <= 0.5 + 1e-3)
    assert np.all(np.abs(positions[:, 1]) <= 0.1 + 1e-3)
    assert positions[:, 0].std() > 0.02 and positions[:, 1].std() > 0.04


def test_sparse_reward_is_success_and_episode_truncates():
    env = ReachEnv(reward="sparse", episode_steps=5, terminate_on_success=False)
    env.reset(seed=0)
    for step in range(5):
        _, reward, terminated, truncated, info = env.step(np.zeros(4, dtype=np.float32))
        assert reward == float(info["success"]) and not terminated
        assert truncated == (step == 4)


def test_success_terminates_and_dense_reward_rises_toward_the_goal():
    env = ReachEnv(tcp_init_noise=0.0)
    env.reset(seed=0)
    rewards = []
    for _ in range(30):
        direction = env.goal - env.tcp_pos
        action = np.append(env.tcp_rot.T @ direction / env.pos_step, -1.0).clip(-1, 1).astype(np.float32)
        _, reward, terminated, _, info = env.step(action)
        rewards.append(reward)
        if terminated:
            break
    assert terminated and info["success"]
    assert rewards[-1] > rewards[0]


def test_gripper_opens_and_closes():
    env = PickCubeEnv()
    env.reset(seed=0)
    for _ in range(5):
        env.step(np.array([0, 0, 0, 1.0], dtype=np.float32))
    assert env.gripper_opening < 0.005
    for _ in range(5):
        env.step(np.array([0, 0, 0, -1.0], dtype=np.float32))
    assert env.gripper_opening > 0.075


@pytest.mark.parametrize(
    "kwargs, key",
    [
        ({"cameras": ["top"]}, "cameras"),
        ({"image_size": 0}, "image_size"),
        ({"image_size": [64, -1]}, "image_size"),
        ({"control_rate_hz": 0}, "control_rate_hz"),
        ({"control_rate_hz": -10}, "control_rate_hz"),
        ({"physics_rate_hz": 505}, "physics_rate_hz"),
        ({"action_dim": 6}, "action_dim"),
        ({"reward": "shaped"}, "reward"),
        ({"controller": {"kp_pos": -1.0}}, "controller.kp_pos"),
        ({"controller": {"stiffness": 1.0}}, "controller"),
    ],
)
def test_bad_settings_raise_config_error_naming_the_key(kwargs, key):
    with pytest.raises(ConfigError) as error:
        PickCubeEnv(**kwargs)
    assert error.value.key == key
    assert "\n" not in str(error.value)


def test_wrist_force_reads_contact_with_the_table():
    env = ReachEnv(force_torque=True, tcp_init_noise=0.0)
    obs, _ = env.reset(seed=0)
    offset, _ = env.state_layout["force"]
    np.testing.assert_allclose(obs["state"][offset : offset + 3], 0.0, atol=1e-3)  # tared at reset
    forces = []
    for _ in range(30):  # TCP z points down: +z moves the TCP down until the fingers touch the table
        obs, *_ = env.step(np.array([0.0, 0.0, 1.0, -1.0], dtype=np.float32))
        forces.append(obs["state"][offset : offset + 3].copy())
    forces = np.array(forces)
    assert np.all(np.linalg.norm(forces[:10], axis=1) < 1.0)  # free motion: ~0 N
    assert env.tcp_pos[2] < 0.015 and forces[-1][2] > 5.0  # pushing on the table: N along hand +z
