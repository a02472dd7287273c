"""Nothing is lost while a node is down, with real nodes over DDS: the learner is killed (SIGKILL) and
restarted, the recorder is killed and restarted, and at the end every transition the actor sent was
ingested by the learner exactly once and every episode it played is in the recorder's store or the
actor's own store."""

import json
import re

import pytest

from tests.conftest import require
from tests.ros.graph_helpers import STATE_RATE_HZ, Graph, Watcher


@pytest.mark.slow
def test_a_learner_killed_for_seconds_and_a_recorder_killed_lose_nothing(tmp_path):
    rclpy = require("rclpy")
    from robot_rl.data import EpisodeStore

    run = tmp_path / "run"
    graph = Graph(
        tmp_path,
        [
            "task=reach",
            "task.episode_steps=15",
            f"train.run_dir={run}",
            "train.demo_episodes=2",
            "train.start_training=30",
            "train.checkpoint_every=60",
            "train.batch_size=32",
            "train.env_steps=500",  # ~270 played by the recorder's restart (2026-11-30: 255)
            "ros.eval_every_episodes=0",
            "ros.delivery.record_timeout=2.0",
            "ros.sim_time=false",
        ],
        safety_rate_hz=STATE_RATE_HZ,
    )  # restarts on the wall clock (sim time: tests/ros/test_twin.py)
    rclpy.init()
    watcher = Watcher(rclpy)

    def online_episodes_after(count: int, more: int, what: str) -> None:
        watcher.wait_for(
            lambda rs: len([r for r in rs[count:] if r["kind"] == "train"]) >= more, timeout=120, what=what
        )

    try:
        for name in ("sim_robot", "safety", "learner", "recorder", "actor"):
            graph.start(name)
        watcher.wait_for(lambda rs: (run / "checkpoint" / "counters.json").exists(), timeout=180, what="a checkpoint")
        online_episodes_after(len(watcher.records), 3, "training after the first checkpoint")
        graph.processes["learner"].kill()  # SIGKILL: everything since its checkpoint is gone from the learner
        graph.processes["learner"].wait()
        online_episodes_after(len(watcher.records), 4, "the actor going on without a learner")
        graph.start("learner")
        online_episodes_after(len(watcher.records), 3, "training with the restarted learner")
        graph.processes["recorder"].kill()
        graph.processes["recorder"].wait()
        online_episodes_after(len(watcher.records), 3, "the actor going on without a recorder")
        graph.start("recorder")
        assert graph.processes["actor"].wait(timeout=300) == 0  # the budget is spent
        graph.processes["learner"].send_signal(2)  # SIGINT: final checkpoint
        assert graph.processes["learner"].wait(timeout=30) == 0
        graph.processes["recorder"].send_signal(2)
        assert graph.processes["recorder"].wait(timeout=30) == 0
    finally:
        graph.stop()
        watcher.node.destroy_node()
        rclpy.shutdown()
    actor_log = graph.log("actor")
    sent = int(re.search(r"(\d+) transitions sent", actor_log).group(1))
    delivery = json.loads((run / "checkpoint" / "counters.json").read_text())["delivery"]
    assert "resumed from" in graph.log("learner")
    assert list(delivery["received"].values()) == [sent]  # the learner has the actor's last transition ...
    assert delivery["ingested"] == sent  # ... and each one exactly once (live steps that overtook the resend waited)
    played = int(re.search(r"(\d+) episodes in", actor_log).group(1))
    uids = set()
    for store in (run / "episodes.zarr", run / "actor_episodes.zarr"):
        if (store / "zarr.json").exists():
            opened = EpisodeStore.open(store)
            uids |= {opened.episode_attrs(name)["uid"] for name in opened.episode_names()}
    assert (run / "actor_episodes.zarr").exists()  # the recorder was down for a while: the actor kept episodes
    assert len(uids) == played  # every episode is on disk, the last one (cut short by the budget) too
    print(f"{sent} transitions sent, all ingested once; {len(uids)} episodes on disk for {played} played")
