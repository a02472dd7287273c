"""``robot-rl data import format=robomimic``: episodes from a robomimic HDF5 file (read with h5py).

The layout read (robomimic's dataset format)::

    data/                       attrs: env_args (JSON: env_name, env_kwargs.control_freq)
      demo_N/                   one episode each, in numeric order (demo_2 before demo_10)
        actions     (T, A)
        rewards     (T,)        absent: 0
        dones       (T,)        absent: done at the last step
        obs/<key>   (T, ...)    low-dimensional vectors, and camera images (T, H, W, 3) uint8
        next_obs/<key>          optional: the observation after each step; its last row is the final observation
                                (without it, the last observation is repeated)

obs/state is the vector keys (``state``, default every non-image key in sorted order) flattened and concatenated, as
float32; the store's ``state_layout`` names each key's part. Cameras (``cameras``, default every image key, named
without its ``_image`` suffix: agentview_image -> agentview) are kept as stored. A done step is terminated; an
episode whose last step is not done is truncated there. robomimic has no success flag: success is false. Steps are
stamped (t + 1) / control rate, in seconds from the episode's start.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.config import ConfigError, settings_of

from ..episode_store import EpisodeStoreError
from .common import Episode, ImportSettings, episode_ends, needs


@dataclass(frozen=True)
class RobomimicMapping:
    """``data.import.robomimic``: which obs keys make obs/state and which are cameras."""

    state: tuple[str, ...] | list[str] | None = None  # obs keys concatenated in order; None: every non-image key
    cameras: Mapping[str, str] | None = None  # {store camera: obs key}; None: every image key, "_image" dropped

    def __post_init__(self) -> None:
        if self.state is not None and (
            isinstance(self.state, str) or not self.state or not all(isinstance(k, str) for k in self.state)
        ):
            raise ConfigError("data.import.robomimic.state", self.state, "a non-empty list of obs keys")
        if self.cameras is not None and (
            not isinstance(self.cameras, Mapping) or not all(isinstance(k, str) for k in self.cameras.values())
        ):
            raise ConfigError("data.import.robomimic.cameras", self.cameras, "{store camera: obs key}")


def read_robomimic(path: Path, options: ImportSettings) -> tuple[dict[str, Any], Iterator[Episode], dict[str, Any]]:
    """The store metadata and the episodes (read lazily, one demo at a time) of a robomimic HDF5 file;
    EpisodeStoreError naming the file and the dataset (``data/demo_3/actions``) for one that does not fit."""
    mapping = settings_of("data.import.robomimic", RobomimicMapping, options.robomimic)
    with _open(path) as file:
        data = file.get("data")
        if not _is_group(data):
            raise EpisodeStoreError(f"{path}: no group data; expected robomimic's data/demo_N layout")
        demos = _demo_names(data, path)
        env_args = _env_args(data, path)
        first = data[demos[0]]
        if not _is_group(first.get("obs")):
            raise EpisodeStoreError(f"{path}: data/{demos[0]}/obs: missing")
        images = sorted(key for key, value in first["obs"].items() if _is_image(value))
        state = list(mapping.state) if mapping.state is not None else sorted(set(first["obs"]) - set(images))
        cameras = (
            dict(mapping.cameras)
            if mapping.cameras is not None
            else {key.removesuffix("_image"): key for key in images}
        )
        layout, offset = {}, 0
        for key in state:
            if key not in first["obs"]:
                raise EpisodeStoreError(f"{path}: data/{demos[0]}/obs/{key} (data.import.robomimic.state): missing")
            size = math.prod(first["obs"][key].shape[1:])
            layout[key], offset = [offset, size], offset + size
    rate = options.control_rate_hz or env_args.get("env_kwargs", {}).get("control_freq")
    if not rate:
        raise EpisodeStoreError(
            f"{path}: data attrs env_args has no env_kwargs.control_freq; give data.import.control_rate_hz"
        )
    metadata = {
        "task": options.task or env_args.get("env_name"),
        "robot": options.robot,
        "control_rate_hz": float(rate),
        "state_layout": layout or None,
        "imported_from": f"robomimic:{path}",
    }
    return metadata, _demos(path, demos, state, cameras, float(rate)), {}


def _open(path: Path):
    h5py = needs("h5py", "robomimic")
    try:
        return h5py.File(path, "r")
    except OSError as error:
        raise EpisodeStoreError(f"{path}: not a readable HDF5 file ({' '.join(str(error).split())})") from None


def _is_group(node: Any) -> bool:
    return node is not None and hasattr(node, "keys")


def _is_image(dataset: Any) -> bool:
    return not _is_group(dataset) and dataset.dtype == np.uint8 and dataset.ndim == 4 and dataset.shape[-1] in (1, 3, 4)


def _demo_names(data: Any, path: Path) -> list[str]:
    """data/demo_N in numeric order."""
    names = [name for name in data if name.startswith("demo_")]
    bad = [name for name in names if not name.removeprefix("demo_").isdigit()]
    if bad:
        raise EpisodeStoreError(f"{path}: data/{bad[0]}: expected demo_<number>")
    if not names:
        raise EpisodeStoreError(f"{path}: no data/demo_N groups")
    return sorted(names, key=lambda name: int(name.removeprefix("demo_")))


def _env_args(data: Any, path: Path) -> dict[str, Any]:
    """data's env_args attribute (JSON), {} when absent."""
    raw = data.attrs.get("env_args")
    if raw is None:
        return {}
    try:
        value = json.loads(raw.decode() if isinstance(raw, bytes) else str(raw))
    except ValueError:
        raise EpisodeStoreError(f"{path}: data attrs env_args: not JSON") from None
    return value if isinstance(value, dict) else {}


