"""The ros extra gives a working rclpy: two processes exchange messages over DDS."""

import subprocess
import sys
import textwrap
import time

from tests.conftest import require
from tests.ros.graph_helpers import stop_processes

TALKER = textwrap.dedent(
    """
    import rclpy, sys
    from sensor_msgs.msg import JointState
    rclpy.init()
    node = rclpy.create_node("robot_rl_test_talker")
    pub = node.create_publisher(JointState, "/robot_rl_test/joint_states", 10)
    count = 0
    def tick():
        global count
        msg = JointState(name=["joint1"], position=[0.001 * count])
        msg.header.stamp = node.get_clock().now().to_msg()
        pub.publish(msg)
        count += 1
    node.create_timer(0.02, tick)
    end = node.get_clock().now().nanoseconds + 20e9
    while rclpy.ok() and node.get_clock().now().nanoseconds < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    """
)


def test_joint_states_cross_process_boundary():
    rclpy = require("rclpy")
    from sensor_msgs.msg import JointState

    talker = subprocess.Popen([sys.executable, "-c", TALKER])
    rclpy.init()
    try:
        node = rclpy.create_node("robot_rl_test_listener")
        received = []
        node.create_subscription(JointState, "/robot_rl_test/joint_states", received.append, 10)
        deadline = time.monotonic() + 15
        while len(received) < 5 and time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.1)
        node.destroy_node()
    finally:
        rclpy.shutdown()
        stop_processes([talker])
    assert len(received) >= 5
    positions = [msg.position[0] for msg in received]
    assert positions == sorted(positions) and received[0].name == ["joint1"]
