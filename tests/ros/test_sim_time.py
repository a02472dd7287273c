"""``ros.sim_time``: the graph on the sim robot's /clock, its errors, and a clean stop on either clock."""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import require
from tests.ros.graph_helpers import launch, run_python


@pytest.mark.parametrize("graph, overrides", [("learner_only", []), ("collect_demos", [])])
def test_sim_time_needs_a_graph_with_a_sim_robot(tmp_path, capsys, graph, overrides):
    from robot_rl.cli.main import main

    code = main(["launch", graph, "ros.sim_time=true", f"train.run_dir={tmp_path / 'run'}", *overrides])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("robot-rl: error: ros.sim_time=True"), err
    assert "sim robot" in lines[0] and not (tmp_path / "run").exists()


def test_the_graph_resolves_sim_time_for_every_node():
    from robot_rl.cli.graph import graph_nodes
    from robot_rl.core.composed_config import load_config

    sim = {node.name: node for node in graph_nodes(load_config(["graph=sim_train"]))}  # the graph's default
    assert all(node.sim_time for node in sim.values())
    assert all("ros.sim_time=true" in sim[name].command(["ros.sim_time=x"]) for name in ("safety", "actor"))
    real = {node.name: node for node in graph_nodes(load_config(["graph=sim_train", "ros.sim_time=false"]))}
    assert "ros.sim_time=false" in real["safety"].command([])
    assert real["learner"].command(["ros.sim_time=false"]).count("ros.sim_time=false") == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "node",
    [
        ["-m", "robot_rl.ros.safety.safety_node", "ros.sim_time=true", "--clock-timeout", "1"],
        ["-m", "robot_rl.ros.nodes.learner_node", "task=reach", "ros.sim_time=true", "ros.startup_timeout=1"],
        ["-m", "robot_rl.ros.nodes.recorder_node", "task=reach", "ros.sim_time=true", "ros.startup_timeout=1"],
        ["-m", "robot_rl.ros.nodes.actor_node", "task=reach", "ros.sim_time=true", "ros.startup_timeout=1"],
    ],
    ids=["safety", "learner", "recorder", "actor"],
)
def test_a_node_without_a_clock_names_the_problem_and_exits(tmp_path, node):
    require("rclpy")
    result = run_python(
        *node, f"train.run_dir={tmp_path / 'run'}" if "task=reach" in node else "--frame-id=base", timeout=120
    )
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and "no /clock within 1 s" in errors[0] and "ros.sim_time" in errors[0], result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert not (tmp_path / "run").exists()  # nothing made: no run folder, no store


@pytest.mark.slow
@pytest.mark.parametrize("sim_time", [True, False], ids=["sim_time", "real_time"])
def test_sim_train_runs_and_stops_without_a_traceback(tmp_path, sim_time):
    require("rclpy")
    from robot_rl.data import EpisodeStore

    run_dir = tmp_path / "run"
    result = launch(
        "sim_train",
        "task=reach",
        f"ros.sim_time={str(sim_time).lower()}",
        f"train.run_dir={run_dir}",
        "train.env_steps=60",
        "train.demo_episodes=1",
        "task.episode_steps=20",
        "train.start_training=20",
        "train.batch_size=32",
        "ros.eval_every_episodes=0",
        timeout=300,
    )
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
    if sim_time:  # each step keeps the sim time of its observation, however late the recorder takes it (it
        # commits an episode while the next one's first steps queue): exactly one control period apart
        np.testing.assert_allclose(periods, 0.1, atol=1e-6)
    else:
        assert steps[0] > 1e9  # wall-clock time, s since the epoch


