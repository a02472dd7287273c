"""The safety node's ticks as a stream: what its fast loop saw and did every tick, for the recorder and the learner.

With ``safety.fast_critic.record_ticks=true`` (or ``learn=true``) the safety node publishes every tick on
``rl/safety_ticks`` (its namespace: one stream per robot), std_msgs/Float64MultiArray, one row per tick:

| column | what | unit |
|---|---|---|
| 0 | the tick's time: sim time in the sim graph, the node's wall clock (ROS time, as the arm's stamps) in real time | s |
| 1 : 1 + W | the fast critic's input row (:func:`robot_rl.safety.fast_critic.tick_features`): the measured state, the delta of the command the hard layer was handed, the task context (W = 26 + C) | m, rad, N, base frame |
| 1 + W | the risk of the tick's command; NaN without a critic or when it was bypassed | [0, 1] |
| 2 + W | the tick's :class:`~robot_rl.safety.Violation` flags | bits |
| 3 + W | the task's constraint bits after the tick: the newest on ``sim/violation`` when the next tick ran (real time) or when the next ones came (sim time: the sim robot sends them with each arm state) | bits |

``layout.dim`` is ``[("ticks", T), ("columns", 4 + W)]``. In real time a message carries ``batch`` ticks (20 ms);
in sim time each arm state's ticks go out as soon as their constraint bits are in, before the observation that ends
the control period reaches the actor.

The actor's :class:`TickInbox` checks every message (layout, sizes, finite values, a risk in [0, 1] or NaN,
integer flags, times that never go back) and hands each step the ticks before its observation as a
:class:`~robot_rl.sim.fast_critic_loop.FastStream` (the env's ``info["fast_loop"]``, as a MuJoCo task's own fast loop
gives it): they travel with the transition (:mod:`robot_rl.data.wire`), so the recorder's episode store keeps them
as the episode's streams and the learner fits the fast critic on them, as in ``robot-rl train``.
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from collections import deque

import numpy as np

from ...safety import ArmState, Command
from ...safety.fast_critic import INPUT_WIDTH, MAX_CONTEXT, fast_state, tick_features
from ...sim.fast_critic_loop import FastStream
from ..plumbing.guard import MessageError
from .fast_critic import task_context

TICKS_TOPIC = "rl/safety_ticks"
VIOLATION_TOPIC = "sim/violation"  # std_msgs/UInt32: the task's constraint bits (the sim robot; a cell's monitor)
EXTRA_COLUMNS = 4  # time, risk, flags, violation around the features
MAX_TICKS = 5_000  # per message
MAX_HELD = 200_000  # ticks the actor holds before it drops the oldest (about 3 min at 1 kHz)
MAX_BITS = 2**32 - 1
TICK_BATCH_S = 0.02  # real time: s of ticks per message


class TickLog:
    """The safety node's side: rows of ticks, each completed with the constraint bits that follow it, published in
    batches on ``publish(msg)`` (a Float64MultiArray publisher's ``publish``).

    ``settle_on_tick``: real time, a tick's constraint bits are the newest when the next tick runs; in sim time
    (False) they are those that come with the next arm state (:meth:`on_violation`), which also sends the ticks
    completed. ``batch``: ticks per message in real time."""

    def __init__(self, publish, batch: int, settle_on_tick: bool):
        from std_msgs.msg import Float64MultiArray, MultiArrayDimension

        self.publish, self.batch, self.settle_on_tick = publish, max(int(batch), 1), settle_on_tick
        self._message, self._dimension = Float64MultiArray, MultiArrayDimension
        self.violation = 0  # the newest constraint bits
        self._pending: list[list[float]] = []  # ticks waiting for the bits that follow them
        self._ready: list[list[float]] = []  # complete rows not sent yet
        self.sent = 0  # ticks published

    def add(self, t: float, features: np.ndarray, risk: float, flags: int) -> None:
        """One tick at ``t`` s: its critic input row, the risk of its command (NaN: none) and its flags."""
        if self.settle_on_tick or len(self._pending) >= MAX_TICKS:
            self._settle()
        self._pending.append([t, *features.tolist(), risk, float(flags)])
        if len(self._ready) >= self.batch:
            self.flush()

    def on_violation(self, bits: int) -> None:
        """New constraint bits: they complete the ticks waiting for them (sim time: and those go out)."""
        self.violation = int(bits)
        if not self.settle_on_tick:
            self._settle()
            self.flush()

    def _settle(self) -> None:
        bits = float(self.violation)
        for row in self._pending:
            row.append(bits)
        self._ready.extend(self._pending)
        self._pending = []

    def flush(self) -> None:
        """Publish the complete rows (at most ``MAX_TICKS`` per message; rows of another width start a message)."""
        while self._ready:
            width = len(self._ready[0])
            count = next((i for i, row in enumerate(self._ready) if len(row) != width), len(self._ready))
            rows, self._ready = self._ready[: min(count, MAX_TICKS)], self._ready[min(count, MAX_TICKS) :]
            msg = self._message()
            msg.layout.dim = [
                self._dimension(label="ticks", size=len(rows), stride=len(rows) * width),
                self._dimension(label="columns", size=width, stride=width),
            ]
            msg.data = array("d", [value for row in rows for value in row])
            self.publish(msg)
            self.sent += len(rows)


class TickRecorder:
    """The safety node's ticks into a :class:`TickLog` on ``publisher``: each tick's critic input row of the command
    the hard layer was handed (the actor's, or the fast critic's choice), its risk and its flags. ``motion``: the
    TCP's motion features (the fast critic's, or the node's own); without a critic the task context is the newest on
    ``/rl/safety_context`` (:meth:`on_context`). Rows are stamped in sim time, else on the wall clock (the arm's)."""

    def __init__(self, publisher, rate_hz: float, sim_time: bool, motion):
        self.log = TickLog(publisher.publish, round(TICK_BATCH_S * rate_hz), settle_on_tick=not sim_time)
        self.sim_time, self.motion = sim_time, motion
        self.context = np.zeros(0, np.float32)

    def on_violation(self, msg) -> None:
        self.log.on_violation(msg.data)

    def on_context(self, msg) -> None:
        self.context = task_context(msg)

    def record(self, now: float, arm: ArmState, command: Command, gripper: float, flags: int, fast) -> None:
        """The tick at ``now`` s: ``command`` handed to it, ``gripper`` the command last sent before it, ``fast`` the
        node's :class:`~robot_rl.ros.safety.fast_critic.FastCritic` or None."""
        handed, risk, context = (command, math.nan, self.context) if fast is None else fast.last_tick
        state = fast_state(self.motion.features, arm.force, arm.torque, gripper)
        features = tick_features(state, arm, handed, gripper, context)
        self.log.add(now if self.sim_time else time.time(), features, risk, flags)


def checked_ticks(msg) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(time (T,) float64 s, features (T, W) float32, risk (T,) float32, flags (T,) uint32, violation (T,) uint32)
    of a ticks message; :class:`MessageError` naming what is wrong otherwise."""
    dims = [(d.label, d.size) for d in msg.layout.dim]
    if len(dims) != 2 or dims[0][0] != "ticks" or dims[1][0] != "columns":
        raise MessageError(f"ticks layout {dims[:4]}; expected [('ticks', T), ('columns', 4 + W)]")
    (_, count), (_, columns) = dims
    width = columns - EXTRA_COLUMNS
    if not 1 <= count <= MAX_TICKS or not INPUT_WIDTH <= width <= INPUT_WIDTH + MAX_CONTEXT:
        raise MessageError(
            f"{count} ticks of {columns} columns; expected 1..{MAX_TICKS} ticks of "
            f"{INPUT_WIDTH + EXTRA_COLUMNS}..{INPUT_WIDTH + MAX_CONTEXT + EXTRA_COLUMNS} columns"
        )
    if len(msg.data) != count * columns:
        raise MessageError(f"{len(msg.data)} values for {count} ticks of {columns} columns")
    rows = np.asarray(msg.data, np.float64).reshape(count, columns)
    times, features, risk = rows[:, 0], rows[:, 1 : 1 + width], rows[:, 1 + width]
    bits = rows[:, 2 + width :]
    if not (np.isfinite(times).all() and np.isfinite(features).all() and np.isfinite(bits).all()):
        raise MessageError("ticks with non-finite time, features or bits")
    if np.any(np.diff(times) < 0):
        raise MessageError("tick times go back within the message")
    if np.any(np.isinf(risk)) or np.any((risk < 0) | (risk > 1)):
        raise MessageError("tick risk outside [0, 1] (NaN: none)")
    if np.any((bits < 0) | (bits > MAX_BITS) | (bits != np.floor(bits))):
        raise MessageError(f"tick flags or violation bits not integers in 0..{MAX_BITS}")
    flags, violation = bits.astype(np.uint32).T
    return times, features.astype(np.float32), risk.astype(np.float32), flags, violation


class TickInbox:
    """The actor's side: the ticks of one safety node as they come (the subscription's callback, :meth:`on_message`,
    runs in the executor's thread), handed out per step by :meth:`take` from the actor's thread."""

    def __init__(self):
        self._rows: deque[tuple[np.ndarray, ...]] = deque()  # messages' arrays, in time order
        self._held = 0
        self.newest = -np.inf  # s: the time of the newest tick received
        self.dropped = 0  # ticks dropped: held too long, or older than an episode's start
        self.arrived = threading.Condition()

    def on_message(self, msg) -> None:
        """A ticks message: checked (:func:`checked_ticks`; a bad one raises for the guard to drop and count) and
        held. Ticks older than the newest held are refused: the stream is in time order."""
        columns = checked_ticks(msg)
        if columns[0][0] < self.newest:
            raise MessageError(f"ticks from {columns[0][0]:.6f} s, older than the newest held ({self.newest:.6f} s)")
        with self.arrived:
            self._rows.append(columns)
            self._held += len(columns[0])
            self.newest = float(columns[0][-1])
            while self._held > MAX_HELD:
                self._held -= len(self._rows[0][0])
                self.dropped += len(self._rows.popleft()[0])
            self.arrived.notify_all()

    def wait_until(self, t: float, timeout: float) -> bool:
        """Wait up to ``timeout`` s (wall clock) for a tick at ``t`` s or later; whether one came."""
        with self.arrived:
            return self.arrived.wait_for(lambda: self.newest >= t, timeout)

    def take(self, before: float) -> FastStream | None:
        """The held ticks earlier than ``before`` s, oldest first, as one stream (None: none)."""
        parts = []
        with self.arrived:
            while self._rows and self._rows[0][0][0] < before:
                columns = self._rows.popleft()
                split = int(np.searchsorted(columns[0], before, side="left"))
                if split < len(columns[0]):  # the rest of this message is the next step's
                    self._rows.appendleft(tuple(c[split:] for c in columns))
                    columns = tuple(c[:split] for c in columns)
                self._held -= len(columns[0])
                parts.append(columns)
        if not parts:
            return None
        widths = {part[1].shape[1] for part in parts}
        if len(widths) > 1:  # the task context changed width within a step (a new task): keep the newest width
            kept = [part for part in parts if part[1].shape[1] == parts[-1][1].shape[1]]
            self.dropped += sum(len(part[0]) for part in parts) - sum(len(part[0]) for part in kept)
            parts = kept
        time, features, risk, flags, violation = (np.concatenate(column) for column in zip(*parts))
        return FastStream(time, features, risk, flags, violation)

    def drop_before(self, t: float) -> None:
        """Drop the ticks earlier than ``t`` s (those of an episode already sent, at a reset), counted."""
        stream = self.take(t)
        if stream is not None:
            self.dropped += len(stream.time)
