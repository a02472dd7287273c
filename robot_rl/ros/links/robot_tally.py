"""What each robot of a fleet (``fleet.robots``) gave the one learner: episodes, successes, online steps and the
human's takeover steps, counted from the transitions as they arrive on each robot's ``rl/transitions``.

A transition sent again (after a learner restart, a ``seq`` already seen from its actor) is not counted twice. The
counts cover this learner session: a restarted learner counts from its start.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

from ...data.delivery_ledger import Numbered


@dataclass
class RobotCounts:
    episodes: int = 0  # online episodes that ended (demonstrations apart)
    successes: int = 0  # of those, the ones solved at some step
    steps: int = 0  # online steps
    takeover_steps: int = 0  # online steps the human's action was executed
    demo_episodes: int = 0


class RobotTally:
    """Per-robot counts; :meth:`add` is called from the executor thread, :meth:`summary` from any other."""

    def __init__(self) -> None:
        self.counts: dict[str, RobotCounts] = {}
        self.last_seq: dict[str, int] = {}  # actor -> the highest seq counted
        self.solved: dict[str, bool] = {}  # actor -> its current episode was solved at some step
        self.lock = threading.Lock()

    def add(self, robot: str, delivered: list[Numbered]) -> None:
        with self.lock:
            counts = self.counts.setdefault(robot, RobotCounts())
            for n in delivered:
                t, actor = n.transition, n.transition.origin.actor
                if n.seq and n.seq <= self.last_seq.get(actor, 0):
                    continue  # a resend
                self.last_seq[actor] = n.seq
                self.solved[actor] = (self.solved.get(actor, False) and not t.first) or t.success
                if not t.demo:
                    counts.steps += 1
                    counts.takeover_steps += int(t.intervened)
                if t.terminated or t.truncated:
                    if t.demo:
                        counts.demo_episodes += 1
                    else:
                        counts.episodes += 1
                        counts.successes += int(self.solved[actor])

    def summary(self) -> dict[str, dict[str, Any]]:
        """robot -> its counts and ``success_rate`` (successes per online episode; None before the first)."""
        with self.lock:
            return {
                robot: {**asdict(c), "success_rate": c.successes / c.episodes if c.episodes else None}
                for robot, c in sorted(self.counts.items())
            }

    def lines(self) -> list[str]:
        """One log line per robot."""
        return [
            f"robot {robot}: {c['episodes']} episodes"
            + (f" (success {c['success_rate']:.2f})" if c["episodes"] else "")
            + f", {c['steps']} online steps, {c['takeover_steps']} takeover steps, {c['demo_episodes']} demos"
            for robot, c in self.summary().items()
        ]
