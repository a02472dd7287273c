"""Fast-loop safety node: the hard-limit layer between the actor and the arm, at a fixed rate.

Every tick (``rate_hz``, default 500 Hz; in real time on a fixed-rate loop that serves the node's callbacks between
ticks, :func:`robot_rl.ros.plumbing.node_main.spin_at_rate`) the node takes the latest target from the actor and the
latest measured state of the arm, runs :func:`robot_rl.safety.enforce` and publishes the result
to the arm's command topic. Staleness is judged on the node's monotonic clock at reception, so
clock offsets between machines do not matter: no command for ``command_timeout`` -> hold the
measured pose; no state for ``state_timeout`` -> hold the last command sent; an e-stop holds
until a reset message arrives. The operator's e-stop is alive: the teleop node sends ``/rl/estop`` false every period
(its heartbeat); once heard, a silence of ``operator_timeout`` s (``teleop_device.estop_timeout``: the teleop died,
its machine or its network is gone) latches the hold as an e-stop does, said in one log line, and a reset is
refused until the heartbeat is back (:mod:`robot_rl.ros.safety.operator_watch`; the actor pauses meanwhile: its
``/rl/safety_status`` names the hold). Every tick's :class:`~robot_rl.safety.Violation` flags are
published too. The limits are ``robot.limits`` of the config (:mod:`robot_rl.safety.robot_limits`):
per-second rates there, per-tick steps of ``rate_hz`` here. In sim time (``ros.sim_time=true``) the node ticks,
in the order of their instants, at the stamp of each actor command (the observation it answers), at each arm
state the sim robot sends inside that command's control period (``control_period``, the task's) and at each new
``/clock`` instant (a reset's pause), once the arm state of that instant is in, with all the ticks ``rate_hz`` makes
since the last instant (:mod:`robot_rl.ros.emulation.sim_robot_node` says why the command, not the clock, starts a control period,
and why the clock moves only once per period).

A managed node (:class:`SafetyLifecycle`): inactive it holds the measured pose, active it obeys the actor;
it activates itself at start unless ``--inactive``.

With ``safety.fast_critic.enabled=true`` a learned risk model runs every tick before the hard layer
(:mod:`robot_rl.ros.safety.fast_critic`, :mod:`robot_rl.safety.fast_critic`): it scales the command down or switches to a
recovery command (hold the measured pose, retreat along the measured force) when the risk is high, and is bypassed
(hard layer only, flagged) when it has no model, the arm state is stale, or it fails or misses its deadline. Its
starting weights are read from ``safety.fast_critic.weights`` at *configure* (a missing or malformed file: one line
on stderr, exit 2); new ones come on ``/rl/fast_risk_weights``.

With ``safety.fast_critic.record_ticks=true`` (or ``learn=true``), with or without a critic, every tick goes out on
``/rl/safety_ticks`` (:mod:`robot_rl.ros.safety.safety_ticks`): the critic's input row of the command the hard layer was
handed, the risk, the flags and the task's constraint bits after the tick (from ``/sim/violation``), for the
actor to send with its transitions: the recorder keeps them, the learner fits the fast critic on them.

Who may move the arm. Without DDS security (the PyPI ROS 2 wheels have none; ``docs/security.md``)
any participant of the domain can publish on any topic, so the node watches the ROS graph every
``graph_period`` s (:class:`PublisherWatch`):

- on its outputs (arm command, gripper command, flags) only its own publishers may exist;
- on its command inputs (``/rl/action``, ``/rl/gripper``) only publishers of the ``senders`` nodes
  (default the actor and the home-reset server); an endpoint whose node stays unnamed for
  ``discovery_grace`` s (a bare DDS participant) counts as foreign too.

A foreign publisher latches the hold exactly like an e-stop, sets
:attr:`~robot_rl.safety.Violation.FOREIGN_PUBLISHER` while it is present, and is logged as an error
naming its node, topic and GID. Each command message is also matched to its sender's GID: one
from a publisher not known to belong to a sender node is dropped (counted; ignored quietly while its
node is still being discovered), so nothing reaches the arm from a foreign node in the moment before
the watch sees it. The reset (``/rl/estop_reset``) is obeyed only
when its sender is an ``operators`` node, every publisher on that topic is one, and no foreign
publisher remains. Every received message is validated (:class:`~robot_rl.ros.plumbing.guard.InputGuard`:
finite, in range, a unit quaternion, a bounded frame id); a bad one is dropped and counted.
Node names are not authentication: a process that takes an allowed node's name passes these
checks; SROS2 on a full ROS 2 install closes that gap (``docs/security.md``).

Topics (all remappable with ``--ros-args -r``):

| direction | topic | type |
|---|---|---|
| in | ``/rl/action`` | geometry_msgs/PoseStamped: target TCP pose, base frame |
| in | ``/rl/gripper`` | std_msgs/Float64: gripper command in [-1 open, 1 closed] |
| in | ``/franka_robot_state_broadcaster/current_pose`` | geometry_msgs/PoseStamped: measured TCP pose |
| in | ``/franka_robot_state_broadcaster/external_wrench_in_base_frame`` | geometry_msgs/WrenchStamped |
| in | ``/rl/estop`` (std_msgs/Bool, true latches; false: the teleop's heartbeat), ``/rl/estop_reset`` (std_msgs/Empty) | |
| in | ``/arm/error`` | std_msgs/String (latched): the arm's own error (a reflex); non-empty: hold, flag ``ARM_ERROR`` |
| out | ``/rl/equilibrium_pose`` | geometry_msgs/PoseStamped: the command for a Cartesian impedance controller |
| out | ``/rl/gripper_command`` (std_msgs/Float64), ``/rl/safety_flags`` (std_msgs/UInt32) | |
| in, fast critic | ``/rl/fast_risk_weights`` | std_msgs/UInt8MultiArray (latched): an ``.npz`` of the risk model |
| out, fast critic | ``/rl/safety_risk`` (std_msgs/Float64), ``/rl/safety_stats`` (std_msgs/String, JSON) | |
| out | ``/rl/safety_status`` | std_msgs/String, JSON, every ``STATUS_PERIOD`` s (wall clock): ``flags`` (the bits of every tick since the last status), ``tcp`` (the measured TCP position, m, or null), ``risk`` (the fast critic's last risk, 0-1, or null), ``estop`` (why the e-stop latch holds the arm, or null), ``ticked``, ``command``, ``holding_since`` (s on the ticks' clock, or null: the last tick, the newest actor command, the first tick of the hold going on; :class:`~robot_rl.ros.safety.safety_outputs.Timing`): a monitor's view (the console, the actor) at 10 Hz instead of the ticks' rate |
| in, critic or ticks | ``/rl/safety_context`` | std_msgs/Float32MultiArray (latched): the task context |
| in, ticks | ``/sim/violation`` | std_msgs/UInt32: the task's constraint bits (the sim robot; a cell's monitor) |
| out, ticks | ``/rl/safety_ticks`` | std_msgs/Float64MultiArray: the ticks (:mod:`robot_rl.ros.safety.safety_ticks`) |

    python -m robot_rl.ros.safety.safety_node [--rate-hz 500] [--senders robot_rl_actor robot_rl_home_reset]
        [--operators robot_rl_teleop] [robot=fr3] [robot.limits.max_force=30] [ros.sim_time=true]
        [safety.fast_critic.enabled=true safety.fast_critic.weights=fast_risk.npz] [--ros-args ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable

import numpy as np
from rclpy.lifecycle import ManagedEntity, TransitionCallbackReturn

from robot_rl.core.config import ConfigError, positive

from ...safety import HOLDS, ArmState, Command, EStopLatch, SafetyLimits, Violation, hold
from ...safety.fast_critic import FastCriticFilter, TcpMotion, fast_critic_config, fast_critic_filter
from ...safety.robot_limits import safety_limits
from ...safety.tick import safety_tick
from ..plumbing import qos
from ..plumbing.guard import InputGuard, MessageError, finite_scalar
from ..plumbing.lockstep import Lockstep
from ..plumbing.messages import command_pose, stamp_ns, wrench_to_numpy
from ..plumbing.messages import seconds as stamp_seconds
from ..plumbing.node_main import (
    exit_with_error,
    is_override,
    node_config,
    restart_count,
    ros_node,
    spin,
    spin_at_rate,
)
from ..plumbing.senders import CommandGate, subscribe_with_sender
from ..plumbing.sim_clock import CLOCK_TOPIC, ClockError, lockstep_period, sim_time_of, wait_for_clock
from .fast_critic import CONTEXT_TOPIC, FastCritic
from .operator_watch import OperatorWatch
from .safety_outputs import STATUS_PERIOD, SafetyOutputs, Timing
from .safety_ticks import TICKS_TOPIC, VIOLATION_TOPIC, TickRecorder
from .state_loss import StateLossReport

DEFAULT_SENDERS = ("robot_rl_actor", "robot_rl_home_reset")
DEFAULT_OPERATORS = ("robot_rl_teleop", "robot_rl_console")  # the console: its token-guarded release
MAX_CLOCK_LEAD = 5.0  # s: a received stamp this far ahead of the clock is no sim time (the sim robot publishes a
#                      state just before the clock instant it belongs to, a reset's pause ahead)


class SafetyNode:
    """Owns the subscriptions, the timers, the publisher watch and the hard-layer state of one arm, ticking in real
    time (:class:`LockstepSafetyNode` ticks in sim time).

    ``active``: obey the actor's commands; inactive, the node holds the measured pose (flag ``INACTIVE``) as
    ros2_control's deactivated controllers do; ``publishing`` false: it sends nothing (unconfigured).
    ``fast_critic``: the learned fast-loop filter run every tick before the hard layer (None: hard layer only);
    ``fast_source`` names where its starting model came from, for the log.
    ``tick_timer``: real time, tick on an rclpy timer of ``node`` (a node embedded in a test's process); the node's
    own process passes False and calls :meth:`tick` from :func:`~robot_rl.ros.plumbing.node_main.spin_at_rate` instead.
    ``record_ticks``: publish every tick on ``/rl/safety_ticks`` (:mod:`robot_rl.ros.safety.safety_ticks`).
    ``operator_timeout``: s of silence of the operator's e-stop heartbeat, once heard, that latch the hold (None: not
    watched)."""

    sim_time = False

    def __init__(
        self,
        node,
        limits: SafetyLimits,
        rate_hz: float,
        frame_id: str = "base",
        senders: Iterable[str] = DEFAULT_SENDERS,
        operators: Iterable[str] = DEFAULT_OPERATORS,
        graph_period: float = 0.1,
        discovery_grace: float = 5.0,
        active: bool = True,
        fast_critic: FastCriticFilter | None = None,
        fast_source: str | None = None,
        tick_timer: bool = True,
        record_ticks: bool = False,
        operator_timeout: float | None = None,
    ):
        from geometry_msgs.msg import PoseStamped, WrenchStamped
        from rclpy.clock import Clock, ClockType
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Bool, Empty, Float32MultiArray, Float64, Float64MultiArray, String, UInt32

        self.node, self.limits, self.frame_id = node, limits, frame_id
        self.rate_hz, self.active, self.publishing = rate_hz, active, True
        self.latch = EStopLatch()
        self.gate = CommandGate(node, self.latch, frozenset(operators))  # who may move the arm
        self.arm: ArmState | None = None
        self.command: Command | None = None
        self.previous: Command | None = None
        self.gripper = -1.0
        self.flags = Violation.NONE
        self.status_flags = Violation.NONE  # the bits of every tick since the last /rl/safety_status
        self.holding_since: float | None = None  # s (tick clock): when the ticks began to hold the arm (HOLDS), or None
        self.ticked_at: float | None = None  # s (tick clock): the last tick's time
        self.guard = InputGuard(node)
        # sim time: reliable, as every message of the lockstep matters (the sim robot waits for each answer)
        reliability = ReliabilityPolicy.RELIABLE if self.sim_time else ReliabilityPolicy.BEST_EFFORT
        stream = QoSProfile(depth=1, reliability=reliability)
        # an executor serves the subscriptions that are ready together in the order they were made: in sim time the
        # clock before the arm state (a reset's pause instant is ticked before the next instant's state covers it),
        # the actor's gripper before its action (it publishes them in that order; the action ticks the instant)
        self._subscribe_first()
        # the ticks on /rl/safety_ticks, with the TCP's motion features (the fast critic's, or the node's own)
        motion = fast_critic.motion if fast_critic is not None else TcpMotion()
        publisher = self.gate.own_publisher(Float64MultiArray, TICKS_TOPIC, qos.TICKS) if record_ticks else None
        self.ticks = TickRecorder(publisher, rate_hz, self.sim_time, motion) if record_ticks else None
        self.motion = motion if fast_critic is not None or record_ticks else None
        if record_ticks:  # before the arm state: the sim robot sends an instant's constraint bits before its pose
            self.guard.subscribe(UInt32, VIOLATION_TOPIC, self.ticks.on_violation, stream)
        self.gripper_topic = subscribe_with_sender(node, self.guard, Float64, "rl/gripper", self._on_gripper, stream)
        self.action_topic = subscribe_with_sender(node, self.guard, PoseStamped, "rl/action", self._on_action, stream)
        self.reset_topic = subscribe_with_sender(node, self.guard, Empty, "rl/estop_reset", self._on_reset, 10)
        self.guard.subscribe(PoseStamped, "franka_robot_state_broadcaster/current_pose", self._on_pose, stream)
        self.guard.subscribe(
            WrenchStamped, "franka_robot_state_broadcaster/external_wrench_in_base_frame", self._on_wrench, stream
        )
        subscribe_with_sender(node, self.guard, Bool, "rl/estop", self._on_estop, qos.ESTOP_READER)
        self.operator = None  # the operator's e-stop heartbeat, watched (operator_timeout)
        if operator_timeout is not None:
            who = ", ".join(sorted(operators))
            self.operator = OperatorWatch(self.latch, operator_timeout, node.get_logger(), who, time.monotonic())
        self.arm_error = ""  # the arm's own error (arm/error): it takes no command until recovered, so hold
        self.state_loss = StateLossReport(node.get_logger())  # says when the arm's state stays away, and is back
        self.guard.subscribe(String, "arm/error", self._on_arm_error, qos.LATCHED)
        own = self.gate.own_publisher
        self.out = SafetyOutputs(own, frame_id, node.get_clock())
        self.fast = None if fast_critic is None else FastCritic(node, self.guard, fast_critic, own, fast_source)
        if record_ticks and fast_critic is None:
            self.guard.subscribe(Float32MultiArray, CONTEXT_TOPIC, self.ticks.on_context, qos.LATCHED)
        self._force, self._torque = np.zeros(3), np.zeros(3)
        self.wrench_stamp = 0.0  # s: when the newest wrench counts as received (sim time: its stamp)
        senders = frozenset(senders)
        self.gate.watch_inputs({self.action_topic: senders, self.gripper_topic: senders}, discovery_grace)
        node.create_timer(graph_period, self.gate.check, clock=Clock(clock_type=ClockType.STEADY_TIME))
        node.create_timer(STATUS_PERIOD, self.publish_status, clock=Clock(clock_type=ClockType.STEADY_TIME))
        if self.operator is not None:
            watch, steady = self.operator, Clock(clock_type=ClockType.STEADY_TIME)
            node.create_timer(graph_period, lambda: watch.check(time.monotonic()), clock=steady)
        if tick_timer and not self.sim_time:
            node.create_timer(1.0 / rate_hz, self.tick)

    def _subscribe_first(self) -> None:
        """Subscriptions served before all others (sim time: the clock)."""

    def publish_status(self) -> None:
        """``/rl/safety_status``: the flags of the ticks since the last status, the measured TCP position (m) and the
        fast critic's last risk (module docstring)."""
        if self.publishing:
            estop = self.latch.reason if self.latch.latched else None
            risk = None if self.fast is None else self.fast.risk
            command_at = None if self.command is None else self.command.stamp
            timing = Timing(self.ticked_at, command_at, self.holding_since)
            self.out.status(self.status_flags, self.arm, risk, estop, timing)
            self.status_flags = Violation.NONE

    # ----------------------------------------------------------------- inputs
    def _on_action(self, msg, gid: bytes | None) -> None:
        if self.gate.admits(self.action_topic, gid):
            self._obey(*command_pose(msg), stamp_ns(msg.header.stamp), self._received(msg))

    def _obey(self, pos: np.ndarray, rot: np.ndarray, stamp_ns: int, received: float) -> None:
        """A new command from the actor: the target of the ticks from now on."""
        self.command = Command(pos, rot, self.gripper, received)

    def _on_gripper(self, msg, gid: bytes | None) -> None:
        if not self.gate.admits(self.gripper_topic, gid):
            return
        gripper = finite_scalar("gripper", msg.data)
        if not -1.0 <= gripper <= 1.0:
            raise MessageError(f"gripper={gripper} is outside [-1 (open), 1 (closed)]")
        self._set_gripper(gripper)

    def _set_gripper(self, gripper: float) -> None:
        self.gripper = gripper
        if self.command is not None:
            self.command.gripper = gripper

    def _on_pose(self, msg) -> None:
        pos, rot = command_pose(msg)
        self.arm = ArmState(pos, rot, self._received(msg), self._force, self._torque)
        if self.motion is not None:  # the twist by finite difference: on the arm's stamps when it sends them
            self.motion.update(pos, rot, stamp_seconds(msg.header.stamp) or self.arm.stamp)
        self._measured()

    def _received(self, msg) -> float:
        """When a command or a state counts as received, s: the monotonic clock now."""
        return time.monotonic()

    def _measured(self) -> None:
        """A new arm pose or wrench is in."""

    def _on_wrench(self, msg) -> None:
        wrench = wrench_to_numpy(msg.wrench)
        self._force, self._torque = wrench[:3], wrench[3:]
        self.wrench_stamp = self._received(msg)
        if self.arm is not None:
            self.arm.force, self.arm.torque = self._force, self._torque
        self._measured()

    def _on_arm_error(self, msg) -> None:
        error = str(msg.data)[:200]
        if error != self.arm_error:
            log = self.node.get_logger()
            if error:
                log.error(f"the arm reports {error!r}: holding until it is recovered")
            else:
                log.info("the arm's error is cleared")
        self.arm_error = error

    def _on_estop(self, msg, gid: bytes | None) -> None:
        """True: the operator's e-stop, latched; false: the teleop's heartbeat (its e-stop is there, not pressed)."""
        if msg.data:
            self.latch.trigger("the operator's e-stop")
        elif self.operator is not None:
            self.operator.heartbeat(gid, time.monotonic())

    def _on_reset(self, msg, gid: bytes | None) -> None:
        """Clear the latch if :meth:`CommandGate.reset_sender` allows it (a refusal raises: the guard counts and
        reports it)."""
        if self.operator is not None:
            self.operator.refuse_reset(time.monotonic())
        sender = self.gate.reset_sender(self.reset_topic, gid)
        if self.latch.latched:
            self.latch.reset()
            self.node.get_logger().info(f"e-stop reset by {sender}")

    # ----------------------------------------------------------------- the loop
    def tick(self, now: float | None = None, publish: bool = True) -> None:
        """One pass of the fast critic (when there is one) and the hard layer at ``now`` (s; default the monotonic
        clock) and, with ``publish``, its command, gripper, flags and risk (in sim time the flags of all ticks of one
        instant go out together)."""
        if self.arm is None or not self.publishing:
            return  # nothing measured yet (nothing to hold) or unconfigured: nothing sent
        started = time.perf_counter()
        now = time.monotonic() if now is None else now
        if self.previous is None:
            self.previous = hold(self.arm, self.gripper, now)
        stale = now - 2 * self.limits.command_timeout  # no target yet, or inactive: a stale one, the arm holds
        obeying = self.active and not self.arm_error
        command = (self.command if obeying else None) or Command(self.arm.pos, self.arm.rot, self.gripper, stale)
        critic = None if self.fast is None else self.fast.step
        gripper = self.previous.gripper  # the gripper command last sent, before this tick
        self.previous, self.flags = safety_tick(self.limits, self.latch, self.arm, command, self.previous, now, critic)
        if self.gate.watch.foreign:
            self.flags |= Violation.FOREIGN_PUBLISHER
        if not self.active:
            self.flags |= Violation.INACTIVE
        if self.arm_error:
            self.flags |= Violation.ARM_ERROR
        self.status_flags |= self.flags
        self.ticked_at = now
        if not self.flags & HOLDS:
            self.holding_since = None
        elif self.holding_since is None:
            self.holding_since = now
        self.state_loss.tick(bool(self.flags & Violation.STALE_STATE), now)
        if self.ticks is not None:
            self.ticks.record(now, self.arm, command, gripper, int(self.flags), self.fast)
        if publish:
            self._publish(now)
        if self.fast is not None:
            if publish:
                self.fast.publish_risk()
            self.fast.tick_time.add(time.perf_counter() - started)

    def _publish(self, now: float) -> None:
        """The last command sent and the tick's flags (real time)."""
        self.out.command(self.previous)
        self.out.flags(self.flags)


