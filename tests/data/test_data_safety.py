"""Data safety and integrity: nothing the stack did not make is deleted; episodes carry a uid and a checksum;
``data info`` verifies every episode; ``data merge`` refuses corrupt input and skips episodes it already holds;
one-shot writers (merge into a new store, export) leave no partial output."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import zarr

from robot_rl.cli.main import main
from robot_rl.core.folders import MARKER, latest, replacing
from robot_rl.data import EpisodeStore, EpisodeStoreError, tools
from robot_rl.data.mcap_export import export_mcap
from robot_rl.data.verification import episode_uid, verify
from tests.data.test_episode_store import META, synthetic_episode, tree_digest, write_episode


def user_folder(path: Path) -> Path:
    """A folder of a user's own files."""
    (path / "notes").mkdir(parents=True)
    (path / "thesis.tex").write_text("three years of work")
    (path / "notes" / "day1.txt").write_text("ideas")
    return path


def new_store(path: Path, seeds=(0, 1, 2)) -> Path:
    store = EpisodeStore.create(path, META)
    for seed in seeds:
        write_episode(store, synthetic_episode(seed))
    return path


def temporary_siblings(folder: Path) -> list[Path]:
    return sorted(folder.parent.glob(f".{folder.name}.*.tmp"))


# ----------------------------------------------------------------- EpisodeStore.create never deletes


def test_create_in_a_user_folder_is_refused_and_the_folder_survives(tmp_path):
    folder = user_folder(tmp_path / "mine")
    before = tree_digest(folder)
    with pytest.raises(
        EpisodeStoreError,
        match="mine: folder holds files and is not a robot_rl episode store; "
        "expected a new path, an empty folder or an existing store",
    ):
        EpisodeStore.create(folder, META)
    assert tree_digest(folder) == before and sorted(p.name for p in folder.iterdir()) == ["notes", "thesis.tex"]


def test_create_refuses_an_empty_path_and_a_file(tmp_path, monkeypatch):
    cwd = user_folder(tmp_path / "cwd")
    monkeypatch.chdir(cwd)
    before = tree_digest(cwd)
    with pytest.raises(EpisodeStoreError, match="store path='' is empty; expected the path of a new or existing"):
        EpisodeStore.create("", META)
    with pytest.raises(EpisodeStoreError, match="thesis.tex: is a file; expected a folder for an episode store"):
        EpisodeStore.create(cwd / "thesis.tex", META)
    assert tree_digest(cwd) == before


def test_create_refuses_a_zarr_group_that_is_not_a_robot_rl_store(tmp_path):
    zarr.open_group(str(tmp_path / "other.zarr"), mode="w-").attrs["owner"] = "someone else"
    before = tree_digest(tmp_path / "other.zarr")
    with pytest.raises(EpisodeStoreError, match="other.zarr: not a robot_rl episode store"):
        EpisodeStore.create(tmp_path / "other.zarr", META)
    assert tree_digest(tmp_path / "other.zarr") == before


def test_an_empty_folder_becomes_a_store_and_a_matching_store_is_appended_to(tmp_path):
    (tmp_path / "empty").mkdir()
    write_episode(EpisodeStore.create(tmp_path / "empty", META), synthetic_episode(0))
    assert write_episode(EpisodeStore.create(tmp_path / "empty", META), synthetic_episode(1)) == "episode_000001"
    assert len(EpisodeStore.open(tmp_path / "empty")) == 2 and verify(EpisodeStore.open(tmp_path / "empty")) == []


def test_collect_into_a_user_folder_or_an_empty_path_fails_and_changes_nothing(tmp_path, monkeypatch, capsys):
    folder = user_folder(tmp_path / "mine")
    monkeypatch.chdir(folder)
    before = tree_digest(folder)
    for out in (str(folder), ""):
        assert main(["collect", "collect.episodes=1", f"collect.out={out}"]) != 0
        error = capsys.readouterr().err
        assert error.startswith("robot-rl: error: collect.out=") and error.count("\n") == 1
    assert tree_digest(folder) == before