def _demos(
    path: Path, demos: list[str], state: list[str], cameras: Mapping[str, str], rate: float
) -> Iterator[Episode]:
    with _open(path) as file:
        for name in demos:
            demo = file["data"][name]
            where = f"{path}: data/{name}"
            actions = _read(demo, "actions", where)
            length = len(actions)
            if actions.ndim != 2 or length == 0:
                raise EpisodeStoreError(f"{where}/actions: shape {actions.shape}; expected (steps >= 1, action size)")
            obs = {}
            if state:
                obs["state"] = np.concatenate(
                    [_observation(demo, key, length, where).reshape(length + 1, -1) for key in state], axis=1
                ).astype(np.float32)
            for camera, key in cameras.items():
                frames = _observation(demo, key, length, where)
                if frames.dtype != np.uint8 or frames.ndim != 4:
                    raise EpisodeStoreError(
                        f"{where}/obs/{key}: {frames.dtype} {frames.shape[1:]}; a camera is (H, W, 3) uint8"
                    )
                obs[camera] = frames
            rewards = _read(demo, "rewards", where, length) if "rewards" in demo else np.zeros(length)
            dones = _read(demo, "dones", where, length) != 0 if "dones" in demo else None
            terminated, truncated = episode_ends(dones, None, length)
            yield Episode(
                origin=f"{path.name}#{name}",
                obs=obs,
                action=actions.astype(np.float32),
                reward=rewards.reshape(length).astype(np.float32),
                terminated=terminated,
                truncated=truncated,
                timestamp=(np.arange(length) + 1) / rate,
            )


def _read(group: Any, key: str, where: str, rows: int | None = None) -> np.ndarray:
    """A numeric dataset of ``group`` (with ``rows`` rows when given); EpisodeStoreError naming it otherwise."""
    node = group.get(key)
    if node is None or _is_group(node):
        raise EpisodeStoreError(f"{where}/{key}: missing")
    if node.dtype.kind not in "biuf":
        raise EpisodeStoreError(f"{where}/{key}: dtype {node.dtype}; expected numbers")
    values = node[()]
    if values.ndim == 0 or (rows is not None and len(values) != rows):
        raise EpisodeStoreError(f"{where}/{key}: {values.shape[0] if values.ndim else 0} rows; expected {rows}")
    return values


def _observation(demo: Any, key: str, length: int, where: str) -> np.ndarray:
    """obs/<key> (T rows) and the final observation after them: next_obs/<key>'s last row, else obs' last repeated."""
    if not _is_group(demo.get("obs")):
        raise EpisodeStoreError(f"{where}/obs: missing")
    values = _read(demo["obs"], key, f"{where}/obs", length)
    following = demo.get("next_obs")
    final = values[-1:]
    if _is_group(following) and key in following:
        final = _read(following, key, f"{where}/next_obs", length)[-1:]
    return np.concatenate([values, final])