class LockstepSafetyNode(SafetyNode):
    """:class:`~robot_rl.ros.safety.safety_node.SafetyNode` in sim time; ``control_period``: s between two actor commands
    (the arm states inside the newest command's period are instants to tick). The flags of all ticks of one instant
    go out together."""

    sim_time = True

    def __init__(self, node, limits, rate_hz: float, *args, control_period: float = 0.0, **kwargs):
        self.lockstep = Lockstep(rate_hz, control_period)  # the instants to tick
        self.instant_flags = Violation.NONE  # the flags of all ticks of the last instant
        super().__init__(node, limits, rate_hz, *args, **kwargs)

    def _subscribe_first(self) -> None:
        from rosgraph_msgs.msg import Clock

        self.node.create_subscription(Clock, CLOCK_TOPIC, self._on_clock, qos.CLOCK)

    def _obey(self, pos: np.ndarray, rot: np.ndarray, stamp_ns: int, received: float) -> None:
        """The command for the observation of its stamp: the sim robot steps on once it is obeyed."""
        self.lockstep.queue(stamp_ns, Command(pos, rot, self.lockstep.next_gripper, received))
        self._tick_when_due()

    def _set_gripper(self, gripper: float) -> None:
        self.lockstep.next_gripper = gripper  # it goes with the arm command that follows, from its instant on

    def _publish(self, now: float) -> None:
        """The last command sent, stamped ``now`` (sim time); the flags go out per instant."""
        self.out.command(self.previous, now)

    def _received(self, msg) -> float:
        stamp = stamp_seconds(msg.header.stamp)
        ahead = stamp - self.node.get_clock().now().nanoseconds * 1e-9
        if ahead > MAX_CLOCK_LEAD:
            raise MessageError(f"stamp {stamp:.3f} s is {ahead:.3f} s ahead of the sim clock; expected sim time")
        return stamp

    def _measured(self) -> None:
        """An arm state inside the newest command's period is an instant of the lockstep."""
        self.lockstep.add_arm_state(self._measured_ns())
        self._tick_when_due()

    def _on_clock(self, msg) -> None:
        """Tick at each new ``/clock`` instant once the arm state of it is in; when the clock stands (the
        sim robot asks again: an answer was lost or came before it listened) the newest command and the flags of
        its instant go out again (for a monitor that joined after the tick)."""
        if not self.lockstep.add_clock(stamp_ns(msg.clock)):
            if self.publishing and self.previous is not None and not self.lockstep.pending:
                self._publish(self.lockstep.ticked_ns * 1e-9)
                self.out.flags(self.instant_flags)
            return
        self._tick_when_due()

    def _tick_when_due(self) -> None:
        """Tick every instant the newest arm state covers (:meth:`Lockstep.due`), oldest first, with the
        ticks the node would have made at ``rate_hz`` since the last one, all on this arm state."""
        for instant in self.lockstep.due(self._measured_ns()):
            if instant.command is not None:
                self.command, self.gripper = instant.command, instant.command.gripper
            flags = Violation.NONE
            times = instant.tick_times(self.rate_hz)
            for index, now in enumerate(times):
                self.tick(now=now, publish=index == len(times) - 1)
                flags |= self.flags
            self.instant_flags = flags
            if self.publishing:
                self.out.flags(flags)

    def _measured_ns(self) -> int:
        """The instant the arm state is measured up to, ns: its pose and its wrench (they travel on two
        topics, and a tick must not read the wrench of the instant before)."""
        if self.arm is None:
            return 0
        return round(min(self.arm.stamp, self.wrench_stamp) * 1e9)


