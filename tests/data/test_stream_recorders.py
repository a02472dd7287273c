"""StreamRecorders: several actors' interleaved hand-ins recorded in a process of their own (the Ray fleet's
driver)."""

import os
import signal
from functools import partial

import numpy as np
import pytest

from robot_rl.data import EpisodeStore, StreamRecorders
from robot_rl.data.delivery_ledger import Numbered
from robot_rl.data.transition import Provenance, Transition
from robot_rl.data.wire import TransitionSchema, encode_transitions
from robot_rl.runtime.fleet import decode_hand_in

META = {"observation_shapes": {"state": [3]}, "action_dim": 2, "task": "streams"}


def episode(actor: str, number: int, length: int, ended: bool = True) -> list[Transition]:
    states = np.arange((length + 1) * 3, dtype=np.float32).reshape(length + 1, 3) + 100 * number
    return [
        Transition(
            obs={"state": states[t]},
            action=np.full(2, t / 10, np.float32),
            reward=float(t),
            next_obs={"state": states[t + 1]},
            terminated=ended and t == length - 1,
            truncated=False,
            first=t == 0,
            origin=Provenance(episode=f"{actor}-{number}", step=t, actor=actor),
        )
        for t in range(length)
    ]


def hand_in(transitions: list[Transition]) -> bytes:
    """A fleet actor's hand-in: its steps, unnumbered."""
    return encode_transitions([Numbered(t) for t in transitions])


DECODE = partial(decode_hand_in, TransitionSchema({"state": (3,)}, 2))


def test_interleaved_hand_ins_become_whole_episodes_and_close_drops_the_open_ones(tmp_path):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    recorders = StreamRecorders(store, DECODE)
    os.kill(recorders._processes[0].pid, signal.SIGINT)  # Ctrl-C reaches the whole process group: the recorder goes on
    a0, b0, a1 = episode("a", 0, 5), episode("b", 0, 7), episode("a", 1, 4)
    open_b = episode("b", 1, 6, ended=False)
    for stream, part in [("a", a0[:2]), ("b", b0[:3]), ("a", a0[2:]), ("b", b0[3:]), ("a", a1), ("b", open_b)]:
        recorders.add(stream, hand_in(part))
    recorders.flush()
    assert len(store.episode_names()) == 3  # flushed: every finished episode is in
    recorders.close()
    uids = {store.episode_attrs(name)["uid"]: name for name in store.episode_names()}
    assert set(uids) == {"a-0", "b-0", "a-1"}  # b-1 was still open: dropped, nothing of it stored
    for transitions in (a0, b0, a1):
        back = store.read_episode(uids[transitions[0].origin.episode])
        np.testing.assert_array_equal(back["action"], np.stack([t.action for t in transitions]))
        np.testing.assert_array_equal(back["obs"]["state"][-1], transitions[-1].next_obs["state"])


def test_an_error_in_the_recorder_comes_back_to_the_driver(tmp_path):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    recorders = StreamRecorders(store, DECODE)
    bad = episode("a", 0, 3)
    for transition in bad:
        transition.obs = {"state": np.zeros(5, np.float32)}  # the run's states have 3 numbers
    recorders.add("a", hand_in(bad))
    with pytest.raises(RuntimeError, match="recording episodes to .* failed: .*state"):
        recorders.flush()
    recorders.add("a", hand_in(episode("a", 1, 3)))  # not recorded: the recorder stopped at the error
    with pytest.raises(RuntimeError, match="recording episodes"):
        recorders.close()
    assert store.episode_names() == []


def test_a_recorder_whose_driver_is_gone_keeps_what_is_finished_and_ends(tmp_path):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    recorders = StreamRecorders(store, DECODE)
    recorders.add("a", hand_in(episode("a", 0, 4)))
    recorders.add("b", hand_in(episode("b", 0, 4, ended=False)))
    recorders._conns[0].close()  # as when the driver is killed
    recorders._processes[0].join(timeout=60)
    assert recorders._processes[0].exitcode == 0
    assert [store.episode_attrs(name)["uid"] for name in store.episode_names()] == ["a-0"]
    assert not list((store.path / ".staging").glob("*"))  # the open episode left nothing behind


def test_two_recorder_processes_share_the_streams_out_and_commit_every_episode_once(tmp_path):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    recorders = StreamRecorders(store, DECODE, processes=2)
    sent = [episode(actor, number, 3 + number % 4) for number in range(12) for actor in ("a", "b", "c")]
    for transitions in sent:
        recorders.add(transitions[0].origin.actor, hand_in(transitions))
    recorders.close()
    names = store.episode_names()
    assert names == [f"episode_{index:06d}" for index in range(len(sent))]  # each name once, none skipped
    by_uid = {store.episode_attrs(name)["uid"]: name for name in names}
    for transitions in sent:
        back = store.read_episode(by_uid[transitions[0].origin.episode])
        np.testing.assert_array_equal(back["action"], np.stack([t.action for t in transitions]))
    assert {recorders._route[actor] for actor in "abc"} == {0, 1}


def test_recorders_starting_leave_the_episodes_other_writers_have_open_alone(tmp_path):
    """Bug: each recorder process opened the store with EpisodeStore.create, which clears the staging folder of a
    crashed writer's leftovers, and so the episode another writer (another recorder) had open at the time."""
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    writer = store.writer()
    writer.start({"state": np.zeros(3, np.float32)})
    recorders = StreamRecorders(store, DECODE, processes=2)
    recorders.add("a", hand_in(episode("a", 0, 3)))
    recorders.flush()
    writer.add({"state": np.ones(3, np.float32)}, np.zeros(2, np.float32), 0.0, terminated=True, truncated=False)
    assert writer.commit("online") == "episode_000001"
    recorders.close()
    assert len(store.episode_names()) == 2
