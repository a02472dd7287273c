"""Videos on disk: a new mp4 written beside its place and linked in, so nothing that is there is ever replaced."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np


def write_video(path: str | Path, frames: list[np.ndarray], fps: float) -> None:
    """The new mp4 ``path`` of RGB ``frames`` (H, W, 3) uint8 at ``fps`` frames per s (see :func:`new_video`)."""
    height, width = frames[0].shape[:2]
    with new_video(path, fps, (width, height)) as write:
        for frame in frames:
            write(frame)


@contextmanager
def new_video(path: str | Path, fps: float, size: tuple[int, int]) -> Iterator[Callable[[np.ndarray], None]]:
    """Yield ``write(frame)`` for the new mp4 ``path`` of RGB frames (H, W, 3) uint8, ``size`` = (width, height) px,
    at ``fps`` frames per s. The video is written in a temporary sibling folder and linked into place when the block
    ends: FileExistsError (nothing written) if ``path`` exists by then, and a failure leaves no file."""
    import cv2

    path = Path(path)
    sibling = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.absolute().parent))
    try:
        staged = sibling / path.name
        writer = cv2.VideoWriter(str(staged), cv2.VideoWriter_fourcc(*"mp4v"), fps, size)
        if not writer.isOpened():
            raise OSError(f"{path}: cv2 cannot write an mp4 video here (no mp4v encoder?)")
        try:
            yield lambda frame: writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
        finally:
            writer.release()
        try:
            os.link(staged, path)  # unlike a rename, never replaces what is there
        except FileExistsError:
            raise FileExistsError(f"{path}: exists; expected a new path") from None
    finally:
        shutil.rmtree(sibling, ignore_errors=True)
