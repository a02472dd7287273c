"""One driver for every way of running: the same short scenario through ``robot-rl train`` (in one process) and
through ``robot-rl launch sim_train`` (the node graph, in sim time) counts the same online steps, ends with
learners that made the same updates (to the one an actor may run ahead, ``train.max_lag``), acts on weight versions
the learners published in order, and records episodes with the same sources, steps and metadata, each one the
learner also took.

What may differ, and why: the actions and observations themselves (the graph's arm runs behind the safety node's
hard layer: tests/ros/test_twin.py compares them step by step), the version of the weights each episode was
played with (in the graph the actor runs up to ``train.max_lag`` steps ahead of the learner process), and the
reset's ``seed`` in the episode metadata (in the graph the sim robot node picks its resets).
"""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import require
from tests.ros.graph_helpers import launch

DEMOS, ONLINE_STEPS, EPISODE_STEPS, START, WEIGHTS_EVERY, MAX_LAG = 2, 35, 10, 10, 5, 1  # the budget cuts an episode
SCENARIO = [
    "task=reach",
    f"task.episode_steps={EPISODE_STEPS}",
    f"train.demo_episodes={DEMOS}",
    f"train.env_steps={ONLINE_STEPS}",
    f"train.start_training={START}",
    f"train.weights_every={WEIGHTS_EVERY}",
    f"train.max_lag={MAX_LAG}",  # the actors keep pace with their learners: the run ends with <= 1 update due
    "train.batch_size=16",
    "train.eval_every=100000",
    "train.final_eval_episodes=1",
    "train.checkpoint_every=100000",
    "ros.eval_every_episodes=0",
]


def recorded(store_path) -> list[dict]:
    from robot_rl.data import EpisodeStore

    store = EpisodeStore.open(store_path)
    return [store.episode_attrs(name) for name in store.episode_names()]


def checkpoint_state(run_dir) -> dict:
    return json.loads((run_dir / "checkpoint" / "counters.json").read_text())


@pytest.mark.slow
def test_train_and_the_sim_train_graph_count_learn_and_record_alike(tmp_path):
    require("rclpy")
    from robot_rl.core.composed_config import load_config
    from robot_rl.runtime.train import train

    local = tmp_path / "in_process"
    summary = train(load_config([*SCENARIO, f"train.run_dir={local}"]))

    graph = tmp_path / "graph"
    result = launch(
        "sim_train",
        *SCENARIO,
        f"train.run_dir={graph}",
        "ros.sim_time=true",
        "ros.progress_every=0.01",  # a line at each episode record: a fast machine ran the online part in 1 s
        timeout=400,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    done = re.search(r"actor done: (\d+) env steps, (\d+) episodes", output)
    assert done is not None, output[-3000:]

    stores = {"in_process": recorded(local / "episodes.zarr"), "graph": recorded(graph / "episodes.zarr")}
    # step counts: the actors' (episodes end early when the arm reaches the target)
    assert summary["env_steps"] == int(done.group(1)) == ONLINE_STEPS
    assert (summary["episodes"], int(done.group(2))) == (len(stores["in_process"]), len(stores["graph"])), output[
        -3000:
    ]
    states = {"in_process": checkpoint_state(local), "graph": checkpoint_state(graph)}
    for state in states.values():  # weight versions: the same updates made
        assert state["online_received"] == ONLINE_STEPS
        assert ONLINE_STEPS - START - MAX_LAG <= state["update_calls"] <= ONLINE_STEPS - START
    in_process_versions = [e["weights"] for e in states["in_process"]["counters"]["episode_log"]]
    assert in_process_versions == sorted(in_process_versions)
    assert all(version % WEIGHTS_EVERY == 0 and version <= ONLINE_STEPS - START for version in in_process_versions)
    graph_versions = [
        json.loads(line[line.index("{") :])["weights"]
        for line in output.splitlines()
        if '"kind": "train"' in line and "{" in line
    ]
    # an online episode a stalled stream cut short (loaded cores) is recorded as it is, with no "train" record
    pauses = output.count('"kind": "paused"')
    assert 0 <= len(stores["graph"]) - DEMOS - len(graph_versions) <= pauses, output[-3000:]
    assert graph_versions == sorted(graph_versions) and all(v % WEIGHTS_EVERY == 0 for v in graph_versions)
    assert max(graph_versions) > 0  # the actor played the weights the learner published once it had updated
    # the learner's progress while it ran, robot-rl train's bar as lines (it printed nothing until its final checkpoint)
    during = output[: output.index("checkpoint (final)")]
    lines = re.findall(
        rf"\[learner\] .* train reach: +\d+% (\d+)/{ONLINE_STEPS} .*, episodes=\d+, updates=(\d+), ", during
    )
    assert len(lines) >= 2 and [int(steps) for steps, _ in lines] == sorted(int(steps) for steps, _ in lines), lines
    # the run's counts from the actor's records: demonstrations and online episodes, not 0 (issue 73)
    counted = states["graph"]["counters"]
    assert counted["demo_episodes_done"] == DEMOS and counted["episodes"] > DEMOS, counted

    # recorded episodes: the same sources, steps and metadata, and exactly the episodes each learner took, but for a
    # demonstration a stalled stream left (on loaded cores): played again, the one left is abandoned, and the
    # actor's log names it (the learner took its steps, no store records it)
    abandoned = {"in_process": set(), "graph": set(re.findall(r"demonstration (\w+) abandoned", output))}
    for name, attrs in stores.items():
        assert [a["source"] for a in attrs] == ["demo"] * DEMOS + ["online"] * (len(attrs) - DEMOS), name
        assert sum(a["length"] for a in attrs[DEMOS:]) == ONLINE_STEPS, name
        assert all(0 < a["length"] <= EPISODE_STEPS for a in attrs), name
        took = sorted({a["uid"] for a in attrs} | abandoned[name])
        assert took == states[name]["delivery"]["episodes"], (name, abandoned[name])
        assert [a["interventions"] for a in attrs[:DEMOS]] == [a["length"] for a in attrs[:DEMOS]], name
    keys = {name: set(attrs[0]) - {"seed"} for name, attrs in stores.items()}
    assert keys["in_process"] == keys["graph"]
    assert {"interventions", "filter_interventions", "violations", "success", "return"} <= keys["graph"]
