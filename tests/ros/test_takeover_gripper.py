"""A take-over keeps the grasp: the operator's action carries the gripper as it is until a button is pressed (the
actor's mux over topics, and the teleop node's buttons)."""

from __future__ import annotations

import time

import numpy as np

from tests.conftest import require

FINGER = 0.04  # m per finger, fully open (the sim's FINGER_TRAVEL)


class Cell:
    """A cell over real topics in real time: the arm's observation streams and the operator's inputs, each published
    every 20 ms by a timer (as drivers and spacenav_node do), and the reset service (the fingers as the test sets)."""

    def __init__(self, rclpy, node):
        from geometry_msgs.msg import PoseStamped, Twist
        from sensor_msgs.msg import JointState, Joy
        from std_msgs.msg import Bool, Float64
        from std_srvs.srv import SetBool

        from robot_rl.ros import qos
        from robot_rl.ros.messages import joint_state_msg, joy_msg, pose_msg
        from robot_rl.ros.topic_env import JOINTS, POSE, REWARD, SUCCESS

        self.node, self.finger, self.push, self.buttons = node, FINGER, 0.0, [0, 0]
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

        def tick() -> None:
            now = time.time()
            publish[REWARD].publish(Float64(data=0.0))
            publish[SUCCESS].publish(Bool(data=False))
            publish[JOINTS].publish(
                joint_state_msg(["finger_left", "finger_right"], np.full(2, self.finger), np.zeros(2), np.zeros(2), now)
            )
            publish[POSE].publish(pose_msg(np.array([0.45, 0.0, 0.2]), np.eye(3), now, "base"))
            twist = Twist()
            twist.linear.z = self.push
            publish["/spacenav/twist"].publish(twist)
            publish["/spacenav/joy"].publish(joy_msg([0.0] * 6, self.buttons, now))

        def reset(request, response):
            response.success, response.message = True, "seed 0"
            return response

        node.create_timer(0.02, tick)
        node.create_service(SetBool, "/rl/reset", reset)


def wait_until(condition, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.01)


def test_a_takeover_keeps_the_grasp_until_the_operator_presses_a_gripper_button():
    """The policy closed the gripper on the cube; the operator moves the puck to correct the arm: the executed gripper
    command stays closed (it was the teleop's own remembered "open", and the cube dropped). A button press is the
    operator acting while held (a take-over even with the puck at rest) and sets the gripper; a reset with the fingers on a part
    (the peg task starts holding its peg) counts as closed."""
    rclpy = require("rclpy")
    from robot_rl.ros.node_main import spinning_in_background
    from robot_rl.ros.teleop_source import TopicTeleop
    from robot_rl.ros.topic_env import TopicEnv, TopicEnvSettings

    layout = {"tcp_pos": (0, 3), "tcp_rotvec": (3, 3), "tcp_linvel": (6, 3), "tcp_angvel": (9, 3), "gripper": (12, 1)}
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
    rclpy.init()
    actor, cell_node = rclpy.create_node("robot_rl_actor"), rclpy.create_node("robot_rl_test_cell")
    cell = Cell(rclpy, cell_node)
    try:
        env = TopicEnv(actor, settings, layout)
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
    from robot_rl.ros.teleop_node import BUTTON_HOLD, TeleopState

    state = TeleopState()
    start = time.monotonic()
    assert state.gripper_buttons(start) == [0, 0], "no button pressed reads as a press"
    state.press("close")
    pressed = state.gripper_press[1]
    assert state.gripper_buttons(pressed + 0.1) == [1, 0]
    assert state.gripper_buttons(pressed + BUTTON_HOLD + 0.01) == [0, 0], "a click stays pressed"
    state.press("open")
    assert state.gripper_buttons(state.gripper_press[1]) == [0, 1]
