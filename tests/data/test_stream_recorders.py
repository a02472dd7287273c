"""StreamRecorders: several actors' interleaved hand-ins recorded on a thread of their own (the Ray fleet's driver)."""

import numpy as np
import pytest

from robot_rl.data import EpisodeStore, StreamRecorders
from robot_rl.data.transition import Transition

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
            episode=f"{actor}-{number}",
            step=t,
            actor=actor,
        )
        for t in range(length)
    ]


def test_interleaved_hand_ins_become_whole_episodes_and_close_drops_the_open_ones(tmp_path):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    recorders = StreamRecorders(store, backlog=2)  # a small backlog: add waits for the thread now and then
    a0, b0, a1 = episode("a", 0, 5), episode("b", 0, 7), episode("a", 1, 4)
    open_b = episode("b", 1, 6, ended=False)
    for stream, part in [("a", a0[:2]), ("b", b0[:3]), ("a", a0[2:]), ("b", b0[3:]), ("a", a1), ("b", open_b)]:
        recorders.add(stream, part)
    recorders.flush()
    assert len(store.episode_names()) == 3  # flushed: every finished episode is in
    recorders.close()
    uids = {store.episode_attrs(name)["uid"]: name for name in store.episode_names()}
    assert set(uids) == {"a-0", "b-0", "a-1"}  # b-1 was still open: dropped, nothing of it stored
    for transitions in (a0, b0, a1):
        back = store.read_episode(uids[transitions[0].episode])
        np.testing.assert_array_equal(back["action"], np.stack([t.action for t in transitions]))
        np.testing.assert_array_equal(back["obs"]["state"][-1], transitions[-1].next_obs["state"])


def test_an_error_on_the_thread_comes_back_to_the_driver(tmp_path):
    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    recorders = StreamRecorders(store)
    bad = episode("a", 0, 3)
    bad[1].obs = {"state": np.zeros(5, np.float32)}  # the store holds 3-dim states
    bad[1].next_obs = {"state": np.zeros(5, np.float32)}
    recorders.add("a", bad)
    with pytest.raises(RuntimeError, match="recording episodes to .* failed"):
        recorders.flush()
    with pytest.raises(RuntimeError, match="recording episodes"):
        recorders.add("a", episode("a", 1, 3))
    with pytest.raises(RuntimeError, match="recording episodes"):
        recorders.close()
    assert store.episode_names() == []
