"""``robot-rl data info|show|merge``: look into, render and combine episode stores."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.config import new_file_path
from robot_rl.core.folders import creating

from .episode_store import EpisodeStore, EpisodeStoreError, _fsync_tree
from .verification import check, episode_uid

SCHEMA_KEYS = ("observation_shapes", "action_dim", "task")


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def info(path: str | os.PathLike) -> dict[str, Any]:
    """Summary of a store: metadata, episodes, steps and success per source, size on disk.

    Every episode is verified first (:func:`~robot_rl.data.verification.verify`): a bad one raises
    EpisodeStoreError naming the store and the episode.
    """
    store = EpisodeStore.open(path)
    check(store)
    meta = store.metadata
    by_source: dict[str, dict[str, float]] = {}
    steps = interventions = 0
    for name in store.episode_names():
        attrs = store.episode_attrs(name)
        row = by_source.setdefault(attrs.get("source", "?"), {"episodes": 0, "steps": 0, "successes": 0})
        row["episodes"] += 1
        row["steps"] += attrs["length"]
        row["successes"] += bool(attrs.get("success"))
        steps += attrs["length"]
        interventions += int(store.read_episode(name, keys={"intervened"})["intervened"].sum())
    episodes = len(store)
    return {
        "store": str(store.path),
        "schema_version": store.root.attrs["schema_version"],
        "software_version": store.root.attrs["software_version"],
        "task": meta.get("task"),
        "robot": meta.get("robot"),
        "control_rate_hz": meta.get("control_rate_hz"),
        "action_dim": meta["action_dim"],
        "observation_shapes": meta["observation_shapes"],
        "episodes": episodes,
        "steps": steps,
        "success_rate": sum(r["successes"] for r in by_source.values()) / episodes if episodes else 0.0,
        "intervention_steps": interventions,
        "by_source": by_source,
        "bytes_on_disk": disk_bytes(store.path),
    }


def format_info(summary: dict[str, Any]) -> str:
    """The info summary as the table ``robot-rl data info`` prints."""
    shapes = ", ".join(f"{key} {tuple(shape)}" for key, shape in summary["observation_shapes"].items())
    lines = [
        (
            f"store          {summary['store']}  ({summary['bytes_on_disk'] / 1e6:.1f} MB, schema "
            f"{summary['schema_version']}, robot_rl {summary['software_version']})"
        ),
        f"task           {summary['task']}   robot {summary['robot']}   control rate {summary['control_rate_hz']} Hz",
        f"observations   {shapes}   action dim {summary['action_dim']}",
        (
            f"episodes       {summary['episodes']}   steps {summary['steps']}   success {100 * summary['success_rate']:.1f}%"
            f"   intervention steps {summary['intervention_steps']}"
        ),
        "",
        f"{'source':<14}{'episodes':>10}{'steps':>10}{'success':>10}",
    ]
    for source, row in summary["by_source"].items():
        rate = 100 * row["successes"] / row["episodes"]
        lines.append(f"{source:<14}{row['episodes']:>10}{row['steps']:>10}{rate:>9.1f}%")
    return "\n".join(lines)


def merge(inputs: list[str | os.PathLike], out: str | os.PathLike) -> dict[str, Any]:
    """Copy the episodes of ``inputs`` into ``out`` (created, or appended to) after schema checks,
    skipping those ``out`` already holds (same uid): merging twice adds nothing.

    All checks run before anything is written: a schema mismatch or an input episode that fails
    verification raises EpisodeStoreError naming the store and the field or episode, and no store
    is modified. A new ``out`` is built in a temporary sibling and renamed into place at the end,
    so a failure leaves no partial store; appending adds one whole episode at a time.
    """
    if not inputs:
        raise EpisodeStoreError("merge needs at least one input store")
    stores = [EpisodeStore.open(path) for path in inputs]
    reference = stores[0].metadata
    existing = EpisodeStore.open(out) if os.fspath(out) and (Path(out) / "zarr.json").exists() else None
    if existing is None:
        EpisodeStore.check_new_path(out)
    out = Path(out)
    for store in stores[1:] + ([existing] if existing is not None else []):
        for key in SCHEMA_KEYS:
            if store.metadata.get(key) != reference.get(key):
                raise EpisodeStoreError(
                    f"{store.path}: {key}={store.metadata.get(key)!r} does not match "
                    f"{stores[0].path}: {key}={reference.get(key)!r}"
                )
    if any(store.path.resolve() == out.resolve() for store in stores):
        raise EpisodeStoreError(f"{out}: the output cannot also be an input")
    check(*stores)
    if existing is not None:
        counts = _copy_new_episodes(stores, EpisodeStore.create(out, reference))
    else:
        with creating(out) as work:
            counts = _copy_new_episodes(stores, EpisodeStore.create(work, reference))
    return {"out": str(out), **counts, "episodes_in_store": len(EpisodeStore.open(out))}


def _copy_new_episodes(stores: list[EpisodeStore], target: EpisodeStore) -> dict[str, int]:
    """Copy each episode (bit for bit, one whole episode at a time) unless ``target`` holds its uid."""
    held = {episode_uid(target, name) for name in target.episode_names()}
    copied = skipped = 0
    for store in stores:
        for name in store.episode_names():
            uid = episode_uid(store, name)
            if uid in held:
                skipped += 1
                continue
            new_name = target._next_name()
            staging = target.path / ".staging" / new_name
            staging.parent.mkdir(exist_ok=True)
            shutil.copytree(store.path / "episodes" / name, staging)
            _fsync_tree(staging)
            os.rename(staging, target.path / "episodes" / new_name)
            target._claimed(new_name)
            held.add(uid)
            copied += 1
    return {"copied": copied, "skipped": skipped}


def render_episode(path: str | os.PathLike, episode: int, out: str | os.PathLike, height: int = 240) -> dict[str, Any]:
    """Write the new mp4 ``out`` (``data.out``: an .mp4 path in an existing folder, never an existing file) of one
    episode: camera views side by side over a plot of actions, reward and interventions with a cursor at the current
    step."""
    import cv2

    from .video import new_video

    out = new_file_path("data.out", out, ".mp4")
    store = EpisodeStore.open(path)
    names = store.episode_names()
    if not 0 <= episode < len(names):
        raise EpisodeStoreError(f"{store.path}: episode index {episode} out of range (0..{len(names) - 1})")
    data = store.read_episode(names[episode])
    length = len(data["action"])
    cameras = [key for key, value in data["obs"].items() if value.ndim == 4]
    fps = float(store.metadata.get("control_rate_hz") or 10)

    def view(t: int) -> np.ndarray | None:
        if not cameras:
            return None
        tiles = []
        for key in cameras:
            frame = data["obs"][key][t]
            scale = height / frame.shape[0]
            tiles.append(cv2.resize(frame, (round(frame.shape[1] * scale), height), interpolation=cv2.INTER_NEAREST))
        return np.concatenate(tiles, axis=1)

    width = view(0).shape[1] if cameras else 640
    width += width % 2
    plot, x_of_step = _episode_plot(data, width, max(200, height))
    with new_video(out, fps, (width, plot.shape[0] + (height if cameras else 0))) as write:
        for t in range(length + 1):
            panel = plot.copy()
            x = x_of_step(min(t, length - 1))
            cv2.line(panel, (x, 0), (x, panel.shape[0] - 1), (0, 0, 0), 2)
            frame = panel
            if cameras:
                top = np.zeros((height, width, 3), np.uint8)
                tiles = view(t)
                top[:, : tiles.shape[1]] = tiles
                frame = np.concatenate([top, panel], axis=0)
            write(frame)
    return {"out": str(out), "episode": names[episode], "frames": length + 1, "fps": fps}


def _episode_plot(data: dict[str, Any], width: int, height: int):
    """RGB image of actions, reward and intervention spans; and step -> pixel column."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.arange(len(data["action"]))
    dpi = 100
    figure, (ax_action, ax_reward) = plt.subplots(2, 1, figsize=(width / dpi, height / dpi), dpi=dpi, sharex=True)
    for dim in range(data["action"].shape[1]):
        ax_action.plot(steps, data["action"][:, dim], linewidth=1, label=f"a{dim}")
    ax_action.set_ylim(-1.1, 1.1)
    ax_action.set_ylabel("action")
    ax_action.legend(loc="upper right", fontsize=6, ncol=data["action"].shape[1])
    ax_reward.plot(steps, data["reward"], color="black", linewidth=1)
    ax_reward.set_ylabel("reward")
    ax_reward.set_xlabel("step")
    for ax in (ax_action, ax_reward):
        for t in np.flatnonzero(data["intervened"]):
            ax.axvspan(t - 0.5, t + 0.5, color="orange", alpha=0.25, linewidth=0)
    ax_reward.set_xlim(-0.5, max(len(steps) - 0.5, 0.5))
    figure.tight_layout(pad=0.3)
    figure.canvas.draw()
    image = np.asarray(figure.canvas.buffer_rgba())[..., :3].copy()
    left, right = ax_reward.get_xlim()
    bbox = ax_reward.get_window_extent()
    plt.close(figure)

    def x_of_step(t: int) -> int:
        return round(bbox.x0 + (t - left) / (right - left) * bbox.width)

    return image, x_of_step
