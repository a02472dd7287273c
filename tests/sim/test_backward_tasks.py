"""The backward (reset) tasks of pick_cube and peg_insert: the start region both directions read, the success check,
the scripted backward expert, starting from a scene another episode left, and a training run on one."""

import mujoco
import numpy as np
import pytest

from robot_rl.cli.main import main
from robot_rl.core.composed_config import load_config
from robot_rl.data import EpisodeStore
from robot_rl.runtime.envs import make_env
from robot_rl.runtime.envs import make_expert as task_expert
from robot_rl.sim.experts import PegInsertResetExpert, PickCubeResetExpert, make_expert
from robot_rl.sim.start_region import StartRegion
from robot_rl.sim.tasks import PegInsertEnv, PickCubeEnv, ReachEnv
from robot_rl.sim.tasks.backward import PegInsertResetEnv, PickCubeResetEnv

PAIRS = [(PickCubeEnv, PickCubeResetEnv), (PegInsertEnv, PegInsertResetEnv)]


def play(env, expert, obs) -> dict:
    """One episode of ``expert`` from the env's current start; the last info, with the progress along the way."""
    expert.reset()
    progress, done = [env.dense_reward()], False
    while not done:
        obs, _, terminated, truncated, info = env.step(expert.act(obs))
        progress.append(env.dense_reward())
        done = terminated or truncated
    return {**info, "progress": np.array(progress)}


# ----------------------------------------------------------------- the start region
def test_start_region_samples_inside_and_measures_the_way_back():
    region = StartRegion([0.4, -0.1], [0.5, 0.1])
    rng = np.random.default_rng(0)
    assert all(region.contains(region.sample(rng)) for _ in range(50))
    assert region.contains([0.45, 0.0, 0.3])  # the axes it has: xy of a 3-D point
    assert not region.contains([0.52, 0.0]) and region.distance([0.53, 0.14]) == pytest.approx(0.05)
    assert StartRegion([0.4, -0.1], [0.5, 0.1], slack=0.03).contains([0.52, 0.0])
    np.testing.assert_allclose(region.inner_point([0.7, 0.0], 0.02), [0.48, 0.0])
    np.testing.assert_allclose(StartRegion([0.4, 0.0], [0.42, 0.0]).inner_point([0.0, 1.0], 0.02), [0.41, 0.0])
    with pytest.raises(ValueError, match="low <= high"):
        StartRegion([0.5, 0.0], [0.4, 0.1])


@pytest.mark.parametrize("forward, backward", PAIRS, ids=["pick_cube", "peg_insert"])
def test_forward_resets_start_inside_the_region_a_success_leaves(forward, backward):
    env = forward()
    expert = make_expert(env)
    for seed in range(3):
        obs, _ = env.reset(seed=seed)
        assert env.in_start_region()
        assert play(env, expert, obs)["success"] and not env.in_start_region()


def test_the_forward_reset_and_the_backward_success_read_one_region():
    box = {"cube_low": (0.42, -0.05), "cube_high": (0.5, 0.05)}
    forward, backward = PickCubeEnv(**box), PickCubeResetEnv(**box)
    np.testing.assert_array_equal(forward.start_region.low, backward.start_region.low)
    for seed in range(10):
        forward.reset(seed=seed)
        assert forward.start_region.contains(forward.cube_pos)
    assert released_scene(backward, [0.49, 0.04]).is_success()
    assert not released_scene(backward, [0.52, 0.0]).is_success()  # inside pick_cube's default box, not this one


# ----------------------------------------------------------------- the success check
def released_scene(env: PickCubeResetEnv, xy, tcp_height=0.15, gripper=-1.0) -> PickCubeResetEnv:
    """The cube flat at ``xy``, at rest, the TCP ``tcp_height`` above the table, the gripper ``gripper``."""
    env.reset(seed=0)
    env.place_cube(np.asarray(xy), 0.0)
    env.place_arm(np.array([xy[0], xy[1], tcp_height]), gripper)
    env.data.qvel[:] = 0.0
    mujoco.mj_forward(env.model, env.data)
    return env


def test_pick_cube_reset_succeeds_only_with_the_cube_put_down_at_rest_and_let_go():
    env = PickCubeResetEnv()
    assert released_scene(env, [0.5, 0.0]).is_success()
    assert not released_scene(env, [0.62, 0.0]).is_success()  # outside the start region
    assert not released_scene(env, [0.5, 0.0], gripper=1.0).is_success()  # gripper closed
    assert not released_scene(env, [0.5, 0.0], tcp_height=0.06).is_success()  # fingers not clear of the cube
    moving = released_scene(env, [0.5, 0.0])
    moving.data.qvel[moving.model.joint("cube").dofadr[0]] = 0.05  # sliding at 5 cm/s
    assert moving.in_start_region() and not moving.is_success()
    held = released_scene(env, [0.5, 0.0], tcp_height=env.cube_half_size, gripper=1.0)
    held.hold("cube", [0.0, 0.0, 0.0], env.cube_half_size)  # on the table inside the region, in the closed gripper
    assert held.grasped() and held.in_start_region() and not held.is_success()
    lifted = released_scene(env, [0.5, 0.0], tcp_height=0.15, gripper=1.0)
    lifted.hold("cube", [0.0, 0.0, 0.0], env.cube_half_size)
    assert lifted.grasped() and not lifted.in_start_region() and not lifted.is_success()


