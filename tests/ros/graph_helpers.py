"""Start robot_rl node graphs as real processes and watch them from the test process over DDS."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from robot_rl.cli.graph import NodeSpec, graph_nodes, ros_environment
from robot_rl.core.composed_config import load_config

#: an easy reach (4 cm steps and success radius) so learning shows within a test's budget
EASY_REACH = [
    "task=reach",
    "task.success_radius=0.04",
    "task.pos_step=0.04",
    "task.episode_steps=40",
    "train.demo_episodes=20",
    "train.start_training=100",
    "train.batch_size=256",
    "agent.utd=2",
]

#: how many lines of each node's log a stopped graph prints (shown by pytest for a failed test)
LOG_TAIL_LINES = 40


def sim_robot(*args: str) -> list[str]:
    """The command of a sim robot node on the reach task with no human and no demos, plus ``args``."""
    return [
        sys.executable,
        "-m",
        "robot_rl.ros.emulation.sim_robot_node",
        "task=reach",
        "human.enabled=false",
        "train.demo_episodes=0",
        *args,
    ]


#: the safety node's tick rate in the wall-clock graph tests that are not about its loop: the sim robot's state rate, a
#: tick per state (the robot's limits are per second, so the arm moves alike). In the 75 s restart test the sim robot
#: and the safety node took 61 s of CPU with sim_train's 500 Hz, 44 s with 100 Hz (2026-12-01)
# a graph with the operator's console (collect_demos, real_train) binds console.port, 8080 by default: two such tests
# at once (pytest -n 2) collided, and the second's console refused the taken port, which stopped its launch (exit 2)
ANY_CONSOLE_PORT = "console.port=0"
STATE_RATE_HZ = 100


class Graph:
    """The nodes of a graph config as child processes, each logging to ``<folder>/<name>.log``, in the domain a
    launch of that config would use (the test's own, from the ``ros_domain`` fixture). ``safety_rate_hz``: the safety
    node's ``--rate-hz`` instead of the graph's."""

    def __init__(
        self, folder: Path, overrides: list[str], graph: str = "sim_train", safety_rate_hz: float | None = None
    ):
        self.folder, self.overrides = folder, [f"graph={graph}", *overrides]
        cfg = load_config(self.overrides)
        self.specs = {node.name: node for node in graph_nodes(cfg)}
        if safety_rate_hz is not None:
            args = list(self.specs["safety"].args)
            args[args.index("--rate-hz") + 1] = str(safety_rate_hz)
            self.specs["safety"] = replace(self.specs["safety"], args=args)
        self.env = ros_environment(cfg.ros)
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *extra: str) -> subprocess.Popen:
        spec: NodeSpec = self.specs[name]
        log = open(self.folder / f"{name}.log", "a")
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        self.processes[name] = subprocess.Popen(
            [*spec.command(self.overrides), *extra], stdout=log, stderr=subprocess.STDOUT, env=env
        )
        return self.processes[name]

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text()

    def stop(self) -> None:
        """Stop every node, then print the end of each node's log: pytest shows it when the test failed."""
        stop_processes(list(self.processes.values()))
        for name, process in self.processes.items():
            lines = self.log(name).splitlines()[-LOG_TAIL_LINES:]
            print(f"----- {name} (exit code {process.returncode}), last {len(lines)} log lines -----")
            print("\n".join(lines))


class Watcher:
    """Collects ``/rl/episode_stats`` records (and optionally other topics) in the test process."""

    def __init__(self, rclpy):
        from std_msgs.msg import String

        from robot_rl.ros.plumbing import qos

        self.rclpy = rclpy
        self.node = rclpy.create_node("robot_rl_test_watcher")
        self.records: list[dict] = []
        self.node.create_subscription(
            String, "/rl/episode_stats", lambda m: self.records.append(json.loads(m.data)), qos.EPISODE_LOG
        )

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.01)

    def wait_for(self, condition, timeout: float, what: str, show=lambda records: records[-3:]):
        """Spin until ``condition(records)`` is truthy; returns its value (else fails showing ``show(records)``)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.01)
            value = condition(self.records)
            if value:
                return value
        raise AssertionError(f"{what}: not within {timeout} s; records: {show(self.records)}")


def python() -> str:
    return sys.executable


def stop_processes(processes: list[subprocess.Popen], grace: float = 10.0) -> None:
    """Stop node processes as an operator would: SIGINT, then SIGKILL for any still running after ``grace``
    seconds. A node killed outright leaves its Fast DDS shared-memory ports behind, and a participant that shared
    them may crash (SIGSEGV) when it is deleted later: one such crash took down the whole test run in CI."""
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
    deadline = time.monotonic() + grace
    for process in processes:
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_python(*args: str, timeout: float, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python <args>`` (a robot-rl launch, a node) in a process group of its own, its output captured. Past ``timeout`` s it is stopped as an operator stops it (SIGINT: a launcher stops its nodes), then killed with
    every process of its group, and the test fails with the end of its output: a hang leaves no node behind in
    the test's domain and shows where the graph stood."""
    import pytest

    process = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=cwd,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGINT)
        try:
            stdout, stderr = process.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
        pytest.fail(f"{' '.join(args)} did not end within {timeout:g} s; its output ends:\n{(stdout + stderr)[-6000:]}")
    print(what_it_said(stdout + stderr))  # shown with a failing test's report, where the output's end is a traceback
    left = sweep_group(process.pid)
    if left:
        print(f"{left}: left running in the process group of {' '.join(args)}; killed")
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def what_it_said(output: str, most: int = 60) -> str:
    """The launcher's own lines and every line that names an error or a refusal, in order (at most ``most``): why a
    launch ended, which the end of its output (an interrupted node's traceback) may not show."""
    lines = [
        line[:400]
        for line in output.splitlines()
        if line.startswith("[launch]") or "error" in line.lower() or "refused" in line
    ]
    return "\n".join(["----- the launcher's lines and the error lines -----", *lines[:most]])


