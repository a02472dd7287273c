"""An actor node that dies is started again by the launch and goes on where it was (issue 71 item 2): its counts, its
draws and the learner's weights, the episode its death cut short kept by the recorder and counted once. Before, the
actor was the graph's required node: its death (kill -9, a crash) ended the whole session."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest

from benchmarks.common import launched_pids, stop_launch
from robot_rl.data import EpisodeStore
from tests.conftest import require
from tests.ros.test_cell_rehearsal import FaultWatcher, start_cell, start_session
from tests.ros.test_launch_and_teleop import run_stand_ins


def test_a_required_node_that_crashes_is_restarted_and_its_exit_0_still_ends_the_graph(tmp_path, monkeypatch):
    """The actor killed at its first start is started again (told so in ``RESTART_ENV``); its exit 0, its budget
    spent, then ends the graph. One that keeps crashing ends it after the restarts, with its code; the sim robot
    (``restart: false``) ends it at once (test_launch_and_teleop's sim-robot test)."""
    from robot_rl.cli import graph
    from robot_rl.ros.plumbing.node_main import RESTART_ENV

    monkeypatch.setattr(graph, "RESTART_BACKOFF", 0.2)
    starts = tmp_path / "actor_starts"
    actor = (  # killed at its first start, done at its second
        "import os, pathlib, signal, sys, time\n"
        f"path = pathlib.Path({str(starts)!r})\n"
        f"path.write_text((path.read_text() if path.exists() else '') + os.environ[{RESTART_ENV!r}] + ',')\n"
        f"if os.environ[{RESTART_ENV!r}] == '0':\n    os.kill(os.getpid(), signal.SIGKILL)\n"
        "time.sleep(0.5)\n"
    )
    code, log = run_stand_ins(tmp_path, {"actor": actor})
    assert code == 0 and starts.read_text() == "0,1,", log
    assert "actor exited with code -9; restarting it in 0.2 s (restart 1 of 3)" in log
    assert "actor exited with code 0; stopping the graph" in log

    (tmp_path / "actor_starts").unlink()
    code, log = run_stand_ins(tmp_path, {"actor": "import sys\nsys.exit(1)\n"})
    assert code == 1 and log.count("started actor") == 1 + graph.RESTARTS, log
    assert f"actor exited with code 1 after {graph.RESTARTS} restarts; stopping the graph" in log


@pytest.mark.slow
def test_an_actor_killed_mid_episode_on_the_cell_is_restarted_and_training_goes_on_where_it_was(tmp_path):
    """real_train on the emulated cell: the actor killed (SIGKILL) inside an episode is started again by the launch;
    it goes on from its actor state: the episode index and the online env steps continue (not from 0), its draws
    where its last finished episode left them (not the seed's first draws again), and the episode its death cut short
    is recorded as it is and counted once, by the learner as by the recorder."""
    rclpy = require("rclpy")
    from geometry_msgs.msg import PoseStamped

    cell, fifo = start_cell(tmp_path, "cell.publish_reward=true")  # the reward: the sim's truth, no classifier
    log_path = tmp_path / "graph.log"
    graph = start_session(tmp_path, fifo, "graph.reward=false", "graph.console=false", "task.cameras=[]")
    state_file = tmp_path / "run" / "actor_episodes.zarr.actor_state.json"
    rclpy.init()
    watcher = FaultWatcher(rclpy)
    actions: list[float] = []  # when the actor sent each command (monotonic s)
    watcher.node.create_subscription(PoseStamped, "/rl/action", lambda m: actions.append(time.monotonic()), 10)

    def records(kind: str) -> list[dict]:
        return [r for r in watcher.records if r["kind"] == kind]

    try:
        watcher.wait_for(lambda: len(records("train")) >= 2, 400, "two episodes")
        # inside the next episode (after its scene reset): its first step has been played, so its state says so
        resets = log_path.read_text().count("reset: ready in")
        watcher.wait_for(lambda: log_path.read_text().count("reset: ready in") > resets, 120, "the next scene reset")
        reset_done = time.monotonic()
        watcher.wait_for(lambda: len([a for a in actions if a > reset_done]) >= 3, 120, "the next episode's commands")
        watcher.wait_for(lambda: json.loads(state_file.read_text())["playing"] is not None, 60, "the episode kept")
        before = records("train")[-1]
        kept = json.loads(state_file.read_text())
        os.kill(launched_pids(log_path.read_text(), "actor")[-1], signal.SIGKILL)

        restarted = watcher.wait_for(
            lambda: next((r for r in records("started") if r["restart"] == 1), None), 180, "the actor started again"
        )
        assert "actor exited with code -9; restarting it in 1 s (restart 1 of 3)" in log_path.read_text()
        assert len(launched_pids(log_path.read_text(), "actor")) == 2
        first = next(r for r in records("started") if r["restart"] == 0)
        # counts go on: the cut episode is counted (the recorder keeps it), its steps are the learner's
        assert restarted["episode_cut"] is True and restarted["episode"] == kept["counters"]["episodes"] + 1
        assert restarted["episode"] > before["episode"] and restarted["env_steps"] >= before["env_steps"] > 0
        # draws go on from the last finished episode's, not from the seed's (the first start's)
        assert restarted["draws"] != first["draws"]
        after = watcher.wait_for(
            lambda: next((r for r in records("train") if r["episode"] > restarted["episode"]), None),
            300,
            "training on after the restart",
        )
        assert after["env_steps"] > restarted["env_steps"] and after["weights"] is not None
    finally:
        watcher.node.destroy_node()
        rclpy.shutdown()
        stop_launch(graph)
        stop_launch(cell)
        print(log_path.read_text()[-6000:])
    log = log_path.read_text()
    assert "restarted (restart 1): going on from" in log
    # the recorder kept the episode the death cut short, as it was; every episode is stored once
    cut = re.search(r"episode (\w+) of actor-\w+ recorded as it is: its actor is gone", log)
    assert cut, log[-3000:]
    store = EpisodeStore.open(tmp_path / "run" / "episodes.zarr")
    stored = {store.episode_attrs(name)["uid"]: store.episode_attrs(name) for name in store.episode_names()}
    assert len(stored) == len(store.episode_names()) and stored[cut.group(1)]["length"] >= 1
    # the learner counted it once, as every stored episode but the one the launch's stop cut (recorded, in no record)
    counted = json.loads((tmp_path / "run" / "checkpoint" / "counters.json").read_text())["counters"]
    assert len(stored) - 1 <= counted["episodes"] <= len(stored), (counted, len(stored))
