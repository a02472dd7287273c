"""robot-rl data import (MCAP, LeRobot v3, robomimic) and data export format=lerobot.

Every foreign file here is written with the format's own library (rosbags, pyarrow + av, h5py), laid out as the
format's tools write it; stores are made with the episode store writer.
"""

import json
import os
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from robot_rl.cli.main import main
from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.data import EpisodeStore, EpisodeStoreError
from robot_rl.data.formats import ImportSettings, import_store
from robot_rl.data.formats.lerobot_import import LeRobotMapping
from robot_rl.data.formats.mcap_import import McapMapping
from robot_rl.data.formats.robomimic import RobomimicMapping
from robot_rl.data.mcap_export import export_mcap

META = {
    "task": "pick_cube",
    "robot": "panda",
    "observation_shapes": {"state": [4], "front": [32, 48, 3]},
    "action_dim": 2,
    "control_rate_hz": 10,
    "state_layout": {"tcp": [0, 3], "gripper": [3, 1]},
}
LENGTHS = (6, 7, 5)
VIDEO_MEAN_ERROR = 4.0  # mean |difference| in 0..255 of a smooth camera frame after h264 / AV1 and back


def smooth_frames(count: int, seed: int, height: int = 32, width: int = 48) -> np.ndarray:
    """Camera-like frames (count, H, W, 3) uint8: smooth colour gradients drifting over time."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    return np.stack(
        [
            np.stack(
                [
                    128 + 100 * np.sin(xx / 7 + t / 3),
                    128 + 100 * np.cos(yy / 6 - t / 4),
                    np.full_like(xx, 60.0 + 40 * seed),
                ],
                axis=-1,
            )
            for t in range(count)
        ]
    ).astype(np.uint8)


def make_store(path: Path) -> Path:
    """Three episodes: flags on every field, the last one ends truncated, the others terminated with success."""
    store = EpisodeStore.create(path, META)
    for seed, steps in enumerate(LENGTHS):
        rng = np.random.default_rng(seed)
        states = rng.normal(size=(steps + 1, 4)).astype(np.float32)
        images = smooth_frames(steps + 1, seed)
        writer = store.writer()
        writer.start({"state": states[0], "front": images[0]})
        for t in range(steps):
            last = t == steps - 1
            writer.add(
                {"state": states[t + 1], "front": images[t + 1]},
                rng.uniform(-1, 1, 2),
                float(rng.normal()),
                terminated=last and seed != 2,
                truncated=last and seed == 2,
                policy_action=rng.uniform(-1, 1, 2),
                success=last and seed != 2,
                intervened=t % 3 == 1,
                safety_flags=t % 4,
                timestamp=1000.0 + 50 * seed + t / 10,
            )
        writer.commit("demo")
    return path


@pytest.fixture
def store_path(tmp_path):
    return make_store(tmp_path / "a.zarr")


def episodes(path: Path) -> list[dict]:
    store = EpisodeStore.open(path)
    return [store.read_episode(name) for name in store.episode_names()]


def leftovers(folder: Path, name: str) -> list[str]:
    """What an import to ``folder / name`` left behind: the output or a temporary sibling."""
    return sorted(p.name for p in folder.iterdir() if p.name == name or p.name.startswith(f".{name}."))


# ------------------------------------------------------------------------------------------------------------ MCAP
def test_mcap_written_by_data_export_imports_as_the_same_episodes(store_path, tmp_path, capsys):
    export_mcap(store_path, tmp_path / "bag")
    argv = ["data", "import", "format=mcap", f"in={tmp_path / 'bag'}", f"out={tmp_path / 'b.zarr'}", "import.task=pick"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["episodes"] == 3 and report["steps"] == sum(LENGTHS) and report["skipped_steps"] == 0
    imported = EpisodeStore.open(tmp_path / "b.zarr")
    assert imported.metadata["control_rate_hz"] == 10.0 and imported.metadata["task"] == "pick"
    for before, after in zip(episodes(store_path), episodes(tmp_path / "b.zarr"), strict=True):
        fields = ("action", "policy_action", "reward", "intervened", "terminated", "truncated", "success")
        for field in (*fields, "safety_flags"):
            np.testing.assert_array_equal(after[field], before[field], err_msg=field)
        np.testing.assert_array_equal(after["obs"]["state"], before["obs"]["state"])
        np.testing.assert_array_equal(after["obs"]["front"], before["obs"]["front"])  # raw rgb8: exact
        np.testing.assert_allclose(after["timestamp"], before["timestamp"], rtol=0, atol=1e-6)
        assert after["attrs"]["origin"].startswith("bag#episode_")
    assert report["absent_flag_topics"] == []


def test_mcap_round_trip_keeps_the_store_metadata_and_the_episode_uids(tmp_path, capsys, monkeypatch):
    """export -> import -> data merge with the source: the metadata is the source's, every episode a duplicate. Old
    code: task and robot came back None, the control rate as the action times' (10 Hz here), the state layout as the
    topic's, and new uids (merge copied all 6)."""
    monkeypatch.setitem(META, "control_rate_hz", 25)  # steps recorded 0.1 s apart all the same
    store_path = make_store(tmp_path / "a.zarr")
    bag, imported, merged = tmp_path / "bag", tmp_path / "b.zarr", tmp_path / "m.zarr"
    assert main(["data", "export", f"store={store_path}", f"out={bag}"]) == 0
    assert main(["data", "import", "format=mcap", f"in={bag}", f"out={imported}"]) == 0
    capsys.readouterr()
    source, copy = EpisodeStore.open(store_path), EpisodeStore.open(imported)
    assert {key: copy.metadata[key] for key in META} == {key: source.metadata[key] for key in META}
    assert copy.metadata["imported_from"] == f"mcap:{bag}"
    assert main(["data", "merge", f"inputs=[{store_path},{imported}]", f"out={merged}"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["copied"], report["skipped"], report["episodes_in_store"]) == (3, 3, 3)


def write_bag(path: Path, messages: list[tuple[str, float, object]]) -> None:
    """A rosbag2 MCAP of (topic, time in s, message), written in time order with rosbags."""
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    types = get_typestore(Stores.ROS2_JAZZY)
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connections = {}
        for topic, stamp, message in sorted(messages, key=lambda item: item[1]):
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, message.__msgtype__, typestore=types)
            writer.write(connections[topic], round(stamp * 1e9), types.serialize_cdr(message, message.__msgtype__))


