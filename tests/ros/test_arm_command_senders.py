"""The sim arm obeys only the safety node: a foreign node that publishes straight to the arm's command topic
(``/rl/equilibrium_pose``, bypassing the safety node) is ignored and counted, while the safety node's commands
move the arm, inside its ``robot.limits.workspace``. (The safety node itself latches on such a publisher:
tests/ros/test_safety_node.py.)"""

import subprocess
import time

import numpy as np
import pytest

from tests.conftest import require
from tests.ros.graph_helpers import sim_robot, stop_processes

POSE = "/franka_robot_state_broadcaster/current_pose"
TOP = 0.3  # m: the top of the arm's workspace in this test (the reach task starts at about 0.23 m)


def tilt_and_position(msg) -> tuple[float, np.ndarray]:
    """(angle in degrees between the tool axis and straight down, TCP position m) of a measured pose."""
    from robot_rl.core.geometry import matrix_from_quat

    q = msg.pose.orientation
    tool_axis = matrix_from_quat(np.array([q.w, q.x, q.y, q.z]))[:, 2]
    p = msg.pose.position
    return float(np.degrees(np.arccos(np.clip(-tool_axis[2], -1.0, 1.0)))), np.array([p.x, p.y, p.z])


@pytest.mark.slow
def test_the_sim_arm_ignores_commands_that_bypass_the_safety_node(tmp_path):
    rclpy = require("rclpy")
    from geometry_msgs.msg import PoseStamped

    from robot_rl.ros.plumbing import qos

    log = open(tmp_path / "sim_robot.log", "w")
    sim = subprocess.Popen(
        sim_robot(f"robot.limits.workspace=[[0.25,-0.35,0.005],[0.75,0.35,{TOP}]]"),  # the task's box: to 0.45 m
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    rclpy.init()
    intruder, safety = rclpy.create_node("robot_rl_intruder"), rclpy.create_node("robot_rl_safety")
    measured: list[tuple[float, np.ndarray]] = []
    intruder.create_subscription(
        PoseStamped, POSE, lambda m: measured.append(tilt_and_position(m)), qos.STREAM_SUBSCRIBER
    )

    def spin(seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for node in (intruder, safety):
                rclpy.spin_once(node, timeout_sec=0.005)

    def command(node, position, quaternion_xyzw) -> PoseStamped:
        msg = PoseStamped()
        msg.header.stamp = node.get_clock().now().to_msg()
        msg.header.frame_id = "base"
        msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = map(float, position)
        q = msg.pose.orientation
        q.x, q.y, q.z, q.w = map(float, quaternion_xyzw)
        return msg

    try:
        deadline = time.monotonic() + 120
        while not measured and time.monotonic() < deadline:
            spin(0.1)
        assert measured, "the sim robot never published its pose"
        start_tilt, start = measured[-1]
        foreign = intruder.create_publisher(PoseStamped, "/rl/equilibrium_pose", qos.COMMAND)
        spin(1.0)
        count = len(measured)
        for _ in range(40):  # a 103 degree tilt, 20 cm away: what drove an arm past its cone before
            foreign.publish(command(intruder, start + [0.2, 0.0, 0.0], [0.79, 0.0, 0.0, -0.62]))
            spin(0.05)
        spin(0.5)
        during = measured[count:]
        assert during, "no measured poses during the intrusion"
        assert max(t for t, _ in during) < start_tilt + 2.0
        assert max(np.linalg.norm(p - start) for _, p in during) < 0.01
        intruder.destroy_publisher(foreign)

        ours = safety.create_publisher(PoseStamped, "/rl/equilibrium_pose", qos.COMMAND)
        spin(1.0)
        target = start + [0.0, 0.0, 0.03]
        for _ in range(40):  # the safety node's command: obeyed
            ours.publish(command(safety, target, [1.0, 0.0, 0.0, 0.0]))
            spin(0.05)
        spin(0.5)
        assert np.linalg.norm(measured[-1][1] - target) < 0.01
        for _ in range(40):  # above the arm's workspace: held at its top, as a real arm's controller does
            ours.publish(command(safety, start + [0.0, 0.0, 0.15], [1.0, 0.0, 0.0, 0.0]))
            spin(0.05)
        spin(0.5)
        assert TOP - 0.01 < measured[-1][1][2] < TOP + 0.005, measured[-1][1]
    finally:
        stop_processes([sim])
        log.close()
        intruder.destroy_node()
        safety.destroy_node()
        rclpy.shutdown()
    text = (tmp_path / "sim_robot.log").read_text()
    assert "bad message(s) on /rl/equilibrium_pose" in text and "robot_rl_safety" in text
