"""LeRobotDataset v3 in: ``robot-rl data import format=lerobot`` (the layout and what each feature holds:
:mod:`robot_rl.data.formats.lerobot`, the export).

A dataset's own features are read as its ``meta/info.json`` declares them (``data.import.lerobot`` maps them to the
store's keys); camera features come from their videos (decoded at each frame's timestamp) or from image columns.
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
from .lerobot import DATA_PATH, VIDEO_PATH


@dataclass(frozen=True)
class LeRobotMapping:
    """``data.import.lerobot``: which features hold what. reward, done and intervened may be absent from a dataset
    (then 0, done at the episode's last frame, false); our export's next.truncated, next.success,
    complementary_info.policy_action and complementary_info.safety_flags are read when present."""

    observations: Mapping[str, str] | None = None  # {store key: feature}; None: every observation.* feature
    action: str = "action"
    reward: str | None = "next.reward"
    done: str | None = "next.done"
    intervened: str | None = "complementary_info.is_intervention"

    def __post_init__(self) -> None:
        if self.observations is not None and (
            not isinstance(self.observations, Mapping)
            or not self.observations
            or not all(isinstance(v, str) for v in self.observations.values())
        ):
            raise ConfigError("data.import.lerobot.observations", self.observations, "{store key: feature name}")
        if not isinstance(self.action, str) or not self.action:
            raise ConfigError("data.import.lerobot.action", self.action, "the action feature's name")


def read_lerobot(path: Path, options: ImportSettings) -> tuple[dict[str, Any], Iterator[Episode], dict[str, Any]]:
    """The store metadata and the episodes (read lazily, one episode's frames at a time) of a LeRobotDataset v3
    folder; EpisodeStoreError naming the file and the field for one that does not fit."""
    mapping = settings_of("data.import.lerobot", LeRobotMapping, options.lerobot)
    pq = needs("pyarrow.parquet", "lerobot")
    info_path = path / "meta" / "info.json"
    if not info_path.is_file():
        raise EpisodeStoreError(f"{path}: no meta/info.json; expected a LeRobotDataset v3 folder")
    try:
        info = json.loads(info_path.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise EpisodeStoreError(f"{info_path}: not JSON ({error})") from None
    version = info.get("codebase_version") if isinstance(info, dict) else None
    if not isinstance(version, str) or not version.startswith("v3"):
        raise EpisodeStoreError(
            f"{info_path}: codebase_version={version!r}; expected v3.x (convert older datasets with LeRobot's "
            "convert_dataset_v21_to_v30)"
        )
    features, fps = info.get("features"), info.get("fps")
    if not isinstance(features, dict) or not features:
        raise EpisodeStoreError(f"{info_path}: field features is missing or empty")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0:
        raise EpisodeStoreError(f"{info_path}: fps={fps!r}; expected a positive number")
    observations = _observation_features(mapping, features, info_path)
    for role in ("action", "reward", "done", "intervened"):
        name = getattr(mapping, role)
        if role == "action" and name not in features:
            raise EpisodeStoreError(f"{info_path}: no feature {name!r} (data.import.lerobot.action)")
        if name in features and features[name].get("dtype") in ("video", "image", "string"):
            raise EpisodeStoreError(f"{info_path}: feature {name} (data.import.lerobot.{role}) is not numeric")
    tasks = _read_tasks(path, pq)
    episodes = _read_episode_table(path, pq)
    first_task = next(iter(tasks.values()), None)
    names = features.get("observation.state", {}).get("names")
    if isinstance(names, dict):
        names = [n for group in names.values() for n in group]
    state_layout = (
        {name: [i, 1] for i, name in enumerate(names)}
        if observations.get("state") == "observation.state"
        and isinstance(names, list)
        and len(set(names)) == len(names)
        else None
    )
    metadata = {
        "task": options.task or first_task,
        "robot": options.robot or info.get("robot_type"),
        "control_rate_hz": options.control_rate_hz or float(fps),
        "state_layout": state_layout,
        "imported_from": f"lerobot:{path}",
    }
    return metadata, _lerobot_episodes(path, info, mapping, observations, episodes, tasks, pq), {}


def _observation_features(mapping: LeRobotMapping, features: Mapping[str, Any], where: Path) -> dict[str, str]:
    """Store key -> feature: the mapping's, or every observation.* feature named by what follows ``observation.``
    (and ``images.``): observation.state -> state, observation.images.front -> front."""
    if mapping.observations is not None:
        for key, name in mapping.observations.items():
            if name not in features:
                raise EpisodeStoreError(f"{where}: no feature {name!r} (data.import.lerobot.observations.{key})")
        return dict(mapping.observations)
    found: dict[str, str] = {}
    for name, feature in features.items():
        if not name.startswith("observation.") or feature.get("dtype") == "string":
            continue
        key = name.removeprefix("observation.").removeprefix("images.").replace(".", "_")
        if key in found:
            raise EpisodeStoreError(
                f"{where}: features {found[key]} and {name} would both be obs/{key}; "
                "name them with data.import.lerobot.observations"
            )
        found[key] = name
    if not found:
        raise EpisodeStoreError(f"{where}: no observation.* feature; map them with data.import.lerobot.observations")
    return found


def _read_tasks(path: Path, pq) -> dict[int, str]:
    """task_index -> task from meta/tasks.parquet (the task is pandas' index column); empty when there is none."""
    file = path / "meta" / "tasks.parquet"
    if not file.exists():
        return {}
    table = _read_parquet(pq, file)
    names = [n for n in ("task", "__index_level_0__") if n in table.column_names]
    if "task_index" not in table.column_names or not names:
        raise EpisodeStoreError(f"{file}: expected columns task_index and task; it has {table.column_names}")
    return dict(zip(table.column("task_index").to_pylist(), table.column(names[0]).to_pylist()))


def _read_episode_table(path: Path, pq) -> list[dict[str, Any]]:
    """The rows of meta/episodes/*/*.parquet (without their stats columns), in episode order."""
    files = sorted((path / "meta" / "episodes").glob("*/*.parquet"))
    if not files:
        raise EpisodeStoreError(f"{path}: no meta/episodes/chunk-*/file-*.parquet; expected a LeRobotDataset v3 folder")
    rows = []
    for file in files:
        schema = _read_schema(pq, file)
        missing = {"episode_index", "data/chunk_index", "data/file_index"} - set(schema.names)
        if missing:
            raise EpisodeStoreError(f"{file}: missing column(s) {', '.join(sorted(missing))}")
        columns = [name for name in schema.names if not name.startswith("stats/")]
        rows += _read_parquet(pq, file, columns).to_pylist()
    return sorted(rows, key=lambda row: row["episode_index"])


def _read_schema(pq, file: Path):
    try:
        return pq.read_schema(file)
    except Exception as error:  # noqa: BLE001 - pyarrow's errors for a file that is no parquet
        raise EpisodeStoreError(f"{file}: not a readable parquet file ({' '.join(str(error).split())})") from None


def _read_parquet(pq, file: Path, columns: list[str] | None = None):
    try:
        return pq.read_table(file, columns=columns)
    except Exception as error:  # noqa: BLE001 - pyarrow's errors for a file that is no parquet
        raise EpisodeStoreError(f"{file}: not a readable parquet file ({' '.join(str(error).split())})") from None


def _lerobot_episodes(
    path: Path,
    info: Mapping[str, Any],
    mapping: LeRobotMapping,
    observations: Mapping[str, str],
    episodes: list[dict[str, Any]],
    tasks: Mapping[int, str],
    pq,
) -> Iterator[Episode]:
    features, fps = info["features"], float(info["fps"])
    data_path = info.get("data_path") or DATA_PATH
    video_path = info.get("video_path") or VIDEO_PATH
    wanted = [*observations.values(), mapping.action, mapping.reward, mapping.done, mapping.intervened]
    wanted += ["next.truncated", "next.success", "complementary_info.policy_action", "complementary_info.safety_flags"]
    columns = [
        name for name in dict.fromkeys(wanted) if name in features and features[name].get("dtype") != "video"
    ] + ["episode_index", "frame_index", "timestamp"]
    loaded: tuple[Path, Any] | None = None
    for row in episodes:
        index = row["episode_index"]
        file = path / data_path.format(chunk_index=row["data/chunk_index"], file_index=row["data/file_index"])
        if loaded is None or loaded[0] != file:
            if not file.is_file():
                raise EpisodeStoreError(f"{file}: missing (data file of episode {index})")
            schema = _read_schema(pq, file)
            absent = [name for name in columns if name not in schema.names]
            if absent:
                raise EpisodeStoreError(f"{file}: missing column(s) {', '.join(absent)}")
            loaded = (file, _read_parquet(pq, file, columns))
        table = loaded[1]
        frames = table.filter(np.asarray(table.column("episode_index").to_numpy()) == index).sort_by("frame_index")
        length = frames.num_rows
        if length == 0 or ("length" in row and row["length"] != length):
            raise EpisodeStoreError(
                f"{file}: field episode_index: {length} rows of episode {index}; meta/episodes says {row.get('length')}"
            )
        where = f"{file}: episode {index}"
        stamps = np.asarray(frames.column("timestamp").to_numpy(), np.float64)
        obs = {}
        for key, name in observations.items():
            dtype = features[name].get("dtype")
            if dtype == "video":
                file_index = (row.get(f"videos/{name}/chunk_index"), row.get(f"videos/{name}/file_index"))
                if None in file_index:
                    raise EpisodeStoreError(f"{path}: meta/episodes: no videos/{name}/* columns for episode {index}")
                video = path / video_path.format(video_key=name, chunk_index=file_index[0], file_index=file_index[1])
                start = float(row.get(f"videos/{name}/from_timestamp") or 0.0)
                values = _decode(video, start + stamps, fps)
            elif dtype == "image":
                values = _decode_images(frames.column(name), f"{where}, field {name}")
            else:
                values = _numbers(frames, name, features[name], where).astype(np.float32)
            obs[key] = np.concatenate([values, values[-1:]])  # no observation after the last action: repeat the last
        action = _numbers(frames, mapping.action, features[mapping.action], where).astype(np.float32)
        optional = {
            role: _numbers(frames, name, features[name], where)
            for role, name in {
                "reward": mapping.reward,
                "done": mapping.done,
                "truncated": "next.truncated",
                "success": "next.success",
                "intervened": mapping.intervened,
                "policy_action": "complementary_info.policy_action",
                "safety_flags": "complementary_info.safety_flags",
            }.items()
            if name is not None and name in features
        }
        flags = {
            role: values[:, 0] != 0
            for role, values in optional.items()
            if role in ("done", "truncated", "success", "intervened")
        }
        terminated, truncated = episode_ends(flags.get("done"), flags.get("truncated"), length)
        task = (row.get("tasks") or [None])[0]
        yield Episode(
            origin=f"{path.name}#episode_{index}",
            obs=obs,
            action=action,
            reward=optional["reward"][:, 0].astype(np.float32)
            if "reward" in optional
            else np.zeros(length, np.float32),
            terminated=terminated,
            truncated=truncated,
            timestamp=stamps + 1.0 / fps,
            policy_action=optional["policy_action"].astype(np.float32) if "policy_action" in optional else None,
            success=flags.get("success"),
            intervened=flags.get("intervened"),
            safety_flags=optional["safety_flags"][:, 0].astype(np.uint32) if "safety_flags" in optional else None,
            attrs={"task": task} if task else {},
        )


def _numbers(table, name: str, feature: Mapping[str, Any], where: str) -> np.ndarray:
    """A numeric column as (rows, size): scalars, or lists of ``size`` numbers (the feature's shape, flattened)."""
    pa = needs("pyarrow", "lerobot")
    column = table.column(name).combine_chunks()
    size = math.prod(feature.get("shape") or [1])
    if column.null_count:
        raise EpisodeStoreError(f"{where}, field {name}: {column.null_count} empty value(s)")
    kind = column.type
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        lengths = np.asarray(column.value_lengths().to_numpy(zero_copy_only=False))
        if (lengths != size).any():
            raise EpisodeStoreError(
                f"{where}, field {name}: a row has {int(lengths[lengths != size][0])} values; info.json's shape "
                f"{feature.get('shape')} says {size}"
            )
        column, kind = column.flatten(), column.type.value_type
    elif size != 1:
        raise EpisodeStoreError(f"{where}, field {name}: scalar column; info.json's shape {feature.get('shape')}")
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
        raise EpisodeStoreError(f"{where}, field {name}: column of {kind}; expected numbers")
    return np.asarray(column.to_numpy(zero_copy_only=False)).reshape(table.num_rows, size)


def _decode(file: Path, times: np.ndarray, fps: float) -> np.ndarray:
    """The video's frames at ``times`` (s in the file) as (N, H, W, 3) uint8 RGB: for each, the frame whose
    presentation time is nearest, which must be within half a frame period."""
    av = needs("av", "lerobot")
    if not file.is_file():
        raise EpisodeStoreError(f"{file}: missing (a video of the dataset)")
    tolerance = 0.5 / fps
    found: list[tuple[float, np.ndarray]] = []
    try:
        with av.open(str(file)) as container:
            stream = container.streams.video[0]
            first = max(float(times.min()) - tolerance, 0.0)
            container.seek(int(first / stream.time_base), stream=stream, backward=True, any_frame=False)
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                t = float(frame.pts * stream.time_base)
                if t > times.max() + tolerance:
                    break
                if t >= first:
                    found.append((t, frame.to_ndarray(format="rgb24")))
    except (av.FFmpegError, IndexError) as error:
        raise EpisodeStoreError(f"{file}: not a readable video ({' '.join(str(error).split())})") from None
    found.sort(key=lambda item: item[0])
    stamps = np.array([t for t, _ in found])
    if not len(stamps):
        raise EpisodeStoreError(f"{file}: no frame between {times.min():.3f} s and {times.max():.3f} s")
    right = np.searchsorted(stamps, times).clip(0, len(stamps) - 1)
    left = (right - 1).clip(0)
    nearest = np.where(np.abs(stamps[left] - times) <= np.abs(stamps[right] - times), left, right)
    gaps = np.abs(stamps[nearest] - times)
    if (gaps > tolerance).any():
        missing = float(times[int(np.argmax(gaps > tolerance))])
        raise EpisodeStoreError(f"{file}: no frame within {tolerance:.4f} s of t={missing:.4f} s")
    return np.stack([found[i][1] for i in nearest])


def _decode_images(column, where: str) -> np.ndarray:
    """An ``image`` feature's column (structs of encoded ``bytes``, PNG or JPEG) as (N, H, W, 3) uint8 RGB."""
    import cv2

    frames = []
    for i, item in enumerate(column.to_pylist()):
        data = item.get("bytes") if isinstance(item, dict) else None
        frame = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR) if data else None
        if frame is None:
            raise EpisodeStoreError(f"{where}: row {i} holds no image cv2 can decode")
        frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    if len({frame.shape for frame in frames}) > 1:
        raise EpisodeStoreError(f"{where}: images of several sizes")
    return np.stack(frames)
