"""Episode store: atomic episodes, crash safety, concurrent reading, schema and corruption errors."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from robot_rl.data import EpisodeStore, EpisodeStoreError

META = {"task": "unit", "observation_shapes": {"state": [4], "front": [16, 20, 3]}, "action_dim": 2}


def synthetic_episode(seed: int, steps: int = 6):
    rng = np.random.default_rng(seed)
    return {
        "obs": {
            "state": rng.normal(size=(steps + 1, 4)).astype(np.float32),
            "front": rng.integers(0, 255, (steps + 1, 16, 20, 3), dtype=np.uint8),
        },
        "action": rng.uniform(-1, 1, (steps, 2)).astype(np.float32),
        "reward": rng.normal(size=steps).astype(np.float32),
        "timestamp": 1000.0 + 100.0 * seed + np.arange(steps) / 10,
    }


def write_episode(store, episode, source="demo"):
    writer = store.writer()
    writer.start({key: value[0] for key, value in episode["obs"].items()})
    steps = len(episode["action"])
    for t in range(steps):
        writer.add(
            {key: value[t + 1] for key, value in episode["obs"].items()},
            episode["action"][t],
            episode["reward"][t],
            terminated=t == steps - 1,
            truncated=False,
            success=t == steps - 1,
            timestamp=episode["timestamp"][t],
            safety_flags=t % 3,
        )
    return writer.commit(source, seed=1)


def tree_digest(path: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def test_round_trip_is_bit_identical(tmp_path):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    episode = synthetic_episode(0)
    name = write_episode(store, episode)
    back = EpisodeStore.open(tmp_path / "s.zarr").read_episode(name)
    for key in ("state", "front"):
        np.testing.assert_array_equal(back["obs"][key], episode["obs"][key])
        assert back["obs"][key].dtype == episode["obs"][key].dtype
    np.testing.assert_array_equal(back["action"], episode["action"])
    np.testing.assert_array_equal(back["policy_action"], episode["action"])
    np.testing.assert_array_equal(back["reward"], episode["reward"])
    np.testing.assert_array_equal(back["timestamp"], episode["timestamp"])
    np.testing.assert_array_equal(back["safety_flags"], [0, 1, 2, 0, 1, 2])
    assert back["terminated"].tolist() == [False] * 5 + [True] and not back["intervened"].any()
    assert back["attrs"]["length"] == 6 and back["attrs"]["source"] == "demo"
    chunks = tmp_path / "s.zarr" / "episodes" / name / "obs" / "front" / "c"
    assert sum(p.is_file() for p in chunks.rglob("*")) == 7  # one chunk per camera frame


def test_writers_with_episodes_open_at_once_each_commit_their_own(tmp_path):
    """Envs stepped together record into one store through one writer each, their episodes open at the same time
    (bug: both writers staged under the same name, and the second start wiped the first's episode)."""
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    episodes = [synthetic_episode(seed, steps=4 + seed) for seed in range(3)]
    writers = [store.writer() for _ in episodes]
    for writer, episode in zip(writers, episodes):
        writer.start({key: value[0] for key, value in episode["obs"].items()})
    for t in range(max(len(e["action"]) for e in episodes)):  # interleaved steps
        for writer, episode in zip(writers, episodes):
            if t < len(episode["action"]):
                writer.add(
                    {key: value[t + 1] for key, value in episode["obs"].items()},
                    episode["action"][t],
                    episode["reward"][t],
                    terminated=False,
                    truncated=t == len(episode["action"]) - 1,
                    success=False,
                    timestamp=episode["timestamp"][t],
                )
    names = [writer.commit("online", seed=index) for index, writer in reversed(list(enumerate(writers)))]
    assert names == ["episode_000000", "episode_000001", "episode_000002"]  # named in commit order
    for name, episode in zip(names, reversed(episodes)):
        back = store.read_episode(name)
        np.testing.assert_array_equal(back["action"], episode["action"])
        np.testing.assert_array_equal(back["obs"]["front"], episode["obs"]["front"])


def test_streams_at_their_own_rate(tmp_path):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    episode = synthetic_episode(1, steps=2)
    writer = store.writer()
    writer.start({key: value[0] for key, value in episode["obs"].items()})
    for i in range(25):
        writer.add_stream("wrench", np.full(6, i, np.float32), timestamp=i / 100)
    for t in range(2):
        writer.add(
            {key: value[t + 1] for key, value in episode["obs"].items()}, episode["action"][t], 0.0, t == 1, False
        )
    name = writer.commit("online")
    streams = store.read_episode(name)["streams"]
    assert streams["wrench"]["data"].shape == (25, 6) and streams["wrench"]["timestamp"][-1] == pytest.approx(0.24)


WRITER = textwrap.dedent(
    """
    import sys, time, numpy as np
    sys.path.insert(0, {tests!r})
    from robot_rl.data import EpisodeStore
    from data.test_episode_store import META, synthetic_episode, write_episode
    store = EpisodeStore.create({path!r}, META)
    for seed in range(3):
        write_episode(store, synthetic_episode(seed))
    partial = synthetic_episode(99, steps=50)
    writer = store.writer()
    writer.start({{k: v[0] for k, v in partial["obs"].items()}})
    for t in range(20):
        writer.add({{k: v[t + 1] for k, v in partial["obs"].items()}}, partial["action"][t], 0.0, False, False)
    print("PARTIAL", flush=True)
    time.sleep(60)
    """
)


def test_sigkill_mid_episode_keeps_finished_episodes_and_drops_the_partial(tmp_path):
    path = tmp_path / "s.zarr"
    script = WRITER.format(tests=str(Path(__file__).parent.parent), path=str(path))
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "PARTIAL"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert (path / ".staging").exists()  # the partial episode was on disk when the writer died

    store = EpisodeStore.open(path)
    assert store.episode_names() == ["episode_000000", "episode_000001", "episode_000002"]
    for seed, episode in enumerate(store):
        expected = synthetic_episode(seed)
        for key in ("state", "front"):
            np.testing.assert_array_equal(episode["obs"][key], expected["obs"][key])
        np.testing.assert_array_equal(episode["action"], expected["action"])
        np.testing.assert_array_equal(episode["reward"], expected["reward"])
    # a new writer cleans up and continues the numbering
    store = EpisodeStore.create(path, META)
    assert not (path / ".staging").exists()
    assert write_episode(store, synthetic_episode(3)) == "episode_000003"


BUSY_AT_EXIT = textwrap.dedent(
    """
    import sys, threading, time
    sys.path.insert(0, {tests!r})
    from tests.data.test_episode_store import META, synthetic_episode, write_episode
    from robot_rl.data import EpisodeStore
    from zarr.core.sync import sync

    write_episode(EpisodeStore.create({path!r}, META), synthetic_episode(0))

    async def busy():
        time.sleep(1.0)  # zarr's I/O thread still busy at exit, as on a loaded machine

    threading.Thread(target=lambda: sync(busy()), daemon=True).start()
    time.sleep(0.1)
    """
)


def test_a_process_that_used_a_store_exits_without_a_traceback_while_zarr_is_busy(tmp_path):
    """zarr's exit hook waits 0.2 s for its I/O thread, then raises "Cannot close a running event
    loop" (seen as a recorder node's traceback on a loaded machine): the store stops the thread first."""
    script = BUSY_AT_EXIT.format(tests=str(Path(__file__).parent.parent), path=str(tmp_path / "s.zarr"))
    process = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60)
    assert process.returncode == 0, process.stderr
    assert "Traceback" not in process.stderr and "running event loop" not in process.stderr, process.stderr
    assert len(EpisodeStore.open(tmp_path / "s.zarr")) == 1


