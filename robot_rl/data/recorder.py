"""Transitions -> committed episodes: the one recorder of every way of running.

``robot-rl train`` feeds it the actor's transitions as they are made, the recorder node feeds it
``/rl/transitions``, and the actor node writes an episode the recorder never confirmed through it. An episode
starts at a transition flagged ``first`` and is committed when one ends it (terminated or truncated), or
when the driver ends it (the step budget was spent: :meth:`EpisodeRecorder.end_episode` in the driver's process,
:meth:`EpisodeRecorder.cut` from another, with the ``seq`` of the episode's last step); an episode cut
short otherwise (the actor paused, crashed or was stopped) is dropped, so a store only ever holds finished
episodes. Each committed episode keeps the actor's episode uid. Steps sent again (an old ``seq`` of an actor
stream, resent for a restarted learner) and episodes already in the store are skipped.

Every committed episode has the same metadata whoever recorded it: ``source`` (demo or online), ``uid``,
``length``, ``success`` (any step), ``return`` (sum of rewards), ``interventions`` (steps the human acted),
``filter_interventions`` (steps the safety filter changed) and ``violations`` (steps with constraint flags),
plus what the driver adds with :meth:`EpisodeRecorder.annotate` (the reset's seed and randomization).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .episode_store import EpisodeStore
from .transition import Transition

MAX_PENDING_CUTS = 64  # cuts of episodes whose last step has not come yet (the oldest is forgotten)


class EpisodeRecorder:
    """Transitions -> committed episodes of one :class:`~robot_rl.data.EpisodeStore`."""

    def __init__(
        self,
        store: EpisodeStore,
        log=None,
        acknowledge: Callable[[list[str]], None] = lambda uids: None,
        clock: Callable[[], float] | None = None,
    ):
        """``log``: a logger with ``info``/``warning`` (None: quiet); ``acknowledge(uids)``: called with each
        committed episode's uid; ``clock``: the ``timestamp`` (s) of a step that comes without its ``stamp``
        (taken at receipt; None: wall time)."""
        self.store, self.writer, self.log, self.acknowledge, self.clock = (
            store,
            store.writer(),
            log,
            acknowledge,
            clock,
        )
        self.committed = 0
        self.last_receipt = time.monotonic()
        self.last_seq: dict[str, int] = {}  # actor -> newest seq taken
        self.uids = {store.episode_attrs(name).get("uid") for name in store.episode_names()} - {None}
        self.recent: list[str] = []  # uids committed lately (the recorder node acknowledges them again)
        self.attrs: dict[str, Any] = {}  # of the episode that starts next or is open
        self.demo, self.uid, self.open_seq = False, "", 0  # the open episode's; open_seq: its newest step's seq
        self.cuts: OrderedDict[str, int] = OrderedDict()  # episode uid -> seq of its last step (cut by the budget)
        self.counts = {"interventions": 0, "filter_interventions": 0, "violations": 0}

    def annotate(self, **attrs: Any) -> None:
        """Metadata for the episode that starts next (or is open), e.g. the reset's seed and randomization."""
        self.attrs.update(attrs)

    def add(self, transitions: list[Transition], resent: bool = False) -> list[str]:
        """Take transitions in the order they were made; returns the names of the episodes committed.
        ``resent``: the transitions come again on purpose (a whole episode, :meth:`record`), their ``seq``
        is not checked against the stream's."""
        self.last_receipt = time.monotonic()
        committed = []
        for t in transitions:
            if t.seq and not resent:
                if t.seq <= self.last_seq.get(t.actor, 0):
                    continue  # sent again for a restarted learner
                self.last_seq[t.actor] = t.seq
            if t.first:
                if self.writer.active:
                    self._warn("dropped an unfinished episode (the actor started a new one)")
                    self.writer.discard()
                if t.episode and t.episode in self.uids:
                    self.attrs = {}
                    continue  # already in the store
                self.writer.start(t.obs)
                self.demo, self.uid = t.demo, t.episode
                self.counts = dict.fromkeys(self.counts, 0)
            if not self.writer.active:
                continue  # the rest of an episode whose start was missed
            stamp = t.stamp or (None if self.clock is None else self.clock())
            t.record(self.writer, **({} if stamp is None else {"timestamp": stamp}))
            self.counts["interventions"] += t.intervened
            self.counts["filter_interventions"] += t.filtered
            self.counts["violations"] += t.violation != 0
            self.open_seq = t.seq
            if t.terminated or t.truncated or (t.seq and t.seq >= self.cuts.get(t.episode, t.seq + 1)):
                self.cuts.pop(t.episode, None)
                committed.append(self._commit())
        return committed

    def cut(self, uid: str, seq: int) -> str | None:
        """The driver in another process cut episode ``uid`` short at its step numbered ``seq`` (its step budget was
        spent). The steps come over the network, maybe after this word: the episode is committed once that step is
        in (its name when that is now). One already in the store is acknowledged again."""
        if uid in self.uids:
            self.acknowledge([uid])
            return None
        if self.writer.active and self.uid == uid and self.open_seq >= seq:
            return self._commit()
        self.cuts[uid] = seq
        while len(self.cuts) > MAX_PENDING_CUTS:
            self.cuts.popitem(last=False)
        return None

    def end_episode(self) -> str | None:
        """Commit the open episode as it is (the driver ended it: the step budget was spent); its name, or
        None when no episode is open."""
        return self._commit() if self.writer.active and len(self.writer) else None

    def record(self, transitions: list[Transition]) -> str | None:
        """A whole episode (from its first step; ended or cut short by the budget) at once."""
        names = self.add(transitions, resent=True)
        return names[-1] if names else self.end_episode()

    def discard(self) -> None:
        """Drop the open episode (Ctrl-C, a stop): nothing of it reaches the store."""
        self.writer.discard()
        self.attrs = {}

    def _commit(self) -> str:
        source = "demo" if self.demo else "online"
        name = self.writer.commit(source, uid=self.uid or None, **self.counts, **self.attrs)
        self.attrs = {}
        self.committed += 1
        if self.log is not None:
            self.log.info(f"recorded {name} ({source})")
        if self.uid:
            self.uids.add(self.uid)
            self.recent = [*self.recent[-49:], self.uid]
            self.acknowledge([self.uid])
        return name

    def _warn(self, message: str) -> None:
        if self.log is not None:
            self.log.warning(message)


