"""robot-rl launch (the graph launcher), the ROS 2 launch files, start-up topic checks, and the
teleop node driven by recorded keyboard bytes and joystick events."""

import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import require
from tests.ros.graph_helpers import ANY_CONSOLE_PORT, Watcher, launch, sim_robot, stop_processes, tear_down

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_robot_rl_launch_collects_demos_in_sim_and_stops_with_the_actor(tmp_path):
    require("rclpy")
    store, bag = tmp_path / "demos.zarr", tmp_path / "raw_bag"
    result = launch(
        "collect_demos",
        "graph.with_sim=true",
        ANY_CONSOLE_PORT,
        "task=reach",
        "train.demo_episodes=3",
        f"ros.recorder.store={store}",
        f"ros.recorder.mcap={bag}",
        f"train.run_dir={tmp_path / 'run'}",
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    for name in ("sim_robot", "safety", "recorder", "actor"):
        assert f"[launch] started {name}" in result.stdout
    assert "[launch] actor exited with code 0; stopping the graph" in result.stdout
    from robot_rl.data import EpisodeStore

    opened = EpisodeStore.open(store)
    assert [opened.episode_attrs(n)["source"] for n in opened.episode_names()] == ["demo"] * 3
    assert all(opened.episode_attrs(n)["success"] for n in opened.episode_names())  # the scripted human reached

    from rosbags.highlevel import AnyReader  # the raw topics, as rosbag2 MCAP

    with AnyReader([bag]) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        assert counts["/joint_states"] > 50 and counts["/rl/action"] > 0 and counts["/rl/equilibrium_pose"] > 50
        connection = next(c for c in reader.connections if c.topic == "/franka_robot_state_broadcaster/current_pose")
        _, _, raw = next(reader.messages(connections=[connection]))
        pose = reader.deserialize(raw, connection.msgtype).pose.position
        assert 0.25 <= pose.x <= 0.75 and 0.0 < pose.z < 0.45  # a TCP position in the workspace, metres


def test_launch_rejects_an_unknown_graph(capsys):
    from robot_rl.cli.main import main

    code = main(["launch", "sim_trian"])
    err = capsys.readouterr().err
    assert code == 2 and "graph='sim_trian'" in err and "sim_train" in err


def test_ros2_launch_files_cover_every_graph():
    from robot_rl.core.composed_config import group_options

    files = sorted(p.name.removesuffix(".launch.py") for p in (ROOT / "launch").glob("*.launch.py"))
    assert files == group_options("graph")
    for name in files:
        source = (ROOT / "launch" / f"{name}.launch.py").read_text()
        compile(source, name, "exec")
        assert f'launch_description("{name}")' in source


def test_ros2_launch_files_build_launch_descriptions():
    # `launch` ships with a full ROS 2 install only (not on PyPI): checked where it exists
    import runpy

    try:
        from launch import LaunchDescription  # (without ROS 2, `launch` is only this repo's folder)
    except ImportError:
        pytest.skip("the ROS 2 launch package is not installed (not on PyPI)")

    for path in (ROOT / "launch").glob("*.launch.py"):
        description = runpy.run_path(str(path))["generate_launch_description"]()
        assert isinstance(description, LaunchDescription)


@pytest.mark.slow
def test_actor_names_a_missing_topic_and_a_wrong_message_type():
    rclpy = require("rclpy")
    command = [sys.executable, "-m", "robot_rl.ros.nodes.actor_node", "task=reach", "ros.startup_timeout=3"]
    missing = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert missing.returncode == 2
    assert "no publisher on /franka_robot_state_broadcaster/current_pose" in missing.stderr
    assert "geometry_msgs/msg/PoseStamped" in missing.stderr

    from std_msgs.msg import String

    rclpy.init()
    node = rclpy.create_node("robot_rl_test_wrong_type")
    node.create_publisher(String, "/rl/reward", 1)
    try:
        actor = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while actor.poll() is None:
            rclpy.spin_once(node, timeout_sec=0.05)
        stderr = actor.stderr.read()
        assert actor.returncode == 2
        assert "topic /rl/reward has type std_msgs/msg/String; robot_rl_actor expected std_msgs/msg/Float64" in stderr
    finally:
        node.destroy_node()
        rclpy.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize(
    "override, expected",
    [
        ("task.privileged_state=true", "task.privileged_state"),
        ("ros.transition_subscribers=robot_rl_learner", "ros.transition_subscribers"),
    ],
)
def test_actor_refuses_settings_a_cell_cannot_serve(override, expected):
    require("rclpy")
    result = subprocess.run(
        [sys.executable, "-m", "robot_rl.ros.nodes.actor_node", "task=reach", override],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2 and expected in result.stderr, result.stderr[-2000:]


class TeleopWatcher(Watcher):
    def __init__(self, rclpy):
        super().__init__(rclpy)
        from geometry_msgs.msg import Twist
        from sensor_msgs.msg import Joy
        from std_msgs.msg import Bool

        self.twists, self.joys, self.switches = [], [], []
        self.node.create_subscription(
            Twist, "/spacenav/twist", lambda m: self.twists.append([m.linear.x, m.linear.y, m.linear.z]), 10
        )
        self.node.create_subscription(Joy, "/spacenav/joy", lambda m: self.joys.append(list(m.buttons)), 10)
        self.node.create_subscription(Bool, "/rl/intervention", lambda m: self.switches.append(m.data), 10)
        self.successes, self.estops = [], []
        self.node.create_subscription(Bool, "/rl/success", lambda m: self.successes.append(m.data), 10)
        # the presses (/rl/estop false is the node's heartbeat: the operator's e-stop is there, not pressed)
        self.node.create_subscription(Bool, "/rl/estop", lambda m: m.data and self.estops.append(True), 10)


@pytest.mark.slow
def test_keyboard_teleop_from_a_byte_stream():
    rclpy = require("rclpy")
    rclpy.init()
    watcher = TeleopWatcher(rclpy)
    node = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "robot_rl.ros.nodes.teleop_node",
            "teleop_device.key_hold=0.5",
            "teleop_device.publish_success=true",
        ],
        stdin=subprocess.PIPE,
    )
    try:
        watcher.wait_for(lambda _: watcher.twists, 60, "teleop publishing")
        assert not any(watcher.switches) and watcher.twists[-1] == [0, 0, 0]
        node.stdin.write(b" wc")  # take over, +x, close the gripper
        node.stdin.flush()
        watcher.wait_for(
            lambda _: (
                watcher.switches
                and [1, 0] in watcher.joys
                and watcher.twists[-1][0] > 0
                and watcher.switches[-1]
                and watcher.successes  # its subscription may match after the others' (CI: none yet at this point)
            ),
            10,
            "+x, take-over and close from the keys",
        )
        assert watcher.twists[-1] == [0.5, 0, 0] and not watcher.successes[-1]
        node.stdin.write(b"y")  # the operator marks success: the cell's success signal before a classifier exists
        node.stdin.flush()
        watcher.wait_for(lambda _: watcher.successes[-1], 10, "success from the y key")
        node.stdin.write(b"q")
        node.stdin.flush()
        assert node.wait(timeout=20) == 0
    finally:
        stop_processes([node])
        watcher.node.destroy_node()
        rclpy.shutdown()


