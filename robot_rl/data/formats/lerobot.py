"""LeRobotDataset v3 out: ``robot-rl data export format=lerobot`` (the import, ``format=lerobot``: :mod:`.lerobot_import`).

The layout (LeRobot's ``lerobot/datasets/utils.py``, codebase_version v3.0)::

    out/
      meta/info.json                              fps, features (dtype, shape, names), totals, path templates
      meta/stats.json                             per feature: min, max, mean, std, count, q01 q10 q50 q90 q99
      meta/tasks.parquet                          task_index, task (the pandas index)
      meta/episodes/chunk-000/file-000.parquet    per episode: length, where its rows and video frames are, stats
      data/chunk-000/file-000.parquet             one row per frame, one row group per episode
      videos/<feature>/chunk-000/file-000.mp4     camera frames of consecutive episodes (h264)

A new data file is started past 100 MB and a new video file past 200 MB (1000 files per chunk), as LeRobot does.

The export writes one frame per step t (T frames): ``observation.state`` (obs/state), ``observation.<key>`` (other
vector observations), ``observation.images.<camera>`` (video, frames (H, W, 3)), ``action``, ``next.reward``,
``next.done`` (terminated or truncated), ``next.truncated``, ``next.success``, ``complementary_info.is_intervention``,
``complementary_info.policy_action``, ``complementary_info.safety_flags``, and LeRobot's ``timestamp`` (s from the
episode's first frame, frame_index / fps), ``frame_index``, ``episode_index``, ``index``, ``task_index``. fps is the
store's control rate. LeRobot keeps no observation after the last action, so the store's final observation is not
exported; the import repeats an episode's last frame as its final observation (LeRobot's own RL buffer does the same).
Imported steps are stamped with the time of the next frame (s from the episode's first frame).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.folders import creating

from ..episode_store import EpisodeStore, EpisodeStoreError
from .common import needs

CODEBASE_VERSION = "v3.0"
CHUNKS_SIZE = 1000  # files per chunk folder
DATA_FILE_MB = 100
VIDEO_FILE_MB = 200
DATA_PATH = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
VIDEO_PATH = "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4"
EPISODES_PATH = "meta/episodes/chunk-000/file-000.parquet"
QUANTILES = {"q01": 0.01, "q10": 0.10, "q50": 0.50, "q90": 0.90, "q99": 0.99}
VIDEO_CODEC = "libx264"  # h264: decoded by torchcodec and PyAV alike, and plays in browsers
VIDEO_OPTIONS = {"crf": "18", "g": "2"}  # near-lossless; a key frame every 2 frames for random access, like LeRobot
STATS_FRAMES = 100  # camera statistics from at most this many frames per episode, at most 150 pixels a side
INDEX_FEATURES = ("timestamp", "frame_index", "episode_index", "index", "task_index")


# ----------------------------------------------------------------------------------------------------------- export
def export_lerobot(
    path: str | os.PathLike, out: str | os.PathLike, episodes: list[int] | None = None
) -> dict[str, Any]:
    """Write the chosen episodes (indices; all by default) of a store as a new LeRobotDataset v3 folder ``out``.

    The folder is written in a temporary sibling and renamed to ``out`` when complete: a failure leaves no ``out``.
    ``out`` must not exist (or be an empty folder). Cameras must be RGB; the control rate a whole number of Hz.
    """
    pa = needs("pyarrow", "lerobot")
    pq = needs("pyarrow.parquet", "lerobot")
    av = needs("av", "lerobot")
    store = EpisodeStore.open(path)
    names = store.episode_names_at(episodes)
    if not names:
        raise EpisodeStoreError(f"{store.path}: no episodes to export")
    if not os.fspath(out):
        raise EpisodeStoreError("out='' is empty; expected a new folder for the LeRobot dataset")
    rate = float(store.metadata.get("control_rate_hz") or 10)
    fps = round(rate)
    if fps < 1 or abs(fps - rate) > 1e-6 * rate:
        raise EpisodeStoreError(
            f"{store.path}: control_rate_hz={rate}; a LeRobot dataset needs a whole number of frames per second"
        )
    features = _features(store, fps)
    cameras = store.cameras
    tasks: dict[str, int] = {}
    rows, episode_stats = [], []
    out = Path(out)
    with creating(out) as work:
        data = _DataFiles(work, pa, pq)
        videos = {key: _VideoFiles(work, f"observation.images.{key}", fps, av) for key in cameras}
        frames_before = 0
        try:
            for episode_index, name in enumerate(names):
                episode = store.read_episode(name)
                length = len(episode["action"])
                task = episode["attrs"].get("task") or store.metadata.get("task") or "unspecified"
                task_index = tasks.setdefault(str(task), len(tasks))
                columns = _frame_columns(store, episode, features, episode_index, frames_before, task_index, fps)
                row = {"episode_index": episode_index, "tasks": [str(task)], "length": length}
                row.update(data.append(columns))
                stats = {name: _stats(values) for name, values in columns.items()}
                for key in cameras:
                    row.update(videos[key].append(episode["obs"][key][:length]))
                    stats[f"observation.images.{key}"] = _image_stats(episode["obs"][key][:length])
                row.update({"dataset_from_index": frames_before, "dataset_to_index": frames_before + length})
                row.update({"meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0})
                row.update(
                    {
                        f"stats/{feature}/{stat}": value.tolist()
                        for feature, s in stats.items()
                        for stat, value in s.items()
                    }
                )
                rows.append(row)
                episode_stats.append(stats)
                frames_before += length
        finally:  # on success and on error: the files are complete, or removed with the sibling
            data.close()
            for video in videos.values():
                video.close()
        (work / "meta" / "episodes" / "chunk-000").mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), work / EPISODES_PATH)
        _write_tasks(work / "meta" / "tasks.parquet", tasks, pa, pq)
        stats = {feature: _aggregate([s[feature] for s in episode_stats]) for feature in episode_stats[0]}
        (work / "meta" / "stats.json").write_text(
            json.dumps({feature: {k: v.tolist() for k, v in s.items()} for feature, s in stats.items()}, indent=2)
        )
        info = {
            "codebase_version": CODEBASE_VERSION,
            "robot_type": store.metadata.get("robot"),
            "total_episodes": len(names),
            "total_frames": frames_before,
            "total_tasks": len(tasks),
            "chunks_size": CHUNKS_SIZE,
            "data_files_size_in_mb": DATA_FILE_MB,
            "video_files_size_in_mb": VIDEO_FILE_MB,
            "fps": fps,
            "splits": {"train": f"0:{len(names)}"},
            "data_path": DATA_PATH,
            "video_path": VIDEO_PATH if cameras else None,
            "features": features,
        }
        (work / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    return {"out": str(out), "format": "lerobot", "episodes": len(names), "frames": frames_before, "fps": fps}


def _feature_name(store: EpisodeStore, key: str) -> str:
    if key in store.cameras:
        return f"observation.images.{key}"
    return "observation.state" if key == "state" else f"observation.{key}"


def _features(store: EpisodeStore, fps: int) -> dict[str, dict[str, Any]]:
    """info.json's features: dtype, shape and names of every column and video (LeRobot's feature dicts)."""
    features: dict[str, dict[str, Any]] = {}
    action_dim = int(store.metadata["action_dim"])
    for key, shape in store.observation_shapes.items():
        name = _feature_name(store, key)
        if key in store.cameras:
            if shape[2] != 3:
                raise EpisodeStoreError(
                    f"{store.path}: field obs/{key} has {shape[2]} channel(s); LeRobot videos are RGB"
                )
            height, width, channels = shape
            features[name] = {
                "dtype": "video",
                "shape": [height, width, channels],
                "names": ["height", "width", "channels"],
                "info": {
                    "video.height": height,
                    "video.width": width,
                    "video.codec": "h264",
                    "video.pix_fmt": _pix_fmt(height, width),
                    "video.is_depth_map": False,
                    "video.fps": fps,
                    "video.channels": channels,
                    "has_audio": False,
                },
            }
        elif len(shape) != 1:
            raise EpisodeStoreError(f"{store.path}: field obs/{key} has shape {shape}; LeRobot export takes vectors")
        else:
            features[name] = {"dtype": "float32", "shape": list(shape), "names": _state_names(store, key, shape[0])}
    scalar = {"shape": [1], "names": None}
    features.update(
        {
            "action": {"dtype": "float32", "shape": [action_dim], "names": None},
            "next.reward": {"dtype": "float32", **scalar},
            "next.done": {"dtype": "bool", **scalar},
            "next.truncated": {"dtype": "bool", **scalar},
            "next.success": {"dtype": "bool", **scalar},
            "complementary_info.is_intervention": {"dtype": "bool", **scalar},
            "complementary_info.policy_action": {"dtype": "float32", "shape": [action_dim], "names": None},
            "complementary_info.safety_flags": {"dtype": "int64", **scalar},
            "timestamp": {"dtype": "float32", **scalar},
            "frame_index": {"dtype": "int64", **scalar},
            "episode_index": {"dtype": "int64", **scalar},
            "index": {"dtype": "int64", **scalar},
            "task_index": {"dtype": "int64", **scalar},
        }
    )
    return features


def _state_names(store: EpisodeStore, key: str, size: int) -> list[str] | None:
    """Names of obs/state's elements from the store's state_layout ({name: (offset, size)}); None without one."""
    layout = store.metadata.get("state_layout") if key == "state" else None
    if not isinstance(layout, Mapping):
        return None
    names = [None] * size
    for name, (offset, count) in layout.items():
        for j in range(count):
            if 0 <= offset + j < size:
                names[offset + j] = name if count == 1 else f"{name}.{j}"
    return names if all(names) else None


def _frame_columns(
    store: EpisodeStore,
    episode: dict[str, Any],
    features: Mapping[str, Any],
    episode_index: int,
    frames_before: int,
    task_index: int,
    fps: int,
) -> dict[str, np.ndarray]:
    """The data columns of one episode, one row per step (the observation before it, the action and its outcome)."""
    length = len(episode["action"])
    frames = np.arange(length)
    columns = {
        _feature_name(store, key): np.asarray(values[:length], np.float32)
        for key, values in episode["obs"].items()
        if key not in store.cameras
    }
    columns.update(
        {
            "action": episode["action"],
            "next.reward": episode["reward"].astype(np.float32),
            "next.done": episode["terminated"] | episode["truncated"],
            "next.truncated": episode["truncated"],
            "next.success": episode["success"],
            "complementary_info.is_intervention": episode["intervened"],
            "complementary_info.policy_action": episode["policy_action"],
            "complementary_info.safety_flags": episode["safety_flags"].astype(np.int64),
            "timestamp": (frames / fps).astype(np.float32),
            "frame_index": frames.astype(np.int64),
            "episode_index": np.full(length, episode_index, np.int64),
            "index": frames_before + frames.astype(np.int64),
            "task_index": np.full(length, task_index, np.int64),
        }
    )
    return {name: columns[name] for name in features if name in columns}


class _DataFiles:
    """data/chunk-*/file-*.parquet: episodes appended as row groups; a new file once one passes DATA_FILE_MB."""

    def __init__(self, root: Path, pa, pq):
        self.root, self.pa, self.pq = root, pa, pq
        self.chunk = self.file = 0
        self.writer = None
        self.bytes = 0

    def append(self, columns: Mapping[str, np.ndarray]) -> dict[str, int]:
        if self.writer is not None and self.bytes >= DATA_FILE_MB * 2**20:
            self.close()
            self.chunk, self.file = _next_file(self.chunk, self.file)
        table = self.pa.table({name: _arrow(values, self.pa) for name, values in columns.items()})
        if self.writer is None:
            target = self.root / DATA_PATH.format(chunk_index=self.chunk, file_index=self.file)
            target.parent.mkdir(parents=True, exist_ok=True)
            self.writer, self.bytes = self.pq.ParquetWriter(str(target), table.schema, compression="snappy"), 0
        self.writer.write_table(table)
        self.bytes += table.nbytes
        return {"data/chunk_index": self.chunk, "data/file_index": self.file}

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class _VideoFiles:
    """videos/<feature>/chunk-*/file-*.mp4: episodes' frames appended (pts = frame count / fps); a new file once one
    passes VIDEO_FILE_MB."""

    def __init__(self, root: Path, feature: str, fps: int, av):
        self.root, self.feature, self.fps, self.av = root, feature, fps, av
        self.chunk = self.file = 0
        self.container = self.stream = self.target = None
        self.frames = 0

    def append(self, frames: np.ndarray) -> dict[str, Any]:
        if self.container is not None and self.target.stat().st_size >= VIDEO_FILE_MB * 2**20:
            self.close()
            self.chunk, self.file = _next_file(self.chunk, self.file)
        if self.container is None:
            self.target = self.root / VIDEO_PATH.format(
                video_key=self.feature, chunk_index=self.chunk, file_index=self.file
            )
            self.target.parent.mkdir(parents=True, exist_ok=True)
            self.container = self.av.open(str(self.target), "w")
            self.stream = self.container.add_stream(VIDEO_CODEC, rate=self.fps, options=VIDEO_OPTIONS)
            self.stream.height, self.stream.width = frames.shape[1:3]
            self.stream.pix_fmt = _pix_fmt(*frames.shape[1:3])
            self.stream.time_base = Fraction(1, self.fps)
            self.frames = 0
        start = self.frames
        for image in frames:
            frame = self.av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")
            frame.pts, frame.time_base = self.frames, Fraction(1, self.fps)
            self.container.mux(self.stream.encode(frame))
            self.frames += 1
        prefix = f"videos/{self.feature}"
        return {
            f"{prefix}/chunk_index": self.chunk,
            f"{prefix}/file_index": self.file,
            f"{prefix}/from_timestamp": start / self.fps,
            f"{prefix}/to_timestamp": self.frames / self.fps,
        }

    def close(self) -> None:
        if self.container is not None:
            self.container.mux(self.stream.encode())
            self.container.close()
            self.container = None


def _pix_fmt(height: int, width: int) -> str:
    """yuv420p (what players and LeRobot's own encoder use) unless a side is odd, which 4:2:0 cannot hold."""
    return "yuv420p" if height % 2 == 0 and width % 2 == 0 else "yuv444p"


def _next_file(chunk: int, file: int) -> tuple[int, int]:
    return (chunk + 1, 0) if file == CHUNKS_SIZE - 1 else (chunk, file + 1)


def _arrow(values: np.ndarray, pa):
    """A column: scalars for (N,) and (N, 1) (LeRobot's shape (1,) features), fixed-size lists for (N, D)."""
    values = np.ascontiguousarray(values)
    if values.ndim == 1 or values.shape[1:] == (1,):
        return pa.array(values.reshape(-1))
    return pa.FixedSizeListArray.from_arrays(pa.array(values.reshape(-1)), values.shape[1])


def _stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """min, max, mean, std, count and quantiles of a column over its rows (per element; shape (1,) for scalars)."""
    values = np.asarray(values, np.float64).reshape(len(values), -1)
    quantiles = np.quantile(values, list(QUANTILES.values()), axis=0)
    stats = {
        "min": values.min(axis=0),
        "max": values.max(axis=0),
        "mean": values.mean(axis=0),
        "std": values.std(axis=0),
        "count": np.array([len(values)]),
    }
    return {**stats, **dict(zip(QUANTILES, quantiles))}


def _image_stats(frames: np.ndarray) -> dict[str, np.ndarray]:
    """Per-channel statistics of camera frames scaled to [0, 1], shaped (C, 1, 1) like LeRobot's, from at most
    STATS_FRAMES frames spread over the episode, subsampled to at most 150 pixels a side."""
    picked = frames[np.unique(np.linspace(0, len(frames) - 1, min(len(frames), STATS_FRAMES)).round().astype(int))]
    stride = max(1, math.ceil(max(frames.shape[1:3]) / 150))
    pixels = picked[:, ::stride, ::stride].reshape(-1, frames.shape[-1]) / 255.0
    stats = _stats(pixels)
    stats = {key: value.reshape(-1, 1, 1) for key, value in stats.items() if key != "count"}
    return {**stats, "count": np.array([len(picked)])}


def _aggregate(stats: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Dataset statistics from the episodes': exact min, max, mean and std; quantiles averaged by count (LeRobot's
    aggregate_stats)."""
    counts = np.array([s["count"][0] for s in stats], np.float64)
    weights = counts.reshape(-1, *([1] * stats[0]["mean"].ndim)) / counts.sum()
    means = np.stack([s["mean"] for s in stats])
    mean = (weights * means).sum(axis=0)
    variance = (weights * (np.stack([s["std"] for s in stats]) ** 2 + (means - mean) ** 2)).sum(axis=0)
    result = {
        "min": np.min([s["min"] for s in stats], axis=0),
        "max": np.max([s["max"] for s in stats], axis=0),
        "mean": mean,
        "std": np.sqrt(variance),
        "count": np.array([int(counts.sum())]),
    }
    return {**result, **{q: (weights * np.stack([s[q] for s in stats])).sum(axis=0) for q in QUANTILES}}


def _write_tasks(path: Path, tasks: Mapping[str, int], pa, pq) -> None:
    """meta/tasks.parquet as pandas writes LeRobot's tasks frame: column task_index, index ``task``."""
    table = pa.table({"task_index": pa.array(list(tasks.values()), pa.int64()), "task": pa.array(list(tasks))})
    pandas = {
        "index_columns": ["task"],
        "column_indexes": [],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {"name": "task", "field_name": "task", "pandas_type": "unicode", "numpy_type": "object", "metadata": None},
        ],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    pq.write_table(table.replace_schema_metadata({"pandas": json.dumps(pandas)}), path)