def cell_messages() -> tuple[list, list[np.ndarray]]:
    """A cell's recording: joint states at 50 Hz, a bgr8 camera at 20 Hz, actions at 10 Hz, a reward after each
    action, an intervention toggled on and off; two episodes (5 and 6 steps) with a 3.6 s reset between them."""
    from rosbags.typesys import Stores, get_typestore

    msg = get_typestore(Stores.ROS2_JAZZY).types
    header = msg["std_msgs/msg/Header"](stamp=msg["builtin_interfaces/msg/Time"](sec=0, nanosec=0), frame_id="base")
    layout = msg["std_msgs/msg/MultiArrayLayout"](dim=[], data_offset=0)
    messages = []
    frames = smooth_frames(200, 0, 8, 10)
    for k in range(200):  # 0.00 .. 3.98 s and 4.00 .. 7.98 s
        t = k * 0.02
        for offset in (0.0, 4.0):
            state = msg["sensor_msgs/msg/JointState"](
                header=header,
                name=["a", "b"],
                position=np.array([t + offset, -(t + offset)]),
                velocity=np.array([1.0, -1.0]),
                effort=np.array([]),
            )
            messages.append(("/joint_states", t + offset, state))
    for k in range(100):  # 20 Hz; frame k is bgr8 of frames[k]
        for offset in (0.0, 4.0):
            image = msg["sensor_msgs/msg/Image"](
                header=header,
                height=8,
                width=10,
                encoding="bgr8",
                is_bigendian=0,
                step=30,
                data=np.ascontiguousarray(frames[k][..., ::-1]).reshape(-1),
            )
            messages.append(("/wrist/image", 0.05 * k + offset, image))
    actions = [1.0 + 0.1 * k for k in range(5)] + [5.0 + 0.1 * k for k in range(6)]
    for i, t in enumerate(actions):
        action = msg["std_msgs/msg/Float32MultiArray"](layout=layout, data=np.array([i, -i, 0.5], np.float32))
        messages.append(("/rl/action", t, action))
        messages.append(("/rl/reward", t + 0.05, msg["std_msgs/msg/Float32"](data=float(i))))
    messages.append(("/rl/intervention", 1.15, msg["std_msgs/msg/Bool"](data=True)))
    messages.append(("/rl/intervention", 1.35, msg["std_msgs/msg/Bool"](data=False)))
    return messages, frames


