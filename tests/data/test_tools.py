"""robot-rl data info / show / export / merge."""

import json

import numpy as np
import pytest

from robot_rl.cli.main import main
from robot_rl.data import EpisodeStore, EpisodeStoreError, tools
from robot_rl.data.mcap_export import (
    TOPIC_ACTION,
    TOPIC_INTERVENED,
    TOPIC_REWARD,
    TOPIC_STATE,
    camera_topic,
    export_mcap,
)
from tests.data.test_episode_store import META, synthetic_episode, tree_digest, write_episode


@pytest.fixture
def store_path(tmp_path):
    store = EpisodeStore.create(tmp_path / "a.zarr", {**META, "control_rate_hz": 10})
    for seed in range(3):
        write_episode(store, synthetic_episode(seed), source="demo" if seed < 2 else "online")
    return tmp_path / "a.zarr"


def test_info_summarises_sources_and_steps(store_path):
    summary = tools.info(store_path)
    assert summary["episodes"] == 3 and summary["steps"] == 18 and summary["success_rate"] == 1.0
    assert summary["by_source"]["demo"]["episodes"] == 2 and summary["by_source"]["online"]["steps"] == 6
    table = tools.format_info(summary)
    assert "demo" in table and "online" in table and "front (16, 20, 3)" in table


def test_show_writes_an_mp4_with_one_frame_per_observation(store_path, tmp_path):
    import cv2

    report = tools.render_episode(store_path, 1, tmp_path / "ep.mp4")
    video = cv2.VideoCapture(str(tmp_path / "ep.mp4"))
    assert int(video.get(cv2.CAP_PROP_FRAME_COUNT)) == report["frames"] == 7
    ok, frame = video.read()
    assert ok and frame.shape[0] > 240 and frame.std() > 10


def test_mcap_export_reads_back_with_rosbags(store_path, tmp_path):
    from rosbags.highlevel import AnyReader

    export_mcap(store_path, tmp_path / "bag", episodes=[0, 2])
    assert list((tmp_path / "bag").glob("*.mcap")) and (tmp_path / "bag" / "metadata.yaml").exists()
    store = EpisodeStore.open(store_path)
    expected = [store.read_episode(name) for name in ("episode_000000", "episode_000002")]
    got: dict[str, list] = {}
    with AnyReader([tmp_path / "bag"]) as reader:
        for connection, stamp, raw in reader.messages():
            got.setdefault(connection.topic, []).append((stamp, reader.deserialize(raw, connection.msgtype)))
    states = np.array([m.data for _, m in got[TOPIC_STATE]])
    np.testing.assert_array_equal(states, np.concatenate([e["obs"]["state"] for e in expected]))
    frames = got[camera_topic("front")]
    assert frames[0][1].encoding == "rgb8" and (frames[0][1].height, frames[0][1].width) == (16, 20)
    images = np.array([m.data.reshape(m.height, m.width, 3) for _, m in frames])
    np.testing.assert_array_equal(images, np.concatenate([e["obs"]["front"] for e in expected]))
    np.testing.assert_array_equal(
        np.array([m.data for _, m in got[TOPIC_ACTION]]), np.concatenate([e["action"] for e in expected])
    )
    np.testing.assert_array_equal(
        np.array([m.data for _, m in got[TOPIC_REWARD]], np.float32), np.concatenate([e["reward"] for e in expected])
    )
    assert [m.data for _, m in got[TOPIC_INTERVENED]] == [False] * 12
    stamps = [stamp for stamp, _ in got[TOPIC_ACTION]]
    assert stamps[:6] == [round(t * 1e9) for t in expected[0]["timestamp"]]


def test_merge_copies_episodes_bit_identically(store_path, tmp_path):
    other = EpisodeStore.create(tmp_path / "b.zarr", {**META, "control_rate_hz": 10})
    write_episode(other, synthetic_episode(7))
    report = tools.merge([store_path, tmp_path / "b.zarr"], tmp_path / "merged.zarr")
    assert report["copied"] == 4
    merged = EpisodeStore.open(tmp_path / "merged.zarr")
    np.testing.assert_array_equal(
        merged.read_episode("episode_000003")["obs"]["front"], synthetic_episode(7)["obs"]["front"]
    )
    assert merged.episode_attrs("episode_000002")["source"] == "online"


