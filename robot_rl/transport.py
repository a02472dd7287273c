"""How the actor and the learner exchange transitions (actor -> learner) and policy weights
(learner -> actor). The in-process transport is a queue; the ROS 2 transport (topics with
standard message types across machines) implements the same interface."""

from __future__ import annotations

import queue
import threading
from abc import ABC, abstractmethod
from typing import Any


class Transport(ABC):
    @abstractmethod
    def send_transitions(self, transitions: list[dict[str, Any]]) -> None: ...

    @abstractmethod
    def receive_transitions(self, timeout: float) -> list[dict[str, Any]]:
        """Everything sent so far and not yet received (waits up to ``timeout`` s for the first)."""

    @abstractmethod
    def publish_weights(self, version: int, weights: dict[str, Any]) -> None: ...

    @abstractmethod
    def latest_weights(self) -> tuple[int, dict[str, Any]] | None:
        """The newest published (version, weights), or None before the first."""


class LocalTransport(Transport):
    """Actor and learner in one process (threads)."""

    def __init__(self):
        self._transitions: queue.Queue = queue.Queue()
        self._weights: tuple[int, dict[str, Any]] | None = None
        self._lock = threading.Lock()

    def send_transitions(self, transitions: list[dict[str, Any]]) -> None:
        for transition in transitions:
            self._transitions.put(transition)

    def receive_transitions(self, timeout: float) -> list[dict[str, Any]]:
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