def test_peg_insert_reset_succeeds_only_with_the_peg_held_upright_in_the_start_region_at_rest():
    forward, env = PegInsertEnv(), PegInsertResetEnv()
    forward.reset(seed=0)
    env.reset(seed=0, options={"scene": forward.scene_state()})
    assert env.is_success()  # a forward start is the backward goal
    peg = env.model.joint("peg").dofadr[0]
    env.data.qvel[peg] = 0.05
    assert not env.is_success()
    for seed in range(20):  # drawn forward end states: in the socket, or held beside it
        env.reset(seed=seed)
        assert not env.is_success()
    env.reset(seed=0, options={"scene": forward.scene_state()})
    for _ in range(10):  # the gripper opens: the peg drops out of the hand
        env.step(np.array([0.0, 0.0, 0.0, -1.0], np.float32))
    assert not env.grasped() and not env.is_success()


# ----------------------------------------------------------------- the expert and the scenes between the directions
@pytest.mark.parametrize(
    "env_class, kwargs",
    [
        (PickCubeResetEnv, {}),
        (PegInsertResetEnv, {}),
        (PickCubeResetEnv, {"action_dim": 7, "cube_yaw_range": 0.7}),
        (PegInsertResetEnv, {"action_dim": 7}),
    ],
    ids=["pick_cube", "peg_insert", "pick_cube-7d-yaw", "peg_insert-7d"],
)
def test_backward_expert_succeeds_from_sampled_forward_end_states_on_90_percent_of_20_seeds(env_class, kwargs):
    env = env_class(**kwargs)
    expert = make_expert(env)
    assert type(expert) is {PickCubeResetEnv: PickCubeResetExpert, PegInsertResetEnv: PegInsertResetExpert}[env_class]
    episodes = [play(env, expert, env.reset(seed=seed)[0]) for seed in range(20)]
    rate = np.mean([info["success"] for info in episodes])
    assert rate >= 0.9, f"backward expert success {rate:.0%}"
    for info in episodes:  # progress the scripted human's rules can read: it rises, never falls far below its best
        progress = info["progress"]
        assert progress[-1] > progress[0] and np.max(np.maximum.accumulate(progress) - progress) < 0.1


@pytest.mark.parametrize("forward, backward", PAIRS, ids=["pick_cube", "peg_insert"])
def test_a_forward_episode_after_a_backward_one_starts_inside_the_start_region(forward, backward):
    """Forward expert, backward expert from the scene it left, forward again from the scene that left: no reset."""
    f, b = forward(), backward()
    f_expert, b_expert = make_expert(f), make_expert(b)
    obs, _ = f.reset(seed=0)
    for cycle in range(3):
        assert play(f, f_expert, obs)["success"]
        obs, _ = b.reset(seed=cycle, options={"scene": f.scene_state()})
        assert b.in_start_region() is False and play(b, b_expert, obs)["success"]
        obs, info = f.reset(seed=cycle, options={"scene": b.scene_state()})
        assert f.in_start_region() and not info["success"]


def test_a_scene_carries_the_arm_the_objects_and_the_socket_to_another_episode():
    forward, backward = PegInsertEnv(), PegInsertResetEnv()
    backward.reset(seed=3)
    backward.step(np.array([0.5, 0.0, -0.5, 1.0], np.float32))
    scene = backward.scene_state()
    forward.reset(seed=7, options={"scene": scene})
    np.testing.assert_array_equal(forward.socket_pos, backward.socket_pos)
    for part in ("qpos", "qvel", "ctrl"):  # arm, fingers, peg; the gripper's command
        np.testing.assert_array_equal(getattr(forward.data, part), getattr(backward.data, part), part)
    np.testing.assert_array_equal(forward.controller.target_pos, forward.tcp_pos)  # the new episode holds the arm
    assert forward.data.time == 0.0
    with pytest.raises(ValueError, match="scene state from another scene"):
        ReachEnv().reset(options={"scene": scene})


# ----------------------------------------------------------------- config and training
@pytest.mark.parametrize("task", ["pick_cube_reset", "peg_insert_reset"])
def test_a_backward_task_composes_and_trains_with_the_scripted_human(task, tmp_path):
    cfg = load_config([f"task={task}", "task.cube_low=[0.4,-0.1]"] if task == "pick_cube_reset" else [f"task={task}"])
    env = make_env(cfg.task)
    assert type(task_expert(cfg.task, env)).__name__.endswith("ResetExpert")
    if task == "pick_cube_reset":
        np.testing.assert_allclose(env.unwrapped.start_region.low, [0.4, -0.1])  # the forward key, overridden
    run = tmp_path / "run"
    overrides = ["train.demo_episodes=1", "train.env_steps=60", "train.eval_every=60", "train.eval_episodes=1"]
    overrides += ["train.final_eval_episodes=1", "train.batch_size=16", "train.start_training=30"]
    assert main(["train", f"task={task}", f"train.run_dir={run}", *overrides]) == 0
    store = EpisodeStore.open(run / "episodes.zarr")
    episodes = [store.episode_attrs(name) for name in store.episode_names()]
    assert [e["source"] for e in episodes] == ["demo", "online"]
    assert episodes[0]["success"]  # the scripted human demonstrates the backward task
    assert episodes[1]["interventions"] > 0  # and takes over from the policy on it
