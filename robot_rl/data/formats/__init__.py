"""Episodes in from other formats (``robot-rl data import``) and out to LeRobot (``robot-rl data export format=lerobot``).

    format      in (``data.in``)                    module          needs
    mcap        rosbag2 folder or ``.mcap`` file     mcap_import     rosbags (always installed)
    lerobot     LeRobotDataset v3 folder            lerobot         pyarrow, av (the ``data`` extra)
    robomimic   HDF5 file (data/demo_N/...)         robomimic       h5py (the ``data`` extra)

Each importer turns its input into :class:`~robot_rl.data.formats.common.Episode` s (observations T + 1, steps T, as
the store keeps them) and :func:`~robot_rl.data.formats.common.write_store` writes them to a new store. The store is built in a temporary sibling of ``out`` and renamed into
place only when every episode was read and written, so bad input leaves no output behind. Bad input raises
:class:`~robot_rl.data.episode_store.EpisodeStoreError` naming the file and the field (``robot-rl`` prints it on one
line and exits 2); a bad mapping raises :class:`~robot_rl.core.config.ConfigError` naming its ``data.import.*`` key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robot_rl.core.config import ConfigError, choice, settings_of

from .common import ImportSettings, write_store

IMPORT_FORMATS = ("mcap", "lerobot", "robomimic")
EXPORT_FORMATS = ("mcap", "lerobot")


def import_store(
    fmt: str, path: str | os.PathLike, out: str | os.PathLike, settings: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Import ``path`` (in format ``fmt``) into a new episode store at ``out``; returns a report for the CLI.

    ``settings`` is the ``data.import`` config block (:class:`ImportSettings`). ``out`` must be a new path or an
    empty folder, never an existing store (``robot-rl data merge`` appends one store to another).
    """
    choice("data.format", fmt, IMPORT_FORMATS)
    options = settings_of("data.import", ImportSettings, settings)
    if path is None or not os.fspath(path):
        raise ConfigError("data.in", path, f"the {fmt} file or folder to import")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file or folder to import")
    if out is None or not os.fspath(out):
        raise ConfigError("data.out", out, "the path of the new episode store")
    if fmt == "mcap":
        from .mcap_import import read_mcap as read
    elif fmt == "lerobot":
        from .lerobot_import import read_lerobot as read
    else:
        from .robomimic import read_robomimic as read
    metadata, episodes, notes = read(path, options)
    return {"format": fmt, "in": str(path), **write_store(out, metadata, episodes, options.source, path), **notes}
