"""A take-over keeps the grasp: the operator's action carries the gripper as it is until a button is pressed (the
actor's mux over topics, and the teleop node's buttons)."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from tests.conftest import require
from tests.ros.graph_helpers import PROPRIO_LAYOUT, TopicCell, topic_env_settings, wait_until


def test_a_takeover_keeps_the_grasp_until_the_operator_presses_a_gripper_button():
    """The policy closed the gripper on the cube; the operator moves the puck to correct the arm: the executed gripper
    command stays closed (it was the teleop's own remembered "open", and the cube dropped). A button held is the
    operator acting (a take-over even with the puck at rest) and sets the gripper; a reset with the fingers on a
    part (the peg task starts holding its peg) counts as closed."""
    rclpy = require("rclpy")
    from robot_rl.ros.links.teleop_source import TopicTeleop
    from robot_rl.ros.links.topic_env import TopicEnv
    from robot_rl.ros.plumbing.node_main import spinning_in_background

    rclpy.init()
    actor, cell_node = rclpy.create_node("robot_rl_actor"), rclpy.create_node("robot_rl_test_cell")
    cell = TopicCell(cell_node)
    try:
        env = TopicEnv(actor, topic_env_settings(), PROPRIO_LAYOUT)
        teleop = TopicTeleop(env, deadzone=0.05, hold=0.3)
        with spinning_in_background(actor), spinning_in_background(cell_node):
            obs, _ = env.reset()
            closing = np.array([0.0, 0.0, 0.0, 1.0], np.float32)
            assert teleop(obs, closing) == (False, None)
            obs, *_ = env.step(closing)  # the policy closes on the cube

            cell.push = 0.8  # the operator lifts the puck to correct the arm, no button
            wait_until(teleop.active, "take-over from the puck")
            took_over, action = teleop(obs, closing)
            assert took_over and action[2] > 0.5
            assert action[-1] == 1.0, f"the take-over executes gripper {action[-1]}: it opens the closed gripper"
            obs, *_ = env.step(action)
            assert teleop(obs, closing)[1][-1] == 1.0, "a second step of the take-over opens the gripper"

            cell.push, cell.buttons = 0.0, [0, 1]  # the operator presses open, the puck at rest
            wait_until(lambda: teleop.pressed == -1.0, "the open button")
            took_over, action = teleop(obs, closing)
            assert took_over and action[-1] == -1.0, "a gripper button is the operator acting"
            obs, *_ = env.step(action)
            cell.buttons = [0, 0]
            wait_until(lambda: not teleop.active(), "the end of the take-over")
            assert teleop(obs, closing) == (False, None)

            cell.finger = 0.01  # the next episode starts holding a part
            obs, _ = env.reset()
            cell.push = 0.8
            wait_until(teleop.active, "take-over at the episode's start")
            assert teleop(obs, -closing)[1][-1] == 1.0, "a take-over at the start drops the part the gripper holds"
        assert env.guard.dropped == {}, env.guard.dropped
    finally:
        actor.destroy_node()
        cell_node.destroy_node()
        rclpy.shutdown()


def test_the_teleop_node_publishes_a_gripper_button_only_while_it_is_pressed():
    """The teleop node published [close, not close] on every message: "open" held down whenever the operator had not
    pressed close, which the actor's mux reads as a press. A button now reads pressed for ``BUTTON_HOLD`` s after its
    press (the actor at 10 Hz sees a click), then released."""
    require("rclpy")
    from robot_rl.ros.nodes.teleop_node import BUTTON_HOLD, TeleopState

    state = TeleopState()
    start = time.monotonic()
    assert state.gripper_buttons(start) == [0, 0], "no button pressed reads as a press"
    state.press("close")
    pressed = state.gripper_press[1]
    assert state.gripper_buttons(pressed + 0.1) == [1, 0]
    assert state.gripper_buttons(pressed + BUTTON_HOLD + 0.01) == [0, 0], "a click stays pressed"
    state.press("open")
    assert state.gripper_buttons(state.gripper_press[1]) == [0, 1]


def test_a_reset_that_takes_longer_than_ten_stream_timeouts_is_waited_for_not_a_stall():
    """Issue 73 item 5: 11 of 23 episodes paused with "no message on /rl/reset (no response) for 10.00 s" while the
    scene reset (homing, then a person putting the cube back) simply took 10-13 s: a reset in progress is not a stalled
    stream. The actor waits ``ros.reset_timeout`` for it."""
    rclpy = require("rclpy")
    from robot_rl.ros.links.topic_env import StreamStalled, TopicEnv
    from robot_rl.ros.plumbing.node_main import spinning_in_background

    rclpy.init()
    actor, cell_node = rclpy.create_node("robot_rl_actor"), rclpy.create_node("robot_rl_test_cell")
    reset_node = rclpy.create_node("robot_rl_test_reset")
    cell = TopicCell(cell_node, reset_seconds=3.0, reset_node=reset_node)
    try:
        with spinning_in_background(actor), spinning_in_background(cell_node), spinning_in_background(reset_node):
            slow = TopicEnv(actor, topic_env_settings(stream_timeout=0.2, reset_timeout=30.0), PROPRIO_LAYOUT)
            obs, info = slow.reset()
            assert cell.resets == 1 and info["reset"] == "reset 1" and obs["state"].shape == (13,)
            short = TopicEnv(actor, topic_env_settings(stream_timeout=0.2, reset_timeout=1.0), PROPRIO_LAYOUT)
            with pytest.raises(StreamStalled, match="no response"):
                short.reset()  # a reset that never ends is still named
    finally:
        for node in (actor, cell_node, reset_node):
            node.destroy_node()
        rclpy.shutdown()


def test_a_reset_server_that_starts_again_mid_reset_is_asked_again():
    """benchmarks/cell_faults.py: the reset node killed while it served a reset, restarted by the launch, never
    answered its predecessor's request, and the actor waited out the 120 s reset_timeout. A node serving the reset
    that sends a newer claim to its name is asked again, and its answer ends the reset."""
    rclpy = require("rclpy")
    from std_msgs.msg import String
    from std_srvs.srv import SetBool

    from robot_rl.ros.links.topic_env import TopicEnv
    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.plumbing.name_claim import CLAIMS_TOPIC
    from robot_rl.ros.plumbing.node_main import spinning_in_background

    rclpy.init()
    actor, cell_node = rclpy.create_node("robot_rl_actor"), rclpy.create_node("robot_rl_test_cell")
    dead = rclpy.create_node("robot_rl_home_reset")  # serves the reset, never spun: it takes the request, no answer
    TopicCell(cell_node, reset_node=dead)
    restarted = None
    try:
        with spinning_in_background(actor), spinning_in_background(cell_node):
            env = TopicEnv(actor, topic_env_settings(stream_timeout=5.0, reset_timeout=60.0), PROPRIO_LAYOUT)
            answer: list = []
            started = time.monotonic()
            thread = threading.Thread(target=lambda: answer.append(env.reset()), daemon=True)
            thread.start()
            time.sleep(1.0)  # the request went to the dead one
            assert not answer
            restarted = rclpy.create_node("robot_rl_home_reset")  # the launch's restart of it

            def reset(request, response):
                response.success, response.message = True, "reset by the restarted node"
                return response

            restarted.create_service(SetBool, "/rl/reset", reset)
            claims = restarted.create_publisher(String, CLAIMS_TOPIC, qos.LATCHED)
            claim = {"name": "/robot_rl_home_reset", "started": time.time(), "token": "restarted"}
            claims.publish(String(data=json.dumps(claim)))
            with spinning_in_background(restarted):
                thread.join(timeout=30.0)
            assert answer, "the reset still waits for the dead server (old code: until reset_timeout, 60 s)"
            assert answer[0][1]["reset"] == "reset by the restarted node"
            assert time.monotonic() - started < 30.0
    finally:
        for node in (actor, cell_node, dead, restarted):
            if node is not None:
                node.destroy_node()
        rclpy.shutdown()
