"""How the actor and the learner exchange transitions (actor -> learner) and policy weights (learner -> actor): one
link per side, the actor's end (:class:`ActorLink`) and the learner's (:class:`LearnerLink`). In one process one
object is both ends (:class:`LocalTransport`); over ROS 2 each node holds its own end
(:mod:`robot_rl.ros.links.transport`: topics with standard message types, across machines).

A link carries transitions without reading them (the core floor knows no data type above it): :class:`LearnerLink`
is generic in what it delivers to the learner. robot_rl's actor sends a :class:`robot_rl.data.transition.Transition`
and its learner receives it in a delivery envelope, :class:`robot_rl.data.delivery_ledger.Numbered`: numbered in the
actor's stream by the ROS 2 transport's outbox, unnumbered in one process (``LocalTransport(deliver=Numbered)``)."""

from __future__ import annotations

import math
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")  # what a transport delivers to the learner (robot_rl's: a Numbered transition)


def updates_due(online_received: int, update_calls: int, start_training: int, update_every: int = 1) -> int:
    """Update calls a learner owes: one per ``update_every`` online transitions after the first ``start_training``,
    less those made."""
    return max(online_received - start_training, 0) // update_every - update_calls


@dataclass
class LearnerProgress:
    """What the learner last said it has done (:meth:`LearnerLink.publish_progress`), and when that came (monotonic
    s): online transitions ingested, update calls made, per actor stream the highest ``seq`` ingested, and (in one
    process) the transitions taken of every kind."""

    online_received: int = 0
    update_calls: int = 0
    received: dict[str, int] = field(default_factory=dict)  # actor -> the highest seq the learner ingested
    taken: int = 0
    heard_at: float = -math.inf


class ProgressBoard:
    """The learner's newest progress as a transport's side hears it, and waits on it: whoever hears it (the learner's
    own thread in one process, the executor's over ROS) puts it up with :meth:`post`; an actor keeping pace, or a
    driver waiting for the learner to catch up, waits in :meth:`wait_until` and wakes at the next post, not at the
    next turn of a sleep-poll."""

    def __init__(self) -> None:
        self._progress = LearnerProgress()
        self._posted = threading.Condition()

    def post(self, progress: LearnerProgress) -> None:
        with self._posted:
            self._progress = progress
            self._posted.notify_all()

    def read(self) -> LearnerProgress:
        return self._progress  # replaced whole by post

    def wait_until(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Block until ``condition()`` holds (checked now and after each post, and at least every ``timeout`` s: it
        may also wait on what is not posted, such as a learner's failure); whether it holds."""
        with self._posted:
            return self._posted.wait_for(condition, timeout)


class Arrivals(Generic[Item]):
    """The learner's one queue: what its link delivered, in order, not yet taken. The link puts (the actor's thread
    in one process, the executor's over ROS 2); the learner takes one at a time between its updates, and waits here
    when nothing is left, woken by the next put rather than the next turn of a sleep-poll."""

    def __init__(self) -> None:
        self._items: deque[Item] = deque()
        self._arrived = threading.Condition()

    def put(self, items: list[Item]) -> None:
        with self._arrived:
            self._items.extend(items)
            self._arrived.notify_all()

    def take(self) -> Item | None:
        """The oldest item, or None when there is none."""
        with self._arrived:
            return self._items.popleft() if self._items else None

    def take_all(self) -> list[Item]:
        with self._arrived:
            items = list(self._items)
            self._items.clear()
            return items

    def wait(self, timeout: float) -> bool:
        """Block until something is here or ``timeout`` s passed; whether something is."""
        with self._arrived:
            return self._arrived.wait_for(lambda: bool(self._items), timeout)

    def __len__(self) -> int:
        return len(self._items)


class ActorLink(ABC):
    """The actor's end of its link to the learner: it sends its steps, takes the newest weights and hears the learner's
    progress, which it holds on :attr:`board` (and waits on there)."""

    board: ProgressBoard

    @abstractmethod
    def send_transitions(self, transitions: list[Any]) -> None:
        """The actor's steps, in the order made (robot_rl's: transitions); each arrives in the learner's end's
        :attr:`LearnerLink.arrivals`."""

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
        send; across processes the recorder must hear it (:class:`~robot_rl.ros.links.transport.RosActorLink`)."""

    def learner_progress(self) -> LearnerProgress:
        """What the learner last published (:meth:`LearnerLink.publish_progress`), as this actor hears it."""
        return self.board.read()

    def wait_for_learner(self, condition: Callable[[], bool], timeout: float) -> bool:
        """Block until ``condition()`` holds, waking at each progress the learner publishes (and every ``timeout`` s
        at least); whether it holds."""
        return self.board.wait_until(condition, timeout)

    @abstractmethod
    def not_ingested(self, progress: LearnerProgress) -> int:
        """Of the transitions this actor sent, those the learner had not ingested at ``progress``."""

    def backlog(self, start_training: int, update_every: int) -> int:
        """How far the learner is behind this actor, by what it last published: the actor's transitions it has not
        ingested yet plus the updates it owes (``train.start_training``, ``train.update_every``). The learner
        publishes between two ingests and after each update, so a half-ingested step never reads as taken but not
        yet due."""
        progress = self.learner_progress()
        due = updates_due(progress.online_received, progress.update_calls, start_training, update_every)
        return self.not_ingested(progress) + due


class LearnerLink(ABC, Generic[Item]):
    """The learner's end: :attr:`arrivals`, the steps delivered to it (its only queue, which it takes from), and
    weights and progress out to the actors."""

    arrivals: Arrivals[Item]

    @abstractmethod
    def publish_weights(self, version: int, weights: dict[str, Any]) -> None: ...

    @abstractmethod
    def publish_progress(self, online_received: int, update_calls: int, received: dict[str, int], taken: int) -> None:
        """The learner's online transitions ingested, updates made, per actor stream the highest ``seq`` ingested and
        transitions taken in all, for the actors that keep the update-to-data ratio (:meth:`ActorLink.backlog`)."""


class LocalTransport(ActorLink, LearnerLink[Item]):
    """Both ends in one process (threads): the actor's and the learner's. ``deliver`` makes what the learner receives
    of each step sent (robot_rl's: ``Numbered``, an unnumbered delivery envelope); None: the step itself."""

    def __init__(self, deliver: Callable[[Any], Item] | None = None):
        self._deliver = deliver
        self.arrivals: Arrivals[Item] = Arrivals()
        self._weights: tuple[int, dict[str, Any]] | None = None
        self._lock = threading.Lock()
        self.sent = 0  # transitions sent so far
        self.board = ProgressBoard()

    def send_transitions(self, transitions: list[Any]) -> None:
        deliver = self._deliver or (lambda transition: transition)
        self.arrivals.put([deliver(transition) for transition in transitions])
        self.sent += len(transitions)

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
        self.board.post(LearnerProgress(online_received, update_calls, received, taken, time.monotonic()))

    def not_ingested(self, progress: LearnerProgress) -> int:
        return self.sent - progress.taken
