"""Folders written as a whole: a crash or an error leaves the previous version or nothing, never a mix.

Work happens in a temporary sibling ``.<name>.<random>.tmp`` that this module makes (marked by a file holding the
maker's process id) and renames into place at the end. Nothing the stack did not make is ever removed: a temporary
sibling is cleaned up by the call that made it, or later only if its marker says its maker is gone (crashed).
"""

from __future__ import annotations

import errno
import glob
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MARKER = ".robot_rl-temporary"  # in every temporary sibling made here; holds the maker's pid


@contextmanager
def replacing(folder: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder; when the block succeeds it takes the place of ``folder``.

    Between the two renames the previous version sits in the temporary sibling; :func:`latest` finds it.
    """
    folder = Path(folder)
    sibling = _temporary_sibling(folder)
    try:
        new = sibling / "new"
        new.mkdir()
        yield new
        if folder.exists():
            os.rename(folder, sibling / "old")
        os.rename(new, folder)
    finally:
        shutil.rmtree(sibling, ignore_errors=True)
    for leftover in _leftovers(folder):
        shutil.rmtree(leftover, ignore_errors=True)


@contextmanager
def creating(folder: str | os.PathLike) -> Iterator[Path]:
    """Yield a path (not there yet) to build a new ``folder`` at; it becomes ``folder`` when the block succeeds
    and is removed when it fails, so ``folder`` never holds a partial result.

    ``folder`` must not exist, or be an empty folder; FileExistsError otherwise (nothing is changed).
    """
    folder = Path(folder)
    if folder.exists() and not (folder.is_dir() and not any(folder.iterdir())):
        raise FileExistsError(f"{folder}: exists and is not an empty folder; expected a new path")
    sibling = _temporary_sibling(folder)
    try:
        work = sibling / folder.name
        yield work
        try:
            os.rename(work, folder)
        except OSError as error:
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise
            raise FileExistsError(f"{folder}: was taken while it was being written; expected a new path") from None
    finally:
        shutil.rmtree(sibling, ignore_errors=True)


def write_new_file(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` as the new file ``path``: into a temporary sibling first, then linked into place, which fails
    with FileExistsError (nothing written) when ``path`` exists by then. A crash leaves the file whole or absent."""
    path = Path(path)
    sibling = _temporary_sibling(path)
    try:
        staged = sibling / "new"
        with open(staged, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(staged, path)  # unlike a rename, never replaces what is there
        except FileExistsError:
            raise FileExistsError(f"{path}: exists; expected a new path") from None
    finally:
        shutil.rmtree(sibling, ignore_errors=True)
    return path


def latest(folder: str | os.PathLike) -> Path:
    """``folder``, or its previous version if a crash interrupted :func:`replacing` between its two renames."""
    folder = Path(folder)
    if folder.exists():
        return folder
    for leftover in _leftovers(folder):
        if (leftover / "old").is_dir():
            return leftover / "old"
    legacy = folder.with_name(folder.name + ".old")  # where earlier robot_rl versions kept it
    return legacy if legacy.exists() else folder


def _temporary_sibling(folder: Path) -> Path:
    folder.parent.mkdir(parents=True, exist_ok=True)
    sibling = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
    (sibling / MARKER).write_text(str(os.getpid()))
    return sibling


def _leftovers(folder: Path) -> list[Path]:
    """Temporary siblings of ``folder`` made here by processes that are gone, newest first."""
    found = []
    for sibling in folder.parent.glob(f".{glob.escape(folder.name)}.*.tmp"):
        try:
            pid = int((sibling / MARKER).read_text())
        except (OSError, ValueError):
            continue  # not made here: left alone
        if not _alive(pid):
            found.append(sibling)
    return sorted(found, key=lambda path: path.stat().st_mtime, reverse=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        pass
    return True


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Write a file the stack owns as a whole: into a temporary sibling, then renamed over ``path``."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as file:
            file.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
