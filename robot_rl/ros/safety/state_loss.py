"""The safety node's report of a lost arm state: the flag holds the arm at every tick, this says it once in the log."""

from __future__ import annotations

#: s of stale arm state before the safety node says so in its log (a loaded machine's gaps of tens of ms: no line)
STATE_LOSS_REPORT_S = 1.0


class StateLossReport:
    """One log line when the arm's state has been stale (no pose within ``robot.limits.state_timeout``) for
    STATE_LOSS_REPORT_S, naming the hold and the driver; one when it is back. The flag holds the arm every tick
    either way: this is what the operator reads (the arm's driver, or the emulated cell, died)."""

    def __init__(self, log):
        self.log = log
        self.since: float | None = None  # s (monotonic): when the state went stale
        self.said = False

    def tick(self, stale: bool, now: float) -> None:
        if stale:
            if self.since is None:
                self.since = now
            elif not self.said and now - self.since >= STATE_LOSS_REPORT_S:
                self.said = True
                self.log.error(
                    f"no arm state for {now - self.since:.1f} s: holding the arm (is the arm's driver up? "
                    "robot.limits.state_timeout)"
                )
        else:
            if self.said:
                self.log.info(f"the arm's state is back after {now - self.since:.1f} s")
            self.since, self.said = None, False