@pytest.mark.slow
def test_the_lockstep_waits_for_a_safety_node_that_starts_late(tmp_path):
    """The sim robot repeats the instant it waits on (the clock, the stamped pose) and the actor its command until a
    safety node answers: one that starts after the actor's first command still gets the arm state and the command it
    needs to tick that instant, and obeys the command."""
    rclpy = require("rclpy")
    import threading
    import time

    from omegaconf import OmegaConf

    from robot_rl.core.composed_config import load_config
    from robot_rl.ros.links.topic_env import TopicEnv, TopicEnvSettings
    from robot_rl.ros.plumbing.node_main import spinning_in_background
    from robot_rl.ros.plumbing.sim_clock import sim_time_parameters, wait_for_clock
    from robot_rl.runtime.envs import make_env
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

    from robot_rl.core.composed_config import load_config
    from robot_rl.ros.links.topic_env import POSE, TopicEnv, TopicEnvSettings
    from robot_rl.ros.plumbing.messages import pose_msg
    from robot_rl.ros.plumbing.sim_clock import sim_time_parameters
    from robot_rl.runtime.envs import make_env

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

    from robot_rl.core.composed_config import load_config
    from robot_rl.ros.emulation.sim_robot_node import SimRobot
    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.plumbing.messages import pose_msg
    from robot_rl.runtime.envs import make_env

    cfg = load_config(["task=pick_cube"])
    env = make_env(OmegaConf.to_container(cfg.task, resolve=True)).unwrapped
    rclpy.init()
    node = rclpy.create_node("robot_rl_sim_robot")
    safety = rclpy.create_node("robot_rl_safety")
    try:
        robot = SimRobot(node, env, 100.0, 10.0, "base", seed=0, reset_service=False, sim_time=True, command_wait=5.0)
        from robot_rl.ros.plumbing.node_main import executor_of

        robot.executor = executor_of(node)
        robot.start(None)  # the first episode's reset: its observation of instant robot.now_ns
        arm_pub = safety.create_publisher(PoseStamped, "/rl/equilibrium_pose", qos.COMMAND)
        gripper_pub = safety.create_publisher(Float64, "/rl/gripper_command", qos.COMMAND)
        deadline = time.monotonic() + 30
        while arm_pub.get_subscription_count() < 1 or gripper_pub.get_subscription_count() < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        robot.command_senders.check(
            time.monotonic()
        )  # the sim robot's sender watch learns the safety node's publishers
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
        assert waited > 0.4, (
            f"the instant was stepped {waited:.2f} s after its arm command, without its gripper command"
        )
        assert not np.array_equal(
            env.data.ctrl, open_ctrl
        )  # the close command is applied before the instant is stepped
    finally:
        safety.destroy_node()
        node.destroy_node()
        rclpy.shutdown()


def test_sim_time_the_sim_robot_sends_a_periods_first_instant_only_after_the_safety_nodes_answer():
    """The safety node ticks a control period's first instant on the actor's command. A ``/clock`` of that instant
    sent with the command (it went out as soon as the actor's command came) could overtake the command on its way to
    the safety node, which then ticked the instant on the previous command, run by run."""
    rclpy = require("rclpy")
    import threading
    import time

    from geometry_msgs.msg import PoseStamped
    from omegaconf import OmegaConf
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import Float64

    from robot_rl.core.composed_config import load_config
    from robot_rl.ros.emulation.sim_robot_node import SimRobot
    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.plumbing.messages import pose_msg, stamp_ns
    from robot_rl.ros.plumbing.node_main import spinning_in_background
    from robot_rl.runtime.envs import make_env

    cfg = load_config(["task=reach"])
    env = make_env(OmegaConf.to_container(cfg.task, resolve=True)).unwrapped
    rclpy.init()
    node = rclpy.create_node("robot_rl_sim_robot")
    safety = rclpy.create_node("robot_rl_safety")
    clocks: list[tuple[float, int]] = []  # (monotonic s, instant ns) of every /clock heard
    safety.create_subscription(
        Clock, "/clock", lambda msg: clocks.append((time.monotonic(), stamp_ns(msg.clock))), qos.CLOCK
    )
    arm_pub = safety.create_publisher(PoseStamped, "/rl/equilibrium_pose", qos.COMMAND)
    gripper_pub = safety.create_publisher(Float64, "/rl/gripper_command", qos.COMMAND)
    stop = threading.Event()
    try:
        robot = SimRobot(node, env, 100.0, 10.0, "base", seed=0, reset_service=False, sim_time=True, command_wait=5.0)
        robot.start(None)  # the first episode's reset: its observation of instant robot.now_ns
        first = robot.now_ns
        with spinning_in_background(safety):
            deadline = time.monotonic() + 30
            while arm_pub.get_subscription_count() < 1 or gripper_pub.get_subscription_count() < 1:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            robot.command_senders.check(time.monotonic())
            robot.action_stamp_ns = first  # the actor's command for the observation came: the period may start
            loop = threading.Thread(target=robot.run_lockstep, args=(stop,))
            loop.start()
            time.sleep(0.5)  # the safety node takes its time to answer ...
            while not clocks:  # ... and has heard the robot's clock (the waiting robot says it again)
                assert time.monotonic() < deadline, "no /clock heard"
                time.sleep(0.01)
            answered = time.monotonic()
            gripper_pub.publish(Float64(data=-1.0))
            arm_pub.publish(pose_msg(env.tcp_pos, env.tcp_rot, first * 1e-9, "base"))
            while robot.now_ns <= first:  # the period goes on
                assert time.monotonic() < answered + 10, clocks[-3:]
                time.sleep(0.01)
            stop.set()
            loop.join(timeout=10)
        heard = [t for t, instant in clocks if instant == first]
        assert heard, f"no /clock of the period's first instant; heard {[instant for _, instant in clocks]}"
        assert min(heard) >= answered, (
            f"/clock of the period's first instant went out {answered - min(heard):.2f} s before the safety node answered"
        )
    finally:
        stop.set()
        safety.destroy_node()
        node.destroy_node()
        rclpy.shutdown()


