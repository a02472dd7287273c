"""Transitions -> committed episodes: the one recorder of every way of running.

``robot-rl train`` feeds it the actor's transitions as they are made, the recorder node feeds it
``/rl/transitions``, and the actor node writes an episode the recorder never confirmed through it. An episode
starts at a transition flagged ``first`` and is committed when one ends it (terminated or truncated), or
when the driver ends it (the step budget was spent: :meth:`EpisodeRecorder.end_episode` in the driver's process,
:meth:`EpisodeRecorder.cut` from another, with the ``seq`` of the episode's last step); an episode cut
short otherwise (the actor paused, crashed or was stopped) is dropped, so a store only ever holds finished
episodes, except an online one whose actor died: when another actor (the one a launch started again) starts an
episode, the open online episode of the gone one is committed as it is (the restarted actor counts it). Each committed episode keeps the actor's episode uid. Steps sent again (an old ``seq`` of an actor
stream, resent for a restarted learner) and episodes already in the store are skipped.

Every committed episode has the same metadata whoever recorded it: ``source`` (demo or online), ``uid``,
``length``, ``success`` (any step), ``return`` (sum of rewards), ``interventions`` (steps the human acted),
``filter_interventions`` (steps the safety filter changed) and ``violations`` (steps with constraint flags),
plus what the driver adds with :meth:`EpisodeRecorder.annotate` (the reset's seed and randomization) and, where the
operator labelled the episode (the console's success or failure, :meth:`EpisodeRecorder.label`), ``operator_label``
(true or false; absent: no label), which ``robot-rl classifier`` trains on.
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from robot_rl.core.interrupts import sigint_ignored

from .delivery_ledger import Numbered
from .episode_store import EpisodeStore, EpisodeWriter
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
        self.actor = ""  # the open episode's actor
        self.cuts: OrderedDict[str, int] = OrderedDict()  # episode uid -> seq of its last step (cut by the budget)
        self.counts = {"interventions": 0, "filter_interventions": 0, "violations": 0}

    def annotate(self, **attrs: Any) -> None:
        """Metadata for the episode that starts next (or is open), e.g. the reset's seed and randomization."""
        self.attrs.update(attrs)

    def label(self, success: bool) -> bool:
        """The operator's label of the open episode, kept as its ``operator_label`` attribute (the last label given
        counts); False when no episode is open (between episodes: the label is not kept)."""
        if not self.writer.active:
            return False
        self.attrs["operator_label"] = bool(success)
        return True

    def add(self, transitions: list[Transition]) -> list[str]:
        """Take transitions in the order they were made, unnumbered (one process, a store); returns the names of the
        episodes committed."""
        return self._take([(t, 0) for t in transitions])

    def add_numbered(self, delivered: list[Numbered]) -> list[str]:
        """Take an actor's steps as its outbox numbered them (``seq``), in the order they were sent: a ``seq`` taken
        already (sent again for a restarted learner) is skipped; returns the names of the episodes committed."""
        return self._take([(n.transition, n.seq) for n in delivered])

    def _take(self, steps: list[tuple[Transition, int]]) -> list[str]:
        """(transition, its ``seq``, 0 unnumbered) -> the names of the episodes committed."""
        self.last_receipt = time.monotonic()
        committed = []
        for t, seq in steps:
            origin = t.origin
            if seq:
                if seq <= self.last_seq.get(origin.actor, 0):
                    continue  # sent again for a restarted learner
                self.last_seq[origin.actor] = seq
            if t.first:
                if self.writer.active and not self.demo and self.actor and origin.actor != self.actor:
                    gone = f"its actor is gone ({origin.actor})"
                    self._warn(f"episode {self.uid} of {self.actor} recorded as it is: {gone}")
                    committed.append(self._commit())  # its actor died (a launch restarted it): cut there
                elif self.writer.active:
                    self._warn("dropped an unfinished episode (the actor started a new one)")
                    self.writer.discard()
                if origin.episode and origin.episode in self.uids:
                    self.attrs = {}
                    continue  # already in the store
                self.writer.start(t.obs)
                self.demo, self.uid, self.actor = t.demo, origin.episode, origin.actor
                self.counts = dict.fromkeys(self.counts, 0)
            if not self.writer.active:
                continue  # the rest of an episode whose start was missed
            stamp = origin.stamp or (None if self.clock is None else self.clock())
            write_step(self.writer, t, **({} if stamp is None else {"timestamp": stamp}))
            self.counts["interventions"] += t.intervened
            self.counts["filter_interventions"] += t.filtered
            self.counts["violations"] += t.violation != 0
            self.open_seq = seq
            if t.terminated or t.truncated or (seq and seq >= self.cuts.get(origin.episode, seq + 1)):
                self.cuts.pop(origin.episode, None)
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
        """A whole episode (from its first step; ended or cut short by the budget) at once (steps sent again on
        purpose: their numbers are not checked against the stream's)."""
        names = self.add(transitions)
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


