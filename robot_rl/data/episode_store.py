"""Append-only episode store on zarr v3: one group per episode, visible only when complete.

Layout::

    store.zarr/
      zarr.json                  root group; attrs: format, schema_version, store metadata
      episodes/
        episode_000000/          attrs: episode metadata (length, success, source, seed, ...)
          obs/state              (T + 1, state_dim) float32: initial observation, then one per step
          obs/<camera>           (T + 1, H, W, 3) uint8, one frame per chunk, lz4 (blosc)
          action                 (T, action_dim) float32: the action executed
          reward, terminated, truncated, success ...   (T,) per-step arrays
      .staging/                  episodes being written; never read

An episode is written under ``.staging`` and moved into ``episodes/`` with one directory
rename once complete, so a crash or SIGKILL while writing loses only that episode and a
reader never sees a partial one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BloscCodec, BloscShuffle

import robot_rl

FORMAT = "robot_rl.episodes"
SCHEMA_VERSION = 1
IMAGE_COMPRESSOR = BloscCodec(cname="lz4", clevel=5, shuffle=BloscShuffle.bitshuffle)


class EpisodeStore:
    """A directory of episodes. Open with :meth:`open` (reading) or :meth:`create` (writing)."""

    def __init__(self, path: str | os.PathLike, root: zarr.Group):
        self.path = Path(path)
        self.root = root

    @classmethod
    def create(cls, path: str | os.PathLike, metadata: Mapping[str, Any] | None = None) -> "EpisodeStore":
        """Create a store, or open an existing one for appending (its metadata must match)."""
        path = Path(path)
        if (path / "zarr.json").exists():
            store = cls.open(path)
            old = store.metadata
            for key, value in (metadata or {}).items():
                if key in old and _jsonable(old[key]) != _jsonable(value):
                    raise ValueError(f"{path}: store metadata {key}={old[key]!r} differs from {value!r}")
            shutil.rmtree(path / ".staging", ignore_errors=True)  # leftovers of a crashed writer
            return store
        path.mkdir(parents=True, exist_ok=True)
        root = zarr.open_group(str(path), mode="w")
        root.attrs.update(
            {
                "format": FORMAT,
                "schema_version": SCHEMA_VERSION,
                "software_version": robot_rl.__version__,
                "metadata": _jsonable(dict(metadata or {})),
            }
        )
        root.create_group("episodes")
        return cls(path, root)

    @classmethod
    def open(cls, path: str | os.PathLike) -> "EpisodeStore":
        path = Path(path)
        if not (path / "zarr.json").exists():
            raise FileNotFoundError(f"{path}: no robot_rl episode store here")
        root = zarr.open_group(str(path), mode="r+" if os.access(path, os.W_OK) else "r")
        if root.attrs.get("format") != FORMAT:
            raise ValueError(f"{path}: not a robot_rl episode store (format={root.attrs.get('format')!r})")
        version = root.attrs.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise ValueError(f"{path}: schema_version={version!r}; this robot_rl reads up to {SCHEMA_VERSION}")
        return cls(path, root)

    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self.root.attrs["metadata"])

    def episode_names(self) -> list[str]:
        """Names of the complete episodes, in the order they were written."""
        folder = self.path / "episodes"
        return sorted(p.name for p in folder.iterdir() if p.name.startswith("episode_") and (p / "zarr.json").exists())

    def __len__(self) -> int:
        return len(self.episode_names())

    def episode(self, name: str) -> zarr.Group:
        return zarr.open_group(str(self.path / "episodes" / name), mode="r")

    def read_episode(self, name: str) -> dict[str, Any]:
        """All arrays of an episode as numpy (``obs`` as a dict) plus ``attrs``."""
        group = self.episode(name)
        out: dict[str, Any] = {"attrs": dict(group.attrs), "obs": {}}
        for key, array in group["obs"].arrays():
            out["obs"][key] = array[:]
        for key, array in group.arrays():
            out[key] = array[:]
        return out

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for name in self.episode_names():
            yield self.read_episode(name)

    def writer(self) -> "EpisodeWriter":
        return EpisodeWriter(self)

    def _next_name(self) -> str:
        names = self.episode_names()
        index = int(names[-1].split("_")[1]) + 1 if names else 0
        return f"episode_{index:06d}"


class EpisodeWriter:
    """Collects one episode step by step and commits it atomically.

    ``start(obs)`` with the reset observation, ``add(obs, action, reward, terminated,
    truncated, **extras)`` after each step, ``commit(**attrs)`` at the end; ``discard()``
    drops an unfinished episode.
    """

    def __init__(self, store: EpisodeStore):
        self.store = store
        self._obs: dict[str, list[np.ndarray]] = {}
        self._steps: dict[str, list[Any]] = {}

    def start(self, obs: Mapping[str, np.ndarray]) -> None:
        self._obs = {key: [np.asarray(value)] for key, value in obs.items()}
        self._steps = {}

    def add(self, obs: Mapping[str, np.ndarray], action: np.ndarray, reward: float, terminated: bool,
            truncated: bool, **extras: Any) -> None:
        if not self._obs:
            raise RuntimeError("EpisodeWriter.add before start")
        if obs.keys() != self._obs.keys():
            raise ValueError(f"observation keys {sorted(obs)} differ from the episode's {sorted(self._obs)}")
        for key, value in obs.items():
            self._obs[key].append(np.asarray(value))
        step = {"action": np.asarray(action, dtype=np.float32), "reward": float(reward),
                "terminated": bool(terminated), "truncated": bool(truncated), **extras}
        for key, value in step.items():
            self._steps.setdefault(key, []).append(value)

    def __len__(self) -> int:
        return len(self._steps.get("action", []))

    def discard(self) -> None:
        self._obs, self._steps = {}, {}

    def commit(self, **attrs: Any) -> str:
        """Write the episode under ``.staging``, then rename it into ``episodes/``; returns its name."""
        if not len(self):
            raise RuntimeError("cannot commit an episode with no steps")
        name = self.store._next_name()
        staging = self.store.path / ".staging" / name
        shutil.rmtree(staging, ignore_errors=True)
        staging.parent.mkdir(exist_ok=True)
        group = zarr.open_group(str(staging), mode="w")
        group.attrs.update(_jsonable({"length": len(self), **attrs}))
        obs_group = group.create_group("obs")
        for key, frames in self._obs.items():
            data = np.stack(frames)
            if data.dtype == np.uint8 and data.ndim == 4:  # camera frames: one per chunk
                array = obs_group.create_array(key, shape=data.shape, dtype=data.dtype,
                                               chunks=(1, *data.shape[1:]), compressors=IMAGE_COMPRESSOR)
            else:
                array = obs_group.create_array(key, shape=data.shape, dtype=data.dtype)
            array[:] = data
        for key, values in self._steps.items():
            data = np.asarray(values)
            group.create_array(key, shape=data.shape, dtype=data.dtype)[:] = data
        _fsync_tree(staging)
        os.rename(staging, self.store.path / "episodes" / name)
        self.discard()
        return name


def _fsync_tree(path: Path) -> None:
    """Flush the files of a finished episode to disk before it is made visible."""
    for file in path.rglob("*"):
        if file.is_file():
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())


def _jsonable(value: Any) -> Any:
    """Plain JSON types (numpy scalars and arrays, tuples, OmegaConf containers included)."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    try:
        from omegaconf import OmegaConf

        return OmegaConf.to_container(value, resolve=True)
    except (ImportError, ValueError):
        return str(value)
