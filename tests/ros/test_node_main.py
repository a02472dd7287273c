"""The nodes' shared set-up (robot_rl/ros/node_main.py) against real rclpy."""

import random
import threading

from tests.conftest import require

ROUNDS = 500  # the old code failed within 20-195 rounds in every try (6 tries)


def test_a_background_executor_stops_without_an_error_in_its_thread(monkeypatch):
    """CI saw the robot fleet's actor print ``Exception in thread robot_rl_actor_executor ... InvalidHandle: cannot
    use Destroyable because destruction was requested`` as it shut down: ``Executor.shutdown`` from the node's main
    thread destroyed the executor's guard condition while the executor thread ran a callback about to trigger it
    (rclpy's shutdown does not wait for the spin in progress). A node with busy timers is spun in the background and
    stopped again, ``ROUNDS`` times, at random instants."""
    rclpy = require("rclpy")
    from robot_rl.ros.node_main import spinning_in_background

    errors: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(repr(args.exc_value)))
    rclpy.init()
    node = rclpy.create_node("robot_rl_spinning")
    fired = []
    node.create_timer(0.0005, lambda: fired.append(1))
    node.create_timer(0.0003, lambda: None)
    rng = random.Random(0)
    try:
        for round_ in range(ROUNDS):
            with spinning_in_background(node) as thread:
                threading.Event().wait(rng.uniform(0.0, 0.005))
            assert not thread.is_alive()
            assert not errors, f"round {round_}: {errors[0]}"
    finally:
        node.destroy_node()
        rclpy.shutdown()
    assert fired  # the timers ran: the executor spun