@pytest.mark.parametrize(
    "change, field",
    [
        ({"observation_shapes": {"state": [4], "wrist": [16, 20, 3]}}, "observation_shapes"),
        ({"observation_shapes": {"state": [4], "front": [32, 20, 3]}}, "observation_shapes"),
        ({"action_dim": 7}, "action_dim"),
        ({"task": "other"}, "task"),
    ],
)
def test_merge_rejects_mismatched_schemas_and_modifies_nothing(store_path, tmp_path, change, field):
    bad = EpisodeStore.create(tmp_path / "bad.zarr", {**META, **change})
    shapes = {k: tuple(v) for k, v in bad.metadata["observation_shapes"].items()}
    rng = np.random.default_rng(0)
    writer = bad.writer()
    obs = {k: rng.integers(0, 255, s).astype(np.uint8 if len(s) == 3 else np.float32) for k, s in shapes.items()}
    writer.start(obs)
    writer.add(obs, np.zeros(bad.metadata["action_dim"]), 0.0, True, False)
    writer.commit("demo")
    before = tree_digest(store_path), tree_digest(tmp_path / "bad.zarr")
    with pytest.raises(EpisodeStoreError, match=f"bad.zarr: {field}="):
        tools.merge([store_path, tmp_path / "bad.zarr"], tmp_path / "merged.zarr")
    assert not (tmp_path / "merged.zarr").exists()
    assert (tree_digest(store_path), tree_digest(tmp_path / "bad.zarr")) == before


def test_data_commands_through_the_cli(store_path, tmp_path, capsys):
    assert main(["data", "info", f"store={store_path}"]) == 0
    assert "episodes       3" in capsys.readouterr().out
    assert main(["data", "export", f"store={store_path}", f"out={tmp_path / 'bag'}", "episodes=[1]"]) == 0
    assert '"episodes": 1' in capsys.readouterr().out
    assert main(["data", "info", f"store={tmp_path / 'missing.zarr'}"]) != 0
    assert "no robot_rl episode store" in capsys.readouterr().err
    assert main(["data", "show", f"store={store_path}", "episode=9"]) != 0
    assert "episode index 9 out of range" in capsys.readouterr().err


def bad_output_cases(tmp_path):
    """(data command and overrides, key named, the file that must be left as it is or absent) for data show/export."""
    ours = tmp_path / "notes.txt"
    ours.write_text("not ours")
    taken = tmp_path / "taken.mp4"
    taken.write_text("not ours either")
    return [
        (["show", f"out={ours}"], "data.out", ours),
        (["show", f"out={taken}"], "data.out", taken),
        (["show", f"out={tmp_path / 'x.gif'}"], "data.out", tmp_path / "x.gif"),
        (["show", f"out={tmp_path / 'missing' / 'ep.mp4'}"], "data.out", tmp_path / "missing"),
        (["show", "episode=abc", f"out={tmp_path / 'ep.mp4'}"], "data.episode", tmp_path / "ep.mp4"),
        (["export", "episodes=abc", f"out={tmp_path / 'bag'}"], "data.episodes", tmp_path / "bag"),
        (["export", "episodes=[0,a]", f"out={tmp_path / 'bag'}"], "data.episodes", tmp_path / "bag"),
    ]


@pytest.mark.parametrize("index", range(7))
def test_a_bad_show_or_export_output_is_one_line_and_nothing_is_written(store_path, tmp_path, capsys, index):
    """Old code: show overwrote an existing file, and raised RuntimeError (cannot open a video writer) or ValueError
    (invalid literal for int()) with a traceback for the others."""
    from tests.test_bad_input import assert_one_line_error, snapshot

    argv, key, path = bad_output_cases(tmp_path)[index]
    before = snapshot(tmp_path)
    code = main(["data", argv[0], f"store={store_path}", *argv[1:]])
    err = assert_one_line_error(capsys, code, key)
    assert "expected " + ("a new .mp4 file in an existing folder" if key == "data.out" else "") in err
    assert snapshot(tmp_path) == before
    assert path.exists() == (path.suffix == ".txt" or path.name == "taken.mp4")


def test_show_refuses_its_default_output_when_taken(store_path, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["data", "show", f"store={store_path}", "episode=1"]) == 0
    assert json.loads(capsys.readouterr().out)["out"] == "a_episode1.mp4"  # says where it wrote
    written = (tmp_path / "a_episode1.mp4").read_bytes()
    assert main(["data", "show", f"store={store_path}", "episode=1"]) == 2
    assert "a_episode1.mp4 exists" in capsys.readouterr().err
    assert (tmp_path / "a_episode1.mp4").read_bytes() == written
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_merge_takes_one_input_without_brackets(store_path, tmp_path, capsys):
    """Old code: ``inputs=PATH`` was read character by character (a store per character)."""
    assert main(["data", "merge", f"inputs={store_path}", f"out={tmp_path / 'm.zarr'}"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["out"] == str(tmp_path / "m.zarr") and report["copied"] == 3 and report["episodes_in_store"] == 3
