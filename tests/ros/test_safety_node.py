"""Fault tests of the fast-loop safety node with real processes over DDS.

The node runs in its own process; an actor process publishes targets; this test process plays
the arm (publishes the measured pose) and watches the node's output.
"""

import subprocess
import sys
import textwrap
import time

import numpy as np

from tests.conftest import require

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
HOME = np.array([0.45, 0.0, 0.2])
STALE_COMMAND, STALE_STATE, ESTOP, TRANSLATION_STEP = 2, 4, 8, 128  # robot_rl.safety.Violation bits


class Arm:
    """Publishes the measured pose at 200 Hz and records the node's output with receive times."""

    def __init__(self, rclpy):
        from geometry_msgs.msg import PoseStamped
        from std_msgs.msg import Bool, Empty, UInt32

        self.rclpy = rclpy
        self.node = rclpy.create_node("robot_rl_test_arm")
        self.pose_pub = self.node.create_publisher(PoseStamped, "/franka_robot_state_broadcaster/current_pose", 1)
        self.estop_pub = self.node.create_publisher(Bool, "/rl/estop", 10)
        self.reset_pub = self.node.create_publisher(Empty, "/rl/estop_reset", 10)
        self.messages = {"Bool": Bool, "Empty": Empty}
        self.streaming = True
        self.outputs: list[tuple[float, float, int]] = []  # (time, commanded x, flags)
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
        self._x = msg.pose.position.x

    def _on_flags(self, msg):
        if self._x is not None:
            self.outputs.append((time.monotonic(), self._x, msg.data))

    def spin(self, seconds: float):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.002)

    def wait_for(self, condition, timeout: float) -> float:
        """Spin until ``condition(x, flags)`` holds for the newest output; returns when (monotonic)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.002)
            if self.outputs and condition(*self.outputs[-1][1:]):
                return self.outputs[-1][0]
        raise AssertionError(f"not reached within {timeout} s; last outputs {self.outputs[-3:]}")


def test_actor_death_stale_state_and_estop_hold_the_arm():
    rclpy = require("rclpy")
    safety = subprocess.Popen([sys.executable, "-m", "robot_rl.ros.safety_node", "--rate-hz", "200",
                               "--state-timeout", "0.05"])
    actor = subprocess.Popen([sys.executable, "-c", ACTOR])
    rclpy.init()
    arm = Arm(rclpy)
    try:
        # the actor's target (3 cm ahead) is approached in limited steps, flagged, then reached
        arm.wait_for(lambda x, flags: x > 0.479 and flags == 0, timeout=30)
        assert any(flags & TRANSLATION_STEP for _, _, flags in arm.outputs)
        assert np.diff([x for _, x, _ in arm.outputs]).max() < 0.01  # never one jump to the target

        # actor killed -> within the 100 ms command timeout (+ a tick and transport) the node holds the measured pose
        actor.kill()
        killed = time.monotonic()
        held = arm.wait_for(lambda x, flags: flags & STALE_COMMAND and abs(x - HOME[0]) < 1e-6, timeout=2)
        assert held - killed < 0.15, f"hold after {held - killed:.3f} s"

        # the state stream stops -> hold the last command, flagged
        arm.streaming = False
        stopped = time.monotonic()
        stale = arm.wait_for(lambda x, flags: flags & STALE_STATE, timeout=2)
        assert stale - stopped < 0.05 + 0.05
        arm.streaming = True
        arm.wait_for(lambda x, flags: not flags & STALE_STATE, timeout=2)

        # e-stop latches: even with a live actor the arm holds until the reset
        actor = subprocess.Popen([sys.executable, "-c", ACTOR])
        arm.wait_for(lambda x, flags: x > 0.47, timeout=30)
        arm.estop_pub.publish(arm.messages["Bool"](data=True))
        arm.wait_for(lambda x, flags: flags == ESTOP and abs(x - HOME[0]) < 1e-6, timeout=2)
        arm.spin(0.5)
        recent = [(x, flags) for t, x, flags in arm.outputs if t > time.monotonic() - 0.4]
        assert recent and all(flags == ESTOP and abs(x - HOME[0]) < 1e-6 for x, flags in recent)
        arm.reset_pub.publish(arm.messages["Empty"]())
        arm.wait_for(lambda x, flags: x > 0.47 and flags == 0, timeout=5)
    finally:
        arm.node.destroy_node()
        rclpy.shutdown()
        for process in (actor, safety):
            process.kill()
            process.wait()