@pytest.mark.slow
def test_joystick_teleop_from_recorded_events(tmp_path):
    rclpy = require("rclpy")
    fifo = tmp_path / "js0"
    import os

    os.mkfifo(fifo)
    rclpy.init()
    watcher = TeleopWatcher(rclpy)
    node = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "robot_rl.ros.nodes.teleop_node",
            "teleop_device.kind=joystick",
            f"teleop_device.device={fifo}",
        ]
    )
    try:
        with open(fifo, "wb", buffering=0) as device:
            event = struct.Struct("IhBB")
            device.write(event.pack(0, 0, 0x82, 1))  # init event: axis 1 at rest
            device.write(event.pack(10, -16384, 0x02, 1))  # axis 1 pushed forward: x = -1 * -0.5
            device.write(event.pack(11, 800, 0x02, 0))  # axis 0 inside the deadzone (0.024 < 0.05)
            device.write(event.pack(12, 1, 0x01, 5))  # take-over button
            device.write(event.pack(13, 1, 0x01, 0))  # close button
            watcher.wait_for(lambda _: watcher.twists and watcher.twists[-1][0] > 0, 30, "x from axis 1")
            np.testing.assert_allclose(watcher.twists[-1], [16384 / 32767, 0, 0], atol=1e-6)
            watcher.wait_for(lambda _: watcher.switches and watcher.switches[-1], 10, "take-over")
            # the buttons come on a topic of their own, maybe after the switch (a loaded full run read none yet)
            watcher.wait_for(lambda _: [1, 0] in watcher.joys, 10, "take-over and close on /joy")
    finally:
        stop_processes([node])
        watcher.node.destroy_node()
        rclpy.shutdown()


def test_a_missing_joystick_is_named_with_what_is_present(tmp_path):
    require("rclpy")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "robot_rl.ros.nodes.teleop_node",
            "teleop_device.kind=joystick",
            f"teleop_device.device={tmp_path / 'js7'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "js7" in result.stderr and "present:" in result.stderr


def spacemouse_node(tmp_path, *extra):
    import os

    fifo = tmp_path / "hidraw0"
    os.mkfifo(fifo)
    node = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "robot_rl.ros.nodes.teleop_node",
            "teleop_device.kind=spacemouse",
            f"teleop_device.spacemouse_device={fifo}",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return fifo, node


def hid_report(device, report: bytes, timeout: float = 30.0) -> None:
    """Write one HID report into the SpaceMouse FIFO and wait until the node has read it. hidraw hands over one
    report per read; a FIFO joins the reports a late reader finds waiting into one read, whose first report alone
    the node parses (a loaded CI run lost the operator's motion behind a button report so)."""
    import fcntl
    import termios

    device.write(report)
    end = time.monotonic() + timeout
    while struct.unpack("i", fcntl.ioctl(device.fileno(), termios.FIONREAD, b"\0" * 4))[0]:
        assert time.monotonic() < end, f"the teleop node did not read the report {report.hex()} within {timeout} s"
        time.sleep(0.01)


def test_a_rotation_report_longer_than_its_three_axes_sets_the_rotation_alone(tmp_path):
    """A report 2 (rotation) with more than three axes' bytes, padded or junk, sets the three rotation axes: it ran
    past the sixth axis (an IndexError), which ended the teleop node's reading thread."""
    require("rclpy")
    from robot_rl.core.composed_config import load_config
    from robot_rl.ros.nodes.teleop_node import SpaceMouse, TeleopState

    teleop = load_config([]).teleop_device
    state = TeleopState()
    signs = dict(teleop.spacemouse_signs)
    parser = SpaceMouse(state, str(tmp_path), signs, teleop.full_scale, 0.0, None, dict(teleop.spacemouse_buttons))
    parser.handle((bytes([2]) + struct.pack("<3h", 350, 0, -175)).ljust(64, b"\x7f"))
    np.testing.assert_allclose(state.twist, [0.0, 0.0, 0.0, signs["rx"], 0.0, -0.5 * signs["rz"]])


@pytest.mark.slow
def test_spacemouse_teleop_from_recorded_hid_reports(tmp_path):
    rclpy = require("rclpy")
    rclpy.init()
    watcher = TeleopWatcher(rclpy)
    fifo, node = spacemouse_node(tmp_path)
    try:
        with open(fifo, "wb", buffering=0) as device:
            for report in (
                bytes([1]) + struct.pack("<3h", 175, -350, 10),  # translation, legacy 6-byte report
                bytes([2]) + struct.pack("<3h", 0, 0, 0),  # rotation report
                bytes([3, 1, 0]),
            ):  # left button: close
                hid_report(device, report)
            # x: +175/350, y: sign -1 * -350/350 = +1, z: 10/350 = 0.029 < deadzone
            watcher.wait_for(
                lambda _: watcher.twists and [1, 0] in watcher.joys and watcher.twists[-1][0] > 0,
                30,
                "the SpaceMouse's translation and button",
            )
            np.testing.assert_allclose(watcher.twists[-1], [0.5, 1.0, 0.0], atol=1e-6)
            hid_report(device, bytes([1]) + struct.pack("<6h", -350, 0, 0, 0, 0, 0))  # 12-byte report of newer models
            watcher.wait_for(lambda _: watcher.twists[-1][0] < 0, 10, "the 12-byte report")
            np.testing.assert_allclose(watcher.twists[-1], [-1.0, 0.0, 0.0], atol=1e-6)
    finally:
        stop_processes([node])
        watcher.node.destroy_node()
        rclpy.shutdown()