def test_sim_time_safety_node_ticks_each_instant_with_its_own_command_and_wrench():
    """In sim time the safety node ticks an instant (a) on the actor's command for it, which no /clock precedes;
    (b) with each command only from its own instant on, so a reset's pause instant ticked late still holds the arm;
    (c) once the wrench of the instant is in as well as its pose (they travel on two topics); (d) it says the flags of
    a standing instant again, for a monitor that joined after the tick; (e) on each arm state inside the control
    period of the newest command, which no /clock precedes (the sim robot moves the clock once per period); (f) the
    state at the period's end (the next observation) only on the actor's command for it."""
    rclpy = require("rclpy")
    import time

    from geometry_msgs.msg import PoseStamped, WrenchStamped
    from rclpy.executors import SingleThreadedExecutor
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import Float64, UInt32

    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.plumbing.messages import pose_msg, stamp_ns, wrench_msg
    from robot_rl.ros.plumbing.sim_clock import sim_time_parameters
    from robot_rl.ros.safety.safety_node import LockstepSafetyNode
    from robot_rl.safety import SafetyLimits, Violation

    down = np.diag([1.0, -1.0, -1.0])  # tool pointing down
    home = np.array([0.45, 0.0, 0.2])
    rclpy.init()
    safety_ros = rclpy.create_node("robot_rl_safety", parameter_overrides=sim_time_parameters(True))
    actor, sim = rclpy.create_node("robot_rl_test_actor"), rclpy.create_node("robot_rl_test_sim")
    executor = SingleThreadedExecutor()
    for each in (safety_ros, actor, sim):
        executor.add_node(each)
    answers: list[tuple[int, float]] = []  # (instant ns, commanded x m)
    flags: list[int] = []
    try:
        safety = LockstepSafetyNode(
            safety_ros, SafetyLimits(), 500.0, senders=("robot_rl_test_actor",), control_period=0.1
        )
        action_pub = actor.create_publisher(PoseStamped, "/rl/action", qos.COMMAND)
        gripper_pub = actor.create_publisher(Float64, "/rl/gripper", qos.COMMAND)
        clock_pub = sim.create_publisher(Clock, "/clock", qos.COMMAND)
        pose_pub = sim.create_publisher(
            PoseStamped, "/franka_robot_state_broadcaster/current_pose", qos.STREAM_PUBLISHER
        )
        wrench_pub = sim.create_publisher(
            WrenchStamped, "/franka_robot_state_broadcaster/external_wrench_in_base_frame", qos.STREAM_PUBLISHER
        )
        sim.create_subscription(
            PoseStamped,
            "/rl/equilibrium_pose",
            lambda m: answers.append((stamp_ns(m.header.stamp), m.pose.position.x)),
            10,
        )
        sim.create_subscription(UInt32, "/rl/safety_flags", lambda m: flags.append(m.data), 10)

        def spin_until(condition, what: str, timeout: float = 10.0) -> None:
            end = time.monotonic() + timeout
            while not condition():
                assert time.monotonic() < end, f"{what}: not within {timeout} s; answers {answers[-3:]}"
                executor.spin_once(timeout_sec=0.01)

        def answer(instant: int) -> float:
            spin_until(lambda: any(a == instant for a, _ in answers), f"the answer for {instant * 1e-9:.3f} s")
            return next(x for a, x in answers if a == instant)

        def clock(instant: int) -> None:
            msg = Clock()
            msg.clock.sec, msg.clock.nanosec = divmod(instant, 1_000_000_000)
            clock_pub.publish(msg)

        def arm(instant: int, force=(0.0, 0.0, 0.0), pose: bool = True, wrench: bool = True) -> None:
            if wrench:
                wrench_pub.publish(wrench_msg(np.asarray(force), np.zeros(3), instant * 1e-9, "base"))
            if pose:
                pose_pub.publish(pose_msg(home, down, instant * 1e-9, "base"))

        def actor_trusted() -> bool:
            """Whether the safety node knows the actor's publishers by now (it drops a command from one it does not)."""
            safety.gate.check()
            return all(safety.gate.watch.trusted[topic] for topic in (safety.action_topic, safety.gripper_topic))

        def command(instant: int, x: float) -> None:
            gripper_pub.publish(Float64(data=-1.0))
            action_pub.publish(pose_msg(np.array([x, 0.0, 0.2]), down, instant * 1e-9, "base"))

        spin_until(
            lambda: (
                action_pub.get_subscription_count()
                and gripper_pub.get_subscription_count()
                and clock_pub.get_subscription_count()
                and pose_pub.get_subscription_count()
                and wrench_pub.get_subscription_count()
                and actor_trusted()
            ),
            "discovery",
        )
        a, b = 1_000_000_000, 1_010_000_000  # s 1.00 and 1.01: one state period apart
        clock(a)
        arm(a)
        assert answer(a) == pytest.approx(home[0])  # nothing commanded yet: holds
        arm(b)  # (a) the observation of b, then the actor's command for it; no /clock of b
        command(b, home[0] + 0.03)
        x_b = answer(b)
        assert x_b == pytest.approx(home[0] + 0.01, abs=1e-6)  # five ticks of 2 mm towards the target
        pause, c = 1_160_000_000, 1_170_000_000  # (b) a reset's pause, then the next episode's first observation
        clock(pause)  # the pause's instant, pending until an arm state covers it ...
        command(c, home[0] + 0.05)  # ... when the command of the next instant is in already
        arm(c)
        x_pause, x_c = answer(pause), answer(c)
        assert x_pause < x_b - 0.005, "the pause's tick obeyed the command of the instant after it"
        assert x_c == pytest.approx(x_pause + 0.01, abs=1e-6)
        d = 1_180_000_000  # (c) the next state period: its pose and clock first, its wrench (a push) later
        arm(d, wrench=False)
        clock(d)
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.01)
        assert not any(instant == d for instant, _ in answers), "ticked before the wrench of the instant was in"
        count = len(flags)
        arm(d, force=(0.0, 0.0, 100.0), pose=False)
        x_d = answer(d)
        spin_until(lambda: len(flags) > count, "the flags of the instant")
        assert flags[-1] & Violation.FORCE and x_d < x_c, (flags[-1], x_c, x_d)
        # (d) a monitor that joins after the tick gets its flags when the clock stands (the sim robot says it again)
        late: list[int] = []
        monitor = rclpy.create_node("robot_rl_test_monitor")
        executor.add_node(monitor)
        monitor.create_subscription(UInt32, "/rl/safety_flags", lambda m: late.append(m.data), 10)
        spin_until(lambda: safety.out.flags_pub.get_subscription_count() >= 2, "the monitor's discovery")
        clock(d)
        spin_until(lambda: late, "the flags of the standing instant")
        assert late[-1] == flags[-1], (late, flags[-1])
        e = 1_190_000_000  # (e) the next state period of c's control period: its arm state alone
        arm(e)
        x_e = answer(e)
        assert x_e > x_d, (x_d, x_e)  # the force is gone: on towards c's target
        f = 1_270_000_000  # (f) the end of c's period (1.17 s + 0.1 s): the next observation
        arm(f)
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.01)
        assert not any(instant == f for instant, _ in answers), "ticked the next observation before its command"
        command(f, home[0] - 0.05)
        assert answer(f) < x_e, "the next observation's instant did not obey the command for it"
        assert safety.guard.dropped == {}, safety.guard.dropped
    finally:
        executor.shutdown()
        for each in (sim, actor, safety_ros):
            each.destroy_node()
        rclpy.shutdown()


