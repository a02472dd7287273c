"""Fast-loop safety node: the hard-limit layer between the actor and the arm, on a timer.

Every tick (``rate_hz``, default 500 Hz) the node takes the latest target from the actor and the
latest measured state of the arm, runs :func:`robot_rl.safety.enforce` and publishes the result
to the arm's command topic. Staleness is judged on the node's monotonic clock at reception, so
clock offsets between machines do not matter: no command for ``command_timeout`` -> hold the
measured pose; no state for ``state_timeout`` -> hold the last command sent; an e-stop holds
until a reset message arrives. Every tick's :class:`~robot_rl.safety.Violation` flags are
published too.

Topics (all remappable with ``--ros-args -r``):

| direction | topic | type |
|---|---|---|
| in | ``/rl/action`` | geometry_msgs/PoseStamped: target TCP pose, base frame |
| in | ``/rl/gripper`` | std_msgs/Float64: gripper command in [-1 open, 1 closed] |
| in | ``/franka_robot_state_broadcaster/current_pose`` | geometry_msgs/PoseStamped: measured TCP pose |
| in | ``/franka_robot_state_broadcaster/external_wrench_in_base_frame`` | geometry_msgs/WrenchStamped |
| in | ``/rl/estop`` (std_msgs/Bool, true latches), ``/rl/estop_reset`` (std_msgs/Empty) | |
| out | ``/rl/equilibrium_pose`` | geometry_msgs/PoseStamped: the command for a Cartesian impedance controller |
| out | ``/rl/gripper_command`` (std_msgs/Float64), ``/rl/safety_flags`` (std_msgs/UInt32) | |

    python -m robot_rl.ros.safety_node [--rate-hz 500] [--command-timeout 0.1] [--state-timeout 0.01]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ..safety import ArmState, Command, EStopLatch, SafetyLimits, Violation, enforce, hold
from .messages import numpy_to_pose, pose_to_numpy


class SafetyNode:
    """Owns the subscriptions, the timer and the hard-layer state of one arm."""

    def __init__(self, node, limits: SafetyLimits, rate_hz: float, frame_id: str = "base"):
        from geometry_msgs.msg import PoseStamped, WrenchStamped
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Bool, Empty, Float64, UInt32

        self.node, self.limits, self.frame_id = node, limits, frame_id
        self.latch = EStopLatch()
        self.arm: ArmState | None = None
        self.command: Command | None = None
        self.previous: Command | None = None
        self.gripper = -1.0
        self.flags = Violation.NONE
        self.tick_times: list[float] = []
        stream = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
        node.create_subscription(PoseStamped, "/rl/action", self._on_action, stream)
        node.create_subscription(Float64, "/rl/gripper", self._on_gripper, stream)
        node.create_subscription(PoseStamped, "/franka_robot_state_broadcaster/current_pose", self._on_pose, stream)
        node.create_subscription(WrenchStamped, "/franka_robot_state_broadcaster/external_wrench_in_base_frame",
                                 self._on_wrench, stream)
        node.create_subscription(Bool, "/rl/estop", self._on_estop, 10)
        node.create_subscription(Empty, "/rl/estop_reset", lambda _: self.latch.reset(), 10)
        self.pose_pub = node.create_publisher(PoseStamped, "/rl/equilibrium_pose", 1)
        self.gripper_pub = node.create_publisher(Float64, "/rl/gripper_command", 1)
        self.flags_pub = node.create_publisher(UInt32, "/rl/safety_flags", 1)
        self._messages = {"pose": PoseStamped, "float": Float64, "flags": UInt32}
        self._force, self._torque = np.zeros(3), np.zeros(3)
        node.create_timer(1.0 / rate_hz, self.tick)

    # ----------------------------------------------------------------- inputs
    def _on_action(self, msg) -> None:
        pos, rot = pose_to_numpy(msg.pose)
        self.command = Command(pos, rot, self.gripper, time.monotonic())

    def _on_gripper(self, msg) -> None:
        self.gripper = float(msg.data)
        if self.command is not None:
            self.command.gripper = self.gripper

    def _on_pose(self, msg) -> None:
        pos, rot = pose_to_numpy(msg.pose)
        self.arm = ArmState(pos, rot, time.monotonic(), self._force, self._torque)

    def _on_wrench(self, msg) -> None:
        f, t = msg.wrench.force, msg.wrench.torque
        self._force, self._torque = np.array([f.x, f.y, f.z]), np.array([t.x, t.y, t.z])
        if self.arm is not None:
            self.arm.force, self.arm.torque = self._force, self._torque

    def _on_estop(self, msg) -> None:
        if msg.data:
            self.latch.trigger()

    # ----------------------------------------------------------------- the loop
    def tick(self) -> None:
        now = time.monotonic()
        self.tick_times.append(now)
        if self.arm is None:
            return  # nothing measured yet: nothing to hold, nothing sent
        if self.previous is None:
            self.previous = hold(self.arm, self.gripper, now)
        command = self.command or Command(self.arm.pos, self.arm.rot, self.gripper, -np.inf)
        self.previous, self.flags = enforce(self.limits, self.latch, self.arm, command, self.previous, now)
        pose = self._messages["pose"]()
        pose.header.stamp = self.node.get_clock().now().to_msg()
        pose.header.frame_id = self.frame_id
        numpy_to_pose(pose.pose, self.previous.pos, self.previous.rot)
        self.pose_pub.publish(pose)
        self.gripper_pub.publish(self._messages["float"](data=float(self.previous.gripper)))
        self.flags_pub.publish(self._messages["flags"](data=int(self.flags)))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate-hz", type=float, default=500.0)
    parser.add_argument("--command-timeout", type=float, default=0.1, help="s without a command -> hold the pose")
    parser.add_argument("--state-timeout", type=float, default=0.01, help="s without arm state -> hold the command")
    parser.add_argument("--frame-id", default="base")
    args, ros_args = parser.parse_known_args(argv)
    import rclpy

    limits = SafetyLimits(command_timeout=args.command_timeout, state_timeout=args.state_timeout)  # checked here
    rclpy.init(args=ros_args)
    node = rclpy.create_node("robot_rl_safety")
    SafetyNode(node, limits, args.rate_hz, args.frame_id)
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
