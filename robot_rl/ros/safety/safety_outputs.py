"""What the safety node sends: the arm command (target pose and gripper), the flags of its ticks and its status.

Each output is one of the node's own publishers (:meth:`~robot_rl.ros.plumbing.senders.CommandGate.own_publisher`: no other
publisher may exist on these topics). The topics and types are in :mod:`robot_rl.ros.safety.safety_node`'s table.
"""

from __future__ import annotations

import json
import math
from typing import NamedTuple

from ...safety import ArmState, Command, Violation
from ..plumbing.messages import numpy_to_pose

STATUS_PERIOD = 0.1  # s (wall clock) between two /rl/safety_status messages


class Timing(NamedTuple):
    """When things happened, as the safety node's ticks count time (s: the monotonic clock in real time, which every
    process of the machine shares; sim seconds in sim time), each None before it first happened: ``ticked`` the last
    tick, ``command`` the newest actor command received, ``holding_since`` the first of the ticks that hold the arm
    (:data:`~robot_rl.safety.HOLDS`) up to now (None while the arm moves). A monitor judges the hold by these, not by
    when the status reaches it."""

    ticked: float | None
    command: float | None
    holding_since: float | None


class SafetyOutputs:
    """The arm command, flags and status publishers of one safety node. ``own_publisher(msg_type, topic)`` makes
    them; ``frame_id``: the command's frame; ``clock``: the node's clock (the stamp of a real-time command)."""

    def __init__(self, own_publisher, frame_id: str, clock):
        from geometry_msgs.msg import PoseStamped
        from std_msgs.msg import Float64, String, UInt32

        self.frame_id, self.clock = frame_id, clock
        self.pose_pub = own_publisher(PoseStamped, "rl/equilibrium_pose")
        self.gripper_pub = own_publisher(Float64, "rl/gripper_command")
        self.flags_pub = own_publisher(UInt32, "rl/safety_flags")
        self.status_pub = own_publisher(String, "rl/safety_status")
        self._pose, self._float, self._flags, self._string = PoseStamped, Float64, UInt32, String

    def command(self, command: Command, sim_seconds: float | None = None) -> None:
        """The command sent to the arm, stamped ``sim_seconds`` (sim time) or the node's clock now: the gripper, then
        the pose (last: in sim time, the stamped sign that this instant's commands are out)."""
        pose = self._pose()
        if sim_seconds is None:
            pose.header.stamp = self.clock.now().to_msg()
        else:
            pose.header.stamp.sec, pose.header.stamp.nanosec = divmod(round(sim_seconds * 1e9), 1_000_000_000)
        pose.header.frame_id = self.frame_id
        numpy_to_pose(pose.pose, command.pos, command.rot)
        self.gripper_pub.publish(self._float(data=float(command.gripper)))
        self.pose_pub.publish(pose)

    def flags(self, flags: Violation) -> None:
        self.flags_pub.publish(self._flags(data=int(flags)))

    def status(
        self, flags: Violation, arm: ArmState | None, risk: float | None, estop: str | None, timing: Timing
    ) -> None:
        """``/rl/safety_status``: the flags of the ticks since the last status, the measured TCP position (m, or
        null), the fast critic's last risk (0-1, or null), why the e-stop latch holds the arm (null: it does not) and
        the :class:`Timing` of the ticks (``ticked``, ``command``, ``holding_since``: s, or null)."""
        status = {
            "flags": int(flags),
            "tcp": None if arm is None else [round(float(v), 4) for v in arm.pos],
            "risk": None if risk is None or math.isnan(risk) else round(float(risk), 4),
            "estop": estop,
            **timing._asdict(),
        }
        self.status_pub.publish(self._string(data=json.dumps(status)))