def test_sim_time_the_actor_reads_the_humans_input_of_the_observation_it_acts_on():
    """The sim robot publishes the scripted human's input of an instant before its observation, on topics of their
    own: input that arrives after the observation's pose must still be read with that observation (it was read a
    step late, so the human's action of the graph's run depended on timing)."""
    rclpy = require("rclpy")
    import threading

    from geometry_msgs.msg import PoseStamped, Twist
    from sensor_msgs.msg import JointState, Joy
    from std_msgs.msg import Bool, Float64
    from std_srvs.srv import SetBool

    from robot_rl.ros.links.teleop_source import TopicTeleop
    from robot_rl.ros.links.topic_env import JOINTS, POSE, REWARD, SUCCESS, TopicEnv
    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.plumbing.messages import joint_state_msg, joy_msg, pose_msg
    from robot_rl.ros.plumbing.node_main import spinning_in_background
    from robot_rl.ros.plumbing.sim_clock import sim_time_parameters
    from tests.ros.graph_helpers import PROPRIO_LAYOUT, topic_env_settings

    settings = topic_env_settings(episode_steps=10, sim_time=True)
    rclpy.init()
    actor = rclpy.create_node("robot_rl_actor", parameter_overrides=sim_time_parameters(True))
    sim = rclpy.create_node("robot_rl_test_sim")
    pubs = {
        topic: sim.create_publisher(kind, topic, qos.STREAM_PUBLISHER)
        for topic, kind in (
            (POSE, PoseStamped),
            (JOINTS, JointState),
            (REWARD, Float64),
            (SUCCESS, Bool),
            ("/spacenav/twist", Twist),
            ("/rl/intervention", Bool),
            ("/spacenav/joy", Joy),
        )
    }
    now = [1.0]  # s: the sim's instant

    def observation() -> None:
        pubs[REWARD].publish(Float64(data=0.0))
        pubs[SUCCESS].publish(Bool(data=False))
        pubs[JOINTS].publish(
            joint_state_msg(["finger_left", "finger_right"], np.full(2, 0.04), np.zeros(2), np.zeros(2), now[0])
        )
        pubs[POSE].publish(pose_msg(np.array([0.45, 0.0, 0.2]), np.eye(3), now[0], "base"))

    def human(push: float) -> None:  # the scripted human's input: take-over switch, twist (base frame), buttons
        pubs["/rl/intervention"].publish(Bool(data=push > 0))
        twist = Twist()
        twist.linear.x = push
        pubs["/spacenav/twist"].publish(twist)
        pubs["/spacenav/joy"].publish(joy_msg([0.0] * 6, [int(push > 0), 0], now[0]))

    def reset(request, response):
        human(0.0)
        observation()
        response.success, response.message = True, "seed 0"
        return response

    late: list[threading.Timer] = []

    def on_action(msg) -> None:  # the period: the observation at once, the human's input of it 0.5 s later
        if late:
            return  # the actor says its command again while it waits: one period per command, as the sim robot
        now[0] = round(now[0] + 0.1, 6)
        observation()
        late.append(threading.Timer(0.5, human, args=(0.8,)))
        late[0].start()

    sim.create_service(SetBool, "/rl/reset", reset)
    sim.create_subscription(PoseStamped, "/rl/action", on_action, qos.COMMAND)
    try:
        env = TopicEnv(actor, settings, PROPRIO_LAYOUT)
        teleop = TopicTeleop(env, deadzone=0.05, hold=0.3, lockstep=True)
        with spinning_in_background(actor), spinning_in_background(sim):
            obs, _ = env.reset()
            assert teleop(obs, np.zeros(4, np.float32)) == (False, None)  # hands off at the reset
            obs, *_ = env.step(np.zeros(4, np.float32))
            took_over, action = teleop(obs, np.zeros(4, np.float32))
            late[0].join()
        assert took_over, "the human's input of the observation was not read with it"
        np.testing.assert_allclose(action, [0.8, 0.0, 0.0, 1.0], atol=1e-6)  # its twist and its close button
        assert env.guard.dropped == {}, env.guard.dropped
    finally:
        actor.destroy_node()
        sim.destroy_node()
        rclpy.shutdown()
