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


@contextmanager
def interrupt_requests() -> Iterator[threading.Event]:
    """Turn Ctrl-C (SIGINT) into a request: the returned event is set and the code runs on to a point where it can
    stop cleanly, so no KeyboardInterrupt lands inside a file write or while a lock is held. A second Ctrl-C raises
    KeyboardInterrupt at once. Off the main thread (no signal handlers there) the event is never set."""
    requested = threading.Event()
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