def test_a_spacemouse_that_only_reports_zeros_gets_a_warning(tmp_path):
    require("rclpy")
    fifo, node = spacemouse_node(tmp_path)
    try:
        with open(fifo, "wb", buffering=0) as device:
            end = time.monotonic() + 2.0
            while time.monotonic() < end:  # one report a read, as from hidraw, however late the node reads
                device.write((bytes([1]) + struct.pack("<3h", 0, 0, 0)).ljust(64, b"\0"))
                time.sleep(0.02)
    finally:
        stop_processes([node])  # the node outlives its device (it waits for it to return)
    output, _ = node.communicate(timeout=30)
    assert "reports only zero axes" in output and "right mode / switched on" in output


@pytest.mark.slow
def test_a_spacemouse_unplugged_mid_takeover_holds_the_arm_and_is_named_and_its_buttons_map_by_bit(tmp_path):
    """Issue 48: a SpaceMouse that goes away while the operator drives is an e-stop (nobody drives any more), named
    in the log; the node waits for it to return and reads it again. A SpaceMouse Pro's further buttons map by bit."""
    rclpy = require("rclpy")
    rclpy.init()
    watcher = TeleopWatcher(rclpy)
    fifo, node = spacemouse_node(tmp_path, "teleop_device.spacemouse_buttons={close:0,open:1,takeover:2}")
    try:
        with open(fifo, "wb", buffering=0) as device:
            hid_report(device, bytes([3, 0b100, 0]))  # the take-over button, pressed ...
            hid_report(device, bytes([3, 0, 0]))  # ... and released: one toggle
            hid_report(device, bytes([1]) + struct.pack("<6h", 200, 0, 0, 0, 0, 0))  # the operator drives
            watcher.wait_for(lambda _: watcher.twists and watcher.twists[-1][0] > 0.5, 30, "the operator's motion")
            watcher.wait_for(lambda _: watcher.switches and watcher.switches[-1], 10, "take-over from bit 2")
            assert not watcher.estops
        # unplugged: the writer is gone
        watcher.wait_for(lambda _: watcher.estops == [True], 20, "an e-stop when the SpaceMouse goes away")
        watcher.wait_for(lambda _: watcher.twists[-1] == [0, 0, 0] and not watcher.switches[-1], 10, "no motion")
        with open(fifo, "wb", buffering=0) as device:  # plugged in again: read again, no new e-stop
            hid_report(device, bytes([1]) + struct.pack("<6h", 0, 350, 0, 0, 0, 0))
            watcher.wait_for(lambda _: watcher.twists[-1][1] < -0.9, 30, "the returned SpaceMouse's motion")
            hid_report(device, bytes([1]) + struct.pack("<6h", 0, 0, 0, 0, 0, 0))  # the puck released
            watcher.wait_for(lambda _: watcher.twists[-1] == [0, 0, 0], 10, "the released puck")
        watcher.spin(1.5)
        assert watcher.estops == [True]  # it went away again with nobody driving: no second e-stop
    finally:
        stop_processes([node])
        watcher.node.destroy_node()
        rclpy.shutdown()
    output, _ = node.communicate(timeout=30)
    assert f"teleop device {fifo} went away during a take-over: e-stop" in output


def test_a_missing_spacemouse_is_named_with_what_is_present(tmp_path):
    require("rclpy")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "robot_rl.ros.nodes.teleop_node",
            "teleop_device.kind=spacemouse",
            f"teleop_device.spacemouse_device={tmp_path / 'hidraw9'}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "hidraw9" in result.stderr
    assert "SpaceMouse (hidraw) device; present:" in result.stderr


