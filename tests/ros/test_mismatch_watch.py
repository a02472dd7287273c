"""The nodes' endpoints without rclpy's default event handlers, and the graph look that reports the same mismatches
(robot_rl/ros/plumbing/mismatch_watch.py), against real rclpy."""

import time

from tests.conftest import require


def test_a_robot_rl_node_has_no_event_handler_in_its_wait_set():
    """rclpy gives each publisher and subscription two event handlers by default, which the executor checks at every
    wake-up; the robot_rl nodes' endpoints have none, also those rclpy makes itself (``/parameter_events``)."""
    rclpy = require("rclpy")
    from std_msgs.msg import Float64

    from robot_rl.ros.plumbing.mismatch_watch import quiet_node

    rclpy.init()
    try:
        plain = rclpy.create_node("robot_rl_plain")
        plain.create_publisher(Float64, "/out", 1)
        plain.create_subscription(Float64, "/in", lambda msg: None, 1)
        assert len(list(plain.waitables)) >= 4  # what the robot_rl nodes had: two per endpoint
        for lifecycle in (False, True):
            node = quiet_node(f"robot_rl_quiet_{int(lifecycle)}", lifecycle)
            node.create_publisher(Float64, "/out", 1)
            node.create_subscription(Float64, "/in", lambda msg: None, 1)
            endpoints = [*node.publishers, *node.subscriptions]
            assert len(endpoints) >= 3 and not any(endpoint.event_handlers for endpoint in endpoints)
            assert not list(node.waitables)
            node.destroy_node()
        plain.destroy_node()
    finally:
        rclpy.shutdown()


def test_the_watch_names_each_endpoint_that_cannot_talk_to_the_nodes_once():
    """A best-effort publisher on a topic the node takes reliably, a publisher of another type, and a reliable
    subscription to a topic the node publishes best-effort are each named once; a matching pair is not named."""
    rclpy = require("rclpy")
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from std_msgs.msg import Float64, String

    from robot_rl.ros.plumbing.mismatch_watch import MismatchWatch, quiet_node

    reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
    best_effort = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
    rclpy.init()
    driver = rclpy.Context()  # a participant of its own: one participant takes one type per topic
    rclpy.init(context=driver)
    try:
        node = quiet_node("robot_rl_watched")
        node.create_subscription(Float64, "/state", lambda msg: None, reliable)
        node.create_subscription(Float64, "/reward", lambda msg: None, reliable)
        node.create_subscription(Float64, "/fine", lambda msg: None, best_effort)
        node.create_publisher(Float64, "/command", best_effort)
        watch = MismatchWatch(node, period_s=0.01)
        other = rclpy.create_node("robot_rl_driver", context=driver)
        other.create_publisher(Float64, "/state", best_effort)  # cannot serve a reliable subscription
        other.create_publisher(String, "/reward", reliable)  # another type
        other.create_publisher(Float64, "/fine", reliable)  # a reliable publisher serves a best-effort subscription
        other.create_subscription(Float64, "/command", lambda msg: None, reliable)  # asks more than it is offered
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        deadline = time.monotonic() + 60.0
        while len(watch.found) < 3 and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.01)
        end = time.monotonic() + 1.0  # a hundred looks more: nothing is named twice
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.01)
        executor.shutdown()
        found = sorted(watch.found)
        assert len(found) == 3, found
        assert found[0].startswith("/command: /robot_rl_driver has a QoS that this node's publisher cannot match (")
        assert found[1] == "/reward: /robot_rl_driver sends std_msgs/msg/String, this node takes std_msgs/msg/Float64"
        assert found[2].startswith("/state: /robot_rl_driver has a QoS that this node's subscription cannot match (")
        assert all("reliab" in line.lower() and "deadline" not in line.lower() for line in (found[0], found[2]))
        other.destroy_node()
        node.destroy_node()
    finally:
        rclpy.shutdown(context=driver)
        rclpy.shutdown()