# ----------------------------------------------------------------- uid and checksum


def test_every_episode_gets_a_uid_and_a_checksum_and_a_caller_may_give_the_uid(tmp_path):
    store = EpisodeStore.open(new_store(tmp_path / "s.zarr", seeds=(0, 1)))
    attrs = [store.episode_attrs(name) for name in store.episode_names()]
    assert all(len(a["uid"]) == 32 and int(a["uid"], 16) >= 0 for a in attrs) and attrs[0]["uid"] != attrs[1]["uid"]
    checksums = [a["checksum"] for a in attrs]
    assert all(len(c) == 64 for c in checksums) and checksums[0] != checksums[1]

    writer = EpisodeStore.create(tmp_path / "s.zarr", META).writer()
    episode = synthetic_episode(0)
    writer.start({key: value[0] for key, value in episode["obs"].items()})
    for t in range(6):
        writer.add(
            {key: value[t + 1] for key, value in episode["obs"].items()},
            episode["action"][t],
            episode["reward"][t],
            terminated=t == 5,
            truncated=False,
            success=t == 5,
            timestamp=episode["timestamp"][t],
            safety_flags=t % 3,
        )
    with pytest.raises(EpisodeStoreError, match="uid=''; expected a printable string"):
        writer.commit("demo", uid="")
    name = writer.commit("demo", uid="actor-7-episode-12", seed=1)
    attrs = store.episode_attrs(name)
    assert attrs["uid"] == "actor-7-episode-12"
    assert attrs["checksum"] == checksums[0]  # the same content: the same checksum, frames hashed as they came


# ----------------------------------------------------------------- verify / data info


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def chunk_files(episode: Path, field: str) -> list[Path]:
    return sorted(p for p in (episode / field / "c").rglob("*") if p.is_file())


def edit_json(path: Path, change) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def rewrite_reward(episode: Path) -> None:
    """Valid chunks (their CRC32C matches) with other content: only the episode checksum can tell."""
    array = zarr.open_array(str(episode / "reward"), mode="r+")
    array[...] = array[...] + 1


CORRUPTIONS = {
    "corrupt camera chunk": (lambda ep: flip_a_byte(chunk_files(ep, "obs/front")[2]), "field obs/front: corrupt chunk"),
    "truncated chunk file": (
        lambda ep: chunk_files(ep, "action")[0].write_bytes(chunk_files(ep, "action")[0].read_bytes()[:7]),
        "field action: corrupt chunk",
    ),
    "missing chunk": (lambda ep: chunk_files(ep, "obs/front")[0].unlink(), "field obs/front: 1 chunk(s) missing"),
    "truncated array": (
        lambda ep: edit_json(ep / "reward" / "zarr.json", lambda doc: doc.update(shape=[5])),
        "field reward: 5 rows; expected 6",
    ),
    "wrong length attr": (
        lambda ep: edit_json(ep / "zarr.json", lambda doc: doc["attributes"].update(length=7)),
        "field action: 6 rows; expected 7",
    ),
    "content changed": (rewrite_reward, "content checksum"),
    "unreadable metadata": (lambda ep: (ep / "zarr.json").write_text("{not json"), "unreadable metadata"),
}


@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_verify_and_info_name_the_bad_episode(tmp_path, capsys, corruption):
    path = new_store(tmp_path / "s.zarr")
    damage, message = CORRUPTIONS[corruption]
    damage(path / "episodes" / "episode_000001")
    problems = verify(EpisodeStore.open(path))
    assert problems and all(problem.startswith("episode episode_000001") for problem in problems), problems
    assert message in " ".join(problems)
    with pytest.raises(EpisodeStoreError, match="failed verification: .*s.zarr: episode episode_000001"):
        tools.info(path)
    assert main(["data", "info", f"store={path}"]) != 0
    captured = capsys.readouterr()
    assert captured.err.startswith("robot-rl: error: failed verification") and captured.err.count("\n") == 1
    assert "episode_000001" in captured.err and not captured.out