def write_step(writer: EpisodeWriter, t: Transition, **extra: Any) -> None:
    """Add step ``t`` to an episode being written (started on ``obs`` of the episode's first step); ``extra``:
    further per-step columns such as ``timestamp``."""
    writer.add(
        t.next_obs,
        t.action,
        t.reward,
        t.terminated,
        t.truncated,
        policy_action=t.policy_action,
        success=t.success,
        intervened=t.intervened,
        safety_flags=t.violation,
        filtered=t.filtered,
        **extra,
    )
    writer.add_streams(t.streams or {})


class StreamRecorders:
    """Several actors' hand-ins (encoded transitions) -> committed episodes of one store, recorded in processes of
    their own.

    One :class:`EpisodeRecorder` per actor stream (their episodes interleave); ``processes`` recorder processes share
    the streams out (a stream stays with the process it first went to) and commit to the same store (a name another
    process took meanwhile goes to the next episode). :meth:`add` sends a hand-in's bytes down a pipe and returns: a
    driver that takes in many actors' transitions neither waits on the disk nor shares its interpreter with the
    recording (zarr's Python, ~1 ms per step of a 40-step episode, most of it the commit's dozen small arrays). A
    pipe holds what its recorder has not read yet; a sender that runs ahead waits. :meth:`flush` returns once
    everything sent is recorded, :meth:`close` records everything sent and drops the episodes still open. An error in
    a recorder stops its recording and comes back from :meth:`flush` and :meth:`close`. Recorders ignore Ctrl-C (the
    driver closes them) and end, dropping their open episodes, when the driver is gone.

    Only raw bytes cross the pipes (no pickle): ``decode(payload) -> list[Numbered]`` is given at the start (a
    module-level function or a ``functools.partial`` of one: it must reach a spawned process) and checks what it
    decodes.
    """

    def __init__(self, store: EpisodeStore, decode: Callable[[bytes], list[Numbered]], processes: int = 1):
        self.path = store.path
        context = multiprocessing.get_context("spawn")  # no copy of the driver's threads and CUDA state
        self._conns, self._processes = [], []
        for index in range(processes):
            conn, child = context.Pipe()
            process = context.Process(
                target=_record_streams,
                args=(str(store.path), decode, child),
                name=f"stream-recorder-{index}",
                daemon=True,  # ends with its driver (it also sees the pipe close)
            )
            with sigint_ignored():  # inherited: Ctrl-C during the recorder's start does not kill it either
                process.start()
            child.close()
            self._conns.append(conn)
            self._processes.append(process)
        self._route: dict[str, int] = {}  # stream -> the recorder it went to first
        self._closed = False

    def add(self, stream: str, payload: bytes) -> None:
        """Send the encoded transitions of actor ``stream``, in the order that actor made them."""
        index = self._route.setdefault(stream, len(self._route) % len(self._conns))
        name = stream.encode()
        self._send(index, b"A" + len(name).to_bytes(2, "little") + name + payload)

    def flush(self) -> None:
        """Wait until everything sent so far is recorded (before a checkpoint counts its episodes); closed, everything
        is recorded already."""
        if not self._closed:
            self._ask(b"F")

    def close(self) -> None:
        """Record everything sent, drop the episodes still open (their actors stopped mid-episode), end the
        recorders."""
        if self._closed:
            return
        self._closed = True
        try:
            self._ask(b"C")
        finally:
            for conn, process in zip(self._conns, self._processes):
                conn.close()
                process.join(timeout=30)

    def _ask(self, message: bytes) -> None:
        """Send ``message`` to every recorder and raise the first error any of them answers."""
        for index in range(len(self._conns)):
            self._send(index, message)
        errors = []
        for conn in self._conns:
            try:
                answer = conn.recv_bytes()
            except (EOFError, OSError):
                answer = b"the recorder process is gone"
            if answer != b"ok":
                errors.append(answer.decode(errors="replace"))
        if errors:
            raise RuntimeError(f"recording episodes to {self.path} failed: {errors[0]}")

    def _send(self, index: int, message: bytes) -> None:
        try:
            self._conns[index].send_bytes(message)
        except OSError as error:
            raise RuntimeError(f"recording episodes to {self.path} failed: the recorder process is gone") from error


def _record_streams(path: str, decode, conn) -> None:
    """The recorder process of :class:`StreamRecorders`: hand-ins from ``conn`` into the store at ``path``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's: it closes the recorder when done
    store = EpisodeStore.open(path)  # not create: that clears the staging folder, where other writers have episodes
    recorders: dict[str, EpisodeRecorder] = {}
    error: str | None = None
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):  # the driver is gone: what is open is dropped, the store keeps what is finished
            message = b"C"
        kind = message[:1]
        if kind == b"A":
            if error is not None:
                continue  # nothing more is recorded once something failed; the driver hears of it
            size = int.from_bytes(message[1:3], "little")
            stream = message[3 : 3 + size].decode()
            try:
                if stream not in recorders:
                    recorders[stream] = EpisodeRecorder(store)
                recorders[stream].add_numbered(decode(message[3 + size :]))
            except Exception as failure:  # noqa: BLE001 - answered to the driver
                error = repr(failure)
            continue
        if kind == b"C":
            for recorder in recorders.values():
                recorder.discard()
        try:
            conn.send_bytes(b"ok" if error is None else error.encode())
        except OSError:
            return
        if kind == b"C":
            return
