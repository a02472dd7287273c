"""Delivery of the actor's transitions when the learner or the recorder is down for a while.

The actor numbers its transitions (``seq``, from 1, per actor session) and keeps each one in its
:class:`Outbox` until the learner acknowledges it as **durable** (in a written checkpoint). The learner
acknowledges on ``/rl/transitions_ack`` (std_msgs/String, JSON) what it has **received** (ingested) and
what is durable, per actor. A learner that restarts from its checkpoint answers with a new session id and
the received count of that checkpoint; the actor then sends again everything after it, and the learner
drops what it already has (by ``seq``). So a learner restart, also after ``kill -9``, loses nothing.

The recorder acknowledges each episode it committed (by episode uid). An episode the actor's step budget cut
short ends with no terminated or truncated step: the actor says so on ``rl/episode_cut`` (std_msgs/String, JSON:
the actor, the episode uid and the ``seq`` of its last step) and the recorder commits it once that step is in. So
does an online episode the actor leaves mid-way (a stream stalled, the operator paused): its steps count in the step
budget, which a resumed graph's actor counts from the stores. A demonstration left so is played again: no store
records it (:meth:`Outbox.abandon`).
A finished episode the recorder did not acknowledge within ``record_timeout`` seconds (recorder down, or it
missed the start) is written by the actor to its own episode store, so no episode is lost while the recorder
is away; both stores hold the episode uid, so ``robot-rl data merge`` never counts an episode twice. The recorder's
acknowledgements are also its heartbeat (every second, with its session id), so the actor does not wait out
``record_timeout`` where it knows the recorder will not confirm: it writes the episode at once when the recorder has
been silent for ``RECORDER_SILENCE`` s (down), or when the recorder that answers now started after the episode's
first step (a restarted recorder drops an episode it saw no start of). ``benchmarks/cell_faults.py`` lost an episode
that ended while the recorder was restarting: the actor was killed within the 10 s it waited.

Memory is bounded: above ``memory_limit`` bytes the oldest finished episodes move from memory to the
actor's store ("spilled") and are read back from there when a learner asks for them again.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from ...data.delivery_ledger import Numbered
from ...data.transition import Transition
from .guard import MessageError

ACK_TOPIC = "rl/transitions_ack"  # relative: each robot's own, under its namespace
RECORDER_HEARTBEAT = 1.0  # s between two acknowledgements of the recorder, new episodes or none
RECORDER_SILENCE = 5.0  # s without the recorder's acknowledgement before the actor takes it for down
CUT_TOPIC = "rl/episode_cut"  # actor -> recorder: the step budget cut an episode short (relative, as ACK_TOPIC)


def transition_bytes(delivered: Numbered) -> int:
    """Memory of a kept transition: its observations plus a little for the rest."""
    step = delivered.transition
    return sum(np.asarray(v).nbytes for part in (step.obs, step.next_obs) for v in part.values()) + 64


def numbered(transitions: list[Transition], actor: str, first_seq: int) -> list[Numbered]:
    """An episode read back from a store (spilled), numbered as it was first sent in ``actor``'s stream: from
    ``first_seq`` on."""
    return [Numbered(t.by(actor), first_seq + i) for i, t in enumerate(transitions)]


class Outbox:
    """The actor's transitions, episode by episode, until the learner has them durably and the
    recorder (or the actor's own store) has each finished episode."""

    def __init__(
        self,
        actor_id: str,
        memory_limit: int,
        record_timeout: float,
        spill: Callable[[list[Numbered]], None],
        for_learner: bool = True,
        for_recorder: bool = True,
    ):
        """``for_learner`` / ``for_recorder`` False: the graph has no such node, nothing is kept for it."""
        self.actor_id, self.memory_limit, self.record_timeout = actor_id, memory_limit, record_timeout
        self.for_learner, self.for_recorder = for_learner, for_recorder
        self.spill_episode = spill  # writes a finished episode to the actor's store
        self.seq = 0
        self.episodes: OrderedDict[str, list[Numbered]] = OrderedDict()  # uid -> transitions, in memory
        self.begun_at: dict[str, float] = {}  # uid -> when its first step was stamped
        self.finished_at: dict[str, float] = {}  # uid -> when the episode ended (waiting for the recorder)
        self.recorded: set[str] = set()  # uid of finished episodes the recorder or our store holds
        self.abandoned: set[str] = set()  # uid of episodes left without their last step: no store records them
        self.spilled: OrderedDict[str, tuple[int, int]] = OrderedDict()  # uid -> (first seq, last seq), on disk
        self.bytes = 0
        self.learner_session: str | None = None
        self.received = 0  # highest seq the current learner session has ingested
        self.durable = 0  # highest seq in a learner checkpoint
        self.progress_at = time.monotonic()  # when the learner last acknowledged something new
        self.learner_heard_at: float | None = None  # when the learner last acknowledged anything
        self.resend_after = 3.0  # s without progress while it lacks transitions -> send them again
        self.recorded_locally = 0  # episodes the actor wrote to its own store
        self.recorder_session: str | None = None  # the id of the recorder that answers
        self.recorder_heard_at: float | None = None  # when the recorder last acknowledged (its heartbeat)
        self.recorder_since = -float("inf")  # when a recorder that replaced another was first heard

    # ----------------------------------------------------------------- sending
    def stamp(self, step: Transition) -> Numbered:
        """A new transition of this actor's stream, numbered (``step`` itself is not changed), kept until
        delivered."""
        self.seq += 1
        delivered = Numbered(step.by(self.actor_id), self.seq, floor=self.durable + 1)
        uid = step.origin.episode
        self.episodes.setdefault(uid, []).append(delivered)
        self.begun_at.setdefault(uid, time.monotonic())
        self.bytes += transition_bytes(delivered)
        if not self.for_learner:
            self.durable = self.seq
        if step.terminated or step.truncated:
            self.end_episode(uid)
        return delivered

    def end_episode(self, uid: str) -> None:
        """An episode cut short (budget spent, stop) is finished too."""
        if uid in self.episodes:
            self.finished_at.setdefault(uid, time.monotonic())
            if not self.for_recorder:
                self.recorded.add(uid)
            self._forget()

    def abandon(self, uid: str) -> None:
        """The actor left episode ``uid`` without its last step and will not say where it ended (a demonstration a
        stream stalled, played again; the episode in progress at a Ctrl-C): the learner still gets its steps, but no
        store records it, as the recorder drops an episode that ends without its last step. An episode already
        finished (its last step, or cut by the budget or a stall) stays so."""
        if uid in self.episodes and uid not in self.finished_at:
            self.finished_at[uid] = time.monotonic()
            self.abandoned.add(uid)
            self._forget()

    def unconfirmed(self) -> list[str]:
        """Finished episodes that the recorder has not confirmed and the actor's store does not hold."""
        return [uid for uid in self.finished_at if uid not in self.recorded and uid not in self.abandoned]

    # ----------------------------------------------------------------- acknowledgements
    def on_ack(self, ack: dict[str, Any]) -> bool:
        """Apply an acknowledgement; True when a new learner session asks for a resend."""
        if ack.get("node") == "recorder" or not self.for_learner:
            if ack.get("node") == "recorder":
                self._heard_recorder(ack.get("session"))
            for uid in ack.get("episodes", []):
                if uid in self.finished_at or uid in self.episodes:
                    self.recorded.add(uid)
            self._forget()
            return False
        entry = ack.get("actors", {}).get(self.actor_id, {"received": 0, "durable": 0})
        received, durable = int(entry.get("received", 0)), int(entry.get("durable", 0))
        new_session = ack.get("session") != self.learner_session
        self.learner_session = ack.get("session")
        now = time.monotonic()
        self.learner_heard_at = now
        if new_session or received > self.received:
            self.progress_at = now
        self.received = received if new_session else max(self.received, received)
        self.durable = max(self.durable, durable) if not new_session else durable
        self._forget()
        stalled = self.seq > self.received and now - self.progress_at > self.resend_after
        if stalled:
            self.progress_at = now  # once per resend_after, not on every acknowledgement
        return (new_session and self.seq > self.received) or stalled

    def _heard_recorder(self, session: Any) -> None:
        now = time.monotonic()
        if session != self.recorder_session:
            if self.recorder_session is not None:  # another recorder than the one before: it saw no earlier start
                self.recorder_since = now
            self.recorder_session = session
        self.recorder_heard_at = now

    def _forget(self) -> None:
        """Drop finished episodes that are durable at the learner and recorded."""
        for uid in list(self.episodes):
            transitions = self.episodes[uid]
            kept = uid in self.recorded or uid in self.abandoned
            if uid in self.finished_at and kept and transitions[-1].seq <= self.durable:
                self._remove(uid)
        for uid, (_, last) in list(self.spilled.items()):  # the store keeps the episode itself
            if last <= self.durable:
                del self.spilled[uid]

    def _remove(self, uid: str) -> list[Numbered]:
        transitions = self.episodes.pop(uid)
        self.bytes -= sum(transition_bytes(t) for t in transitions)
        self.finished_at.pop(uid, None)
        self.begun_at.pop(uid, None)
        self.recorded.discard(uid)
        self.abandoned.discard(uid)
        return transitions

    # ----------------------------------------------------------------- housekeeping (the actor's loop)
    def unrecorded_due(self, now: float | None = None) -> list[str]:
        """Finished episodes the recorder will not confirm: not within ``record_timeout``; at once while the
        recorder is silent (``RECORDER_SILENCE``) or when the recorder that answers started after the episode's
        first step (module docstring)."""
        now = time.monotonic() if now is None else now
        heard = self.recorder_heard_at
        silent = heard is not None and now - heard > RECORDER_SILENCE
        return [
            uid
            for uid in self.unconfirmed()
            if silent
            or now - self.finished_at[uid] > self.record_timeout
            or self.begun_at.get(uid, now) < self.recorder_since
        ]

    def record_locally(self, uid: str) -> None:
        self.spill_episode(self.episodes[uid])
        self.recorded.add(uid)
        self.recorded_locally += 1
        self._forget()

    def enforce_memory_limit(self) -> None:
        """Move the oldest finished episodes to the actor's store while over the memory limit (an abandoned one stays
        in memory until the learner holds it durably)."""
        for uid in list(self.episodes):
            if self.bytes <= self.memory_limit:
                return
            if uid not in self.finished_at or uid in self.abandoned:
                continue  # unfinished, or abandoned: no store holds it to read back for a learner's resend
            if uid not in self.recorded:
                self.record_locally(uid)
                if uid not in self.episodes:
                    continue
            transitions = self._remove(uid)
            if transitions[-1].seq > self.durable:
                self.spilled[uid] = (transitions[0].seq, transitions[-1].seq)

    def resend(self) -> tuple[list[tuple[str, int]], list[Numbered]]:
        """([(spilled episode uid, its first seq)], in-memory transitions) the current learner session lacks."""
        spilled = [(uid, first) for uid, (first, last) in self.spilled.items() if last > self.received]
        pending = [t for transitions in self.episodes.values() for t in transitions if t.seq > self.received]
        return spilled, pending

    def undelivered(self) -> int:
        """Transitions the learner has not received (memory and spilled); 0 in a graph without a learner."""
        if not self.for_learner:
            return 0
        in_memory = sum(1 for transitions in self.episodes.values() for t in transitions if t.seq > self.received)
        on_disk = sum(
            last - max(first - 1, self.received) for first, last in self.spilled.values() if last > self.received
        )
        return in_memory + on_disk


#: the longest JSON control message (an ack, the learner's progress) a node parses; a longer one is dropped
MAX_CONTROL_CHARS = 1_000_000


def parse_control(text: str, what: str) -> Any:
    """A JSON control message from the network, refused (:class:`MessageError`) above :data:`MAX_CONTROL_CHARS`."""
    if len(text) > MAX_CONTROL_CHARS:
        raise MessageError(f"{what} of {len(text)} characters")
    return json.loads(text)


def parse_ack(text: str) -> dict[str, Any]:
    """An acknowledgement message, checked (it comes from the network)."""
    ack = parse_control(text, "ack")
    if not isinstance(ack, dict) or ack.get("node") not in ("learner", "recorder"):
        raise MessageError("ack is not an object from a learner or a recorder")
    if ack["node"] == "recorder":
        episodes = ack.get("episodes")
        if not isinstance(episodes, list) or not all(isinstance(uid, str) for uid in episodes):
            raise MessageError("recorder ack needs a list of episode uids")
        if not isinstance(ack.get("session", ""), str):
            raise MessageError("recorder ack's session is not text")
        return ack
    actors = ack.get("actors")
    if not isinstance(ack.get("session"), str) or not isinstance(actors, dict):
        raise MessageError("learner ack needs a session and actors")
    for entry in actors.values():
        if not isinstance(entry, dict) or not all(
            isinstance(entry.get(k), int) and entry[k] >= 0 for k in ("received", "durable")
        ):
            raise MessageError("learner ack entries need received and durable counts")
    return ack


def cut_message(actor: str, uid: str, seq: int) -> str:
    """The actor's word on ``rl/episode_cut``: its budget cut episode ``uid`` short at the step numbered ``seq``."""
    return json.dumps({"actor": actor, "episode": uid, "seq": seq})


def parse_cut(text: str) -> tuple[str, int]:
    """(episode uid, seq of its last step) of an ``rl/episode_cut`` message, checked (it comes from the network)."""
    cut = parse_control(text, "episode cut")
    if not (
        isinstance(cut, dict)
        and isinstance(cut.get("episode"), str)
        and 0 < len(cut["episode"]) <= 64
        and isinstance(cut.get("seq"), int)
        and not isinstance(cut["seq"], bool)
        and cut["seq"] > 0
    ):
        raise MessageError("an episode cut needs an episode uid (1-64 characters) and the seq (>= 1) of its last step")
    return cut["episode"], cut["seq"]
