"""How the actor and the learner exchange transitions (actor -> learner) and policy weights
(learner -> actor). The in-process transport is a queue; the ROS 2 transport (topics with
standard message types across machines) implements the same interface."""

from __future__ import annotations

import math
import queue
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from robot_rl.data.transition import Transition, stream_position


def updates_due(online_received: int, update_calls: int, start_training: int, update_every: int = 1) -> int:
    """Update calls a learner owes: one per ``update_every`` online transitions after the first ``start_training``,
    less those made."""
    return max(online_received - start_training, 0) // update_every - update_calls


@dataclass
class LearnerProgress:
    """What the learner last said it has done (:meth:`Transport.publish_progress`), and when that came (monotonic
    s): online transitions ingested, update calls made, per actor stream the highest ``seq`` ingested, and (in one
    process) the transitions taken of every kind."""

    online_received: int = 0
    update_calls: int = 0
    received: dict[str, int] = field(default_factory=dict)  # actor -> the highest seq the learner ingested
    taken: int = 0
    heard_at: float = -math.inf


class Transport(ABC):
    @abstractmethod
    def send_transitions(self, transitions: list[Transition]) -> None: ...

    @abstractmethod
    def receive_transitions(self, timeout: float) -> list[Transition]:
        """Everything sent so far and not yet received (waits up to ``timeout`` s for the first)."""

    @abstractmethod
    def publish_weights(self, version: int, weights: dict[str, Any]) -> None: ...

    @abstractmethod
    def latest_weights(self) -> tuple[int, dict[str, Any]] | None:
        """The newest published (key, weights), or None before the first; the key changes with every
        publication (also when a restarted learner counts its updates from its checkpoint again)."""

    @abstractmethod
    def weights_version(self) -> int | None:
        """The learner's update count when it published the newest weights (None before the first)."""

    def weights_session(self) -> str | None:
        """The learner run (session id) that published the newest weights; None in one process."""
        return None

    def cut_episode(self, uid: str) -> None:
        """The step budget cut episode ``uid`` short after the last step sent: it is finished as it is. In one
        process the driver's own recorder ends it (:meth:`~robot_rl.data.EpisodeRecorder.end_episode`): nothing to
        send; across processes the recorder must hear it (:class:`~robot_rl.ros.transport.RosTransport`)."""

    def publish_progress(self, online_received: int, update_calls: int, received: dict[str, int], taken: int) -> None:
        """The learner's online transitions ingested, updates made, per actor stream the highest ``seq`` ingested and
        transitions taken in all, for the actors that keep the update-to-data ratio (:meth:`backlog`)."""

    @abstractmethod
    def learner_progress(self) -> LearnerProgress:
        """What the learner last published (:meth:`publish_progress`), as this transport's actor hears it."""

    @abstractmethod
    def not_ingested(self, progress: LearnerProgress) -> int:
        """Of the transitions this transport's actor sent, those the learner had not ingested at ``progress``."""

    def backlog(self, start_training: int, update_every: int) -> int:
        """How far the learner is behind this transport's actor, by what it last published: the actor's transitions
        it has not ingested yet plus the updates it owes (``train.start_training``, ``train.update_every``). The
        learner publishes between two ingests and after each update, so a half-ingested step never reads as taken
        but not yet due."""
        progress = self.learner_progress()
        due = updates_due(progress.online_received, progress.update_calls, start_training, update_every)
        return self.not_ingested(progress) + due


class LocalTransport(Transport):
    """Actor and learner in one process (threads)."""

    def __init__(self):
        self._transitions: queue.Queue = queue.Queue()
        self._weights: tuple[int, dict[str, Any]] | None = None
        self._lock = threading.Lock()
        self.sent = 0  # transitions sent so far
        self._progress = LearnerProgress()

    def send_transitions(self, transitions: list[Transition]) -> None:
        for transition in transitions:
            self._transitions.put(transition)
            self.sent += 1

    def receive_transitions(self, timeout: float) -> list[Transition]:
        try:
            received = [self._transitions.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                received.append(self._transitions.get_nowait())
            except queue.Empty:
                return received

    def publish_weights(self, version: int, weights: dict[str, Any]) -> None:
        with self._lock:
            self._weights = (version, weights)

    def latest_weights(self) -> tuple[int, dict[str, Any]] | None:
        with self._lock:
            return self._weights

    def weights_version(self) -> int | None:
        with self._lock:
            return None if self._weights is None else self._weights[0]

    def publish_progress(self, online_received: int, update_calls: int, received: dict[str, int], taken: int) -> None:
        self._progress = LearnerProgress(online_received, update_calls, received, taken, time.monotonic())

    def learner_progress(self) -> LearnerProgress:
        return self._progress  # replaced whole by the learner's thread

    def not_ingested(self, progress: LearnerProgress) -> int:
        return self.sent - progress.taken


class DeliveryLedger:
    """The learner's record of what it ingested, so a resend or a backfill never adds a step twice.

    Numbered transitions (:class:`~robot_rl.data.transition.NumberedTransition`: the ROS actor numbers them) are
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

    def accept(self, transition: Transition) -> bool:
        """True when ``transition`` is new and continues its episode (then it counts as ingested)."""
        if not self._accept(transition):
            return False
        actor, uid, step = transition.actor, transition.episode, transition.step
        if uid and step is not None:
            episode, next_step = (uid, 0) if transition.first else self.next_step.get(actor, (uid, step))
            if episode == uid and step != next_step:  # a step repeated or skipped within the actor's episode
                self.out_of_order += 1
                return False
            self.next_step[actor] = (uid, step + 1)
        self.ingested += 1
        return True

    def _accept(self, transition: Transition) -> bool:
        actor, uid = transition.actor, transition.episode
        seq, floor = stream_position(transition)
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
