"""The scripted human as a teleop device of the ROS 2 graph.

:class:`~robot_rl.runtime.teleop.ScriptedHuman` decides when to take over (demos, stalls, failures) from
privileged sim state; this class publishes its decisions the way an operator with a SpaceMouse
reaches the actor: ``/rl/intervention`` (std_msgs/Bool, the take-over switch),
``/spacenav/twist`` (geometry_msgs/Twist, normalised [-1, 1], base frame) and ``/spacenav/joy``
(sensor_msgs/Joy: button 0 closes, button 1 opens the gripper). The intervention rules advance
once per control period (:meth:`decide`); in real time the messages go out at every tick with the
expert's action recomputed, in sim time once per period, before the period's observation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from geometry_msgs.msg import Twist
from sensor_msgs.msg import Joy
from std_msgs.msg import Bool

from robot_rl.runtime.teleop import ScriptedHuman

from ...sim.panda_env import PandaTaskEnv
from ..plumbing import qos
from ..plumbing.messages import joy_msg


class ScriptedTeleop:
    def __init__(
        self, node, env: PandaTaskEnv, human: ScriptedHuman, control_period: float, stamp: Callable[[], float]
    ):
        """``stamp``: the sim robot's time (s) for message headers."""
        self.node, self.env, self.human, self.period, self.stamp = node, env, human, control_period, stamp
        self.twist_pub = node.create_publisher(Twist, "spacenav/twist", qos.STREAM_PUBLISHER)
        self.joy_pub = node.create_publisher(Joy, "spacenav/joy", qos.STREAM_PUBLISHER)
        self.switch_pub = node.create_publisher(Bool, "rl/intervention", qos.STREAM_PUBLISHER)
        self.active, self.next_decision, self.first = False, 0.0, True

    def begin_episode(self, demo: bool) -> None:
        self.human.begin_episode(demo)
        self.active, self.next_decision, self.first = False, 0.0, True

    def decide(self, progress: float) -> None:
        """One rule step (once per control period): the progress of the step just made, then take over or not."""
        if not self.first:
            self.human.observe(progress)
        self.first = False
        self.active, _ = self.human(None, None)

    def tick(self, now: float, progress: float) -> None:
        """Real time: a rule step when a control period has passed, then the messages."""
        if now >= self.next_decision:
            self.next_decision = now + self.period
            self.decide(progress)
        self.publish()

    def publish(self) -> None:
        """The switch, the twist (the expert's action now, turned into the base frame) and the gripper buttons (none
        pressed while the human is hands off): one message on each topic every time, which the actor in sim time
        waits for (:func:`~robot_rl.ros.plumbing.sim_clock.lockstep_teleop`)."""
        self.switch_pub.publish(Bool(data=bool(self.active)))
        twist, buttons = Twist(), [0, 0]  # hands off the puck: zeros, as spacenav_node reports a released SpaceMouse
        if self.active:
            action = np.asarray(self.human.expert.act(None), dtype=float)
            rot = self.env.tcp_rot  # the expert's deltas are in the TCP frame; a SpaceMouse speaks base frame
            twist.linear.x, twist.linear.y, twist.linear.z = map(float, rot @ action[:3])
            if self.env.action_dim == 7:
                twist.angular.x, twist.angular.y, twist.angular.z = map(float, rot @ action[3:6])
            close = action[-1] > 0
            buttons = [int(close), int(not close)]
        self.twist_pub.publish(twist)
        self.joy_pub.publish(joy_msg([0.0] * 6, buttons, self.stamp()))