def test_a_reader_sees_new_episodes_while_a_writer_appends(tmp_path):
    writer_store = EpisodeStore.create(tmp_path / "s.zarr", META)
    write_episode(writer_store, synthetic_episode(0))
    reader = EpisodeStore.open(tmp_path / "s.zarr")
    assert len(reader) == 1
    writer = writer_store.writer()
    episode = synthetic_episode(1)
    writer.start({key: value[0] for key, value in episode["obs"].items()})
    writer.add({key: value[1] for key, value in episode["obs"].items()}, episode["action"][0], 0.0, False, False)
    assert len(reader) == 1  # the episode in flight is invisible
    writer.add({key: value[2] for key, value in episode["obs"].items()}, episode["action"][1], 0.0, True, False)
    writer.commit("online")
    assert len(reader) == 2 and reader.read_episode("episode_000001")["attrs"]["length"] == 2


@pytest.mark.parametrize(
    "obs_change, message",
    [
        (lambda obs: {"state": obs["state"], "wrist": obs["front"]}, "observation keys"),
        (lambda obs: {"state": obs["state"], "front": obs["front"][:8]}, "obs/front has shape (8, 20, 3)"),
        (lambda obs: {"state": obs["state"][:3], "front": obs["front"]}, "obs/state has shape (3,)"),
    ],
)
def test_mismatched_cameras_or_shapes_are_rejected_and_nothing_changes(tmp_path, obs_change, message):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    write_episode(store, synthetic_episode(0))
    before = tree_digest(tmp_path / "s.zarr")
    episode = synthetic_episode(1)
    with pytest.raises(EpisodeStoreError, match="episode_000001") as error:
        store.writer().start(obs_change({key: value[0] for key, value in episode["obs"].items()}))
    assert message in str(error.value)
    assert tree_digest(tmp_path / "s.zarr") == before


