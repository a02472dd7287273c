"""Arm bridge for UR and other ros2_control arms driven by MoveIt Servo.

MoveIt Servo takes velocity commands, the safety node emits target poses: this node closes the
loop between them. Every tick (``rate_hz``) it turns the newest filtered target
(``/rl/equilibrium_pose``, base frame) and the newest measured TCP pose into a twist

    v = clip(kp_linear * (p_target - p_measured), max_linear)      m/s, base frame
    w = clip(kp_angular * log(R_target R_measured^T), max_angular)  rad/s, base frame

published as geometry_msgs/TwistStamped on ``/servo_node/delta_twist_cmds`` (RELIABLE, as Servo
requires; header frame = the base frame, Servo's ``robot_link_command_frame``). Without a fresh
target (``command_timeout``) or state (``state_timeout``) it sends nothing, and MoveIt Servo
stops the arm by itself after its own 0.1 s timeout. The gripper command is passed through on
``/rl/gripper_command`` for the gripper driver. Limits stay in the safety node: this bridge
only follows what the safety node let through. A pose with NaN / inf or a zero quaternion on either
input is dropped and counted (``guard.dropped``); the last good one stays (and ages out).

    python -m robot_rl.ros.nodes.servo_bridge_node --rate-hz 100 --ros-args -r /franka_robot_state_broadcaster/current_pose:=/tcp_pose_broadcaster/pose
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped

from robot_rl.core.geometry import rotvec_from_matrix

from ..plumbing import qos
from ..plumbing.guard import InputGuard
from ..plumbing.messages import pose_to_numpy, twist_msg

SERVO_TOPIC = "servo_node/delta_twist_cmds"


def servo_twist(
    target_pos: np.ndarray,
    target_rot: np.ndarray,
    pos: np.ndarray,
    rot: np.ndarray,
    kp_linear: float,
    kp_angular: float,
    max_linear: float,
    max_angular: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(linear m/s, angular rad/s), base frame, that moves the TCP toward the target, speed-limited."""
    linear = kp_linear * (np.asarray(target_pos) - pos)
    angular = kp_angular * rotvec_from_matrix(np.asarray(target_rot) @ rot.T)
    for vector, limit in ((linear, max_linear), (angular, max_angular)):
        norm = np.linalg.norm(vector)
        if norm > limit:
            vector *= limit / norm
    return linear, angular


class ServoBridge:
    def __init__(self, node, args):
        self.node, self.args = node, args
        self.target: tuple[np.ndarray, np.ndarray, float] | None = None
        self.state: tuple[np.ndarray, np.ndarray, float] | None = None
        self.guard = InputGuard(node)
        self.guard.subscribe(PoseStamped, "rl/equilibrium_pose", self._on_target, qos.COMMAND)
        self.guard.subscribe(
            PoseStamped, "franka_robot_state_broadcaster/current_pose", self._on_state, qos.STREAM_SUBSCRIBER
        )
        self.twist_pub = node.create_publisher(TwistStamped, SERVO_TOPIC, qos.COMMAND)
        node.create_timer(1.0 / args.rate_hz, self.tick)

    def _on_target(self, msg) -> None:
        self.target = (*pose_to_numpy(msg.pose), time.monotonic())

    def _on_state(self, msg) -> None:
        self.state = (*pose_to_numpy(msg.pose), time.monotonic())

    def tick(self) -> None:
        now = time.monotonic()
        if self.target is None or self.state is None:
            return
        if now - self.target[2] > self.args.command_timeout or now - self.state[2] > self.args.state_timeout:
            return  # silence: MoveIt Servo halts on its own
        linear, angular = servo_twist(
            self.target[0],
            self.target[1],
            self.state[0],
            self.state[1],
            self.args.kp_linear,
            self.args.kp_angular,
            self.args.max_linear,
            self.args.max_angular,
        )
        self.twist_pub.publish(
            twist_msg(linear, angular, self.node.get_clock().now().nanoseconds * 1e-9, self.args.frame_id)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate-hz", type=float, default=100.0)
    parser.add_argument("--kp-linear", type=float, default=4.0, help="1/s")
    parser.add_argument("--kp-angular", type=float, default=4.0, help="1/s")
    parser.add_argument("--max-linear", type=float, default=0.25, help="m/s")
    parser.add_argument("--max-angular", type=float, default=1.0, help="rad/s")
    parser.add_argument("--command-timeout", type=float, default=0.1, help="s")
    parser.add_argument("--state-timeout", type=float, default=0.05, help="s")
    parser.add_argument("--frame-id", default="base")
    args, ros_args = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    for name in ("rate_hz", "kp_linear", "kp_angular", "max_linear", "max_angular", "command_timeout", "state_timeout"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    from ..plumbing.node_main import ros_node, spin

    with ros_node("robot_rl_servo_bridge", ["robot_rl", *ros_args]) as node:
        ServoBridge(node, args)
        spin(node)
    return 0


if __name__ == "__main__":
    sys.exit(main())
