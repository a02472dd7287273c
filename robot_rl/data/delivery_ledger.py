"""The learner's record of what it ingested (:class:`DeliveryLedger`): each step once and in order, whatever way
it came (one process, the Ray fleet, ROS topics with resends, a backfill from a store), and the envelope a step is
delivered in (:class:`Numbered`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .transition import Transition


@dataclass(frozen=True)
class Numbered:
    """A step as it is delivered to a learner or a recorder: the transition (not changed) and, when an actor of the
    node graph sent it (its outbox, :mod:`robot_rl.ros.plumbing.delivery`), its place in that actor session's stream
    (``transition.origin.actor``), so that each step is taken once and in order. One process, the Ray fleet and a
    store deliver steps unnumbered (``seq`` 0), as the wire sends them (:mod:`robot_rl.data.wire`)."""

    transition: Transition
    seq: int = 0  # the step's number in the actor session's stream, from 1 (0 unnumbered)
    floor: int = 0  # the lowest ``seq`` the actor still holds: what lies below can no longer be sent again


class DeliveryLedger:
    """The learner's record of what it ingested, so a resend or a backfill never adds a step twice.

    Numbered transitions (:class:`Numbered` with a ``seq``: the ROS actor numbers them) are
    taken once per ``(actor, seq)`` and in order: one that skips ahead (the actor's live stream reached a restarted
    learner before the resend of what it lacks) is dropped, and comes again with the resend. ``floor`` is the lowest
    ``seq`` the actor still holds; what lies below it can no longer be asked for.
    Transitions that carry ``episode`` (a uid) are taken only for episodes whose first step was taken,
    and an episode whose first step arrives a second time (a resend of an episode backfilled from a
    store) is skipped. Transitions that carry ``step`` (their index in the episode) are taken only in
    order: one that repeats or skips a step of its episode is refused and counted (``out_of_order``).
    """

    def __init__(self) -> None:
        self.received: dict[str, int] = {}  # actor -> highest seq ingested
        self.episodes: set[str] = set()  # uids of episodes whose first step was ingested
        self.skipping: set[str] = set()
        self.next_step: dict[str, tuple[str, int]] = {}  # actor -> (its episode's uid, the step that comes next)
        self.ingested = self.duplicates = self.gaps = self.orphans = self.out_of_order = 0

    def accept(self, delivered: Numbered) -> bool:
        """True when the delivered step is new and continues its episode (then it counts as ingested)."""
        if not self._accept(delivered):
            return False
        transition = delivered.transition
        actor, uid, step = transition.origin.actor, transition.origin.episode, transition.origin.step
        if uid and step is not None:
            episode, next_step = (uid, 0) if transition.first else self.next_step.get(actor, (uid, step))
            if episode == uid and step != next_step:  # a step repeated or skipped within the actor's episode
                self.out_of_order += 1
                return False
            self.next_step[actor] = (uid, step + 1)
        self.ingested += 1
        return True

    def _accept(self, delivered: Numbered) -> bool:
        transition, seq, floor = delivered.transition, delivered.seq, delivered.floor
        actor, uid = transition.origin.actor, transition.origin.episode
        if seq:
            last = max(self.received.get(actor, 0), (floor or 1) - 1)
            if seq <= last:
                self.duplicates += 1
                return False
            if seq != last + 1:
                self.gaps += 1  # ahead of a resend that will bring the steps between
                return False
            self.received[actor] = seq
        if not uid:
            return True
        if transition.first:
            if uid in self.episodes:
                self.duplicates += 1
                self.skipping.add(uid)
                return False
            self.skipping.discard(uid)
            self.episodes.add(uid)
            return True
        if uid in self.skipping:
            return False
        if uid not in self.episodes:
            self.orphans += 1  # its start was never received (it lies below the actor's floor)
            return False
        return True

    def state(self) -> dict[str, Any]:
        return {
            "received": dict(self.received),
            "episodes": sorted(self.episodes),
            "ingested": self.ingested,
            "duplicates": self.duplicates,
            "gaps": self.gaps,
            "orphans": self.orphans,
            "out_of_order": self.out_of_order,
            "next_step": {actor: list(value) for actor, value in self.next_step.items()},
        }

    def load(self, state: dict[str, Any]) -> None:
        self.received = {str(k): int(v) for k, v in state.get("received", {}).items()}
        self.episodes = set(state.get("episodes", []))
        self.ingested, self.duplicates = int(state.get("ingested", 0)), int(state.get("duplicates", 0))
        self.gaps, self.orphans = int(state.get("gaps", 0)), int(state.get("orphans", 0))
        self.out_of_order = int(state.get("out_of_order", 0))
        self.next_step = {str(k): (str(v[0]), int(v[1])) for k, v in state.get("next_step", {}).items()}
