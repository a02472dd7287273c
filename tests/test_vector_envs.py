"""``train.num_envs=N``: N sim envs stepped together with one batched policy call per step. Each env is a stream
of its own, so the learner's replay and the episode store hold every env's episodes whole (never one env's
observation paired with another's next observation), the counts add up, and it still learns."""

import numpy as np
import pytest

from robot_rl.core.folders import latest
from robot_rl.data import EpisodeStore, ReplayBuffer
from robot_rl.data.streams import stored_tuples
from robot_rl.runtime.train import train
from tests.conftest import LEARNING_REACH
from tests.test_train import small_run


def episode_tuples(episode) -> list[tuple]:
    """An episode's transitions as :func:`stored_tuples` writes them."""
    obs, rows = episode["obs"], []
    for t in range(len(episode["action"])):
        rows.append(
            (
                tuple(np.asarray(obs[key][t]).tobytes() for key in sorted(obs)),
                np.asarray(episode["action"][t], np.float32).tobytes(),
                float(np.float32(episode["reward"][t])),
                tuple(np.asarray(obs[key][t + 1]).tobytes() for key in sorted(obs)),
                bool(episode["terminated"][t]),
                bool(episode["truncated"][t]),
            )
        )
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_envs_stepped_together_keep_their_episodes_whole(tmp_path, vectorization):
    """In this process and with each env in a worker process (train.vectorization=async)."""
    summary = train(
        small_run(tmp_path, "train.num_envs=3", "train.env_steps=400", f"train.vectorization={vectorization}")
    )
    run = tmp_path / "run"
    store = EpisodeStore.open(run / "episodes.zarr")
    names = store.episode_names()
    online = [store.read_episode(n) for n in names if store.episode_attrs(n)["source"] == "online"]
    assert summary["env_steps"] == 400 and summary["demo_episodes"] == 3
    assert summary["episodes"] == len(names)  # every episode counted is recorded, the last ones cut by the budget
    assert [entry["env_steps"] for entry in summary["eval_history"]].count(400) == 1  # one final evaluation (was 3)
    assert sum(len(episode["action"]) for episode in online) == 400
    assert len({store.episode_attrs(n)["seed"] for n in names}) == len(names)  # each reset its own seed
    buffer = ReplayBuffer.load(latest(run / "checkpoint") / "online_buffer")
    held = stored_tuples(buffer)
    assert len(held) == 400
    ended = [e for e in online if e["terminated"][-1] or e["truncated"][-1]]
    assert len(ended) >= 3
    missing = [row for episode in ended for row in episode_tuples(episode) if row not in set(held)]
    assert not missing, f"{len(missing)} recorded transitions are not in the replay as recorded"


@pytest.mark.slow
@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_it_learns_with_envs_stepped_together(tmp_path, vectorization):
    summary = train(small_run(tmp_path, *LEARNING_REACH, "train.num_envs=2", f"train.vectorization={vectorization}"))
    assert summary["final_eval_success"] >= 0.7, summary["eval_history"]  # the bar of the one-env test
