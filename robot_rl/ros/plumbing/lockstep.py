"""When the safety node ticks in sim time: the lockstep with the sim robot, apart from ROS (no rclpy here).

In sim time (``ros.sim_time=true``) the sim robot owns ``/clock`` and steps a control period only once the actor's
command for the period's first instant has been obeyed; between commands it sends an arm state every state period.
The safety node ticks the instants of that lockstep, each once the arm state measured at it is in, with all the
ticks its ``rate_hz`` makes since the instant before (so a 500 Hz node ticks 50 times over a 0.1 s period, on the
arm states it has):

* an instant comes from ``/clock`` (:meth:`Lockstep.add_instant`; a clock that stands adds nothing), from the stamp of
  an actor's command (the period that command starts), or from an arm state inside the newest command's period
  (:meth:`Lockstep.add_arm_state`; the state at the period's end is the next observation, ticked on the actor's
  command for it);
* a command that came early waits in :meth:`Lockstep.queue` for its instant: an earlier one (a reset's pause) holds
  until then;
* :meth:`Lockstep.due` yields each pending instant the newest arm state covers, oldest first, as an
  :class:`Instant`: when, how many ticks, and the command obeyed from it on.

Times are integer nanoseconds of sim time; two stamps within ``STAMP_TOLERANCE_NS`` are one instant (a command's
stamp travels as float seconds).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .messages import STAMP_TOLERANCE_NS

MAX_SIM_TICKS = 1000  # ticks made at one instant at most (a long jump of the clock, e.g. a reset's pause)


@dataclass(frozen=True)
class Instant:
    """One instant to tick: ``ns`` (sim time), ``ticks`` the node makes at its rate since its last instant (all on
    this arm state), ``command`` obeyed from here on (None: the one before stays)."""

    ns: int
    ticks: int
    command: Any | None

    def tick_times(self, rate_hz: float) -> list[float]:
        """s of sim time of each tick, oldest first; the last is the instant itself."""
        return [(self.ns - (index - 1) * 1e9 / rate_hz) * 1e-9 for index in range(self.ticks, 0, -1)]


class Lockstep:
    """The instants to tick (module docstring), for a node ticking at ``rate_hz`` and an actor commanding every
    ``control_period`` s."""

    def __init__(self, rate_hz: float, control_period: float):
        self.rate_hz = rate_hz
        self.period_ns = round(control_period * 1e9)
        self.ticked_ns = 0  # the instant of the last tick (0: none yet)
        self.clock_ns = 0  # the last /clock instant heard
        self.period_end_ns = 0  # the end of the newest obeyed command's period (its next observation)
        self.pending: set[int] = set()  # instants to tick, each once the arm state of it is in
        self.queued: list[tuple[int, Any]] = []  # commands, each obeyed from its instant on, oldest first
        self.next_gripper = -1.0  # the actor's newest gripper command: it goes with the arm command that follows

    def add_clock(self, now_ns: int) -> bool:
        """A ``/clock`` instant; False when the clock stands (the sim robot asks again for what it did not get)."""
        if now_ns == self.clock_ns:
            return False
        self.clock_ns = now_ns
        self.add_instant(now_ns)
        return True

    def add_instant(self, instant_ns: int) -> None:
        """An instant to tick (a new clock instant, the stamp of an actor's command), unless it is ticked already."""
        if instant_ns > self.ticked_ns + STAMP_TOLERANCE_NS:
            self.pending.add(instant_ns)

    def queue(self, instant_ns: int, command: Any) -> None:
        """The actor's command for the observation of ``instant_ns``: obeyed from that instant on, which it adds."""
        self.queued.append((instant_ns, command))
        self.queued.sort(key=lambda queued: queued[0])
        self.add_instant(instant_ns)

    def add_arm_state(self, measured_ns: int) -> None:
        """An arm state measured at ``measured_ns``: an instant when it falls inside the newest command's period."""
        if self.ticked_ns + STAMP_TOLERANCE_NS < measured_ns < self.period_end_ns - STAMP_TOLERANCE_NS:
            self.pending.add(measured_ns)

    def due(self, measured_ns: int) -> Iterator[Instant]:
        """Each pending instant that the arm state measured up to ``measured_ns`` covers, oldest first; an instant
        counts as ticked once the caller asks for the next."""
        while self.pending and measured_ns >= min(self.pending) - STAMP_TOLERANCE_NS:
            now_ns = min(self.pending)
            self.pending.remove(now_ns)
            if now_ns <= self.ticked_ns + STAMP_TOLERANCE_NS:
                continue  # the same instant by another message (a command's stamp is float seconds: within 1 us)
            command = None
            while self.queued and self.queued[0][0] <= now_ns + STAMP_TOLERANCE_NS:  # an early command waits for
                instant, command = self.queued.pop(0)  # its instant (an earlier one, a reset's pause, holds)
                self.period_end_ns = instant + self.period_ns
            elapsed = round((now_ns - self.ticked_ns) * 1e-9 * self.rate_hz)
            ticks = 1 if self.ticked_ns == 0 else min(max(elapsed, 1), MAX_SIM_TICKS)
            yield Instant(now_ns, ticks, command)
            self.ticked_ns = now_ns
