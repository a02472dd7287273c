"""Keep Ctrl-C from landing between "episode written" and "episode counted", or inside a write."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Run the block to the end even if SIGINT arrives; afterwards hand it to the handler the block replaced: under
    :func:`interrupt_requests` that sets the stop request (the caller goes on to count what the block wrote and
    stops cleanly), otherwise Python's default raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        if callable(previous):  # the default handler raises KeyboardInterrupt; interrupt_requests' sets its event
            previous(signal.SIGINT, received[0])
        elif previous != signal.SIG_IGN:  # SIG_DFL (or unknown, set outside Python): Ctrl-C still stops the run
            raise KeyboardInterrupt


@contextmanager
def sigint_ignored() -> Iterator[None]:
    """SIGINT ignored for the block (on the main thread; off it Python cannot change handlers). A process started in
    the block inherits the ignoring (a Python handler it would not): a helper process that its driver stops starts
    immune to the Ctrl-C meant for the driver."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class StopRequest:
    """A stop request that a signal handler sets: :meth:`set` stores a bool and takes no lock, so it is safe in a
    handler that Python runs inside another handler. ``threading.Event.set`` takes the event's lock: a second SIGINT
    whose handler ran between that lock and the flag (Python runs handlers between any two bytecodes of the main
    thread) waited for the lock forever. A cell node sent Ctrl-C by its process group and, a moment later, by its
    launcher hung so and was killed without its report (reproduced: two SIGINTs 200 loop turns apart hung the
    event's handler at the 7th and the 120th pair of 3,000)."""

    __slots__ = ("_requested",)

    def __init__(self) -> None:
        self._requested = False

    def set(self) -> None:
        self._requested = True

    def is_set(self) -> bool:
        return self._requested


@contextmanager
def interrupt_requests() -> Iterator[StopRequest]:
    """Turn Ctrl-C (SIGINT) into a request: the returned request is set and the code runs on to a point where it
    can stop cleanly, so no KeyboardInterrupt lands inside a file write or while a lock is held. A second Ctrl-C
    raises KeyboardInterrupt at once. Off the main thread (no signal handlers there) it is never set."""
    requested = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield requested
        return

    def on_sigint(signum, frame) -> None:
        if requested.is_set():
            raise KeyboardInterrupt
        requested.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield requested
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupt_on_sigterm(signum=None, frame=None) -> None:
    """Signal handler: SIGTERM behaves like Ctrl-C, so ``kill`` runs the same clean-up."""
    raise KeyboardInterrupt


def interrupt_once(signum=None, frame=None) -> None:
    """Signal handler for SIGINT and SIGTERM of a process whose clean-up must run whole (a node: its checkpoint, its
    episode store, the actor's last deliveries): the first signal raises KeyboardInterrupt, and from then on both are
    ignored, set before it raises. A node stopped with Ctrl-C gets SIGINT from its process group and again from its
    launcher; with a handler that only raised, the second landed in the actor's ``except KeyboardInterrupt`` clause
    before that clause could ignore it, and the actor died with a traceback (a loaded CI run)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt
