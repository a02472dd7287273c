"""``ros.sim_time``: the graph on the sim robot's /clock, its errors, and a clean stop on either clock."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import require


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.parametrize("graph, overrides", [("learner_only", []), ("collect_demos", [])])
def test_sim_time_needs_a_graph_with_a_sim_robot(tmp_path, graph, overrides):
    result = run("-m", "robot_rl.cli", "launch", graph, "ros.sim_time=true", f"train.run_dir={tmp_path / 'run'}",
                 *overrides)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("robot-rl: error: ros.sim_time=True"), result.stderr
    assert "sim robot" in lines[0] and not (tmp_path / "run").exists()


def test_the_graph_resolves_sim_time_for_every_node():
    from robot_rl.cli import load_config
    from robot_rl.graph import graph_nodes

    sim = {node.name: node for node in graph_nodes(load_config(["graph=sim_train"]))}  # the graph's default
    assert all(node.sim_time for node in sim.values())
    assert "--sim-time" in sim["safety"].command([]) and "ros.sim_time=true" in sim["actor"].command(["ros.sim_time=x"])
    real = {node.name: node for node in graph_nodes(load_config(["graph=sim_train", "ros.sim_time=false"]))}
    assert "--sim-time" not in real["safety"].command([])
    assert real["learner"].command(["ros.sim_time=false"]).count("ros.sim_time=false") == 1


@pytest.mark.parametrize("node", [
    ["-m", "robot_rl.ros.safety_node", "--sim-time", "--clock-timeout", "1"],
    ["-m", "robot_rl.ros.learner_node", "task=reach", "ros.sim_time=true", "ros.startup_timeout=1"],
    ["-m", "robot_rl.ros.recorder_node", "task=reach", "ros.sim_time=true", "ros.startup_timeout=1"],
    ["-m", "robot_rl.ros.actor_node", "task=reach", "ros.sim_time=true", "ros.startup_timeout=1"],
], ids=["safety", "learner", "recorder", "actor"])
def test_a_node_without_a_clock_names_the_problem_and_exits(tmp_path, node):
    require("rclpy")
    result = run(*node, f"train.run_dir={tmp_path / 'run'}" if "task=reach" in node else "--frame-id=base")
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "no /clock within 1 s" in errors[0] and "ros.sim_time" in errors[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "run").exists()  # nothing made: no run folder, no store


@pytest.mark.parametrize("sim_time", [True, False], ids=["sim_time", "real_time"])
def test_sim_train_runs_and_stops_without_a_traceback(tmp_path, sim_time):
    require("rclpy")
    from robot_rl.data import EpisodeStore

    run_dir = tmp_path / "run"
    result = run("-m", "robot_rl.cli", "launch", "sim_train", "task=reach", f"ros.sim_time={str(sim_time).lower()}",
                 f"train.run_dir={run_dir}", "train.env_steps=60", "train.demo_episodes=1", "task.episode_steps=20",
                 "train.start_training=20", "train.batch_size=32", "ros.eval_every_episodes=0", timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "Traceback" not in output and "Error" not in output, output[-3000:]
    assert "actor done: 60 env steps" in output
    clock = "in lockstep on sim time" if sim_time else "at real time"
    assert clock in output
    store = EpisodeStore.open(run_dir / "episodes.zarr")
    assert store.metadata["clock"] == ("sim" if sim_time else "wall")
    steps = store.read_episode(store.episode_names()[-1])["timestamp"]
    periods = steps[1:] - steps[:-1]
    if sim_time:  # the recorder stamps each step on receipt, on the sim clock: one control period apart (while it
        # commits an episode, the next one's first steps queue and are stamped late)
        assert abs(float(np.median(periods)) - 0.1) < 1e-6, periods
    else:
        assert steps[0] > 1e9  # wall-clock time, s since the epoch


def test_the_lockstep_waits_for_a_safety_node_that_starts_late(tmp_path):
    """The sim robot repeats the instant it waits on (the clock, the stamped pose) and the actor its command until a
    safety node answers: one that starts after the actor's first command still gets the arm state and the command it
    needs to tick that instant, and obeys the command."""
    rclpy = require("rclpy")
    import threading
    import time

    from omegaconf import OmegaConf

    from robot_rl.cli import load_config
    from robot_rl.envs import make_env
    from robot_rl.ros.node_main import spinning_in_background
    from robot_rl.ros.sim_clock import sim_time_parameters, wait_for_clock
    from robot_rl.ros.topic_env import TopicEnv, TopicEnvSettings
    from tests.ros.graph_helpers import Graph

    overrides = ["task=reach", "ros.sim_time=true", "ros.stream_timeout=60", "human.enabled=false"]
    cfg = load_config(overrides)
    task = OmegaConf.to_container(cfg.task, resolve=True)
    graph = Graph(tmp_path, overrides)
    rclpy.init()
    node = rclpy.create_node("robot_rl_actor", parameter_overrides=sim_time_parameters(True))
    try:
        graph.start("sim_robot")
        spec = make_env(task)
        env = TopicEnv(node, TopicEnvSettings.from_config(task, cfg.ros), spec.unwrapped.state_layout)
        spec.close()
        with spinning_in_background(node):
            wait_for_clock(node, 60.0, spinning=True)
            obs, _ = env.reset()
            late = threading.Timer(2.0, lambda: graph.start("safety"))  # after the command below went out
            late.start()
            started = time.monotonic()
            forward = np.array([1.0, 0.0, 0.0, -1.0], np.float32)  # 2 cm along the TCP's x
            moved, *_ = env.step(forward)  # first sent before the safety node was there
            late.join()
            waited = time.monotonic() - started
        assert waited > 2.0  # the step waited for the safety node's answer ...
        assert moved["state"][0] - obs["state"][0] > 0.005  # ... which obeyed the command said again
    finally:
        graph.stop()
        node.destroy_node()
        rclpy.shutdown()


def test_sim_time_velocity_stands_when_the_sim_robot_repeats_an_instant():
    """The sim robot says an instant again (pose, same stamp) while it waits for a late answer; the finite-difference
    velocity of that instant must stand. It read zero, so an actor woken after the repeat (a loaded machine) saw an
    arm at rest that was moving: the graph's run depended on timing."""
    rclpy = require("rclpy")
    from omegaconf import OmegaConf

    from robot_rl.cli import load_config
    from robot_rl.envs import make_env
    from robot_rl.ros.messages import pose_msg
    from robot_rl.ros.sim_clock import sim_time_parameters
    from robot_rl.ros.topic_env import POSE, TopicEnv, TopicEnvSettings

    cfg = load_config(["task=reach", "ros.sim_time=true"])
    task = OmegaConf.to_container(cfg.task, resolve=True)
    rclpy.init()
    node = rclpy.create_node("robot_rl_actor", parameter_overrides=sim_time_parameters(True))
    try:
        spec = make_env(task)
        env = TopicEnv(node, TopicEnvSettings.from_config(task, cfg.ros), spec.unwrapped.state_layout)
        spec.close()
        for x, stamp in ((0.500, 1.00), (0.501, 1.01), (0.501, 1.01)):  # two instants, then the second again
            env._on_pose(pose_msg(np.array([x, 0.0, 0.3]), np.eye(3), stamp, "base"))
            linvel, stamp_read = env.inbox.latest[POSE][0][2], env.inbox.latest[POSE][0][4]
            assert stamp_read == stamp
        np.testing.assert_allclose(linvel, [0.1, 0.0, 0.0], atol=1e-6)  # 1 mm in 10 ms, also after the repeat
        env._on_pose(pose_msg(np.array([0.503, 0.0, 0.3]), np.eye(3), 1.02, "base"))
        np.testing.assert_allclose(env.inbox.latest[POSE][0][2], [0.2, 0.0, 0.0], atol=1e-6)
    finally:
        node.destroy_node()
        rclpy.shutdown()


