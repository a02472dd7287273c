"""``robot-rl data import format=mcap``: episodes from a rosbag2 recording (MCAP, or any storage rosbags reads).

By default the topics of our own export (``robot_rl/data/mcap_export.py``), so export -> import round-trips; a cell's
recording is read through the ``data.import.mcap`` mapping (:class:`McapMapping`). Every time below is the bag's
log time of a message (ns in the bag, s in the store).

Steps: each message on the first ``action`` topic is one step t, at time a_t. Of each mapped topic a step takes

    observation t      the latest message stamped before a_t (for the reset observation, the episode's
                       earliest if none came before a_0)
    final observation  the first message at or after the last action (the episode's last if none came after)
    action, policy_action, reward, intervened, success, terminated, truncated, safety_flags
                       the latest message stamped before the next step (before the episode's end for the last
                       step), not before the episode's start; none: policy_action = action, reward 0, flags false

An observation key takes one image topic (``sensor_msgs/Image`` rgb8, bgr8, rgba8, bgra8, mono8, or
``sensor_msgs/CompressedImage``) or a list of topics concatenated in order, each message turned into numbers:
``std_msgs`` numbers and ``*MultiArray`` (data), ``sensor_msgs/JointState`` (position, then velocity),
``geometry_msgs`` Pose (position x y z, quaternion x y z w), Twist (linear, angular), Wrench (force, torque),
Vector3, Point, and their ``*Stamped`` forms. The store's ``state_layout`` names the topic of each part of obs/state.

Episodes: ``split=topic``: each message on ``episode_topic`` starts one (steps before the first are skipped and
counted); ``split=gap``: a pause longer than ``reset_gap`` s between two actions starts one. The episode's ends
come from the ``terminated`` and ``truncated`` topics; without them (a cell's recording) the last step of each episode
is ``terminated`` (or ``truncated``, ``episode_end``). A flag topic (success, terminated, truncated, safety_flags)
that the bag lacks is read as none and named in the report (``absent_flag_topics``).

A bag of our export also holds the source store's metadata (``/robot_rl/store_metadata``: task, robot, control rate,
state layout, ...; ``data.import.task``, ``robot`` and ``control_rate_hz`` override it) and each episode's uid
(``/robot_rl/episode_uid``, the first in the episode's window), which the imported episodes keep: a ``data merge``
with the source recognises them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.config import ConfigError, choice, positive, settings_of

from ..episode_store import EpisodeStoreError
from ..mcap_export import (
    TOPIC_ACTION,
    TOPIC_EPISODE,
    TOPIC_EPISODE_UID,
    TOPIC_INTERVENED,
    TOPIC_METADATA,
    TOPIC_POLICY_ACTION,
    TOPIC_REWARD,
    TOPIC_SAFETY_FLAGS,
    TOPIC_STATE,
    TOPIC_SUCCESS,
    TOPIC_TERMINATED,
    TOPIC_TRUNCATED,
)
from .common import Episode, ImportSettings, episode_ends

IMAGE_TYPES = ("sensor_msgs/msg/Image", "sensor_msgs/msg/CompressedImage")
EXPORT_CAMERA = re.compile(r"^/camera/([^/]+)/color/image_raw$")  # mcap_export.camera_topic
EXPORT_OBS = re.compile(r"^/robot_rl/obs/([^/]+)$")  # the export's vector observations other than state
BEGIN, END = -(2**62), 2**62  # ns: before and after every message
FLAGS = ("success", "terminated", "truncated", "safety_flags")  # read as none when the bag lacks their topic
PER_STEP = ("policy_action", "reward", "intervened", *FLAGS)  # one value per step besides the action


@dataclass(frozen=True)
class McapMapping:
    """``data.import.mcap``: which topics hold what, and how episodes are split (defaults: our export's topics)."""

    observations: Mapping[str, Any] | None = None  # {store key: topic or [topics]}; None: our export's topics
    action: tuple[str, ...] | list[str] = (TOPIC_ACTION,)  # concatenated; a message on the first is one step
    policy_action: str | None = TOPIC_POLICY_ACTION  # None: the action
    reward: str | None = TOPIC_REWARD  # None: 0
    intervened: str | None = TOPIC_INTERVENED  # std_msgs/Bool (any number: non-zero); None: false
    success: str | None = TOPIC_SUCCESS  # std_msgs/Bool; None or absent: false
    terminated: str | None = TOPIC_TERMINATED  # std_msgs/Bool; None or absent (with truncated): episode_end
    truncated: str | None = TOPIC_TRUNCATED  # std_msgs/Bool
    safety_flags: str | None = TOPIC_SAFETY_FLAGS  # std_msgs/UInt32 constraint flags; None or absent: 0
    split: str = "topic"  # topic | gap
    episode_topic: str = TOPIC_EPISODE  # split=topic: a message here starts an episode
    reset_gap: float = 1.0  # split=gap: s without an action that starts a new episode
    episode_end: str = "terminated"  # without end topics, how an episode's last step is flagged: terminated | truncated

    def __post_init__(self) -> None:
        choice("data.import.mcap.split", self.split, ("topic", "gap"))
        choice("data.import.mcap.episode_end", self.episode_end, ("terminated", "truncated"))
        positive("data.import.mcap.reset_gap", self.reset_gap)
        if isinstance(self.action, str) or not self.action or not all(isinstance(t, str) for t in self.action):
            raise ConfigError("data.import.mcap.action", self.action, "a non-empty list of topics")
        if self.observations is not None:
            if not isinstance(self.observations, Mapping) or not self.observations:
                raise ConfigError("data.import.mcap.observations", self.observations, "{store key: topic or [topics]}")
            for key, topics in self.observations.items():
                if isinstance(topics, str):
                    continue
                if not isinstance(topics, (list, tuple)) or not topics or not all(isinstance(t, str) for t in topics):
                    raise ConfigError(f"data.import.mcap.observations.{key}", topics, "a topic or a list of topics")


@dataclass
class _Topic:
    """One topic's messages: log times (ns, ascending) and, for a small topic, their values."""

    name: str
    msgtype: str
    stamps: np.ndarray
    values: list


@dataclass
class _Span:
    """One episode: its label, its window [start, end) in ns and the indices of its steps' action messages."""

    label: str
    start: int
    end: int
    steps: np.ndarray


def read_mcap(path: Path, options: ImportSettings) -> tuple[dict[str, Any], Iterator[Episode], dict[str, Any]]:
    """The store metadata, the episodes (read lazily, camera frames one episode at a time) and report notes
    (``skipped_steps``: steps outside every episode) of a rosbag2 at ``path``; EpisodeStoreError naming the file
    and the topic for a bag that does not fit the mapping."""
    mapping = settings_of("data.import.mcap", McapMapping, options.mcap)
    with _open(path) as reader:
        available = {}
        for connection in reader.connections:
            available.setdefault(connection.topic, []).append(connection)
        observations = _observation_topics(mapping, available, path)
        roles = {"action": list(mapping.action)}
        for role in PER_STEP:
            if getattr(mapping, role) is not None:
                roles[role] = [getattr(mapping, role)]
        absent = [roles.pop(role)[0] for role in FLAGS if role in roles and roles[role][0] not in available]
        if mapping.split == "topic":
            roles["episode_topic"] = [mapping.episode_topic]
        named = [(f"observations.{key}", names) for key, names in observations.items()] + list(roles.items())
        missing = [(role, name) for role, names in named for name in names if name not in available]
        if missing:
            role, name = missing[0]
            listed = ", ".join(sorted(available)[:12]) + (" ..." if len(available) > 12 else "")
            hint = "; without an episode topic, split episodes with split=gap" if role == "episode_topic" else ""
            raise EpisodeStoreError(
                f"{path}: topic {name} (data.import.mcap.{role}) is not in the bag; it has {listed}{hint}"
            )
        wanted = {name for names in [*observations.values(), *roles.values()] for name in names}
        wanted |= {name for name in (TOPIC_METADATA, TOPIC_EPISODE_UID) if name in available}
        topics = _read_small_topics(reader, path, {name: available[name] for name in wanted})
    images = {key: topics[names[0]] for key, names in observations.items() if topics[names[0]].msgtype in IMAGE_TYPES}
    vectors = {key: [topics[name] for name in names] for key, names in observations.items() if key not in images}
    for key, names in observations.items():
        if key in images and len(names) > 1:
            raise ConfigError(f"data.import.mcap.observations.{key}", names, "one image topic, or number topics")
        for name in names if key not in images else []:
            _check_numbers(path, topics[name], f"observations.{key}")
    for role in ("action", *PER_STEP):
        for name in roles.get(role, []):
            _check_numbers(path, topics[name], role)
    steps = topics[mapping.action[0]]
    spans, skipped = _spans(mapping, steps.stamps, topics.get(mapping.episode_topic), path)
    if not spans:
        raise EpisodeStoreError(f"{path}: no episodes found (no message on {mapping.action[0]} within one)")
    recorded = _recorded_metadata(path, topics.get(TOPIC_METADATA))
    rate = options.control_rate_hz or recorded.get("control_rate_hz") or _control_rate(steps.stamps, spans, path)
    layout, offset = {}, 0
    for topic in vectors.get("state", []):
        layout[topic.name] = [offset, len(topic.values[0])]
        offset += len(topic.values[0])
    metadata = {
        **recorded,
        "task": options.task or recorded.get("task"),
        "robot": options.robot or recorded.get("robot"),
        "control_rate_hz": rate,
        "state_layout": recorded.get("state_layout") if recorded and mapping.observations is None else layout or None,
        "imported_from": f"mcap:{path}",
    }
    per_step = {role: topics[roles[role][0]] for role in PER_STEP if role in roles}
    actions = [topics[name] for name in mapping.action]
    uids = topics.get(TOPIC_EPISODE_UID)
    episodes = _episodes(path, mapping, spans, vectors, images, actions, per_step, uids)
    return metadata, episodes, {"skipped_steps": skipped, "absent_flag_topics": absent}


@contextmanager
def _open(path: Path) -> Iterator[Any]:
    """An open rosbags AnyReader of ``path``; EpisodeStoreError naming the file when it is no bag rosbags reads."""
    from rosbags.highlevel import AnyReader

    reader = AnyReader([path])
    try:
        reader.open()
    except Exception as error:  # noqa: BLE001 - rosbags raises several kinds for a file that is no bag
        raise EpisodeStoreError(f"{path}: not a readable rosbag2 recording ({' '.join(str(error).split())})") from None
    try:
        yield reader
    finally:
        reader.close()


def _observation_topics(mapping: McapMapping, available: Mapping[str, list], path: Path) -> dict[str, list[str]]:
    """Store key -> topics: the mapping's, or our export's (state, /robot_rl/obs/<key>, the cameras)."""
    if mapping.observations is not None:
        return {
            key: [topics] if isinstance(topics, str) else list(topics) for key, topics in mapping.observations.items()
        }
    if TOPIC_STATE not in available:
        raise EpisodeStoreError(
            f"{path}: topic {TOPIC_STATE} (robot-rl data export's state) is not in the bag; map the bag's topics with "
            "data.import.mcap.observations={state: [TOPIC, ...], CAMERA: TOPIC}"
        )
    found = {"state": [TOPIC_STATE]}
    for topic in sorted(available):
        match = EXPORT_CAMERA.match(topic) or EXPORT_OBS.match(topic)
        if match:
            found[match.group(1)] = [topic]
    return found


def _read_small_topics(reader, path: Path, wanted: Mapping[str, list]) -> dict[str, _Topic]:
    """Every wanted topic's log times; the values of all but the image topics (deserialised once, kept in memory)."""
    topics = {name: _Topic(name, conns[0].msgtype, [], []) for name, conns in wanted.items()}
    for name, conns in wanted.items():
        types = {connection.msgtype for connection in conns}
        if len(types) > 1:
            raise EpisodeStoreError(f"{path}: topic {name}: recorded with several message types {sorted(types)}")
    connections = [connection for conns in wanted.values() for connection in conns]
    for connection, stamp, raw in reader.messages(connections=connections):
        topic = topics[connection.topic]
        topic.stamps.append(stamp)
        if topic.msgtype not in IMAGE_TYPES:
            topic.values.append(_value(reader.deserialize(raw, connection.msgtype), path, topic))
    for topic in topics.values():
        order = np.argsort(np.asarray(topic.stamps, dtype=np.int64), kind="stable")
        topic.stamps = np.asarray(topic.stamps, dtype=np.int64)[order]
        topic.values = [topic.values[i] for i in order] if topic.values else []
    return topics


def _value(message: Any, path: Path, topic: _Topic) -> Any:
    """A message as numbers (float64 vector), or as text for std_msgs/String (episode labels); None if neither."""
    msgtype = message.__msgtype__
    if msgtype == "std_msgs/msg/String":
        return message.data
    for field in ("twist", "pose", "wrench", "vector", "point"):  # the *Stamped forms
        if msgtype.endswith("Stamped") and hasattr(message, field):
            message = getattr(message, field)
    names = type(message).__dataclass_fields__
    if msgtype == "sensor_msgs/msg/JointState":
        return np.concatenate([np.asarray(message.position, np.float64), np.asarray(message.velocity, np.float64)])
    if {"position", "orientation"} <= set(names):
        p, q = message.position, message.orientation
        return np.array([p.x, p.y, p.z, q.x, q.y, q.z, q.w], np.float64)
    if {"linear", "angular"} <= set(names) or {"force", "torque"} <= set(names):
        a, b = (message.linear, message.angular) if "linear" in names else (message.force, message.torque)
        return np.array([a.x, a.y, a.z, b.x, b.y, b.z], np.float64)
    if set(names) - {"__msgtype__"} == {"x", "y", "z"}:
        return np.array([message.x, message.y, message.z], np.float64)
    if msgtype.startswith("std_msgs/msg/") and "data" in names:
        data = message.data
        if isinstance(data, (bool, int, float, np.generic)):
            return np.array([float(data)], np.float64)
        if isinstance(data, np.ndarray) and data.dtype.kind in "biuf":
            return data.astype(np.float64).reshape(-1)
    return None


def _check_numbers(path: Path, topic: _Topic, role: str) -> None:
    """EpisodeStoreError unless every message of a topic became a vector of one length."""
    if topic.msgtype in IMAGE_TYPES or any(value is None or isinstance(value, str) for value in topic.values):
        raise EpisodeStoreError(
            f"{path}: topic {topic.name} (data.import.mcap.{role}): message type {topic.msgtype} carries no numbers "
            "this import reads (std_msgs numbers and arrays, JointState, Pose, Twist, Wrench, Vector3, Point)"
        )
    if not topic.values:
        raise EpisodeStoreError(f"{path}: topic {topic.name} (data.import.mcap.{role}) has no message")
    sizes = {len(value) for value in topic.values}
    if len(sizes) > 1:
        index = next(i for i, value in enumerate(topic.values) if len(value) != len(topic.values[0]))
        raise EpisodeStoreError(
            f"{path}: topic {topic.name}: message {index} has {len(topic.values[index])} values, the first "
            f"{len(topic.values[0])}"
        )


def _spans(mapping: McapMapping, stamps: np.ndarray, markers: _Topic | None, path: Path) -> tuple[list[_Span], int]:
    """The episodes (those with at least one step) and the number of steps outside every episode."""
    if mapping.split == "topic":
        starts = list(markers.stamps)
        if not starts:
            raise EpisodeStoreError(
                f"{path}: topic {mapping.episode_topic} (data.import.mcap.episode_topic) has no message; "
                "split episodes with split=gap"
            )
        labels = [value if isinstance(value, str) and value else str(i) for i, value in enumerate(markers.values)]
        labels += [str(i) for i in range(len(labels), len(starts))]
        bounds = [*starts, END]
        spans = []
        for i, label in enumerate(labels):
            first, stop = np.searchsorted(stamps, [bounds[i], bounds[i + 1]], side="left")
            spans.append(_Span(label, int(bounds[i]), int(bounds[i + 1]), np.arange(first, stop)))
        skipped = int(np.searchsorted(stamps, starts[0], side="left"))
    else:
        breaks = np.flatnonzero(np.diff(stamps) > round(mapping.reset_gap * 1e9)) + 1
        groups = np.split(np.arange(len(stamps)), breaks)
        spans = [
            _Span(
                str(i),
                int(stamps[groups[i - 1][-1]]) if i else BEGIN,
                int(stamps[groups[i + 1][0]]) if i + 1 < len(groups) else END,
                group,
            )
            for i, group in enumerate(groups)
            if len(group)
        ]
        skipped = 0
    return [span for span in spans if len(span.steps)], skipped


def _recorded_metadata(path: Path, topic: _Topic | None) -> dict[str, Any]:
    """The source store's metadata that our export wrote on ``/robot_rl/store_metadata`` (its first message, JSON);
    empty for a bag without it. The observation shapes and action size are the imported episodes' own."""
    if topic is None or not topic.values:
        return {}
    try:
        recorded = json.loads(topic.values[0]) if isinstance(topic.values[0], str) else None
    except ValueError:
        recorded = None
    if not isinstance(recorded, dict):
        raise EpisodeStoreError(f"{path}: topic {topic.name}: message 0 is no JSON object (a store's metadata)")
    return {key: value for key, value in recorded.items() if key not in ("observation_shapes", "action_dim")}


def _span_text(topic: _Topic | None, span: _Span) -> str | None:
    """The text of the topic's first message in the episode's window [start, end); None if there is none."""
    if topic is None:
        return None
    index = int(np.searchsorted(topic.stamps, span.start, side="left"))
    found = index < len(topic.stamps) and topic.stamps[index] < span.end and isinstance(topic.values[index], str)
    return topic.values[index] if found else None


def _control_rate(stamps: np.ndarray, spans: list[_Span], path: Path) -> float:
    """Steps per second: one over the median time between two actions of an episode (Hz, 3 decimals)."""
    gaps = np.concatenate([np.diff(stamps[span.steps]) for span in spans])
    if not len(gaps) or np.median(gaps) <= 0:
        raise EpisodeStoreError(
            f"{path}: cannot tell the control rate from the action times (no two steps in one episode); "
            "give data.import.control_rate_hz"
        )
    return round(1e9 / float(np.median(gaps)), 3)


def _episodes(
    path: Path,
    mapping: McapMapping,
    spans: list[_Span],
    vectors: Mapping[str, list[_Topic]],
    images: Mapping[str, _Topic],
    actions: list[_Topic],
    per_step: Mapping[str, _Topic],
    uids: _Topic | None = None,
) -> Iterator[Episode]:
    stamps = actions[0].stamps
    with _open(path) as reader:
        for span in spans:
            where = f"{path}: episode {span.label}"
            times = stamps[span.steps]
            # the observation before each step, then the one after the last step
            wanted = {}
            for topic in [*(t for topics in vectors.values() for t in topics), *images.values()]:
                wanted[topic.name] = _observation_indices(topic, times, span, where)
            # each step's values: the latest message before the next step
            ends = np.append(times[1:], span.end)
            step_values = {topic.name: _step_indices(topic, ends, span) for topic in [*actions, *per_step.values()]}
            obs = {
                key: np.concatenate([_gather(t, wanted[t.name]) for t in topics], axis=1).astype(np.float32)
                for key, topics in vectors.items()
            }
            for key, topic in images.items():
                obs[key] = _frames(reader, path, topic, wanted[topic.name])
            for topic in actions:
                missing = step_values[topic.name] < 0
                if missing.any():
                    raise EpisodeStoreError(
                        f"{where}: topic {topic.name} (data.import.mcap.action) has no message for step "
                        f"{int(np.argmax(missing))}"
                    )
            action = np.concatenate([_gather(t, step_values[t.name]) for t in actions], axis=1).astype(np.float32)
            extras = {role: _held(topic, step_values[topic.name]) for role, topic in per_step.items()}
            length = len(times)
            reward = extras["reward"][:, 0] if "reward" in extras else np.zeros(length)
            policy_action = extras.get("policy_action")
            if policy_action is not None:
                if policy_action.shape[1] != action.shape[1]:
                    raise EpisodeStoreError(
                        f"{where}: topic {mapping.policy_action} (data.import.mcap.policy_action) has "
                        f"{policy_action.shape[1]} values, the action {action.shape[1]}"
                    )
                # a step with no proposal of its own proposed what was executed
                policy_action = np.where(step_values[mapping.policy_action][:, None] < 0, action, policy_action)
            flags = {role: extras[role][:, 0] != 0 for role in FLAGS[:-1] + ("intervened",) if role in extras}
            if "terminated" in flags or "truncated" in flags:
                truncated = flags.get("truncated", np.zeros(length, bool))
                terminated, truncated = episode_ends(flags.get("terminated", truncated) | truncated, truncated, length)
            else:
                last, none = np.arange(length) == length - 1, np.zeros(length, bool)
                terminated = last if mapping.episode_end == "terminated" else none
                truncated = last if mapping.episode_end == "truncated" else none
            safety_flags = extras["safety_flags"][:, 0].astype(np.int64) if "safety_flags" in extras else None
            uid = _span_text(uids, span)
            yield Episode(
                origin=f"{path.name}#{span.label}",
                obs=obs,
                action=action,
                reward=reward.astype(np.float32),
                terminated=terminated,
                truncated=truncated,
                timestamp=times / 1e9,
                policy_action=None if policy_action is None else policy_action.astype(np.float32),
                success=flags.get("success"),
                intervened=flags.get("intervened"),
                safety_flags=safety_flags,
                attrs={"uid": uid} if uid else {},
            )


def _observation_indices(topic: _Topic, times: np.ndarray, span: _Span, where: str) -> np.ndarray:
    """Indices of the topic's messages for observations 0..T (see the module docstring)."""
    low, high = np.searchsorted(topic.stamps, [span.start, span.end], side="left")
    if low >= high:
        raise EpisodeStoreError(f"{where}: topic {topic.name} has no message in this episode")
    before = np.maximum(np.searchsorted(topic.stamps, times, side="left") - 1, low)
    after = min(int(np.searchsorted(topic.stamps, times[-1], side="left")), high - 1)
    return np.append(before, after)


def _step_indices(topic: _Topic, ends: np.ndarray, span: _Span) -> np.ndarray:
    """Per step, the index of the topic's latest message before ``ends`` and not before the episode; -1 if none."""
    low = np.searchsorted(topic.stamps, span.start, side="left")
    latest = np.searchsorted(topic.stamps, ends, side="left") - 1
    return np.where(latest >= low, latest, -1)


def _gather(topic: _Topic, indices: np.ndarray) -> np.ndarray:
    return np.stack([topic.values[i] for i in indices])


def _held(topic: _Topic, indices: np.ndarray) -> np.ndarray:
    """The topic's values at ``indices``; zeros where there was none (-1)."""
    size = len(topic.values[0])
    return np.stack([topic.values[i] if i >= 0 else np.zeros(size) for i in indices])


def _frames(reader, path: Path, topic: _Topic, indices: np.ndarray) -> np.ndarray:
    """The topic's images at ``indices`` as (N, H, W, C) uint8 RGB, reading only the episode's time window."""
    first = int(topic.stamps[indices.min()])
    offset = int(np.searchsorted(topic.stamps, first, side="left"))  # messages at ``first`` before the one wanted
    last = int(indices.max())
    needed = set(indices.tolist())
    frames: dict[int, np.ndarray] = {}
    connections = [connection for connection in reader.connections if connection.topic == topic.name]
    messages = reader.messages(connections=connections, start=first, stop=int(topic.stamps[last]) + 1)
    for k, (connection, _, raw) in enumerate(messages):
        index = offset + k
        if index in needed:
            frames[index] = _image(reader.deserialize(raw, connection.msgtype), path, topic.name, index)
        if index >= last:
            break
    shapes = {frame.shape for frame in frames.values()}
    if len(shapes) > 1:
        raise EpisodeStoreError(f"{path}: topic {topic.name}: images of several sizes {sorted(shapes)}")
    return np.stack([frames[i] for i in indices])


def _image(message: Any, path: Path, topic: str, index: int) -> np.ndarray:
    """A sensor_msgs Image or CompressedImage as (H, W, C) uint8 RGB (C = 1 for mono8)."""
    if message.__msgtype__ == "sensor_msgs/msg/CompressedImage":
        import cv2

        frame = cv2.imdecode(np.frombuffer(message.data, np.uint8), cv2.IMREAD_COLOR)
        if frame is None:
            raise EpisodeStoreError(f"{path}: topic {topic}: message {index}: data is no image cv2 can decode")
        return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
    channels = {"rgb8": 3, "bgr8": 3, "rgba8": 4, "bgra8": 4, "mono8": 1}.get(message.encoding)
    if channels is None:
        raise EpisodeStoreError(
            f"{path}: topic {topic}: message {index}: encoding={message.encoding!r}; expected rgb8, bgr8, rgba8, "
            "bgra8 or mono8"
        )
    data = np.asarray(message.data, np.uint8)
    if data.size != message.height * message.step or message.step < message.width * channels:
        raise EpisodeStoreError(
            f"{path}: topic {topic}: message {index}: {data.size} bytes of data for height {message.height}, "
            f"width {message.width}, step {message.step} ({message.encoding})"
        )
    rows = data.reshape(message.height, message.step)
    frame = rows[:, : message.width * channels].reshape(message.height, message.width, channels)
    if message.encoding.startswith("bgr"):
        frame = frame[..., [2, 1, 0]]
    return np.ascontiguousarray(frame[..., :3])
