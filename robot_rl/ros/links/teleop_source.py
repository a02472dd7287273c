"""The actor's intervention mux: a teleop source (:class:`robot_rl.runtime.teleop.TeleopSource`) fed by
the spacenav-style topics that a SpaceMouse, a gamepad, the keyboard teleop node or the sim's
scripted human publish.

* ``/spacenav/twist`` (geometry_msgs/Twist): normalised [-1, 1] motion in the base frame;
  the human is active while its magnitude exceeds ``deadzone`` (HIL-SERL's rule);
* ``/rl/intervention`` (std_msgs/Bool): an explicit take-over switch (held: active);
* ``/spacenav/joy`` (sensor_msgs/Joy): button 0 closes, button 1 opens the gripper; a button held is the
  human acting, as with HIL-SERL's SpaceMouse (the teleop node holds a click for ``BUTTON_HOLD``).

Messages go through the env's :class:`~robot_rl.ros.plumbing.guard.InputGuard` (``env.guard``): a twist
with NaN / inf or a Joy with fewer than two buttons or non-finite axes is dropped and counted.
An input counts for ``hold`` seconds after its last message (of the sim clock in sim time, where
the sim robot publishes the scripted human's input once per control period). With ``lockstep``
(sim time with the sim robot's scripted human: :func:`~robot_rl.ros.plumbing.sim_clock.lockstep_teleop`) the
env waits for the three inputs of each observation as for its streams: they travel on their own
topics, and one that comes after the observation's pose would otherwise be read a step late. While active the
human's action is the twist turned into the TCP frame of the newest measured pose, plus the gripper: the button
held, otherwise the gripper as it is (``env.gripper_command``, the last command executed): moving the puck to
correct the arm never opens a gripper that holds a part. In a demonstration episode the human owns every step: a released puck is the human's zero motion, not
the policy's turn (so a late switch message at the start of a demo cannot hand a step to the policy).
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import Twist
from sensor_msgs.msg import Joy
from std_msgs.msg import Bool

from ..plumbing import qos
from ..plumbing.messages import joy_to_numpy, twist_to_numpy
from ..plumbing.sim_clock import NodeClock
from .topic_env import TopicEnv

TWIST, SWITCH, JOY = "spacenav/twist", "rl/intervention", "spacenav/joy"


class TopicTeleop:
    def __init__(self, env: TopicEnv, deadzone: float, hold: float, lockstep: bool = False):
        self.env, self.deadzone, self.hold = env, float(deadzone), float(hold)
        self.lockstep = lockstep
        self.clock = NodeClock(env.node, env.settings.sim_time)
        self.twist, self.twist_time = np.zeros(6), -np.inf
        self.switch, self.switch_time = False, -np.inf
        self.pressed, self.joy_time = 0.0, -np.inf  # the gripper button held: +1 close, -1 open, 0 none
        self.demo = False
        stream = qos.stream_subscriber(env.settings.sim_time)
        env.guard.subscribe(Twist, TWIST, self._on_twist, stream)
        env.guard.subscribe(Bool, SWITCH, self._on_switch, stream)
        env.guard.subscribe(Joy, JOY, self._on_joy, stream)
        if lockstep:
            env.lockstep_inputs.extend((TWIST, SWITCH, JOY))

    def _on_twist(self, msg) -> None:
        self.twist, self.twist_time = twist_to_numpy(msg), self.clock.now()
        self._arrived(TWIST)

    def _on_switch(self, msg) -> None:
        self.switch, self.switch_time = bool(msg.data), self.clock.now()
        self._arrived(SWITCH)

    def _on_joy(self, msg) -> None:
        _, buttons = joy_to_numpy(msg, min_buttons=2)
        self.pressed = 1.0 if buttons[0] else -1.0 if buttons[1] else 0.0
        self.joy_time = self.clock.now()
        self._arrived(JOY)

    def _arrived(self, topic: str) -> None:
        """Lockstep: tell the env this input of the observation is in (after it is applied)."""
        if self.lockstep:
            self.env.inbox.put(topic, None)

    def begin_episode(self, demo: bool) -> None:
        """Tells the env whether a human demonstration comes next (the reset request carries it)."""
        self.demo = demo
        self.env.demo_next = demo

    def active(self) -> bool:
        now = self.clock.now()
        moving = now - self.twist_time < self.hold and np.linalg.norm(self.twist) > self.deadzone
        switched = now - self.switch_time < self.hold and self.switch
        return bool(moving or switched or self._pressing(now))

    def _pressing(self, now: float) -> bool:
        return self.pressed != 0.0 and now - self.joy_time < self.hold

    def __call__(self, obs, policy_action) -> tuple[bool, np.ndarray | None]:
        if not (self.demo or self.active()):
            return False, None
        rot, now = self.env.tcp_rot, self.clock.now()
        twist = self.twist if now - self.twist_time < self.hold else np.zeros(6)
        action = np.zeros(self.env.action_space.shape[0], dtype=np.float32)
        action[:3] = rot.T @ twist[:3]
        if action.size == 7:
            action[3:6] = rot.T @ twist[3:]
        action[-1] = self.pressed if self._pressing(now) else self.env.gripper_command
        return True, np.clip(action, -1.0, 1.0)

    def observe(self, progress: float) -> None:
        pass
