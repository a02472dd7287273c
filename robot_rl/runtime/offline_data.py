"""Offline data for ``robot-rl pretrain`` and warm starts: episode stores checked against a run, loaded into replay.

Offline steps are learned as online ones are (:class:`~robot_rl.runtime.replay_router.SafetyRelabel`): a step the safety filter
changed costs ``safety.penalty`` and, with ``safety.relabel=proposed``, teaches the action the policy proposed.

Any episode store works (teleop demos, past runs' ``episodes.zarr``, sim runs under randomization, ``robot-rl collect``
with action noise, what ``robot-rl data import`` brought in from rosbag2, LeRobot or robomimic) as long as it holds
the run's observations (same keys and shapes; extra keys are ignored) and its action size. Every episode is
loaded, whatever its source (demo, online, probe, intervention).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from robot_rl.core.config import ConfigError
from robot_rl.data import EpisodeStore, ReplayBuffer
from robot_rl.data.episode_store import EpisodeStoreError
from robot_rl.data.transition import stored_transitions
from robot_rl.policies.pretrained import FrozenFeatures
from robot_rl.runtime.replay_router import ReplayRouter, SafetyRelabel, replay_space


def store_paths(key: str, value: Any) -> list[Path]:
    """One path or a list of them -> existing episode store folders; anything else -> ConfigError naming ``key``."""
    paths = value if isinstance(value, (list, tuple)) else [value]
    if not paths or any(path is None or not str(path).strip() for path in paths):
        raise ConfigError(key, value, "an episode store, or a list of them")
    for path in paths:
        if not Path(str(path)).is_dir():
            raise ConfigError(key, str(path), "an episode store folder (robot-rl collect, train, data import)")
    return [Path(str(path)) for path in paths]


def store_weights(key: str, value: Any, count: int) -> list[float]:
    """Per-store sampling weights: null (equal) or ``count`` numbers >= 0, not all 0."""
    if value is None:
        return [1.0] * count
    ok = isinstance(value, (list, tuple)) and len(value) == count
    ok = ok and all(
        isinstance(w, (int, float)) and not isinstance(w, bool) and np.isfinite(w) and w >= 0 for w in value
    )
    if not ok or not sum(value) > 0:
        raise ConfigError(key, value, f"null or {count} numbers >= 0 (one per store), not all 0")
    return [float(w) for w in value]


def open_store(key: str, path: Path, shapes: dict[str, tuple[int, ...]], action_dim: int) -> EpisodeStore:
    """The store at ``path``, refused (ConfigError naming ``key``) when it lacks this run's observations or actions."""
    try:
        store = EpisodeStore.open(path)
    except EpisodeStoreError as error:
        raise ConfigError(key, str(path), f"a robot_rl episode store ({error})") from None
    held = store.observation_shapes
    missing = {k: list(s) for k, s in shapes.items() if tuple(held.get(k, ())) != tuple(s)}
    if missing or int(store.metadata["action_dim"]) != action_dim:
        raise ConfigError(
            key,
            str(path),
            f"a store of this run's observations {missing or 'as given'} and {action_dim} action dimensions "
            f"(it holds {dict(held)} and {store.metadata['action_dim']})",
        )
    if not store.episode_names():
        raise ConfigError(key, str(path), "a store with episodes (this one has none)")
    return store


def store_steps(store: EpisodeStore) -> int:
    """Observation slots the store's episodes take in a replay buffer (steps + one per episode)."""
    return sum(int(store.episode_attrs(name).get("length", 0)) + 1 for name in store.episode_names())


def add_store(store: EpisodeStore, buffer: ReplayBuffer, relabel: SafetyRelabel) -> int:
    """Every episode of ``store`` into ``buffer``, each step relabelled as the learner relabels an online one (an
    episode's last step ends it, also one the budget cut short); returns how many episodes."""
    names = store.episode_names()
    for name in names:
        transitions = stored_transitions(store.read_episode(name), name)
        if transitions:
            transitions[-1].truncated = True
        for transition in transitions:
            buffer.add(*relabel.row(transition))
    return len(names)


def load_offline(
    key: str,
    paths: list[Path],
    shapes: dict[str, tuple[int, ...]],
    action_dim: int,
    device: torch.device,
    relabel: SafetyRelabel,
    discount: float | None = None,
    frozen: FrozenFeatures | None = None,
) -> list[ReplayBuffer]:
    """One replay buffer per store, sized to it, on the learner's ``device``, its steps relabelled by ``relabel``;
    with ``discount``, each batch also carries the returns-to-go (``mc_return``, for Cal-QL); with ``frozen`` (the
    agent's frozen camera backbone) storing its features of the frames instead of the images."""
    space = replay_space(shapes, frozen)
    encode = None if frozen is None else frozen.store
    buffers = []
    for path in paths:
        store = open_store(key, path, shapes, action_dim)
        buffer = ReplayBuffer(store_steps(store) + 2, space, action_dim, device, encode)
        add_store(store, buffer, relabel)
        if discount is not None:
            buffer.set_returns_to_go(discount)
        buffers.append(buffer)
    return buffers


def add_offline(key: str, paths: list[Path], router: ReplayRouter) -> int:
    """Every episode of the stores at ``paths`` into the learner's demo buffer (``router.demo``: demos recorded
    before, the offline-retained baseline's data), relabelled as the router relabels; returns how many."""
    buffer = router.demo
    return sum(
        add_store(open_store(key, path, router.shapes, buffer.action_dim), buffer, router.relabel) for path in paths
    )