def test_robot_configs_remap_topics_set_the_safety_rate_and_add_the_bridge():
    from robot_rl.cli.graph import graph_nodes
    from robot_rl.core.composed_config import group_options, load_config

    assert group_options("robot") == ["fr3", "panda", "ur5e"]
    nodes = {n.name: n for n in graph_nodes(load_config(["graph=real_train", "robot=ur5e"]))}
    assert nodes["bridge"].module == "robot_rl.ros.nodes.servo_bridge_node" and nodes["bridge"].respawn
    actor = nodes["actor"].command(["task=pick_cube"])
    assert actor[actor.index("--ros-args") + 1 :][:2] == [
        "-r",
        "franka_robot_state_broadcaster/current_pose:=tcp_pose_broadcaster/pose",
    ]
    assert nodes["safety"].args == ["--rate-hz", "500"] and nodes["safety"].hydra  # its limits: robot.limits
    assert load_config(["robot=ur5e"]).robot.limits.state_timeout == 0.02
    franka = load_config(["graph=real_train", "robot=fr3"])
    assert list(franka.ros.gripper_joints) == ["fr3_finger_joint1", "fr3_finger_joint2"]
    nodes = {n.name: n for n in graph_nodes(franka)}
    assert "bridge" not in nodes
    assert "rl/equilibrium_pose:=cartesian_impedance_controller/equilibrium_pose" in nodes["safety"].command([])


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_teleop_servo_bridge_and_home_reset_stop_cleanly_on_a_signal(tmp_path, stop):
    rclpy = require("rclpy")
    from std_srvs.srv import SetBool

    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("teleop", "bridge", "reset")}
    processes = {
        "teleop": subprocess.Popen(
            [sys.executable, "-m", "robot_rl.ros.nodes.teleop_node"],
            stdin=subprocess.PIPE,
            stdout=logs["teleop"],
            stderr=subprocess.STDOUT,
        ),
        "bridge": subprocess.Popen(
            [sys.executable, "-m", "robot_rl.ros.nodes.servo_bridge_node"],
            stdout=logs["bridge"],
            stderr=subprocess.STDOUT,
        ),
        "reset": subprocess.Popen(
            [sys.executable, "-m", "robot_rl.ros.nodes.home_reset_node", "reset.timeout=60"],
            stdout=logs["reset"],
            stderr=subprocess.STDOUT,
        ),
    }
    rclpy.init()
    node = rclpy.create_node("robot_rl_test_signals")
    client = node.create_client(SetBool, "/rl/reset")
    try:
        names = {"robot_rl_teleop", "robot_rl_servo_bridge", "robot_rl_home_reset"}
        end = time.monotonic() + 90
        while not names <= set(node.get_node_names()) and time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
        assert names <= set(node.get_node_names()), node.get_node_names()
        assert client.wait_for_service(timeout_sec=30)
        future = client.call_async(SetBool.Request(data=False))  # a reset in flight: no pose comes, it waits
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
        for process in processes.values():
            process.send_signal(stop)
        stopped = time.monotonic()
        codes = {name: process.wait(timeout=10) for name, process in processes.items()}
        assert time.monotonic() - stopped < 6.0 and codes == {name: 0 for name in processes}, codes
        assert not future.done() or not future.result().success
        assert "reset: the node is shutting down" in (tmp_path / "reset.log").read_text()  # gave up, did not hang
        for name in processes:
            output = (tmp_path / f"{name}.log").read_text()
            assert "Traceback" not in output and "terminate called" not in output, f"{name}: {output[-2000:]}"
    finally:
        stop_processes(list(processes.values()))
        for log in logs.values():
            log.close()
        node.destroy_node()
        rclpy.shutdown()


@pytest.mark.slow
def test_the_operator_stops_and_releases_the_arm_from_the_teleop_node():
    """x on the teleop keyboard latches the safety node's e-stop; z (the operator's reset) releases it."""
    rclpy = require("rclpy")
    from std_msgs.msg import UInt32

    from robot_rl.safety import Violation

    processes = [
        subprocess.Popen(sim_robot()),
        subprocess.Popen([sys.executable, "-m", "robot_rl.ros.safety.safety_node", "robot.limits.state_timeout=0.05"]),
    ]
    teleop = subprocess.Popen([sys.executable, "-m", "robot_rl.ros.nodes.teleop_node"], stdin=subprocess.PIPE)
    rclpy.init()
    watcher = TeleopWatcher(rclpy)
    flags: list[int] = []
    watcher.node.create_subscription(UInt32, "/rl/safety_flags", lambda m: flags.append(m.data), 10)
    try:
        watcher.wait_for(lambda _: len(flags) > 20 and watcher.twists, 120, "safety flags and teleop")
        assert not flags[-1] & Violation.ESTOP

        def press_until(key: bytes, done, what: str) -> None:
            """Press ``key`` every 0.5 s until ``done()``: a press before DDS matched the safety node's
            subscription to the teleop node's publisher is lost, as an operator's first press would be."""
            for _ in range(40):
                teleop.stdin.write(key)
                teleop.stdin.flush()
                watcher.spin(0.5)
                if done():
                    return
            raise AssertionError(f"{what}: not within 20 s; last flags {flags[-1]}")

        press_until(b"x", lambda: flags[-1] & Violation.ESTOP, "the e-stop from the x key")
        watcher.spin(0.5)
        assert flags[-1] & Violation.ESTOP  # latched
        press_until(b"z", lambda: not flags[-1] & Violation.ESTOP, "the operator's reset from the z key")
    finally:
        tear_down(rclpy, watcher.node, processes + [teleop])