def strip_identity(path: Path) -> None:
    """Make the store look written before episodes had a uid and a checksum."""
    for episode in (path / "episodes").glob("episode_*"):
        edit_json(episode / "zarr.json", lambda doc: [doc["attributes"].pop(key) for key in ("uid", "checksum")])


def test_episodes_of_older_stores_still_read_and_get_a_deterministic_content_uid(tmp_path):
    path = new_store(tmp_path / "old.zarr", seeds=(0, 1))
    strip_identity(path)
    store = EpisodeStore.open(path)
    assert verify(store) == [] and tools.info(path)["episodes"] == 2
    uid = episode_uid(store, "episode_000000")
    assert uid.startswith("content-") and uid == episode_uid(store, "episode_000000")
    assert uid != episode_uid(store, "episode_000001")


# ----------------------------------------------------------------- merge


def test_merging_twice_adds_nothing_the_second_time(tmp_path):
    a = new_store(tmp_path / "a.zarr")
    b = new_store(tmp_path / "b.zarr", seeds=(7,))
    first = tools.merge([a, b], tmp_path / "m.zarr")
    assert (first["copied"], first["skipped"], first["episodes_in_store"]) == (4, 0, 4)
    before = tree_digest(tmp_path / "m.zarr")
    second = tools.merge([a, b], tmp_path / "m.zarr")
    assert (second["copied"], second["skipped"], second["episodes_in_store"]) == (0, 4, 4)
    assert tree_digest(tmp_path / "m.zarr") == before
    c = new_store(tmp_path / "c.zarr", seeds=(8,))
    assert tools.merge([a, c], tmp_path / "m.zarr")["copied"] == 1  # only the new episode


def test_merging_older_stores_twice_adds_nothing_the_second_time(tmp_path):
    a = new_store(tmp_path / "a.zarr", seeds=(0, 1))
    strip_identity(a)
    assert tools.merge([a], tmp_path / "m.zarr")["copied"] == 2
    assert tools.merge([a], tmp_path / "m.zarr")["copied"] == 0


@pytest.mark.parametrize("out_exists", [False, True])
def test_merge_with_a_corrupt_input_writes_nothing(tmp_path, out_exists):
    a = new_store(tmp_path / "a.zarr")
    b = new_store(tmp_path / "b.zarr", seeds=(7, 8))
    flip_a_byte(chunk_files(b / "episodes" / "episode_000001", "reward")[0])
    if out_exists:
        new_store(tmp_path / "m.zarr", seeds=(9,))
    before = {p.name: tree_digest(p) for p in tmp_path.iterdir()}
    with pytest.raises(EpisodeStoreError, match="failed verification: .*b.zarr: episode episode_000001, field reward"):
        tools.merge([a, b], tmp_path / "m.zarr")
    assert {p.name: tree_digest(p) for p in tmp_path.iterdir()} == before  # no m.zarr unless it was there


def test_merge_into_a_user_folder_is_refused(tmp_path, capsys):
    a = new_store(tmp_path / "a.zarr")
    folder = user_folder(tmp_path / "mine")
    before = tree_digest(folder)
    assert main(["data", "merge", f"inputs=[{a}]", f"out={folder}"]) != 0
    assert "mine: folder holds files and is not a robot_rl episode store" in capsys.readouterr().err
    assert tree_digest(folder) == before


def test_a_merge_that_fails_midway_leaves_no_output(tmp_path, monkeypatch):
    a = new_store(tmp_path / "a.zarr")
    calls = []

    def fail_on_the_second_episode(path):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(tools, "_fsync_tree", fail_on_the_second_episode)
    with pytest.raises(OSError, match="No space left"):
        tools.merge([a], tmp_path / "m.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr"]  # no m.zarr, no temporary sibling


# ----------------------------------------------------------------- export


