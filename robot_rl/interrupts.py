"""Keep Ctrl-C from landing between "episode written" and "episode counted"."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Run the block to the end even if SIGINT arrives; raise KeyboardInterrupt afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


def interrupt_on_sigterm(signum=None, frame=None) -> None:
    """Signal handler: SIGTERM behaves like Ctrl-C, so ``kill`` runs the same clean-up."""
    raise KeyboardInterrupt
