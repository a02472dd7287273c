"""Several actors' interleaved transitions -> one replay buffer, every episode stored whole.

A :class:`~robot_rl.data.ReplayBuffer` stores an episode in consecutive slots (the next observation of slot i is
slot i + 1), so transitions of two actors written as they arrive would pair one actor's observation with the
other's next observation. A :class:`StreamWriter` keeps that from happening: one stream (an actor, or an actor's
takeover segments) at a time *owns* the buffer and writes live; the others' transitions wait in host memory and
are written as whole episodes when the owner's episode ends. With one actor nothing ever waits: its transitions
are written as they come, exactly as before. Any interleaving of K streams therefore stores the same
(obs, action, reward, next obs, end flags) tuples as feeding the streams one after another.

:meth:`StreamWriter.flush` writes what waits now (a checkpoint holds every transition received): a waiting stream's
open episode is written as a segment, and its continuation becomes a segment of its own whose opening action is the
stream's last one (so the gripper critic's previous command stays right).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from .replay_buffer import ReplayBuffer


class StreamWriter:
    """Writes K interleaved streams of transitions into ``buffer`` (``add`` takes :meth:`ReplayBuffer.add`'s
    arguments after the stream's key)."""

    def __init__(self, buffer: ReplayBuffer):
        self.buffer = buffer
        self.owner: Hashable | None = None  # the stream whose episode is open in the buffer
        self.waiting: dict[Hashable, list[tuple[tuple, dict]]] = {}  # stream -> its open episode's transitions
        self.finished: list[list[tuple[tuple, dict]]] = []  # whole episodes of other streams, to write in order
        self.last_action: dict[Hashable, np.ndarray] = {}  # stream -> its last action (a continuation's opening)
        self.continues: set[Hashable] = set()  # streams whose next transition continues an episode already written

    @property
    def pending(self) -> int:
        """Transitions received and not in the buffer yet."""
        return sum(map(len, self.waiting.values())) + sum(map(len, self.finished))

    def add(self, stream: Hashable, *args: Any, **kwargs: Any) -> None:
        """One transition of ``stream`` (``obs, action, reward, next_obs, terminated, truncated, ...``)."""
        ends = bool(args[4]) or bool(args[5])
        if stream in self.continues and "opening_action" not in kwargs:
            kwargs["opening_action"] = self.last_action[stream]
        self.continues.discard(stream)
        self.last_action[stream] = np.asarray(args[1])
        if self.owner is None:
            self._write_finished()
            self.owner = stream
            for item_args, item_kwargs in self.waiting.pop(stream, []):
                self.buffer.add(*item_args, **item_kwargs)
        if self.owner == stream:
            self.buffer.add(*args, **kwargs)
            if ends:
                self._release()
            return
        self.waiting.setdefault(stream, []).append((args, kwargs))
        if ends:
            self.finished.append(self.waiting.pop(stream))

    def close(self, stream: Hashable) -> None:
        """The stream's open episode (or segment) ends without a terminal flag (a new one starts, a takeover ended);
        its next transition starts a new one."""
        self.continues.discard(stream)
        if stream == self.owner:
            self.buffer.close_episode()
            self._release()
        elif self.waiting.get(stream):
            self.finished.append(self.waiting.pop(stream))

    def flush(self) -> None:
        """Write every waiting transition now (nothing changes when nothing waits, the one-actor case); the owner's
        and every waiting stream's open episode then goes on in a new segment."""
        if not self.pending:
            return
        if self.owner is not None:
            self.buffer.close_episode()
            self.continues.add(self.owner)
            self.owner = None
        for stream in list(self.waiting):
            self.continues.add(stream)
            self.finished.append(self.waiting.pop(stream))
        self._write_finished()

    def _release(self) -> None:
        """The owner's episode ended: write the finished episodes that waited, then let the stream that has waited
        longest write its open episode and own the buffer."""
        self.owner = None
        self._write_finished()
        if self.waiting:
            stream = next(iter(self.waiting))
            self.owner = stream
            for item_args, item_kwargs in self.waiting.pop(stream):
                self.buffer.add(*item_args, **item_kwargs)

    def _write_finished(self) -> None:
        for episode in self.finished:
            for item_args, item_kwargs in episode:
                self.buffer.add(*item_args, **item_kwargs)
            self.buffer.close_episode()  # an episode closed without a terminal flag ends here too
        self.finished = []


def stored_tuples(buffer: ReplayBuffer) -> list[tuple]:
    """Every transition ``buffer`` holds as a comparable tuple, sorted: (obs bytes per key, action bytes, reward,
    next obs bytes per key, terminated, truncated). Two buffers hold the same transitions when these are equal,
    however their slots are laid out (the check that interleaved streams were stored whole)."""
    rows = []
    for slot in buffer.valid_indices().tolist():
        after = (slot + 1) % buffer.capacity
        rows.append(
            (
                tuple(column[slot].cpu().numpy().tobytes() for _, column in sorted(buffer.obs.items())),
                buffer.action[slot].cpu().numpy().tobytes(),
                float(buffer.reward[slot]),
                tuple(column[after].cpu().numpy().tobytes() for _, column in sorted(buffer.obs.items())),
                bool(buffer.terminated[slot]),
                bool(buffer.truncated[slot]),
            )
        )
    return sorted(rows)