def sweep_group(pgid: int) -> str:
    """Kill (SIGKILL) whatever still runs in process group ``pgid`` after its leader ended; the processes killed, as
    ``ps`` names them, or "" when none. A node left behind would live on in the test's ROS domain, which a later
    test may take (its namesake then refuses that test's node)."""
    left = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (name)": state, ppid, pgrp, ...
            if int(fields[2]) == pgid and fields[0] != "Z":
                left.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:200])
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
    if left:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return ""
    return "; ".join(left)


def launch(graph: str, *overrides: str, timeout: float, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``robot-rl launch <graph> <overrides>`` in a child process (:func:`run_python`), in ``cwd`` when given."""
    return run_python("-m", "robot_rl.cli.main", "launch", graph, *overrides, timeout=timeout, cwd=cwd)


def tear_down(rclpy, node, processes: list[subprocess.Popen]) -> None:
    """Stop the node processes a test started, then its own node and rclpy context."""
    stop_processes(processes)
    node.destroy_node()
    rclpy.shutdown()


def recorded_episodes(run_dir: Path) -> list[dict]:
    """The attributes of every episode a graph's run kept, in the recorder's store and in the actor's own
    (``actor_episodes.zarr``: the episodes a loaded recorder did not confirm within ``ros.delivery.record_timeout``),
    each episode once (by uid), the recorder's first."""
    from robot_rl.data import EpisodeStore

    episodes: dict = {}
    for path in (run_dir / "episodes.zarr", run_dir / "actor_episodes.zarr"):
        if (path / "zarr.json").exists():
            store = EpisodeStore.open(path)
            for name in store.episode_names():
                attrs = store.episode_attrs(name)
                episodes.setdefault(attrs.get("uid") or (str(path), name), attrs)
    return list(episodes.values())


class TopicCell:
    """A cell over real topics in real time for a :class:`~robot_rl.ros.links.topic_env.TopicEnv` in the test process: the
    arm's pose and fingers (``finger`` m each) and the operator's twist (``push`` m/s up) and gripper ``buttons``,
    each published every ``period`` s by a timer (as drivers and spacenav_node do), and the reset service, which
    answers after ``reset_seconds`` (a scene put back by a person; served by ``reset_node``, spun apart, so the streams
    go on meanwhile). With ``signals`` the timer publishes success false and reward 0 too; without, the test
    publishes them."""

    def __init__(self, node, signals: bool = True, period: float = 0.02, reset_seconds: float = 0.0, reset_node=None):
        import numpy as np
        from geometry_msgs.msg import PoseStamped, Twist
        from sensor_msgs.msg import JointState, Joy
        from std_msgs.msg import Bool, Float64
        from std_srvs.srv import SetBool

        from robot_rl.ros.links.topic_env import JOINTS, POSE, REWARD, SUCCESS
        from robot_rl.ros.plumbing import qos
        from robot_rl.ros.plumbing.messages import joint_state_msg, joy_msg, pose_msg

        self.node, self.finger, self.push, self.buttons, self.resets = node, 0.04, 0.0, [0, 0], 0
        publish = {
            topic: node.create_publisher(kind, topic, qos.STREAM_PUBLISHER)
            for topic, kind in (
                (POSE, PoseStamped),
                (JOINTS, JointState),
                (REWARD, Float64),
                (SUCCESS, Bool),
                ("/spacenav/twist", Twist),
                ("/spacenav/joy", Joy),
            )
        }
        self.success_pub, self.reward_pub = publish[SUCCESS], publish[REWARD]

        def tick() -> None:
            now = time.time()
            if signals:
                publish[SUCCESS].publish(Bool(data=False))
                publish[REWARD].publish(Float64(data=0.0))
            fingers = np.full(2, self.finger)
            publish[JOINTS].publish(
                joint_state_msg(["finger_left", "finger_right"], fingers, 0 * fingers, 0 * fingers, now)
            )
            publish[POSE].publish(pose_msg(np.array([0.45, 0.0, 0.2]), np.eye(3), now, "base"))
            twist = Twist()
            twist.linear.z = self.push
            publish["/spacenav/twist"].publish(twist)
            publish["/spacenav/joy"].publish(joy_msg([0.0] * 6, self.buttons, now))

        def reset(request, response):
            time.sleep(reset_seconds)
            self.resets += 1
            response.success, response.message = True, f"reset {self.resets}"
            return response

        node.create_timer(period, tick)
        (reset_node or node).create_service(SetBool, "/rl/reset", reset)


def topic_env_settings(**changes):
    """TopicEnvSettings of a 4-D action at 10 Hz on the :class:`TopicCell`'s streams (no cameras), real time."""
    import numpy as np

    from robot_rl.ros.links.topic_env import TopicEnvSettings

    settings = TopicEnvSettings(
        control_rate_hz=10.0,
        action_dim=4,
        pos_step=0.02,
        rot_step=0.1,
        workspace=np.array([[0.2, -0.4, 0.0], [0.8, 0.4, 0.5]]),
        episode_steps=50,
        cameras=(),
        image_size=(64, 64),
        terminate_on_success=True,
        stream_timeout=10.0,
        reset_pause=0.0,
    )
    return replace(settings, **changes)


#: the state layout of a TopicEnv without task state
PROPRIO_LAYOUT = {
    "tcp_pos": (0, 3),
    "tcp_rotvec": (3, 3),
    "tcp_linvel": (6, 3),
    "tcp_angvel": (9, 3),
    "gripper": (12, 1),
}


def wait_until(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.01)