def test_appending_with_other_metadata_is_rejected(tmp_path):
    EpisodeStore.create(tmp_path / "s.zarr", META)
    with pytest.raises(EpisodeStoreError, match="observation_shapes"):
        EpisodeStore.create(tmp_path / "s.zarr", {**META, "observation_shapes": {"state": [5]}})


def test_missing_chunk_names_episode_and_field(tmp_path):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    name = write_episode(store, synthetic_episode(0))
    chunk_dir = tmp_path / "s.zarr" / "episodes" / name / "obs" / "front" / "c"
    victim = sorted(p for p in chunk_dir.rglob("*") if p.is_file())[3]
    victim.unlink()
    with pytest.raises(EpisodeStoreError, match=f"episode {name}, field obs/front: 1 chunk\\(s\\) missing"):
        store.read_episode(name)
    assert store.read_episode(name, keys={"action"})["action"].shape == (6, 2)  # the rest still reads


def test_corrupt_chunk_names_episode_and_field(tmp_path):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    name = write_episode(store, synthetic_episode(0))
    chunk = next(p for p in (tmp_path / "s.zarr" / "episodes" / name / "reward" / "c").rglob("*") if p.is_file())
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0xFF
    chunk.write_bytes(bytes(data))
    with pytest.raises(EpisodeStoreError, match=f"episode {name}, field reward: corrupt chunk"):
        store.read_episode(name)


def test_store_from_a_newer_schema_is_refused(tmp_path):
    EpisodeStore.create(tmp_path / "s.zarr", META)
    meta_file = tmp_path / "s.zarr" / "zarr.json"
    document = json.loads(meta_file.read_text())
    document["attributes"]["schema_version"] = 99
    meta_file.write_text(json.dumps(document))
    with pytest.raises(EpisodeStoreError, match="schema_version=99 was written by a newer robot_rl"):
        EpisodeStore.open(tmp_path / "s.zarr")


def test_bad_source_is_rejected(tmp_path):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    episode = synthetic_episode(0, steps=1)
    writer = store.writer()
    writer.start({key: value[0] for key, value in episode["obs"].items()})
    writer.add({key: value[1] for key, value in episode["obs"].items()}, episode["action"][0], 0.0, True, False)
    with pytest.raises(EpisodeStoreError, match="source='teleop'"):
        writer.commit("teleop")
    assert len(store) == 0