class StreamRecorders:
    """Several actors' transitions -> committed episodes of one store, recorded on a thread of their own.

    One :class:`EpisodeRecorder` per actor stream (their episodes interleave). :meth:`add` queues a hand-in and
    returns at once: a driver that takes in many actors' transitions does not wait on the disk (an episode's
    commit, a dozen small files written and flushed, takes tens of ms). :meth:`close` records everything queued and
    drops the episodes still open; an error on the thread comes back from the next :meth:`add` or :meth:`close`.
    """

    def __init__(self, store: EpisodeStore, backlog: int = 64):
        """``backlog``: hand-ins queued at most (then :meth:`add` waits for the thread)."""
        self.store = store
        self.recorders: dict[str, EpisodeRecorder] = {}
        self.error: BaseException | None = None
        self._queue: queue.Queue[tuple[str, list[Transition]] | None] = queue.Queue(maxsize=backlog)
        self._thread = threading.Thread(target=self._run, name="stream-recorders", daemon=True)
        self._thread.start()

    def add(self, stream: str, transitions: list[Transition]) -> None:
        """Queue ``transitions`` of actor ``stream``, in the order that actor made them."""
        self._raise_error()
        if transitions:
            self._queue.put((stream, transitions))

    def flush(self) -> None:
        """Wait until every hand-in queued so far is recorded (before a checkpoint counts its episodes)."""
        self._queue.join()
        self._raise_error()

    def close(self) -> None:
        """Record every hand-in queued, then drop the episodes still open (their actors stopped mid-episode)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        for recorder in self.recorders.values():
            recorder.discard()
        self._raise_error()

    def _raise_error(self) -> None:
        if self.error is not None:
            raise RuntimeError(f"recording episodes to {self.store.path} failed: {self.error!r}") from self.error

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            stream, transitions = item
            try:
                if self.error is None:  # after an error nothing more is recorded; the driver hears of it
                    if stream not in self.recorders:
                        self.recorders[stream] = EpisodeRecorder(self.store)
                    self.recorders[stream].add(transitions)
            except Exception as error:  # noqa: BLE001 - handed to the driver's thread
                self.error = error
            finally:
                self._queue.task_done()
        self._queue.task_done()