def test_an_export_that_fails_midway_leaves_no_folder(tmp_path):
    a = new_store(tmp_path / "a.zarr")
    flip_a_byte(chunk_files(a / "episodes" / "episode_000002", "obs/front")[3])
    with pytest.raises(EpisodeStoreError, match="episode episode_000002, field obs/front: corrupt chunk"):
        export_mcap(a, tmp_path / "bag")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr"]
    report = export_mcap(a, tmp_path / "bag", episodes=[0, 1])  # the sound episodes still export
    assert report["episodes"] == 2 and (tmp_path / "bag" / "bag.mcap").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.zarr", "bag"]


def test_export_into_an_existing_folder_is_refused(tmp_path):
    a = new_store(tmp_path / "a.zarr", seeds=(0,))
    folder = user_folder(tmp_path / "mine")
    before = tree_digest(folder)
    with pytest.raises(FileExistsError, match="mine: exists and is not an empty folder"):
        export_mcap(a, folder)
    assert tree_digest(folder) == before


# ----------------------------------------------------------------- folders.replacing


def test_replacing_leaves_a_users_tmp_and_old_folders_alone(tmp_path):
    target = tmp_path / "checkpoint"
    names = ("checkpoint.tmp", "checkpoint.old", ".checkpoint.mine.tmp")
    for name in names:
        user_folder(tmp_path / name)
    before = {name: tree_digest(tmp_path / name) for name in names}
    for version in ("1", "2"):
        with replacing(target) as tmp:
            (tmp / "a").write_text(version)
    assert (target / "a").read_text() == "2" and latest(target) == target
    assert {name: tree_digest(tmp_path / name) for name in before} == before
    assert temporary_siblings(target) == [tmp_path / ".checkpoint.mine.tmp"]


def test_replacing_keeps_the_previous_version_when_the_block_fails(tmp_path):
    target = tmp_path / "checkpoint"
    with replacing(target) as tmp:
        (tmp / "a").write_text("1")
    with pytest.raises(RuntimeError), replacing(target) as tmp:
        (tmp / "a").write_text("half")
        raise RuntimeError("save failed")
    assert (target / "a").read_text() == "1" and temporary_siblings(target) == []


CRASH_BETWEEN_RENAMES = textwrap.dedent(
    """
    import os
    from robot_rl.core.folders import replacing
    real_rename, renames = os.rename, []
    def rename(source, destination):
        renames.append(source)
        if len(renames) == 2:
            os._exit(9)  # the process dies after moving the old version away, before the new one is in place
        real_rename(source, destination)
    os.rename = rename
    with replacing({target!r}) as tmp:
        (tmp / "a").write_text("2")
    """
)


def test_latest_finds_the_previous_version_after_a_crash_between_the_renames(tmp_path):
    target = tmp_path / "checkpoint"
    with replacing(target) as tmp:
        (tmp / "a").write_text("1")
    script = CRASH_BETWEEN_RENAMES.format(target=str(target))
    crashed = subprocess.run(
        [sys.executable, "-c", script], cwd=Path(__file__).parents[2], env={**os.environ}, check=False
    )
    assert crashed.returncode == 9 and not target.exists()
    leftover = temporary_siblings(target)
    assert len(leftover) == 1 and (leftover[0] / MARKER).exists()
    assert (latest(target) / "a").read_text() == "1"
    with replacing(target) as tmp:  # the next save puts a version in place and removes the dead writer's leftover
        (tmp / "a").write_text("3")
    assert (latest(target) / "a").read_text() == "3" and temporary_siblings(target) == []


def test_merge_and_export_refuse_an_empty_out_path(tmp_path, monkeypatch):
    a = new_store(tmp_path / "a.zarr", seeds=(0,))
    b = new_store(tmp_path / "b.zarr", seeds=(1,))
    monkeypatch.chdir(a)  # the current folder is a store: an empty path must not stand for it
    before = tree_digest(a)
    with pytest.raises(EpisodeStoreError, match="store path='' is empty"):
        tools.merge([b], "")
    with pytest.raises(EpisodeStoreError, match="out='' is empty"):
        export_mcap(b, "")
    assert tree_digest(a) == before and len(EpisodeStore.open(a)) == 1