class SafetyLifecycle(ManagedEntity):
    """The safety node as a managed (lifecycle) node, like a ros2_control controller (``ros2 lifecycle set
    /robot_rl_safety <transition>``): *configure* builds the node on the limits checked at start-up, which leaves
    it inactive, holding the measured pose; *activate*: it obeys the actor; *deactivate*: it holds again;
    *cleanup*, *shutdown* or an error: it sends nothing (the arm's controller keeps the last command)."""

    def __init__(self, node, build: Callable[[], SafetyNode]):
        self.node, self.build = node, build
        self.safety: SafetyNode | None = None
        self.error: ConfigError | None = None  # why configure failed (a bad fast-critic weights file)

    def _set(self, active: bool, publishing: bool, what: str) -> TransitionCallbackReturn:
        if self.safety is not None:
            self.safety.active, self.safety.publishing = active, publishing
        self.node.get_logger().info(f"safety node {what}")
        return TransitionCallbackReturn.SUCCESS

    def on_configure(self, state) -> TransitionCallbackReturn:
        if self.safety is None:
            try:
                self.safety = self.build()
            except ConfigError as error:  # main() exits with it; the node stays unconfigured
                self.error = error
                return TransitionCallbackReturn.FAILURE
        return self._set(False, True, "configured: holding the arm until activated")

    def on_activate(self, state) -> TransitionCallbackReturn:
        return self._set(True, True, "active: the actor's commands pass the hard layer")

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        return self._set(False, True, "inactive: holding the arm")

    def on_cleanup(self, state) -> TransitionCallbackReturn:
        return self._set(False, False, "unconfigured: sending nothing")

    def on_shutdown(self, state) -> TransitionCallbackReturn:
        return self._set(False, False, "shut down: sending nothing")

    def on_error(self, state) -> TransitionCallbackReturn:
        return self._set(False, False, "error: sending nothing")