def test_two_handles_of_one_store_take_turns_without_taking_each_others_names(tmp_path):
    """Each handle keeps the next episode's name instead of listing the folder at every commit; a name another
    handle took meanwhile is noticed and the next free one used."""
    first = EpisodeStore.create(tmp_path / "s.zarr", META)
    second = EpisodeStore.create(tmp_path / "s.zarr", META)
    names = [write_episode(store, synthetic_episode(seed), "online") for seed, store in enumerate([first, second] * 2)]
    names.append(write_episode(first, synthetic_episode(9), "online"))
    assert names == [f"episode_{index:06d}" for index in range(5)]
    for seed, name in zip([0, 1, 2, 3, 9], names):
        np.testing.assert_array_equal(first.read_episode(name)["action"], synthetic_episode(seed)["action"])


def test_handles_taking_turns_list_the_folder_once_each_however_many_names_the_others_took(tmp_path, monkeypatch):
    """With one writer per fleet actor nearly every commit finds its name taken: listing the folder again each time
    (a stat per episode) grew with the store; the names taken since are stepped over instead."""
    handles = [EpisodeStore.create(tmp_path / "s.zarr", META) for _ in range(3)]
    listings = []
    episode_names = EpisodeStore.episode_names
    monkeypatch.setattr(EpisodeStore, "episode_names", lambda store: listings.append(store) or episode_names(store))
    names = [write_episode(store, synthetic_episode(seed), "online") for seed, store in enumerate(handles * 4)]
    assert names == [f"episode_{index:06d}" for index in range(12)]
    assert len(listings) == len(handles)  # each handle's first commit


def test_a_name_taken_between_choosing_it_and_committing_goes_to_the_next_one(tmp_path, monkeypatch):
    """Writers in several processes append to one store (the fleet's recorders): one that loses the race for a name
    commits under the next instead of failing."""
    first = EpisodeStore.create(tmp_path / "s.zarr", META)
    second = EpisodeStore.create(tmp_path / "s.zarr", META)
    write_episode(second, synthetic_episode(0), "online")  # takes episode_000000
    chosen = iter(["episode_000000"] * 3)  # what `first` chose before (two calls as it starts, one as it commits)
    real = EpisodeStore._next_name
    monkeypatch.setattr(EpisodeStore, "_next_name", lambda store: next(chosen, None) or real(store))
    assert write_episode(first, synthetic_episode(1), "online") == "episode_000001"
    np.testing.assert_array_equal(first.read_episode("episode_000000")["action"], synthetic_episode(0)["action"])
    np.testing.assert_array_equal(first.read_episode("episode_000001")["action"], synthetic_episode(1)["action"])


def test_an_episode_s_array_files_are_the_files_zarr_itself_writes(tmp_path):
    import zarr

    from robot_rl.data.episode_store import ARRAY_CODECS, ARRAY_CONFIG, _write_arrays

    rng = np.random.default_rng(0)
    arrays = [
        ("obs/state", rng.normal(size=(6, 5)).astype(np.float32)),
        ("action", rng.normal(size=(5, 3)).astype(np.float32)),
        ("terminated", np.array([False] * 4 + [True])),
        ("streams/wrench/timestamp", np.arange(9, dtype=np.float64)),
    ]

    def episode_folder(name: str) -> zarr.Group:
        group = zarr.open_group(str(tmp_path / name), mode="w-")
        group.create_group("obs")
        group.create_group("streams").create_group("wrench")
        return group

    episode_folder("ours")
    _write_arrays(tmp_path / "ours", arrays)
    theirs = episode_folder("theirs")
    for path, data in arrays:
        parent, _, name = path.rpartition("/")
        group = theirs[parent] if parent else theirs
        group.create_array(name, shape=data.shape, dtype=data.dtype, compressors=ARRAY_CODECS, config=ARRAY_CONFIG)[
            ...
        ] = data

    def files(name: str) -> dict[str, bytes]:
        root = tmp_path / name
        return {str(file.relative_to(root)): file.read_bytes() for file in root.rglob("*") if file.is_file()}

    assert files("ours") == files("theirs")
    assert len(files("ours")) == 4 + 2 * len(arrays)  # four groups' zarr.json; each array's and its one chunk
    read = zarr.open_group(str(tmp_path / "ours"), mode="r")
    for path, data in arrays:
        np.testing.assert_array_equal(read[path][...], data)
