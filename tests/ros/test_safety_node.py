"""Fault tests of the fast-loop safety node with real processes over DDS.

The node runs in its own process; an actor process publishes targets; this test process plays
the arm (publishes the measured pose) and the operator (e-stop reset), and watches the node's output.
Foreign nodes (not allowed to move the arm) are separate processes too.
"""

import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tests.conftest import require
from tests.ros.graph_helpers import stop_processes

ACTOR = textwrap.dedent(
    """
    import rclpy
    from geometry_msgs.msg import PoseStamped
    rclpy.init()
    node = rclpy.create_node("robot_rl_test_actor")
    pub = node.create_publisher(PoseStamped, "/rl/action", 1)
    def tick():
        msg = PoseStamped()
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = 0.48, 0.0, 0.2
        msg.pose.orientation.x, msg.pose.orientation.w = 1.0, 0.0   # tool pointing down
        pub.publish(msg)
    node.create_timer(0.05, tick)
    rclpy.spin(node)
    """
)
# a node the safety node was not told about: commands a tool pointing up (180 deg off the cone axis), 15 cm away
INTRUDER = textwrap.dedent(
    """
    import sys
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from rclpy.executors import ExternalShutdownException
    rclpy.init()
    node = rclpy.create_node("robot_rl_intruder")
    pub = node.create_publisher(PoseStamped, sys.argv[1], 1)
    msg = PoseStamped()
    msg.header.frame_id = "intruder"
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = 0.6, 0.0, 0.2
    msg.pose.orientation.w = 1.0
    node.create_timer(0.01, lambda: pub.publish(msg))
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    """
)
HOME = np.array([0.45, 0.0, 0.2])
STALE_COMMAND, STALE_STATE, ESTOP, TRANSLATION_STEP = 2, 4, 8, 128  # robot_rl.safety.Violation bits
FOREIGN_PUBLISHER = 1024
SAFETY = [
    sys.executable,
    "-m",
    "robot_rl.ros.safety.safety_node",
    "--rate-hz",
    "200",
    "robot.limits.state_timeout=0.05",
    "robot.limits.max_speed=0.4",  # m/s: 2 mm per tick at 200 Hz
    "--senders",
    "robot_rl_test_actor",
    "--operators",
    "robot_rl_test_operator",
]


class Arm:
    """Publishes the measured pose at 200 Hz and records the node's output with receive times. Its executor spins
    the other nodes a test adds too."""

    def __init__(self, rclpy):
        from geometry_msgs.msg import PoseStamped
        from rclpy.executors import SingleThreadedExecutor
        from std_msgs.msg import Bool, UInt32

        self.node = rclpy.create_node("robot_rl_test_arm")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.pose_pub = self.node.create_publisher(PoseStamped, "/franka_robot_state_broadcaster/current_pose", 1)
        self.estop_pub = self.node.create_publisher(Bool, "/rl/estop", 10)
        self.messages = {"Bool": Bool}
        self.streaming = True
        self.outputs: list[tuple[float, float, int]] = []  # (time, commanded x, flags)
        self.positions: list[list[float]] = []  # every commanded position of the safety node
        self._x = None
        self.node.create_subscription(PoseStamped, "/rl/equilibrium_pose", self._on_pose, 10)
        self.node.create_subscription(UInt32, "/rl/safety_flags", self._on_flags, 10)
        self.node.create_timer(0.005, self._publish_state)
        self._pose = PoseStamped()
        self._pose.pose.position.x, self._pose.pose.position.y, self._pose.pose.position.z = HOME
        self._pose.pose.orientation.x, self._pose.pose.orientation.w = 1.0, 0.0

    def _publish_state(self):
        if self.streaming:
            self.pose_pub.publish(self._pose)

    def _on_pose(self, msg):
        if msg.header.frame_id != "intruder":  # what the intruder writes to the arm's topic is not the node's output
            p = msg.pose.position
            self._x = p.x
            self.positions.append([p.x, p.y, p.z, msg.pose.orientation.w])

    def _on_flags(self, msg):
        if self._x is not None:
            self.outputs.append((time.monotonic(), self._x, msg.data))

    def spin(self, seconds: float):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.002)

    def wait_for(self, condition, timeout: float) -> float:
        """Spin until ``condition(x, flags)`` holds for the newest output; returns when (monotonic)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.002)
            if self.outputs and condition(*self.outputs[-1][1:]):
                return self.outputs[-1][0]
        raise AssertionError(f"not reached within {timeout} s; last outputs {self.outputs[-3:]}")

    def until(self, condition, timeout: float, what: str) -> None:
        """Spin until ``condition()`` is true."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.002)
            if condition():
                return
        raise AssertionError(f"{what}: not within {timeout} s")

    def next_outputs(self, count: int, timeout: float = 60.0) -> list[tuple[float, int]]:
        """The next ``count`` outputs, (x, flags) each, however long the node takes to send them (at most ``timeout``
        s): a window counted in outputs. One in wall time came back empty when a loaded machine stalled the node for
        longer than the window (39.8 ticks/s for a second, against 200)."""
        start = len(self.outputs)
        self.until(lambda: len(self.outputs) >= start + count, timeout, f"{count} outputs more")
        return [(x, flags) for _, x, flags in self.outputs[start : start + count]]

    def close(self):
        self.executor.shutdown()
        self.node.destroy_node()


