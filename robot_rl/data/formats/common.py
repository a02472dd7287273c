"""What the importers share: the :class:`Episode` they yield, the ``data.import`` settings, and :func:`write_store`,
which writes episodes to a new store built in a temporary sibling and renamed into place only when every episode was
read and written (bad input leaves no output behind)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from robot_rl.core.config import ConfigError, choice, positive
from robot_rl.core.folders import creating

from ..episode_store import SOURCES, EpisodeStore, EpisodeStoreError


@dataclass
class Episode:
    """One episode read from a foreign file, laid out as the store keeps it.

    ``obs``: key -> (T + 1, ...) (the reset observation, then one per step; images (H, W, C) uint8); the step fields
    are (T,) or (T, A); ``timestamp`` is the time of each step in seconds (the input's clock). Optional fields left
    None get the store's defaults: ``policy_action`` = ``action``, flags False, ``safety_flags`` 0.
    """

    origin: str  # where it came from, "<file>#<episode>"; kept as the episode's ``origin`` attr
    obs: dict[str, np.ndarray]
    action: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    timestamp: np.ndarray
    policy_action: np.ndarray | None = None
    success: np.ndarray | None = None
    intervened: np.ndarray | None = None
    safety_flags: np.ndarray | None = None
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ImportSettings:
    """``data.import``: what the new store's metadata says and the per-format mappings (each module checks its own)."""

    task: str | None = None  # store metadata task; None: the input's own (LeRobot's first task, robomimic env_name)
    robot: str | None = None  # store metadata robot; None: the input's own (LeRobot robot_type)
    control_rate_hz: float | None = None  # None: LeRobot fps, robomimic control_freq, MCAP median action period
    source: str = "demo"  # every imported episode's source
    mcap: Mapping[str, Any] | None = None
    lerobot: Mapping[str, Any] | None = None
    robomimic: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        choice("data.import.source", self.source, SOURCES)
        if self.control_rate_hz is not None:
            positive("data.import.control_rate_hz", self.control_rate_hz)
        for key in ("task", "robot"):
            if getattr(self, key) is not None and not isinstance(getattr(self, key), str):
                raise ConfigError(f"data.import.{key}", getattr(self, key), "a string or null")


def write_store(
    out: str | os.PathLike, metadata: Mapping[str, Any], episodes: Iterable[Episode], source: str, path: Path
) -> dict[str, Any]:
    """Write ``episodes`` to a new store at ``out`` (built in a temporary sibling, renamed when all are written).

    ``metadata`` is the store's (task, robot, control_rate_hz, state_layout); ``observation_shapes`` and
    ``action_dim`` come from the first episode and every other must match them. An episode whose lengths disagree or
    whose floats are not finite raises EpisodeStoreError naming its origin and the field; so does an input (``path``)
    with no episodes. Nothing is left at ``out`` after an error.
    """
    if os.fspath(out) and (Path(out) / "zarr.json").exists():
        raise EpisodeStoreError(
            f"{out}: is an episode store already; import writes a new one (then robot-rl data merge adds it to this)"
        )
    out = EpisodeStore.check_new_path(out)
    written = steps = 0
    with creating(out) as work:
        store, shapes, action_dim = None, None, None
        for episode in episodes:
            check_episode(episode)
            episode_shapes = {key: tuple(value.shape[1:]) for key, value in episode.obs.items()}
            if store is None:
                shapes, action_dim = episode_shapes, episode.action.shape[1]
                store = EpisodeStore.create(work, {**metadata, "observation_shapes": shapes, "action_dim": action_dim})
            for key in sorted(set(shapes) | set(episode_shapes)):
                if episode_shapes.get(key) != shapes.get(key):
                    raise EpisodeStoreError(
                        f"{episode.origin}: field obs/{key} has shape {episode_shapes.get(key)}; "
                        f"the first episode's {shapes.get(key)}"
                    )
            if episode.action.shape[1] != action_dim:
                raise EpisodeStoreError(
                    f"{episode.origin}: field action has {episode.action.shape[1]} values per step; "
                    f"the first episode's {action_dim}"
                )
            _write_episode(store, episode, source)
            written += 1
            steps += len(episode.action)
        if store is None:
            raise EpisodeStoreError(f"{path}: no episodes found to import")
    return {"out": str(out), "episodes": written, "steps": steps}


def check_episode(episode: Episode) -> None:
    """EpisodeStoreError naming the origin and the field for lengths that disagree (observations T + 1, steps T,
    T >= 1), an action that is not (T, A), or floats that are not finite."""
    length = len(episode.action)
    if length < 1 or episode.action.ndim != 2:
        raise EpisodeStoreError(
            f"{episode.origin}: field action has shape {episode.action.shape}; expected (steps >= 1, action size)"
        )
    step_fields = {
        "action": episode.action,
        "policy_action": episode.policy_action,
        "reward": episode.reward,
        "terminated": episode.terminated,
        "truncated": episode.truncated,
        "timestamp": episode.timestamp,
        "success": episode.success,
        "intervened": episode.intervened,
        "safety_flags": episode.safety_flags,
    }
    fields = {f"obs/{key}": (value, length + 1) for key, value in episode.obs.items()}
    fields.update({key: (value, length) for key, value in step_fields.items() if value is not None})
    for name, (value, rows) in fields.items():
        if len(value) != rows:
            raise EpisodeStoreError(f"{episode.origin}: field {name} has {len(value)} rows; expected {rows}")
        if np.issubdtype(value.dtype, np.floating) and not np.isfinite(value).all():
            row = int(np.flatnonzero(~np.isfinite(value.reshape(rows, -1)).all(axis=1))[0])
            raise EpisodeStoreError(f"{episode.origin}: field {name} is not finite (NaN or inf) in row {row}")


def _write_episode(store: EpisodeStore, episode: Episode, source: str) -> None:
    length = len(episode.action)

    def per_step(value: np.ndarray | None, default: Any) -> np.ndarray:
        return np.full(length, default) if value is None else value

    policy_action = episode.action if episode.policy_action is None else episode.policy_action
    success = per_step(episode.success, False)
    intervened = per_step(episode.intervened, False)
    safety_flags = per_step(episode.safety_flags, 0)
    writer = store.writer()
    writer.start({key: value[0] for key, value in episode.obs.items()})
    for t in range(length):
        writer.add(
            {key: value[t + 1] for key, value in episode.obs.items()},
            episode.action[t],
            float(episode.reward[t]),
            bool(episode.terminated[t]),
            bool(episode.truncated[t]),
            policy_action=policy_action[t],
            success=bool(success[t]),
            intervened=bool(intervened[t]),
            safety_flags=int(safety_flags[t]),
            timestamp=float(episode.timestamp[t]),
        )
    writer.commit(source, origin=episode.origin, **episode.attrs)


def episode_ends(done: np.ndarray | None, truncated: np.ndarray | None, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(terminated, truncated) per step from an input's done flags (None: done at the last step) and truncation flags
    (None: none): a done step that is not truncated is terminated, and an episode whose last step is neither is
    truncated there (every episode ends one way or the other)."""
    done = np.arange(length) == length - 1 if done is None else np.asarray(done, dtype=bool)
    truncated = np.zeros(length, bool) if truncated is None else np.asarray(truncated, dtype=bool).copy()
    if not done[-1] and not truncated[-1]:
        truncated[-1] = True
    return done & ~truncated, truncated


def needs(module: str, fmt: str) -> ModuleType:
    """Import an optional library of a format; ConfigError naming the ``data`` extra when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            "data.format",
            fmt,
            f"a format whose library is installed ({module} is missing: pip install 'robot-rl[data]')",
        ) from None