@pytest.mark.parametrize("graph", [["graph=sim_train"], ["graph=collect_demos", "graph.with_sim=true"]])
def test_a_sim_robot_that_dies_ends_the_launch(tmp_path, graph):
    """The sim robot is the rehearsal's arm: when it exits, the launch stops the graph with its code. It did not
    (only the actor was required), so the actor waited for its streams and the launch hung until killed. The
    graph's own node entries run, each with a stand-in module: the sim robot exits with 3, the others wait."""
    exits = "import sys, time\ntime.sleep(0.5)\nsys.exit(3)\n"
    code, log = run_stand_ins(tmp_path, {"sim_robot": exits}, required_after=60.0, graph=graph, timeout=30.0)
    assert code == 3, log
    assert "sim_robot exited with code 3; stopping the graph" in log


@pytest.mark.parametrize(
    "graph, overrides, key",
    [
        ("real_train", ["classifier.out={tmp}/missing/clf.pt"], "classifier.out"),
        ("collect_demos", ["teleop_device.kind=spacemouse", "teleop_device.spacemouse_device={tmp}/hidraw9"], None),
        ("real_train", ["teleop_device.kind=joystick", "teleop_device.device={tmp}/js7"], "teleop_device.device"),
    ],
)
def test_a_missing_file_or_device_is_refused_before_any_node_starts_or_a_folder_is_made(
    tmp_path, monkeypatch, capsys, graph, overrides, key
):
    """Issue 73 item 3: with a missing classifier file the graph started, the reward node exited 2, and the graph ran
    on for 42 s and left a run folder that then blocked the name; the teleop node's error named
    ``teleop_device.device`` where the user had set ``teleop_device.spacemouse_device``. The launch refuses in one
    line naming the key the user set, before any node starts or a folder is made."""
    from robot_rl.cli import graph as graphs
    from robot_rl.cli.main import main

    started = []
    monkeypatch.setattr(graphs.Launcher, "run", lambda self: started.append(self) or 0)
    given = [each.replace("{tmp}", str(tmp_path)) for each in overrides]
    key = key or "teleop_device.spacemouse_device"
    if graph == "real_train" and key != "classifier.out":  # a classifier that is there: the device is what is missing
        from robot_rl.policies.reward_classifier import RewardClassifier, RewardClassifierConfig

        RewardClassifier({"front": (16, 16, 3)}, RewardClassifierConfig()).save(tmp_path / "clf.pt")
        given.append(f"classifier.out={tmp_path / 'clf.pt'}")
    run = tmp_path / "run"
    assert main(["launch", graph, *given, f"train.run_dir={run}", f"ros.recorder.store={tmp_path / 'demos.zarr'}"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"robot-rl: error: {key}="), lines
    assert started == [] and not run.exists() and not (tmp_path / "demos.zarr").exists()


def test_a_console_port_another_session_holds_is_refused_before_any_node_starts(tmp_path, monkeypatch, capsys):
    """Two sessions' consoles on one port: the second's console node exited 2 once the graph was up, which stopped
    that launch (two tests at once, CI). The launch refuses the taken port in one line before any node starts."""
    import socket

    from robot_rl.cli import graph as graphs
    from robot_rl.cli.main import main

    started = []
    monkeypatch.setattr(graphs.Launcher, "run", lambda self: started.append(self) or 0)
    with socket.socket() as other_session:
        other_session.bind(("127.0.0.1", 0))
        other_session.listen()
        port = other_session.getsockname()[1]
        store = tmp_path / "demos.zarr"
        assert main(["launch", "collect_demos", f"console.port={port}", f"ros.recorder.store={store}"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"robot-rl: error: console.port={port} is not allowed: expected a port free"
    ), lines
    assert started == [] and not store.exists()
    assert main(["launch", "collect_demos", f"console.port={port}", f"ros.recorder.store={store}"]) == 0  # freed
    assert len(started) == 1


def test_a_session_rewarded_by_another_node_has_no_reward_node_and_needs_no_classifier(tmp_path, monkeypatch):
    """``graph.reward=false``: the emulated cell's ground truth (or another node) publishes the reward; the graph has no
    reward node, and the launch asks for no classifier file."""
    from robot_rl.cli import graph as graphs
    from robot_rl.cli.main import main
    from robot_rl.core.composed_config import load_config

    started = []
    monkeypatch.setattr(graphs.Launcher, "run", lambda self: started.append(self) or 0)
    names = {node.name for node in graphs.graph_nodes(load_config(["graph=real_train", "graph.reward=false"]))}
    assert "reward" not in names and "actor" in names
    missing = f"classifier.out={tmp_path / 'missing.pt'}"
    assert main(["launch", "real_train", "graph.reward=false", missing, f"train.run_dir={tmp_path / 'run'}"]) == 0
    assert len(started) == 1 and "reward" not in {node.name for node in started[0].nodes}


def run_stand_ins(
    tmp_path,
    modules: dict[str, str],
    required_after: float = 4.0,
    graph: list[str] | None = None,
    timeout: float = 60.0,
) -> tuple[int | None, str]:
    """The node entries of ``graph`` (default sim_train), each running a stand-in: ``modules`` maps node names to
    Python source, the actor exits 0 after ``required_after`` s and the others wait. Returns the launch's exit code
    (None: it had not ended within ``timeout`` s and was stopped) and its log."""
    import threading

    from robot_rl.cli.graph import Launcher, graph_nodes
    from robot_rl.core.composed_config import load_config

    waits = "import time\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    pass\n"
    sources = {"waits": waits, "actor": f"import time\ntime.sleep({required_after})\n", **modules}
    for name, source in sources.items():
        (tmp_path / f"{name}.py").write_text(source)
    nodes = graph_nodes(load_config(graph or ["graph=sim_train"]))
    for node in nodes:
        node.module, node.hydra, node.args = (node.name if node.name in sources else "waits"), False, []
    result: list[int] = []
    with open(tmp_path / "launch.log", "w") as log:
        launcher = Launcher(nodes, [], grace=5.0, out=log, env={"PYTHONPATH": str(tmp_path)})
        run = threading.Thread(target=lambda: result.append(launcher.run()))
        run.start()
        run.join(timeout=timeout)
        if run.is_alive():  # a launch that hangs: stop it, then the caller's assertions fail
            launcher.stop()
            run.join()
    assert all(process.poll() is not None for process in launcher.processes.values())
    return (result or [None])[0], (tmp_path / "launch.log").read_text()


def test_a_node_that_dies_is_restarted_a_bounded_number_of_times_with_a_back_off(tmp_path, monkeypatch):
    """Issue 71 item 2: a node killed mid-session stayed dead (only the safety node respawned) and the session waited
    for a person. A node that dies is started again, after a back-off, at most RESTARTS times, each said in the log;
    one that keeps dying is then left down, saying so; the graph goes on to its end."""
    from robot_rl.cli import graph

    monkeypatch.setattr(graph, "RESTART_BACKOFF", 0.2)
    counter = tmp_path / "learner_starts"
    learner = (  # dies twice (a crash, then kill -9), then runs
        "import os, pathlib, signal, sys, time\n"
        f"path = pathlib.Path({str(counter)!r})\n"
        "starts = int(path.read_text()) + 1 if path.exists() else 1\n"
        "path.write_text(str(starts))\n"
        "if starts == 1:\n    sys.exit(1)\n"
        "if starts == 2:\n    os.kill(os.getpid(), signal.SIGKILL)\n"
        "try:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    pass\n"
    )
    code, log = run_stand_ins(tmp_path, {"learner": learner, "recorder": "import sys\nsys.exit(1)\n"}, 6.0)
    assert code == 0 and counter.read_text() == "3", log
    assert "learner exited with code 1; restarting it in 0.2 s (restart 1 of 3)" in log
    assert "learner exited with code -9; restarting it in 0.4 s (restart 2 of 3)" in log
    assert log.count("started recorder") == 1 + graph.RESTARTS, log
    assert f"recorder exited with code 1 after {graph.RESTARTS} restarts; not starting it again" in log
    assert "actor exited with code 0; stopping the graph" in log


def test_a_node_that_refuses_its_input_stops_the_launch(tmp_path):
    """Issue 73 item 3: the reward node exited 2 at its start (a missing classifier file) and the graph ran on for 42 s
    without a reward. A node's exit 2 (bad input, one line on stderr) stops the launch with that code."""
    code, log = run_stand_ins(tmp_path, {"recorder": "import sys, time\ntime.sleep(0.5)\nsys.exit(2)\n"}, 30.0)
    assert code == 2 and "recorder refused its input (exit code 2); stopping the graph" in log, log