class ResetSender:
    """A node that sends e-stop resets (``robot_rl_test_operator`` is the operator the node is told about)."""

    def __init__(self, rclpy, name: str):
        from std_msgs.msg import Empty

        self.node = rclpy.create_node(name)
        self.pub = self.node.create_publisher(Empty, "/rl/estop_reset", 10)
        self.message = Empty

    def reset(self):
        self.pub.publish(self.message())


def start(command: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(command, stdout=log.open("a"), stderr=subprocess.STDOUT)


def wait_for_text(path: Path, text: str, timeout: float) -> str:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if text in path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {path.name} within {timeout} s:\n{path.read_text()[-2000:]}")


def held_until_the_operators_reset(arm: Arm, operator: ResetSender) -> None:
    """The next 100 outputs hold the arm where it is (flagged e-stop) while the actor commands 3 cm ahead; the
    operator's reset lets the actor's command through."""
    held = arm.next_outputs(100)
    assert all(flags == ESTOP and abs(x - HOME[0]) < 1e-6 for x, flags in held), held[-3:]
    operator.reset()
    arm.wait_for(lambda x, flags: x > 0.47 and flags == 0, timeout=10)


@pytest.mark.slow
def test_actor_death_stale_state_and_estop_hold_the_arm(tmp_path):
    rclpy = require("rclpy")
    safety = start(SAFETY, tmp_path / "safety.log")
    actor = subprocess.Popen([sys.executable, "-c", ACTOR])
    rclpy.init()
    arm = Arm(rclpy)
    operator = ResetSender(rclpy, "robot_rl_test_operator")
    try:
        # the actor's target (3 cm ahead) is approached in limited steps, flagged, then reached
        arm.wait_for(lambda x, flags: x > 0.479 and flags == 0, timeout=30)
        assert any(flags & TRANSLATION_STEP for _, _, flags in arm.outputs)
        assert np.diff([x for _, x, _ in arm.outputs]).max() < 0.01  # never one jump to the target

        # actor killed -> after the 100 ms command timeout the node holds the measured pose. Seen from this process,
        # on 2 loaded cores: 0.435 s once, so the bound here is 20 timeouts (a timeout read in ms instead of s fails
        # it); the exact rule, 100 ms on the node's clock, is tests/safety/test_hard_limits.py's
        actor.kill()
        killed = time.monotonic()
        held = arm.wait_for(lambda x, flags: flags & STALE_COMMAND and abs(x - HOME[0]) < 1e-6, timeout=30)
        assert held - killed < 2.0, f"hold after {held - killed:.3f} s"

        # the state stream stops -> hold the last command, flagged (state timeout 50 ms; the same margin)
        arm.streaming = False
        stopped = time.monotonic()
        stale = arm.wait_for(lambda x, flags: flags & STALE_STATE, timeout=30)
        assert stale - stopped < 1.0, f"stale state flagged after {stale - stopped:.3f} s"
        # a state that stays away is said in the log (the arm's driver, or the emulated cell, died: cell_faults.json's
        # cell kill held the arm with no line of the safety node's own), and so is its return
        said = tmp_path / "safety.log"
        arm.until(lambda: "no arm state for" in said.read_text(), 30, "the state's loss said")
        arm.streaming = True
        arm.wait_for(lambda x, flags: not flags & STALE_STATE, timeout=2)
        arm.until(lambda: "the arm's state is back" in said.read_text(), 30, "the state's return said")

        # e-stop latches: even with a live actor the arm holds until the operator's reset
        actor = subprocess.Popen([sys.executable, "-c", ACTOR])
        arm.wait_for(lambda x, flags: x > 0.47, timeout=30)
        arm.estop_pub.publish(arm.messages["Bool"](data=True))
        arm.wait_for(lambda x, flags: flags == ESTOP and abs(x - HOME[0]) < 1e-6, timeout=2)
        held_until_the_operators_reset(arm, operator)
    finally:
        arm.close()
        rclpy.shutdown()
        stop_processes([actor, safety])


@pytest.mark.slow
def test_a_foreign_publisher_on_the_arm_command_topic_latches_the_hold_and_is_named(tmp_path):
    rclpy = require("rclpy")
    log = tmp_path / "safety.log"
    safety = start(SAFETY, log)
    actor = subprocess.Popen([sys.executable, "-c", ACTOR])
    rclpy.init()
    arm = Arm(rclpy)
    intruder = None
    try:
        arm.wait_for(lambda x, flags: x > 0.479 and flags == 0, timeout=30)
        intruder = start([sys.executable, "-c", INTRUDER, "/rl/equilibrium_pose"], tmp_path / "intruder.log")
        # the node holds the measured pose (not the actor's target), latched, and says who it was
        arm.wait_for(lambda x, flags: flags == ESTOP | FOREIGN_PUBLISHER and abs(x - HOME[0]) < 1e-6, timeout=30)
        text = wait_for_text(log, "foreign publisher: /robot_rl_intruder", timeout=5)
        assert "on /rl/equilibrium_pose" in text
        arm.spin(0.5)
        assert all(flags == ESTOP | FOREIGN_PUBLISHER and abs(x - HOME[0]) < 1e-6 for x, flags in arm.next_outputs(80))

        # the intruder leaves: the hold stays latched (the actor is still live) until an operator resets it
        intruder.send_signal(signal.SIGINT)
        intruder.wait(timeout=10)
        arm.wait_for(lambda x, flags: flags == ESTOP, timeout=10)
        arm.spin(0.5)
        assert all(flags == ESTOP and abs(x - HOME[0]) < 1e-6 for x, flags in arm.next_outputs(80))
    finally:
        arm.close()
        rclpy.shutdown()
        stop_processes([process for process in (intruder, actor, safety) if process is not None])


@pytest.mark.slow
def test_a_foreign_sender_of_targets_never_moves_the_arm_and_only_the_operator_resets(tmp_path):
    rclpy = require("rclpy")
    log = tmp_path / "safety.log"
    safety = start(SAFETY, log)
    rclpy.init()
    arm = Arm(rclpy)
    operator = ResetSender(rclpy, "robot_rl_test_operator")
    intruder = None
    try:
        arm.wait_for(lambda x, flags: flags == STALE_COMMAND, timeout=30)  # up, holding: no actor yet
        intruder = start([sys.executable, "-c", INTRUDER, "/rl/action"], tmp_path / "intruder.log")
        arm.wait_for(lambda x, flags: flags == ESTOP | FOREIGN_PUBLISHER, timeout=30)
        assert "foreign publisher: /robot_rl_intruder" in wait_for_text(log, "on /rl/action", timeout=5)

        # the operator's reset is refused while the intruder is still there
        arm.spin(0.3)
        operator.reset()
        arm.spin(1.0)
        assert all(flags == ESTOP | FOREIGN_PUBLISHER for _, flags in arm.next_outputs(100))
        wait_for_text(log, "e-stop reset refused: foreign publisher(s) still present", timeout=5)

        intruder.send_signal(signal.SIGINT)
        intruder.wait(timeout=10)
        arm.wait_for(lambda x, flags: flags == ESTOP, timeout=10)

        # a reset from a node that is not an operator is ignored (and the operator's too while it publishes there)
        stranger = ResetSender(rclpy, "robot_rl_test_stranger")
        arm.spin(0.5)
        stranger.reset()
        operator.reset()
        arm.spin(1.0)
        assert all(flags == ESTOP for _, flags in arm.next_outputs(100))
        stranger.node.destroy_node()

        # the operator's reset clears the latch once only operators publish there
        def released():
            operator.reset()
            arm.spin(0.2)
            return arm.outputs[-1][2] == STALE_COMMAND

        arm.until(released, timeout=10, what="the operator's reset")
        wait_for_text(log, "e-stop reset by /robot_rl_test_operator", timeout=5)
        # the intruder's targets never reached the arm: every command held the measured pose, tool down
        assert arm.positions and np.allclose(arm.positions, [[*HOME, 0.0]], atol=1e-6)
    finally:
        arm.close()
        rclpy.shutdown()
        stop_processes([process for process in (intruder, safety) if process is not None])


def test_bad_inputs_are_dropped_counted_and_never_reach_the_arm():
    rclpy = require("rclpy")
    from geometry_msgs.msg import PoseStamped, WrenchStamped
    from std_msgs.msg import Float64

    from robot_rl.ros.safety.safety_node import SafetyNode
    from robot_rl.safety import SafetyLimits

    rclpy.init()
    arm = Arm(rclpy)  # it also plays the actor: the node is told to take its targets
    node = rclpy.create_node("robot_rl_safety")
    arm.executor.add_node(node)
    action_pub = arm.node.create_publisher(PoseStamped, "/rl/action", 10)
    gripper_pub = arm.node.create_publisher(Float64, "/rl/gripper", 10)
    wrench_pub = arm.node.create_publisher(
        WrenchStamped, "/franka_robot_state_broadcaster/external_wrench_in_base_frame", 10
    )

    def pose(x=0.47, y=0.0, quaternion=(1.0, 0.0, 0.0, 0.0), frame_id="base"):
        msg = PoseStamped()
        msg.header.frame_id = frame_id
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = x, y, 0.2
        o = msg.pose.orientation
        o.x, o.y, o.z, o.w = quaternion
        return msg

    def wrench(fx):
        msg = WrenchStamped()
        msg.wrench.force.x = fx
        return msg

    bad = {
        "/rl/action": (
            action_pub,
            [
                pose(x=math.nan),
                pose(y=math.inf),
                pose(quaternion=(0.5, 0.0, 0.0, 0.0)),
                pose(quaternion=(math.nan, 0.0, 0.0, 1.0)),
                pose(frame_id="b" * 100_000),
            ],
        ),
        "/rl/gripper": (gripper_pub, [Float64(data=math.nan), Float64(data=math.inf), Float64(data=1.5)]),
        "/franka_robot_state_broadcaster/current_pose": (arm.pose_pub, [pose(x=math.nan), pose(frame_id="b" * 10_000)]),
        "/franka_robot_state_broadcaster/external_wrench_in_base_frame": (wrench_pub, [wrench(math.nan)]),
    }
    try:
        safety = SafetyNode(node, SafetyLimits(state_timeout=0.05), 200.0, senders=["robot_rl_test_arm"])
        arm.wait_for(lambda x, flags: flags == STALE_COMMAND, timeout=10)
        arm.streaming = False  # the bad measured poses are not overwritten by good ones before the node reads them
        for topic, (publisher, messages) in bad.items():
            for count, message in enumerate(messages, start=1):
                publisher.publish(message)
                arm.until(
                    lambda topic=topic, count=count: safety.guard.dropped.get(topic, 0) == count,
                    timeout=5,
                    what=f"{topic} drop {count}",
                )
        arm.streaming = True
        arm.spin(0.5)
        assert {topic: safety.guard.dropped.get(topic) for topic in bad} == {t: len(m) for t, (_, m) in bad.items()}
        assert np.isfinite(arm.positions).all() and np.allclose(np.array(arm.positions)[:, 0], HOME[0], atol=1e-6)
        assert safety.gripper == -1.0

        # the pipeline is alive: good inputs still move the arm
        def moved():
            action_pub.publish(pose())
            gripper_pub.publish(Float64(data=1.0))
            arm.spin(0.05)
            return arm.outputs[-1][1] > 0.469

        arm.until(moved, timeout=10, what="the good target reached")
        assert np.isfinite(arm.positions).all() and safety.gripper == 1.0
    finally:
        arm.close()
        node.destroy_node()
        rclpy.shutdown()


def test_the_status_says_when_the_last_command_came_and_when_the_hold_began():
    """A monitor judges the hold by the node's own times (a loaded process may read a status late): the status
    gives the last tick, the newest command and the first tick of the hold, on the ticks' clock."""
    rclpy = require("rclpy")
    import json

    from robot_rl.ros.safety.safety_node import SafetyNode
    from robot_rl.safety import ArmState, Command, SafetyLimits

    rclpy.init()
    node = rclpy.create_node("robot_rl_safety")
    try:
        limits = SafetyLimits(command_timeout=0.25, state_timeout=1.0)
        safety = SafetyNode(node, limits, 100.0, tick_timer=False)
        sent: list[dict] = []
        safety.out.status_pub.publish = lambda msg: sent.append(json.loads(msg.data))
        home = np.array(HOME)
        safety.arm = ArmState(home, np.diag([1.0, -1.0, -1.0]), stamp=10.0)
        safety.command = Command(home + [0.01, 0, 0], np.diag([1.0, -1.0, -1.0]), -1.0, 10.0)  # received at 10 s
        for k in range(60):  # ticks at 100 Hz from 10 s; the arm's state stays fresh
            now = 10.0 + k / 100
            safety.arm.stamp = now
            safety.tick(now=now, publish=False)
            if k in (20, 59):
                safety.publish_status()
        moving, held = sent
        assert (moving["ticked"], moving["command"], moving["holding_since"]) == (pytest.approx(10.2), 10.0, None)
        assert not moving["flags"] & STALE_COMMAND
        # the first tick past the command timeout holds, and the hold goes on
        assert (held["ticked"], held["command"]) == (pytest.approx(10.59), 10.0)
        assert held["holding_since"] == pytest.approx(10.26) and held["flags"] & STALE_COMMAND
    finally:
        node.destroy_node()
        rclpy.shutdown()


def test_publisher_watch_waits_for_an_unnamed_node_then_counts_it_foreign():
    require("rclpy")
    from robot_rl.ros.plumbing.senders import UNNAMED, PublisherWatch

    def endpoint(name, gid):
        return SimpleNamespace(node_name=name, node_namespace="/", endpoint_gid=list(gid))

    graph = {
        "/rl/equilibrium_pose": [endpoint("robot_rl_safety", b"own")],
        "/rl/action": [endpoint("robot_rl_actor", b"act"), endpoint(UNNAMED, b"new")],
    }
    node = SimpleNamespace(get_publishers_info_by_topic=lambda topic: graph[topic])
    watch = PublisherWatch(
        node,
        {"/rl/equilibrium_pose": frozenset({b"own"})},
        {"/rl/action": frozenset({"robot_rl_actor"})},
        discovery_grace=1.0,
    )
    assert watch.check(now=10.0) == [] and watch.trusted["/rl/action"] == {b"act"}
    assert watch.check(now=10.9) == []  # not named yet: maybe the actor's second publisher, not trusted either
    assert watch.pending["/rl/action"] == {b"new"} and watch.trusted["/rl/action"] == {b"act"}
    graph["/rl/action"][1] = endpoint("robot_rl_actor", b"new")
    assert watch.check(now=11.0) == [] and watch.trusted["/rl/action"] == {b"act", b"new"}
    assert watch.pending["/rl/action"] == set()

    graph["/rl/action"].append(endpoint(UNNAMED, b"raw"))  # e.g. a bare DDS participant: never named
    assert watch.check(now=12.0) == []
    assert watch.check(now=13.1) == [f"/{UNNAMED} (gid {b'raw'.hex()}) on /rl/action"]
    assert watch.check(now=13.2) == []  # reported once, still foreign
    assert list(watch.foreign) == [b"raw"]

    # on the arm's topic any publisher but the node's own is foreign, whatever its name, at once
    graph["/rl/equilibrium_pose"].append(endpoint("robot_rl_safety", b"twin"))
    assert watch.check(now=13.3) == [f"/robot_rl_safety (gid {b'twin'.hex()}) on /rl/equilibrium_pose"]
    graph["/rl/action"].pop()
    graph["/rl/equilibrium_pose"].pop()
    assert watch.check(now=13.4) == [] and watch.foreign == {}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_node_stops_cleanly_on_a_signal(signum, tmp_path):
    rclpy = require("rclpy")
    log = tmp_path / "safety.log"
    safety = start(SAFETY, log)
    rclpy.init()
    arm = Arm(rclpy)
    try:
        arm.wait_for(lambda x, flags: True, timeout=30)  # ticking
        sent = time.monotonic()
        safety.send_signal(signum)
        safety.wait(timeout=30)
        # it stops promptly, not after a launch's grace runs out (60 s); generous for a loaded 2-core machine, where
        # the old 3 s bound failed now and then (the node's own stop takes well under a second alone)
        assert time.monotonic() - sent < 15.0
        assert safety.returncode == 0, log.read_text()[-2000:]
        assert "Traceback" not in log.read_text() and "terminate called" not in log.read_text()
    finally:
        arm.close()
        rclpy.shutdown()
        stop_processes([safety])


@pytest.mark.slow
def test_a_safety_node_the_launch_restarted_holds_the_arm_until_the_operator_releases_it(tmp_path):
    """benchmarks/cell_faults.py: the safety node killed mid-session and respawned by the launch obeyed the actor
    again at once (issue 71: it must come back holding the arm until the operator releases it). Started again after
    a death (the launch's ROBOT_RL_RESTART), it holds, latched as an e-stop, however the actor commands, and says
    why; the operator's reset lets the actor's commands through."""
    rclpy = require("rclpy")
    from robot_rl.ros.plumbing.node_main import RESTART_ENV

    log = tmp_path / "safety.log"
    safety = subprocess.Popen(
        SAFETY, stdout=log.open("a"), stderr=subprocess.STDOUT, env={**os.environ, RESTART_ENV: "1"}
    )
    actor = subprocess.Popen([sys.executable, "-c", ACTOR])
    rclpy.init()
    arm = Arm(rclpy)
    operator = ResetSender(rclpy, "robot_rl_test_operator")
    try:
        arm.wait_for(lambda x, flags: flags & ESTOP, timeout=30)
        assert "restarted after it died: holding the arm until the operator releases it" in log.read_text()
        held_until_the_operators_reset(arm, operator)  # old code: it followed the actor at once
    finally:
        arm.close()
        rclpy.shutdown()
        stop_processes([actor, safety])


@pytest.mark.slow
def test_the_safety_node_is_a_lifecycle_node_that_holds_the_arm_until_activated(tmp_path):
    """Started ``--inactive`` (for a lifecycle manager) it holds the measured pose, flagged, though the actor
    commands; activated it obeys; deactivated it holds again; cleaned up it sends nothing."""
    rclpy = require("rclpy")
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState, GetState

    from robot_rl.safety import Violation

    safety = start([*SAFETY, "--inactive"], tmp_path / "safety.log")
    actor = subprocess.Popen([sys.executable, "-c", ACTOR])
    rclpy.init()
    arm = Arm(rclpy)
    get_state = arm.node.create_client(GetState, "/robot_rl_safety/get_state")
    change_state = arm.node.create_client(ChangeState, "/robot_rl_safety/change_state")

    def call(client, request):
        assert client.wait_for_service(timeout_sec=30), client.srv_name
        future = client.call_async(request)
        arm.until(future.done, 10, f"the answer of {client.srv_name}")
        return future.result()

    def state() -> str:
        return call(get_state, GetState.Request()).current_state.label

    def transition(transition_id: int) -> None:
        assert call(change_state, ChangeState.Request(transition=Transition(id=transition_id))).success

    inactive = int(Violation.INACTIVE)
    try:
        arm.wait_for(lambda x, flags: flags & inactive, timeout=30)
        held = arm.next_outputs(200)  # the actor commands 3 cm ahead all along
        assert state() == "inactive"
        assert all(abs(x - HOME[0]) < 1e-6 and flags & inactive for x, flags in held)
        transition(Transition.TRANSITION_ACTIVATE)
        arm.wait_for(lambda x, flags: x > 0.479 and flags == 0, timeout=10)
        assert state() == "active"
        transition(Transition.TRANSITION_DEACTIVATE)
        arm.wait_for(lambda x, flags: flags & inactive and abs(x - HOME[0]) < 1e-6, timeout=5)
        transition(Transition.TRANSITION_CLEANUP)
        arm.spin(0.3)
        sent = len(arm.positions)
        arm.spin(0.5)
        assert len(arm.positions) == sent and state() == "unconfigured"
    finally:
        arm.close()
        rclpy.shutdown()
        stop_processes([safety, actor])


def test_bad_settings_are_named():
    result = subprocess.run(
        [*SAFETY, "robot.limits.command_timeout=-1"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2 and "robot.limits.command_timeout=-1" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_the_sros2_policy_gives_the_arm_and_its_inputs_to_the_nodes_the_safety_node_allows():
    require("rclpy")
    from xml.etree import ElementTree

    from robot_rl.ros.safety.safety_node import DEFAULT_OPERATORS, DEFAULT_SENDERS

    folder = Path(__file__).resolve().parents[2] / "configs" / "sros2"
    ElementTree.parse(folder / "common" / "node.xml")  # well-formed
    publishers: dict[str, set[str]] = {}
    enclaves = ElementTree.parse(folder / "robot_rl.policy.xml").getroot().findall("enclaves/enclave")
    for enclave in enclaves:
        (profile,) = enclave.findall("profiles/profile")
        node = profile.get("node")
        assert enclave.get("path") == "/robot_rl/" + node.removeprefix("robot_rl_").removesuffix("_front")
        for topic in profile.findall("topics[@publish='ALLOW']/topic"):
            publishers.setdefault(topic.text, set()).add(node)
    assert publishers["rl/equilibrium_pose"] == publishers["rl/gripper_command"] == {"robot_rl_safety"}
    assert publishers["rl/action"] == publishers["rl/gripper"] == set(DEFAULT_SENDERS)
    assert publishers["rl/estop_reset"] == set(DEFAULT_OPERATORS)


class GappyStateStream:
    """The arm's state broadcaster at 1 kHz in a thread of its own, on absolute deadlines: ``gaps`` s > 0 drops every
    state in alternate windows of that length (a broadcaster that misses cycles); ``streaming`` False stops it."""

    def __init__(self, node, rate_hz: float = 1000.0):
        from geometry_msgs.msg import PoseStamped

        self.publisher = node.create_publisher(PoseStamped, "/franka_robot_state_broadcaster/current_pose", 10)
        self.pose = PoseStamped()
        self.pose.pose.position.x, self.pose.pose.position.y, self.pose.pose.position.z = HOME
        self.pose.pose.orientation.x, self.pose.pose.orientation.w = 1.0, 0.0
        self.period, self.gaps, self.streaming, self.running = 1.0 / rate_hz, 0.0, True, True
        self.sent = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        start = next_at = time.monotonic()
        while self.running:
            next_at += self.period
            time.sleep(max(next_at - time.monotonic(), 0.0))
            in_gap = self.gaps > 0 and (time.monotonic() - start) % (2 * self.gaps) < self.gaps
            if self.streaming and not in_gap:
                self.publisher.publish(self.pose)
                self.sent += 1

    def close(self):
        self.running = False
        self.thread.join(timeout=5)


@pytest.mark.slow
def test_state_with_5_ms_gaps_at_1_khz_keeps_the_arm_moving_and_an_outage_holds_it(tmp_path):
    """Issue 48 item 6: a Franka's state broadcaster at 1 kHz that misses 5 ms now and then (here every other 5 ms
    window for 3 s) is not an outage: the safety node at 1 kHz with the Franka's ``state_timeout`` (10 ms) flags
    STALE_STATE on no more of its ticks than with the gapless stream beside it (the slack is what a loaded machine
    adds); a real outage (300 ms) holds the arm on nearly every tick. Every tick's flags come from
    ``/rl/safety_ticks``. A node that took a 5 ms gap for an outage (a timeout under 3 ms) fails the first check;
    one that ignored stale state, the second."""
    rclpy = require("rclpy")
    from std_msgs.msg import Float64MultiArray

    safety = start(
        [
            *SAFETY[:3],
            "--rate-hz",
            "1000",
            "robot.limits.state_timeout=0.01",  # robot=fr3's: ten periods of the state broadcaster
            "safety.fast_critic.record_ticks=true",
            "--senders",
            "robot_rl_test_actor",
        ],
        tmp_path / "safety.log",
    )
    actor = subprocess.Popen([sys.executable, "-c", ACTOR])
    rclpy.init()
    node = rclpy.create_node("robot_rl_test_arm")
    ticks: list[tuple[float, int]] = []  # (tick time on the wall clock s, flags) of every tick
    node.create_subscription(Float64MultiArray, "/rl/safety_ticks", lambda m: ticks.extend(rows_time_and_flags(m)), 100)
    stream = GappyStateStream(node)

    def spin(seconds: float) -> tuple[float, float]:
        begin = time.time()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.01)
        return begin, time.time()

    def stale_share(window: tuple[float, float]) -> float:
        inside = [flags for t, flags in ticks if window[0] <= t < window[1]]
        assert len(inside) > 100, f"{len(inside)} ticks in a {window[1] - window[0]:.1f} s window"
        return sum(1 for flags in inside if flags & STALE_STATE) / len(inside)

    try:
        end = time.monotonic() + 60
        while not ticks or not any(flags == 0 for _, flags in ticks[-50:]):  # the actor's target is obeyed
            assert time.monotonic() < end, f"no unflagged tick within 60 s; last {ticks[-3:]}"
            rclpy.spin_once(node, timeout_sec=0.01)
        steady = spin(3.0)
        stream.gaps = 0.005
        gappy = spin(3.0)
        stream.gaps, stream.streaming = 0.0, False
        # an outage of at least 0.3 s, kept until 150 of its ticks past the timeout came in: the node ticked 4 times
        # in 0.25 s once, starved by a loaded CI machine
        outage_start, outage_end = time.time(), time.monotonic() + 30
        outage = spin(0.3)
        while len([t for t, _ in ticks if t >= outage_start + 0.05]) < 150 and time.monotonic() < outage_end:
            outage = (outage_start, spin(0.05)[1])
        stream.streaming = True
        spin(0.5)  # the last batches of ticks
        steady_share, gap_share = stale_share(steady), stale_share(gappy)
        outage_share = stale_share((outage[0] + 0.05, outage[1]))  # past the 10 ms timeout and a slow tick
        print(f"STALE_STATE on {steady_share:.3f} of ticks gapless, {gap_share:.3f} with 5 ms gaps, {outage_share:.3f}")
        # slack: a machine loaded past the CI recipe (two full runs' work on 2 cores) delayed the test's 1 kHz stream
        # past the 10 ms timeout on 0.061 of the ticks; a node timing out under 3 ms flags >= 0.2 (2 of each 10 ms)
        assert gap_share <= steady_share + 0.15
        assert outage_share > 0.8
    finally:
        stream.close()
        node.destroy_node()
        rclpy.shutdown()
        stop_processes([actor, safety])


def rows_time_and_flags(msg) -> list[tuple[float, int]]:
    """(time s, flags) of each tick of an ``/rl/safety_ticks`` message (robot_rl.ros.safety.safety_ticks: time is column 0,
    the flags the second to last)."""
    rows = np.asarray(msg.data).reshape(msg.layout.dim[0].size, msg.layout.dim[1].size)
    return [(float(row[0]), int(row[-2])) for row in rows]