def test_sim_time_the_sim_robot_steps_only_with_the_gripper_command_of_the_instant():
    """The safety node sends an instant's gripper command, then its arm command; the two travel on separate topics
    and may arrive the other way round. The sim robot must not step the instant before the gripper command is in
    (it stepped with the last one after one look, so a grasp could close a state period later, run by run)."""
    rclpy = require("rclpy")
    import threading
    import time

    from geometry_msgs.msg import PoseStamped
    from omegaconf import OmegaConf
    from std_msgs.msg import Float64

    from robot_rl.cli import load_config
    from robot_rl.envs import make_env
    from robot_rl.ros import qos
    from robot_rl.ros.messages import pose_msg
    from sim.robot_node import SimRobot

    cfg = load_config(["task=pick_cube"])
    env = make_env(OmegaConf.to_container(cfg.task, resolve=True)).unwrapped
    rclpy.init()
    node = rclpy.create_node("robot_rl_sim_robot")
    safety = rclpy.create_node("robot_rl_safety")
    try:
        robot = SimRobot(node, env, 100.0, 10.0, "base", seed=0, reset_service=False, sim_time=True, command_wait=5.0)
        from robot_rl.ros.node_main import executor_of

        robot.executor = executor_of(node)
        robot.start(None)  # the first episode's reset: its observation of instant robot.now_ns
        arm_pub = safety.create_publisher(PoseStamped, "/rl/equilibrium_pose", qos.COMMAND)
        gripper_pub = safety.create_publisher(Float64, "/rl/gripper_command", qos.COMMAND)
        deadline = time.monotonic() + 30
        while arm_pub.get_subscription_count() < 1 or gripper_pub.get_subscription_count() < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        robot.command_senders.check(time.monotonic())  # the sim robot's sender watch learns the safety node's publishers
        robot.publish_clock()
        open_ctrl = env.data.ctrl.copy()
        arm_pub.publish(pose_msg(env.tcp_pos, env.tcp_rot, robot.now_ns * 1e-9, "base"))  # the arm command first ...
        late = threading.Timer(0.5, lambda: gripper_pub.publish(Float64(data=1.0)))  # ... its gripper command later
        late.start()
        started = time.monotonic()
        assert robot.wait_for_arm_command(threading.Event())
        waited = time.monotonic() - started
        late.join()
        assert robot.guard.dropped == {}, robot.guard.dropped
        assert waited > 0.4, f"the instant was stepped {waited:.2f} s after its arm command, without its gripper command"
        assert not np.array_equal(env.data.ctrl, open_ctrl)  # the close command is applied before the instant is stepped
    finally:
        safety.destroy_node()
        node.destroy_node()
        rclpy.shutdown()