def hold_after_restart(node, latch: EStopLatch) -> None:
    """The launch started this safety node again after it died (kill -9, a crash): it comes back holding the arm,
    latched like an e-stop, until the operator releases it (an e-stop reset from the console or the teleop), never
    moving the arm on its own (issue 71: it obeyed the actor again at once). In sim time (no person at a cell) it
    goes on."""
    latch.trigger("the safety node restarted after it died")
    node.get_logger().error(
        "restarted after it died: holding the arm until the operator releases it (an e-stop reset from the console "
        "or the teleop)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate-hz", type=float, default=500.0, help="ticks per second (wall or sim time)")
    parser.add_argument("--frame-id", default="base")
    parser.add_argument(
        "--senders",
        nargs="+",
        default=list(DEFAULT_SENDERS),
        help="nodes allowed to publish /rl/action and /rl/gripper",
    )
    parser.add_argument(
        "--operators", nargs="+", default=list(DEFAULT_OPERATORS), help="nodes whose /rl/estop_reset is obeyed"
    )
    parser.add_argument("--graph-period", type=float, default=0.1, help="s between checks of who publishes")
    parser.add_argument(
        "--discovery-grace",
        type=float,
        default=5.0,
        help="s an input publisher's node may stay unnamed (discovery) before it counts as foreign",
    )
    parser.add_argument(
        "--clock-timeout",
        type=float,
        default=30.0,
        help="s (wall clock) to wait for the first /clock with ros.sim_time=true before giving up",
    )
    parser.add_argument(
        "--inactive",
        action="store_true",
        help="start configured but inactive, holding the arm, for a lifecycle manager to activate "
        "(ros2 lifecycle set /robot_rl_safety activate); default: configure and activate at start",
    )
    parser.epilog = "Further arguments: Hydra overrides (robot.limits.*, ros.sim_time), then --ros-args ..."
    argv = list(sys.argv[1:] if argv is None else argv)
    end = argv.index("--ros-args") if "--ros-args" in argv else len(argv)
    overrides = [a for a in argv[:end] if is_override(a)]  # before argparse: --senders a b would take key=value
    args, rest = parser.parse_known_args([a for a in argv[:end] if not is_override(a)])
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    for name in ("rate_hz", "graph_period", "discovery_grace", "clock_timeout"):
        if not getattr(args, name) > 0:  # also NaN
            parser.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    try:
        cfg, ros_args = node_config([*overrides, *argv[end:]])
        limits, sim_time = safety_limits(cfg.robot.limits, args.rate_hz), sim_time_of(cfg)
        fast = fast_critic_config(cfg)
        operator_timeout = positive("teleop_device.estop_timeout", cfg.teleop_device.estop_timeout)
        timing = {"control_period": lockstep_period(cfg)} if sim_time else {}
        with ros_node("robot_rl_safety", ros_args, sim_time, lifecycle=True) as node:

            def build() -> SafetyNode:
                return (LockstepSafetyNode if sim_time else SafetyNode)(
                    node,
                    limits,
                    args.rate_hz,
                    args.frame_id,
                    args.senders,
                    args.operators,
                    args.graph_period,
                    args.discovery_grace,
                    active=False,
                    fast_critic=fast_critic_filter(fast, args.rate_hz, limits.state_timeout),
                    fast_source=fast.weights,
                    tick_timer=False,
                    record_ticks=fast.records_ticks,
                    operator_timeout=operator_timeout,
                    **timing,
                )

            lifecycle = SafetyLifecycle(node, build)
            node.add_managed_entity(lifecycle)
            node.trigger_configure()
            if lifecycle.error is not None:
                raise lifecycle.error
            if not args.inactive:
                node.trigger_activate()
            if restart_count() > 0 and not sim_time:
                hold_after_restart(node, lifecycle.safety.latch)
            if sim_time:
                wait_for_clock(node, args.clock_timeout)
                spin(node)
            else:  # the real-time ticks in the executor's loop, on a schedule of their own (not a timer)
                spin_at_rate(node, lambda: lifecycle.safety.tick(), args.rate_hz)
    except (ConfigError, ClockError) as error:
        return exit_with_error("robot_rl.ros.safety.safety_node", error)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM while starting: nothing to clean up beyond ros_node's
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
