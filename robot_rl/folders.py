"""Folders replaced as a whole: a crash leaves either the old or the new version, never a mix."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replacing(folder: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder; when the block succeeds it takes the place of ``folder``.

    Between the two renames the previous version is ``<folder>.old``; :func:`latest` finds it.
    """
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    yield tmp
    old = folder.with_name(folder.name + ".old")
    if folder.exists():
        shutil.rmtree(old, ignore_errors=True)
        os.rename(folder, old)
    os.rename(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)


def latest(folder: str | os.PathLike) -> Path:
    """``folder``, or its previous version if a crash interrupted :func:`replacing`."""
    folder = Path(folder)
    old = folder.with_name(folder.name + ".old")
    return old if not folder.exists() and old.exists() else folder
