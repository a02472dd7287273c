"""``robot-rl data export``: episodes to a rosbag2 (MCAP) with standard ROS 2 message types.

Written with ``rosbags`` (pure Python, Jazzy type store), readable by ``ros2 bag`` and rosbags.
Topics, one message per observation / step, stamped with the recorded step times:

    /camera/<name>/color/image_raw   sensor_msgs/msg/Image (rgb8), the realsense2_camera names
    /robot_rl/state                  std_msgs/msg/Float32MultiArray
    /robot_rl/action                 std_msgs/msg/Float32MultiArray (executed)
    /robot_rl/policy_action          std_msgs/msg/Float32MultiArray
    /robot_rl/reward                 std_msgs/msg/Float32
    /robot_rl/intervened             std_msgs/msg/Bool
    /robot_rl/terminated             std_msgs/msg/Bool
    /robot_rl/truncated              std_msgs/msg/Bool
    /robot_rl/success                std_msgs/msg/Bool
    /robot_rl/safety_flags           std_msgs/msg/UInt32 (robot_rl.sim.constraints flags, 0 = none)
    /robot_rl/episode                std_msgs/msg/String (episode name, at its first step)
    /robot_rl/episode_uid            std_msgs/msg/String (the episode's uid, with its name: merges see duplicates)
    /robot_rl/store_metadata         std_msgs/msg/String (the store's metadata as JSON, once, at the first message:
                                     task, robot, control_rate_hz, state_layout, ...)

``robot-rl data import format=mcap`` reads the last two back, so export -> import -> ``data merge`` with the source
keeps the metadata and recognises every episode.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.folders import creating

from .episode_store import EpisodeStore, EpisodeStoreError
from .verification import episode_uid

TOPIC_STATE = "/robot_rl/state"
TOPIC_ACTION = "/robot_rl/action"
TOPIC_POLICY_ACTION = "/robot_rl/policy_action"
TOPIC_REWARD = "/robot_rl/reward"
TOPIC_INTERVENED = "/robot_rl/intervened"
TOPIC_TERMINATED = "/robot_rl/terminated"
TOPIC_TRUNCATED = "/robot_rl/truncated"
TOPIC_SUCCESS = "/robot_rl/success"
TOPIC_SAFETY_FLAGS = "/robot_rl/safety_flags"
TOPIC_EPISODE = "/robot_rl/episode"
TOPIC_EPISODE_UID = "/robot_rl/episode_uid"
TOPIC_METADATA = "/robot_rl/store_metadata"


def camera_topic(name: str) -> str:
    return f"/camera/{name}/color/image_raw"


def export_mcap(path: str | os.PathLike, out: str | os.PathLike, episodes: list[int] | None = None) -> dict[str, Any]:
    """Write the chosen episodes (indices; all by default) of a store to a new rosbag2 MCAP folder.

    The bag is written in a temporary sibling and renamed to ``out`` when complete: a failure
    (an unreadable episode, a full disk) leaves no ``out``. ``out`` must not exist (or be empty).
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = EpisodeStore.open(path)
    chosen = store.episode_names_at(episodes)
    if not os.fspath(out):
        raise EpisodeStoreError("out='' is empty; expected a new folder for the rosbag2 MCAP export")
    out = Path(out)
    period = 1.0 / float(store.metadata.get("control_rate_hz") or 10)
    types = get_typestore(Stores.ROS2_JAZZY)
    msg = types.types
    Time = msg["builtin_interfaces/msg/Time"]
    Header = msg["std_msgs/msg/Header"]
    Image = msg["sensor_msgs/msg/Image"]
    Array = msg["std_msgs/msg/Float32MultiArray"]
    Layout = msg["std_msgs/msg/MultiArrayLayout"]
    Dimension = msg["std_msgs/msg/MultiArrayDimension"]
    Float32, Bool, String = msg["std_msgs/msg/Float32"], msg["std_msgs/msg/Bool"], msg["std_msgs/msg/String"]
    UInt32 = msg["std_msgs/msg/UInt32"]

    def array(values: np.ndarray, label: str):
        values = np.asarray(values, dtype=np.float32)
        layout = Layout(dim=[Dimension(label=label, size=values.size, stride=values.size)], data_offset=0)
        return Array(layout=layout, data=values)

    written = 0
    with creating(out) as work, Writer(work, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connections: dict[str, Any] = {}

        def write(topic: str, message, stamp: float) -> None:
            nonlocal written
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, message.__msgtype__, typestore=types)
            writer.write(connections[topic], round(stamp * 1e9), types.serialize_cdr(message, message.__msgtype__))
            written += 1

        for name in chosen:
            data = store.read_episode(name)
            step_times = np.asarray(data["timestamp"], dtype=np.float64)
            obs_times = np.concatenate([[step_times[0] - period], step_times])
            if name == chosen[0]:
                write(TOPIC_METADATA, String(data=json.dumps(store.metadata, sort_keys=True)), obs_times[0])
            write(TOPIC_EPISODE, String(data=name), obs_times[0])
            write(TOPIC_EPISODE_UID, String(data=episode_uid(store, name)), obs_times[0])
            for t, stamp in enumerate(obs_times):
                seconds = int(np.floor(stamp))
                header = Header(
                    stamp=Time(sec=seconds, nanosec=round((stamp - seconds) * 1e9) % 1_000_000_000), frame_id="base"
                )
                for key, values in data["obs"].items():
                    frame = values[t]
                    if values.ndim == 4:
                        height, width, channels = frame.shape
                        image = Image(
                            header=header,
                            height=height,
                            width=width,
                            encoding="rgb8" if channels == 3 else "mono8",
                            is_bigendian=0,
                            step=width * channels,
                            data=np.ascontiguousarray(frame).reshape(-1),
                        )
                        write(camera_topic(key), image, stamp)
                    else:
                        write(TOPIC_STATE if key == "state" else f"/robot_rl/obs/{key}", array(frame, key), stamp)
                if t < len(step_times):
                    write(TOPIC_ACTION, array(data["action"][t], "action"), step_times[t])
                    write(TOPIC_POLICY_ACTION, array(data["policy_action"][t], "policy_action"), step_times[t])
                    write(TOPIC_REWARD, Float32(data=float(data["reward"][t])), step_times[t])
                    write(TOPIC_INTERVENED, Bool(data=bool(data["intervened"][t])), step_times[t])
                    for topic, field in ((TOPIC_TERMINATED, "terminated"), (TOPIC_TRUNCATED, "truncated")):
                        write(topic, Bool(data=bool(data[field][t])), step_times[t])
                    write(TOPIC_SUCCESS, Bool(data=bool(data["success"][t])), step_times[t])
                    write(TOPIC_SAFETY_FLAGS, UInt32(data=int(data["safety_flags"][t])), step_times[t])
    return {"out": str(out), "episodes": len(chosen), "messages": written}
