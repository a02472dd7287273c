"""Guarded subscriptions: no message a node receives can crash it or kill one of its threads.

Every subscription of a robot_rl node goes through :meth:`InputGuard.subscribe`. The callback runs
inside a ``try``: a message that fails validation (:class:`MessageError`, raised by the node's own
checks of size, shape, dtype, finite values and version) or makes the callback raise anything else
is dropped, counted per topic (its fully qualified name) in :attr:`InputGuard.dropped`, and reported with a
warning at most once per ``warn_period`` seconds per topic (a flood of junk does not flood the log).

    guard = InputGuard(node)
    guard.subscribe(PoseStamped, "rl/action", self._on_action, qos.STREAM_SUBSCRIBER)
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ...data.wire import MessageError  # the wire format's: a node's inputs are checked alike


def finite(name: str, values: Any) -> np.ndarray:
    """``values`` as a float64 array; raise :class:`MessageError` naming ``name`` if any is NaN or inf."""
    array = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(array)):
        raise MessageError(f"{name} has non-finite values")
    return array


def finite_scalar(name: str, value: Any) -> float:
    value = float(value)
    if not math.isfinite(value):
        raise MessageError(f"{name}={value} is not finite")
    return value


class InputGuard:
    """Counts and reports the messages a node dropped, per topic."""

    def __init__(self, node, warn_period: float = 5.0):
        self.node, self.warn_period = node, warn_period
        self.dropped: dict[str, int] = {}
        self.accepted: dict[str, int] = {}
        self._last_warning: dict[str, float] = {}
        self._reported: dict[str, int] = {}
        self._lock = threading.Lock()

    def wrap(self, topic: str, callback: Callable[[Any], None]) -> Callable[[Any], None]:
        """``callback`` that never raises: failures are dropped messages on ``topic`` (counted under its fully
        qualified name: a relative name resolves in the node's namespace, e.g. a robot's ``/left/rl/action``)."""
        topic = self.node.resolve_topic_name(topic)

        def guarded(msg) -> None:
            try:
                callback(msg)
            except Exception as error:  # noqa: BLE001 - any failure of one message is that message's fault
                self.drop(topic, error)
            else:
                with self._lock:
                    self.accepted[topic] = self.accepted.get(topic, 0) + 1

        return guarded

    def subscribe(self, msg_type, topic: str, callback: Callable[[Any], None], qos, **kwargs):
        return self.node.create_subscription(msg_type, topic, self.wrap(topic, callback), qos, **kwargs)

    def drop(self, topic: str, error: BaseException) -> None:
        """Count a dropped message and warn (rate-limited per topic)."""
        now = time.monotonic()
        with self._lock:
            self.dropped[topic] = self.dropped.get(topic, 0) + 1
            if now - self._last_warning.get(topic, -math.inf) < self.warn_period:
                return
            self._last_warning[topic] = now
            count = self.dropped[topic] - self._reported.get(topic, 0)
            self._reported[topic] = self.dropped[topic]
        reason = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        with contextlib.suppress(Exception):  # a logger that fails (shutdown) must not undo the guard
            self.node.get_logger().warning(
                f"dropped {count} bad message(s) on {topic} ({self.dropped[topic]} in all): {reason}"
            )

    def total_dropped(self, topics: Iterable[str] | None = None) -> int:
        with self._lock:
            return sum(count for topic, count in self.dropped.items() if topics is None or topic in topics)
