"""The task spec: what a node needs to know about a task without building its env.

An actor, a learner or a recorder needs the task's observation shapes, action size and state layout, not its
simulator: a learner on a GPU box has no MuJoCo, and on a cell the task is behind topics. The spec is built once
from the env where one can be built (``robot_rl.runtime.envs.task_spec``: ``robot-rl launch`` does it and hands it
to every node as ``ros.task_spec``) and travels as JSON: a ``task_spec.json`` file or an episode store's metadata,
which holds the spec of the task it was recorded from. :func:`read_task_spec` reads either.

Units: ``observation_shapes`` in pixels (``(H, W, 3)`` cameras) or state dimensions; ``action_dim`` in the agent's
normalised action space; ``control_rate_hz`` in policy steps per second; ``state_layout`` maps each part of
``obs/state`` to ``(offset, size)`` in state dimensions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robot_rl.core.config import ConfigError, is_integer, is_number

SPEC_FILE = "task_spec.json"
MAX_SPEC_BYTES = 1 << 20  # a spec is a few hundred bytes; a larger file is not one
MAX_DIMS = 4  # observation arrays: state (D,), cameras (H, W, C)


@dataclass(frozen=True)
class TaskSpec:
    task: str | None
    robot: str | None
    observation_shapes: dict[str, tuple[int, ...]]
    action_dim: int
    control_rate_hz: float | None = None
    state_layout: dict[str, tuple[int, int]] | None = None

    @property
    def cameras(self) -> list[str]:
        """The image observations, in observation order (as an episode store names them)."""
        from robot_rl.data.episode_store import camera_keys

        return camera_keys(self.observation_shapes)

    def metadata(self) -> dict[str, Any]:
        """The spec as episode-store metadata (JSON values)."""
        return {
            "task": self.task,
            "robot": self.robot,
            "observation_shapes": {key: list(shape) for key, shape in self.observation_shapes.items()},
            "action_dim": self.action_dim,
            "control_rate_hz": self.control_rate_hz,
            "state_layout": None if self.state_layout is None else {k: list(v) for k, v in self.state_layout.items()},
        }

    @classmethod
    def from_metadata(cls, metadata: Any, where: str = "ros.task_spec", value: Any = None) -> TaskSpec:
        """The spec in ``metadata`` (a spec file's object or a store's metadata; other keys are ignored); a
        malformed one raises :class:`ConfigError` naming ``where`` = ``value``."""

        def refuse(expected: str) -> ConfigError:
            return ConfigError(where, value, expected)

        if not isinstance(metadata, Mapping):
            raise refuse("a task spec: a JSON object")
        shapes = metadata.get("observation_shapes")
        if not isinstance(shapes, Mapping) or not shapes:
            raise refuse("a task spec whose observation_shapes maps each observation key to its shape")
        observation_shapes = {}
        for key, shape in shapes.items():
            if not (isinstance(shape, list | tuple) and 1 <= len(shape) <= MAX_DIMS and all(map(_positive, shape))):
                raise refuse(f"observation_shapes.{key}: 1 to {MAX_DIMS} positive integers")
            observation_shapes[str(key)] = tuple(int(size) for size in shape)
        action_dim = metadata.get("action_dim")
        if not _positive(action_dim):
            raise refuse("a task spec whose action_dim is a positive integer")
        rate = metadata.get("control_rate_hz")
        if rate is not None and not (is_number(rate) and rate > 0):
            raise refuse("a task spec whose control_rate_hz is a positive number or null")
        for name in ("task", "robot"):
            if metadata.get(name) is not None and not isinstance(metadata[name], str):
                raise refuse(f"a task spec whose {name} is a string or null")
        return cls(
            task=metadata.get("task"),
            robot=metadata.get("robot"),
            observation_shapes=observation_shapes,
            action_dim=int(action_dim),
            control_rate_hz=None if rate is None else float(rate),
            state_layout=_state_layout(metadata.get("state_layout"), observation_shapes, refuse),
        )

    def write(self, path: str | Path) -> Path:
        """Write the spec as JSON to ``path`` (a temporary sibling renamed into place)."""
        from robot_rl.core.folders import write_text_atomically

        write_text_atomically(path, json.dumps(self.metadata(), indent=2) + "\n")
        return Path(path)


def read_task_spec(path: str | Path, where: str = "ros.task_spec") -> TaskSpec:
    """The spec in ``path``: a spec file (JSON) or an episode store (its metadata); anything else raises
    :class:`ConfigError` naming ``where``."""
    path = Path(path)
    if path.is_dir():
        from robot_rl.data.episode_store import EpisodeStore, EpisodeStoreError

        try:
            metadata = EpisodeStore.open(path).metadata
        except (EpisodeStoreError, OSError, KeyError, ValueError):  # no store, another format, unreadable zarr
            raise ConfigError(
                where, str(path), f"a {SPEC_FILE} file or an episode store recorded from the task"
            ) from None
        return TaskSpec.from_metadata(metadata, where, str(path))
    try:
        if path.stat().st_size > MAX_SPEC_BYTES:
            raise ConfigError(where, str(path), f"a task spec under {MAX_SPEC_BYTES} bytes")
        metadata = json.loads(path.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise ConfigError(where, str(path), f"a readable {SPEC_FILE} ({type(error).__name__})") from None
    return TaskSpec.from_metadata(metadata, where, str(path))


def _state_layout(layout: Any, shapes: Mapping[str, tuple[int, ...]], refuse) -> dict[str, tuple[int, int]] | None:
    """``{name: (offset, size)}`` within ``obs/state``, or None."""
    if layout is None:
        return None
    state = shapes.get("state")
    if not isinstance(layout, Mapping) or state is None or len(state) != 1:
        raise refuse("a task spec whose state_layout maps parts of a (D,) state observation to (offset, size)")
    parts = {}
    for name, part in layout.items():
        ok = isinstance(part, list | tuple) and len(part) == 2 and _natural(part[0]) and _positive(part[1])
        if not ok or part[0] + part[1] > state[0]:
            raise refuse(f"state_layout.{name}: (offset, size) within the {state[0]} state dimensions")
        parts[str(name)] = (int(part[0]), int(part[1]))
    return parts


def _natural(value: Any) -> bool:
    return is_integer(value) and value >= 0


def _positive(value: Any) -> bool:
    return is_integer(value) and value > 0