def test_mcap_from_a_cell_with_a_topic_mapping_and_a_reset_gap(tmp_path):
    messages, frames = cell_messages()
    write_bag(tmp_path / "cell", messages)
    mapping = {
        "observations": {"state": ["/joint_states"], "wrist": "/wrist/image"},
        "action": ["/rl/action"],
        "policy_action": None,
        "reward": "/rl/reward",
        "intervened": "/rl/intervention",
        "split": "gap",
        "reset_gap": 0.5,
    }
    report = import_store("mcap", tmp_path / "cell", tmp_path / "s.zarr", {"mcap": mapping})
    assert report["episodes"] == 2 and report["steps"] == 11
    store = EpisodeStore.open(tmp_path / "s.zarr")
    assert store.metadata["control_rate_hz"] == 10.0 and store.metadata["state_layout"] == {"/joint_states": [0, 4]}
    first, second = episodes(tmp_path / "s.zarr")
    # the state before each action is the last joint state stamped before it; the final one, the first at or after
    # the last action
    expected = [0.98, 1.08, 1.18, 1.28, 1.38, 1.40]
    np.testing.assert_allclose(first["obs"]["state"], [[t, -t, 1, -1] for t in expected], atol=1e-5)
    np.testing.assert_allclose(second["obs"]["state"][0], [4.98, -4.98, 1, -1], atol=1e-5)
    # camera: frame k at 0.05 k s; before 1.0 s is frame 19, bgr8 turned into rgb
    np.testing.assert_array_equal(first["obs"]["wrist"][0], frames[19])
    np.testing.assert_array_equal(first["obs"]["wrist"][-1], frames[28])  # the first at or after 1.4 s
    np.testing.assert_array_equal(first["action"][:, 0], np.arange(5))
    np.testing.assert_array_equal(second["action"][:, 0], np.arange(5, 11))
    np.testing.assert_array_equal(first["policy_action"], first["action"])
    np.testing.assert_array_equal(first["reward"], np.arange(5))
    # the intervention is held: on from 1.15 s, off from 1.35 s; it does not carry over the reset
    np.testing.assert_array_equal(first["intervened"], [False, True, True, False, False])
    assert not second["intervened"].any()
    assert first["terminated"].tolist() == [False] * 4 + [True] and not first["truncated"].any()
    np.testing.assert_allclose(second["timestamp"], 5.0 + np.arange(6) / 10)


def test_mcap_import_refuses_a_bag_that_does_not_fit(tmp_path, capsys):
    messages, _ = cell_messages()
    write_bag(tmp_path / "cell", messages)
    out = tmp_path / "s.zarr"
    # the default mapping is our export's topics, which a cell's bag lacks
    assert main(["data", "import", f"in={tmp_path / 'cell'}", f"out={out}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("robot-rl: error: ") and err.count("\n") == 1
    assert f"{tmp_path / 'cell'}: topic /robot_rl/state" in err
    cell = {
        "observations": {"state": "/joint_states"},
        "action": ["/rl/action"],
        "policy_action": None,
        "reward": "/rl/reward",
        "intervened": "/rl/intervention",
    }
    with pytest.raises(EpisodeStoreError, match="topic /robot_rl/episode .*split=gap"):  # says what to do
        import_store("mcap", tmp_path / "cell", out, {"mcap": cell})
    numbers_and_image = {**cell, "split": "gap", "observations": {"x": ["/joint_states", "/wrist/image"]}}
    with pytest.raises(EpisodeStoreError, match=r"topic /wrist/image \(data.import.mcap.observations.x\)"):
        import_store("mcap", tmp_path / "cell", out, {"mcap": numbers_and_image})
    with pytest.raises(ConfigError, match="data.import.mcap.observations.state"):
        import_store("mcap", tmp_path / "cell", out, {"mcap": {**cell, "observations": {"state": 3}}})
    (tmp_path / "junk.mcap").write_bytes(b"not a bag at all")
    with pytest.raises(EpisodeStoreError, match="junk.mcap: not a readable rosbag2"):
        import_store("mcap", tmp_path / "junk.mcap", out)
    assert leftovers(tmp_path, "s.zarr") == []


def test_import_never_writes_over_an_existing_store(store_path, tmp_path):
    export_mcap(store_path, tmp_path / "bag")
    before = sorted(str(p) for p in store_path.rglob("*"))
    with pytest.raises(EpisodeStoreError, match="is an episode store already"):
        import_store("mcap", tmp_path / "bag", store_path)
    assert sorted(str(p) for p in store_path.rglob("*")) == before and len(EpisodeStore.open(store_path)) == 3


# --------------------------------------------------------------------------------------------------------- LeRobot
def test_lerobot_export_is_laid_out_as_lerobot_v3_and_imports_back(store_path, tmp_path, capsys):
    import av
    import pyarrow.parquet as pq

    assert main(["data", "export", "format=lerobot", f"store={store_path}", f"out={tmp_path / 'lr'}"]) == 0
    assert json.loads(capsys.readouterr().out)["frames"] == sum(LENGTHS)
    root = tmp_path / "lr"
    info = json.loads((root / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == 10 and info["total_episodes"] == 3
    assert info["robot_type"] == "panda" and info["total_frames"] == sum(LENGTHS) and info["total_tasks"] == 1
    features = info["features"]
    assert features["observation.state"] == {
        "dtype": "float32",
        "shape": [4],
        "names": ["tcp.0", "tcp.1", "tcp.2", "gripper"],
    }
    assert features["observation.images.front"]["dtype"] == "video"
    assert features["observation.images.front"]["shape"] == [32, 48, 3]
    assert features["action"]["shape"] == [2] and features["next.done"]["dtype"] == "bool"
    data = pq.read_table(root / "data" / "chunk-000" / "file-000.parquet")
    assert (
        data.num_rows == sum(LENGTHS)
        and pq.ParquetFile(root / "data" / "chunk-000" / "file-000.parquet").num_row_groups == 3
    )
    assert set(data.column_names) == set(features) - {"observation.images.front"}
    assert data.column("index").to_pylist() == list(range(sum(LENGTHS)))
    assert data.column("timestamp").to_pylist()[:3] == pytest.approx([0.0, 0.1, 0.2])
    tasks = pq.read_table(root / "meta" / "tasks.parquet")
    assert tasks.to_pydict() == {"task_index": [0], "task": ["pick_cube"]}
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]  # pandas reads task as the index
    meta = pq.read_table(root / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()
    assert [row["length"] for row in meta] == list(LENGTHS) and meta[1]["dataset_from_index"] == LENGTHS[0]
    assert meta[1]["videos/observation.images.front/from_timestamp"] == pytest.approx(LENGTHS[0] / 10)
    assert meta[0]["stats/action/count"] == [LENGTHS[0]] and len(meta[0]["stats/observation.images.front/mean"]) == 3
    stats = json.loads((root / "meta" / "stats.json").read_text())
    all_actions = np.concatenate([e["action"] for e in episodes(store_path)])
    np.testing.assert_allclose(stats["action"]["mean"], all_actions.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(stats["action"]["std"], all_actions.std(axis=0), rtol=1e-5)
    assert stats["observation.images.front"]["mean"][0][0][0] == pytest.approx(0.5, abs=0.2)
    with av.open(str(root / "videos" / "observation.images.front" / "chunk-000" / "file-000.mp4")) as video:
        assert sum(1 for _ in video.decode(video=0)) == sum(LENGTHS)

    report = import_store("lerobot", root, tmp_path / "back.zarr")
    assert report["episodes"] == 3
    imported = EpisodeStore.open(tmp_path / "back.zarr")
    assert imported.metadata["task"] == "pick_cube" and imported.metadata["robot"] == "panda"
    assert imported.metadata["control_rate_hz"] == 10
    for before, after in zip(episodes(store_path), episodes(tmp_path / "back.zarr"), strict=True):
        for field in ("action", "policy_action", "reward", "terminated", "truncated", "success", "intervened"):
            np.testing.assert_array_equal(after[field], before[field], err_msg=field)
        np.testing.assert_array_equal(after["safety_flags"], before["safety_flags"])
        # LeRobot keeps one observation per step: the final one comes back as the last step's
        np.testing.assert_array_equal(after["obs"]["state"][:-1], before["obs"]["state"][:-1])
        np.testing.assert_array_equal(after["obs"]["state"][-1], before["obs"]["state"][-2])
        error = np.abs(after["obs"]["front"][:-1].astype(int) - before["obs"]["front"][:-1]).mean()
        assert error < VIDEO_MEAN_ERROR
        np.testing.assert_allclose(after["timestamp"], (np.arange(len(before["action"])) + 1) / 10, atol=1e-6)


def write_lerobot_folder(root: Path, fps: int = 15) -> dict:
    """A LeRobotDataset v3 folder written the way LeRobot lays one out (pyarrow + av, AV1 video as LeRobot's
    default encoder makes it): two episodes in one data file and one video file, two tasks."""
    import av
    import pyarrow as pa
    import pyarrow.parquet as pq

    lengths = [4, 6]
    rng = np.random.default_rng(7)
    states = rng.normal(size=(sum(lengths), 6)).astype(np.float32)
    actions = rng.normal(size=(sum(lengths), 3)).astype(np.float32)
    frames = smooth_frames(sum(lengths), 1, 64, 64)
    episode_index = np.repeat([0, 1], lengths)
    frame_index = np.concatenate([np.arange(n) for n in lengths])
    done = np.concatenate([np.arange(n) == n - 1 for n in lengths])
    names = [f"joint_{i}" for i in range(6)]
    features = {
        "observation.state": {"dtype": "float32", "shape": [6], "names": names},
        "observation.images.top": {
            "dtype": "video",
            "shape": [64, 64, 3],
            "names": ["height", "width", "channels"],
            "info": {"video.fps": fps, "video.codec": "av1", "video.pix_fmt": "yuv420p"},
        },
        "action": {"dtype": "float32", "shape": [3], "names": ["x", "y", "z"]},
        "next.reward": {"dtype": "float32", "shape": [1], "names": None},
        "next.done": {"dtype": "bool", "shape": [1], "names": None},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
    }
    info = {
        "codebase_version": "v3.0",
        "robot_type": "so101_follower",
        "total_episodes": 2,
        "total_frames": sum(lengths),
        "total_tasks": 2,
        "chunks_size": 1000,
        "data_files_size_in_mb": 100,
        "video_files_size_in_mb": 500,
        "fps": fps,
        "splits": {"train": "0:2"},
        "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
        "video_path": "videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4",
        "features": features,
    }
    (root / "meta" / "episodes" / "chunk-000").mkdir(parents=True)
    (root / "data" / "chunk-000").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps(info, indent=4))
    data = pa.table(
        {
            "observation.state": pa.array(list(states), pa.list_(pa.float32())),  # as datasets writes lists
            "action": pa.array(list(actions), pa.list_(pa.float32())),
            "next.reward": pa.array(done.astype(np.float32)),
            "next.done": pa.array(done),
            "timestamp": pa.array((frame_index / fps).astype(np.float32)),
            "frame_index": pa.array(frame_index),
            "episode_index": pa.array(episode_index),
            "index": pa.array(np.arange(sum(lengths))),
            "task_index": pa.array(episode_index),
        }
    )
    pq.write_table(data, root / "data" / "chunk-000" / "file-000.parquet")
    video = root / "videos" / "observation.images.top" / "chunk-000" / "file-000.mp4"
    video.parent.mkdir(parents=True)
    policy, priority = os.sched_getscheduler(0), os.sched_getparam(0)  # SVT-AV1, run as root, makes this thread
    with av.open(str(video), "w") as container:  # SCHED_FIFO 99: put back below, or every later node inherits it
        stream = container.add_stream("libsvtav1", rate=fps, options={"crf": "30", "g": "2", "preset": "12"})
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        stream.time_base = Fraction(1, fps)
        for i, image in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    os.sched_setscheduler(0, policy, priority)
    episodes_table = {
        "episode_index": [0, 1],
        "tasks": [["pick the cube"], ["place the cube"]],
        "length": lengths,
        "data/chunk_index": [0, 0],
        "data/file_index": [0, 0],
        "dataset_from_index": [0, lengths[0]],
        "dataset_to_index": [lengths[0], sum(lengths)],
        "videos/observation.images.top/chunk_index": [0, 0],
        "videos/observation.images.top/file_index": [0, 0],
        "videos/observation.images.top/from_timestamp": [0.0, lengths[0] / fps],
        "videos/observation.images.top/to_timestamp": [lengths[0] / fps, sum(lengths) / fps],
        "meta/episodes/chunk_index": [0, 0],
        "meta/episodes/file_index": [0, 0],
        "stats/action/mean": [actions[:4].mean(0).tolist(), actions[4:].mean(0).tolist()],
    }
    pq.write_table(pa.table(episodes_table), root / "meta" / "episodes" / "chunk-000" / "file-000.parquet")
    # LeRobot 0.4.4 writes its tasks DataFrame with pandas: task_index, and the task as the (unnamed) index
    index = "__index_level_0__"
    tasks = pa.table(
        {"task_index": pa.array([0, 1]), index: pa.array(["pick the cube", "place the cube"], pa.large_string())}
    )
    columns = [
        {"name": name, "field_name": field, "pandas_type": kind, "numpy_type": numpy, "metadata": None}
        for name, field, kind, numpy in (
            ("task_index", "task_index", "int64", "int64"),
            (None, index, "unicode", "object"),
        )
    ]
    pandas = {"index_columns": [index], "column_indexes": [], "columns": columns, "pandas_version": "2.3.3"}
    pq.write_table(tasks.replace_schema_metadata({"pandas": json.dumps(pandas)}), root / "meta" / "tasks.parquet")
    return {"lengths": lengths, "states": states, "actions": actions, "frames": frames}


def test_a_lerobot_v3_folder_as_lerobot_writes_it_imports(tmp_path):
    written = write_lerobot_folder(tmp_path / "so101")
    report = import_store("lerobot", tmp_path / "so101", tmp_path / "s.zarr")
    assert report["episodes"] == 2 and report["steps"] == 10
    store = EpisodeStore.open(tmp_path / "s.zarr")
    assert store.metadata["control_rate_hz"] == 15 and store.metadata["robot"] == "so101_follower"
    assert store.metadata["task"] == "pick the cube" and store.metadata["observation_shapes"] == {
        "state": [6],
        "top": [64, 64, 3],
    }
    assert store.metadata["state_layout"]["joint_5"] == [5, 1]
    offsets = np.cumsum([0, *written["lengths"]])
    for i, episode in enumerate(episodes(tmp_path / "s.zarr")):
        rows = slice(offsets[i], offsets[i + 1])
        np.testing.assert_array_equal(episode["action"], written["actions"][rows])
        np.testing.assert_array_equal(episode["obs"]["state"][:-1], written["states"][rows])
        error = np.abs(episode["obs"]["top"][:-1].astype(int) - written["frames"][rows]).mean()
        assert error < VIDEO_MEAN_ERROR, error
        assert episode["terminated"].tolist() == [False] * (written["lengths"][i] - 1) + [True]
        assert episode["reward"][-1] == 1.0 and not episode["intervened"].any()
        assert episode["attrs"]["task"] == ["pick the cube", "place the cube"][i]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("version", "info.json: codebase_version='v2.1'; expected v3"),
        ("column", "file-000.parquet: missing column(s) action"),
        ("video", "file-000.mp4: missing"),
        (
            "rows",
            "file-000.parquet: episode 1, field observation.state: a row has 5 values; info.json's shape [6] says 6",
        ),
    ],
)
def test_a_bad_lerobot_folder_is_one_line_naming_file_and_field(damage, message, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "so101"
    write_lerobot_folder(root)
    data_file = root / "data" / "chunk-000" / "file-000.parquet"
    if damage == "version":
        info = json.loads((root / "meta" / "info.json").read_text())
        (root / "meta" / "info.json").write_text(json.dumps({**info, "codebase_version": "v2.1"}))
    elif damage == "column":
        pq.write_table(pq.read_table(data_file).drop_columns(["action"]), data_file)
    elif damage == "video":
        next(root.glob("videos/*/*/*.mp4")).unlink()
    else:
        table = pq.read_table(data_file)
        states = table.column("observation.state").to_pylist()
        states[7] = states[7][:5]
        column = table.column_names.index("observation.state")
        pq.write_table(table.set_column(column, "observation.state", pa.array(states)), data_file)
    assert main(["data", "import", "format=lerobot", f"in={root}", f"out={tmp_path / 's.zarr'}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("robot-rl: error: ") and err.count("\n") == 1 and message in err, err
    assert leftovers(tmp_path, "s.zarr") == []


# ------------------------------------------------------------------------------------------------------- robomimic
def write_robomimic(path: Path, bad: str | None = None) -> dict:
    """A robomimic HDF5 file written with h5py: demo_0 (with next_obs), demo_1 (not done: truncated), demo_10."""
    import h5py

    rng = np.random.default_rng(3)
    written = {}
    with h5py.File(path, "w") as file:
        data = file.create_group("data")
        data.attrs["env_args"] = json.dumps({"env_name": "Lift", "type": 1, "env_kwargs": {"control_freq": 20}})
        for name, steps in (("demo_0", 5), ("demo_10", 4), ("demo_1", 3)):
            demo = data.create_group(name)
            demo.attrs["num_samples"] = steps
            obs = {
                "robot0_eef_pos": rng.normal(size=(steps, 3)),
                "object": rng.normal(size=(steps, 10)),
                "agentview_image": rng.integers(0, 255, (steps, 8, 8, 3), dtype=np.uint8),
            }
            following = {
                key: rng.normal(size=value.shape) if value.dtype != np.uint8 else value for key, value in obs.items()
            }
            actions = rng.uniform(-1, 1, (steps, 7))
            if bad == "length" and name == "demo_1":
                obs["robot0_eef_pos"] = obs["robot0_eef_pos"][:2]
            if bad == "nan" and name == "demo_10":
                actions[2, 3] = np.nan
            demo.create_dataset("actions", data=actions)
            demo.create_dataset("rewards", data=(np.arange(steps) == steps - 1).astype(np.float64))
            demo.create_dataset("dones", data=(np.arange(steps) == steps - 1) & (name != "demo_1"))
            for key, value in obs.items():
                demo.create_dataset(f"obs/{key}", data=value)
            if name == "demo_0":
                for key, value in following.items():
                    demo.create_dataset(f"next_obs/{key}", data=value)
            written[name] = {"actions": actions, "obs": obs, "next_obs": following}
    return written


def test_robomimic_hdf5_imports(tmp_path):
    written = write_robomimic(tmp_path / "lift.hdf5")
    report = import_store("robomimic", tmp_path / "lift.hdf5", tmp_path / "s.zarr")
    assert report["episodes"] == 3 and report["steps"] == 12
    store = EpisodeStore.open(tmp_path / "s.zarr")
    assert store.metadata["task"] == "Lift" and store.metadata["control_rate_hz"] == 20.0
    assert store.metadata["state_layout"] == {"object": [0, 10], "robot0_eef_pos": [10, 3]}
    assert store.metadata["observation_shapes"] == {"state": [13], "agentview": [8, 8, 3]}
    loaded = episodes(tmp_path / "s.zarr")
    assert [e["attrs"]["origin"] for e in loaded] == ["lift.hdf5#demo_0", "lift.hdf5#demo_1", "lift.hdf5#demo_10"]
    for episode, name in zip(loaded, ("demo_0", "demo_1", "demo_10")):
        demo = written[name]
        np.testing.assert_array_equal(episode["action"], demo["actions"].astype(np.float32))
        state = np.concatenate([demo["obs"]["object"], demo["obs"]["robot0_eef_pos"]], axis=1).astype(np.float32)
        np.testing.assert_array_equal(episode["obs"]["state"][:-1], state)
        np.testing.assert_array_equal(episode["obs"]["agentview"][:-1], demo["obs"]["agentview_image"])
        assert episode["reward"][-1] == 1.0 and episode["attrs"]["source"] == "demo"
    final = np.concatenate(
        [written["demo_0"]["next_obs"]["object"][-1], written["demo_0"]["next_obs"]["robot0_eef_pos"][-1]]
    )
    np.testing.assert_array_equal(loaded[0]["obs"]["state"][-1], final.astype(np.float32))  # next_obs' last row
    np.testing.assert_array_equal(loaded[1]["obs"]["state"][-1], loaded[1]["obs"]["state"][-2])  # repeated
    assert loaded[0]["terminated"][-1] and not loaded[0]["truncated"].any()
    assert loaded[1]["truncated"][-1] and not loaded[1]["terminated"].any()  # not done at its end
    mapping = {"state": ["robot0_eef_pos"], "cameras": {"front": "agentview_image"}}
    import_store("robomimic", tmp_path / "lift.hdf5", tmp_path / "m.zarr", {"robomimic": mapping, "source": "online"})
    store = EpisodeStore.open(tmp_path / "m.zarr")
    assert store.metadata["observation_shapes"] == {"state": [3], "front": [8, 8, 3]}
    assert store.episode_attrs("episode_000000")["source"] == "online"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("length", "lift.hdf5: data/demo_1/obs/robot0_eef_pos: 2 rows; expected 3"),
        ("nan", "lift.hdf5#demo_10: field action is not finite (NaN or inf) in row 2"),
        ("text", "lift.hdf5: not a readable HDF5 file"),
    ],
)
def test_a_bad_robomimic_file_is_one_line_and_leaves_nothing(bad, message, tmp_path, capsys):
    if bad == "text":
        (tmp_path / "lift.hdf5").write_text("demo_0,1,2,3\n")
    else:
        write_robomimic(tmp_path / "lift.hdf5", bad)  # demo_0 is sound: it is written before the bad one is met
    assert (
        main(["data", "import", "format=robomimic", f"in={tmp_path / 'lift.hdf5'}", f"out={tmp_path / 's.zarr'}"]) == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("robot-rl: error: ") and err.count("\n") == 1 and message in err, err
    assert leftovers(tmp_path, "s.zarr") == []


# ---------------------------------------------------------------------------------------------------------- config
def test_the_config_documents_the_settings_defaults():
    """configs/config.yaml's data.import block holds exactly the defaults the settings dataclasses use."""
    block = load_config([]).data["import"]
    defaults = ImportSettings()
    assert {key: block[key] for key in ("task", "robot", "control_rate_hz", "source")} == {
        "task": defaults.task,
        "robot": defaults.robot,
        "control_rate_hz": defaults.control_rate_hz,
        "source": defaults.source,
    }
    for key, cls in (("mcap", McapMapping), ("lerobot", LeRobotMapping), ("robomimic", RobomimicMapping)):
        given = {name: list(v) if isinstance(v, (list, tuple)) else v for name, v in block[key].items()}
        expected = {name: list(v) if isinstance(v, tuple) else v for name, v in vars(cls()).items()}
        assert given == expected, key


@pytest.mark.parametrize(
    ("argv", "key"),
    [
        (["format=parquet"], "data.format"),
        (["import.source=human"], "data.import.source"),
        (["import.mcap.split=sometimes"], "data.import.mcap.split"),
        (["format=lerobot", "import.lerobot.action="], "data.import.lerobot.action"),
        (["in="], "data.in"),
    ],
)
def test_a_bad_import_setting_names_its_key(argv, key, store_path, tmp_path, capsys):
    export_mcap(store_path, tmp_path / "bag")
    assert main(["data", "import", f"in={tmp_path / 'bag'}", f"out={tmp_path / 's.zarr'}", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"robot-rl: error: {key}=") and err.count("\n") == 1, err
    assert leftovers(tmp_path, "s.zarr") == []


def test_lerobot_export_refuses_a_control_rate_that_is_no_whole_number(tmp_path, capsys):
    store = EpisodeStore.create(tmp_path / "a.zarr", {**META, "control_rate_hz": 12.5})
    writer = store.writer()
    writer.start({"state": np.zeros(4, np.float32), "front": smooth_frames(1, 0)[0]})
    writer.add({"state": np.zeros(4, np.float32), "front": smooth_frames(1, 0)[0]}, np.zeros(2), 0.0, True, False)
    writer.commit("demo")
    assert main(["data", "export", "format=lerobot", f"store={tmp_path / 'a.zarr'}", f"out={tmp_path / 'lr'}"]) == 2
    assert "control_rate_hz=12.5" in capsys.readouterr().err and not (tmp_path / "lr").exists()
