"""``robot-rl launch`` of a graph that trains continues a run folder only with ``train.resume=true``, and then goes on
with the run's counts (issue 50 item 1): before, ``launch sim_train`` on an existing run resumed the learner while the
actor played its demonstrations again and a whole new step budget (81 online transitions with train.env_steps=60)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import require
from tests.ros.graph_helpers import launch, recorded_episodes

TINY_GRAPH = [
    "task=reach",
    "train.demo_episodes=1",
    "task.episode_steps=20",
    "train.start_training=20",
    "train.batch_size=32",
    "ros.eval_every_episodes=0",
]


@pytest.mark.slow
def test_a_resumed_sim_train_launch_continues_the_actors_budget(tmp_path):
    require("rclpy")

    run_dir = tmp_path / "run"
    first = launch("sim_train", *TINY_GRAPH, f"train.run_dir={run_dir}", "train.env_steps=60", timeout=300)
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    kept = run_dir / "actor_episodes.zarr.actor_state.json"  # the actor's draws after its last episode (issue 71)
    drawn = json.loads(kept.read_text())["random_state"]
    assert "generator" in drawn
    # a graph run ends as robot-rl train does (issue 73 item 4): summary.json with counts that add up, the learning
    # curve and TensorBoard, the episodes counted from the actor's records (counters.json said 0 episodes)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["demo_episodes"] == 1 and summary["episodes"] >= 3 and summary["env_steps"] == 60, summary
    assert (run_dir / "learning_curve.png").is_file() and any((run_dir / "tb").iterdir())
    assert "run summary: {" in first.stdout
    again = launch("sim_train", f"train.run_dir={run_dir}", "train.env_steps=100", timeout=120)
    assert again.returncode == 2 and "train.resume=true" in again.stderr and "[launch] started" not in again.stdout
    resumed = launch("sim_train", f"train.run_dir={run_dir}", "train.resume=true", "train.env_steps=100", timeout=300)
    output = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0 and "Traceback" not in output, output[-3000:]
    assert "resumed: 1 demonstrations, 60 online env steps" in output, output[-3000:]
    assert f"acting random state restored from {kept}" in output, output[-3000:]  # not the seed's first draws again
    assert json.loads(kept.read_text())["random_state"]["generator"] != drawn["generator"]
    # each start's record names the draws it acts from: the resumed actor's are where the first launch's left them,
    # not the seed's the first launch started from (issue 71 item 3: the old actor node drew from the seed again)
    (first_draws,), (resumed_draws,) = started_draws(first.stdout), started_draws(resumed.stdout)
    assert resumed_draws != first_draws
    assert "actor done: 100 env steps" in output and '"kind": "demo"' not in output, output[-3000:]
    counters = json.loads((run_dir / "checkpoint" / "counters.json").read_text())
    assert counters["online_received"] == 100  # 60 + the 40 the budget had left
    resumed_summary = json.loads((run_dir / "summary.json").read_text())
    assert resumed_summary["demo_episodes"] == 1 and resumed_summary["episodes"] > summary["episodes"]
    episodes = recorded_episodes(run_dir)  # a loaded recorder leaves some to the actor's own store
    sources = [episode["source"] for episode in episodes]
    assert sources.count("demo") == 1  # the demonstration was not played again
    assert sum(episode["length"] for episode in episodes if episode["source"] == "online") == 100
    assert "train.env_steps 60 -> 100" in (run_dir / "config.yaml").read_text().splitlines()[0]


def started_draws(log: str) -> list[str]:
    """The ``draws`` of each ``started`` record the actor logged in a launch's output."""
    records = [json.loads(line[line.index("{") :]) for line in log.splitlines() if '"kind": "started"' in line]
    return [record["draws"] for record in records]
