"""The operator's e-stop is alive: the safety node's watch of the teleop node's heartbeat.

The teleop node carries the operator's e-stop and sends ``/rl/estop`` false every period (its heartbeat: the e-stop is
there, not pressed). Once a heartbeat is heard, a silence of ``timeout`` s latches the safety node's hold as an e-stop
press does, said in one log line. When heartbeats come back:

- from the same publisher (the same teleop process: it was stalled, starved of CPU, not dead; any press it made
  meanwhile comes before its heartbeat), the hold the silence made is released, unless anything else triggered the
  latch since (an e-stop press, a foreign publisher): those wait for an operator's reset as always;
- from a new publisher (the teleop died and ``robot-rl launch`` restarted it, or the operator started it again), the
  arm stays held until an operator's e-stop reset; a reset is refused while the heartbeat is silent.
"""

from __future__ import annotations

import math

from ...safety import EStopLatch
from ..plumbing.guard import MessageError
from ..plumbing.senders import describe


class OperatorWatch:
    """The heartbeat of the operator's e-stop against ``latch``; ``timeout``: s of silence that latch the hold;
    ``log``: the node's logger; ``operators``: who may reset the e-stop, for the log. Times are monotonic s."""

    def __init__(self, latch: EStopLatch, timeout: float, log, operators: str, now: float):
        self.latch, self.timeout, self.log, self.operators = latch, timeout, log, operators
        self.heard = -math.inf  # the last heartbeat (never: nothing to watch, no teleop in this graph)
        self.sender: bytes | None = None  # the GID of the publisher of the last heartbeat
        self.silent = False  # heard once, then silent for timeout s
        self.hold: tuple[bytes, int] | None = None  # the silent sender and the latch's triggers, of the hold it made
        self.checked = now

    def heartbeat(self, gid: bytes | None, now: float) -> None:
        """A heartbeat from the publisher ``gid``."""
        gap, self.heard, self.sender = now - self.heard, now, gid
        if not self.silent:
            return
        self.silent = False
        if gid is not None and self.hold == (gid, self.latch.triggers):
            self.latch.reset()
            self.log.warning(
                f"the teleop's e-stop is back after {gap:.1f} s from the same node (it was stalled, not gone): "
                "the hold it made is released"
            )
        else:
            self.log.info(
                f"the teleop's e-stop is back (publisher {describe(gid)}); the arm stays held until an e-stop reset by "
                f"{self.operators}"
            )
        self.hold = None

    def check(self, now: float) -> None:
        """Latch the hold when the heartbeat, heard before, has been silent ``timeout`` s. A check that comes late (the
        safety node was starved of CPU for more than half the timeout) judges nothing: heartbeats may wait unread."""
        late, self.checked = now - self.checked > self.timeout / 2, now
        silent = now - self.heard
        if late or self.silent or not self.timeout <= silent < math.inf:
            return
        self.silent = True
        made = not self.latch.latched
        self.latch.trigger(f"teleop silent for {silent:.1f} s: the operator's e-stop is gone")
        self.hold = (self.sender, self.latch.triggers) if made and self.sender is not None else None
        self.log.error(
            f"teleop silent for {silent:.1f} s: holding the arm; the operator's e-stop is gone (an e-stop reset by "
            f"{self.operators} releases it once the teleop is back)"
        )

    def refuse_reset(self, now: float) -> None:
        """:class:`MessageError` while the heartbeat is silent: no reset without the operator's e-stop."""
        if self.silent:
            raise MessageError(
                f"e-stop reset refused: the teleop's e-stop is silent ({now - self.heard:.1f} s); start the teleop node "
                "again first"
            )
