"""One scenario through the three ways of running a training run, which share one run loop
(:class:`robot_rl.runtime.run_loop.Run`): ``robot-rl train`` in one process, the Ray fleet's driver with one actor,
and the learner node over DDS fed the transitions ``robot-rl train`` recorded. Each keeps the same counters, evaluates
on the same rule (every ``train.eval_every`` online steps at an episode's end, a final one when the budget is spent;
the learner node has no env and does not evaluate) and checkpoints on the same rule (every
``train.checkpoint_every`` online steps, and a final one holding every step counted)."""

from __future__ import annotations

import json
import re
import time

from robot_rl.core.composed_config import load_config
from robot_rl.core.folders import latest
from robot_rl.runtime import run_loop
from robot_rl.runtime.run_loop import EvalSchedule
from tests.conftest import require
from tests.ros.graph_helpers import Graph

EVERY_EVAL, EVERY_CHECKPOINT, BUDGET = 60, 70, 200
SCENARIO = [
    *("task=reach", "task.episode_steps=20", "seed=5", "agent.hidden=[64,64]"),
    *(f"train.env_steps={BUDGET}", "train.demo_episodes=2", "train.start_training=40", "train.batch_size=16"),
    *(f"train.eval_every={EVERY_EVAL}", "train.eval_episodes=1", "train.final_eval_episodes=2"),
    *(f"train.checkpoint_every={EVERY_CHECKPOINT}", "train.deterministic=true"),
]
CHECKPOINT_LINE = re.compile(r"checkpoint \((\w+)\): (\d+) updates, (\d+) online transitions")


def checkpoint_state(run_dir) -> dict:
    return json.loads((latest(run_dir / "checkpoint") / "counters.json").read_text())


def evaluation_points(ends: list[int]) -> list[int]:
    """Where the evaluation rule evaluates a run whose online episodes ended at ``ends`` online steps."""
    schedule = EvalSchedule(EVERY_EVAL)
    return [end for end in ends if schedule.due(end, end >= BUDGET)]


def due_checkpoint_points(ends: list[int]) -> list[int]:
    """Where the checkpoint rule checkpoints a run whose online episodes ended at ``ends`` online steps."""
    points, last = [], 0
    for end in ends:
        if end - last >= EVERY_CHECKPOINT:
            points.append(end)
            last = end
    return points


def follows_the_checkpoint_rule(points: list[tuple[str, int]], total: int) -> None:
    """Due checkpoints each ``train.checkpoint_every`` online steps or more after the last, then the final one."""
    last = 0
    for reason, steps in points[:-1]:
        assert reason == "due" and steps - last >= EVERY_CHECKPOINT, points
        last = steps
    assert points[-1] == ("final", total), points


def test_train_the_fleet_and_the_learner_node_share_one_run_loop(tmp_path, monkeypatch):
    rclpy = require("rclpy")
    require("ray")
    from robot_rl.data import EpisodeStore
    from robot_rl.data.transition import stored_transitions
    from robot_rl.data.wire import weight_shapes
    from robot_rl.ros.links.transport import RosActorLink
    from robot_rl.ros.plumbing.delivery import Outbox
    from robot_rl.runtime.fleet import train_fleet
    from robot_rl.runtime.session import make_agent
    from robot_rl.runtime.train import train

    checkpoints: dict[str, list[tuple[str, int]]] = {}  # run folder name -> (reason, online steps) per checkpoint
    checkpoint = run_loop.Run.checkpoint

    def recorded(run, reason: str) -> None:
        checkpoints.setdefault(run.learning.run_dir.name, []).append((reason, run.counters.env_steps))
        checkpoint(run, reason)

    monkeypatch.setattr(run_loop.Run, "checkpoint", recorded)
    summaries = {
        "train": train(load_config([*SCENARIO, f"train.run_dir={tmp_path / 'train'}"])),
        "fleet": train_fleet(
            load_config([*SCENARIO, "fleet=ray", "fleet.actors=1", f"train.run_dir={tmp_path / 'fleet'}"])
        ),
    }

    # the learner node, fed over DDS what robot-rl train recorded (demonstrations, then its online episodes)
    store = EpisodeStore.open(tmp_path / "train" / "episodes.zarr")
    stream = [
        transition
        for name in store.episode_names()
        for transition in stored_transitions(store.read_episode(name), store.episode_attrs(name)["uid"])
    ]
    trained = checkpoint_state(tmp_path / "train")
    node_config = [*SCENARIO, f"train.run_dir={tmp_path / 'node'}", "ros.delivery.backfill=false"]
    shapes = {key: value.shape for key, value in stream[0].obs.items()}
    policy = make_agent(load_config(node_config), shapes, len(stream[0].action), seed=5).policy_state()
    graph = Graph(tmp_path, node_config, "learner_only")
    rclpy.init()
    node = rclpy.create_node("robot_rl_actor")
    try:
        graph.start("learner")
        outbox = Outbox("actor-run", memory_limit=2**26, record_timeout=60.0, spill=lambda _: None, for_recorder=False)
        actor = RosActorLink(node, expected_weights=weight_shapes(policy), outbox=outbox)
        assert actor.wait_for_subscribers(["robot_rl_learner"], timeout=60.0) == []
        for start in range(0, len(stream), 16):
            actor.send_transitions(stream[start : start + 16])
        deadline = time.monotonic() + 120.0
        done = (trained["online_received"], trained["update_calls"])
        while (actor.learner_progress().online_received, actor.learner_progress().update_calls) != done:
            assert time.monotonic() < deadline, f"the learner node is at {actor.learner_progress()}, not {done}"
            rclpy.spin_once(node, timeout_sec=0.05)
    finally:
        graph.stop()  # SIGINT: its final checkpoint
        node.destroy_node()
        rclpy.shutdown()
    lines = CHECKPOINT_LINE.findall(graph.log("learner"))
    checkpoints["node"] = [(reason, int(online)) for reason, _, online in lines]

    states = {way: checkpoint_state(tmp_path / way) for way in ("train", "fleet", "node")}
    # counters: the same fields everywhere; the learner node's are robot-rl train's, which made its transitions
    assert len({frozenset(state["counters"]) for state in states.values()}) == 1
    for way in ("train", "node"):
        assert states[way]["online_received"] == states[way]["counters"]["env_steps"] == BUDGET
    assert states["node"]["update_calls"] == states["train"]["update_calls"] > 0
    assert states["fleet"]["counters"]["env_steps"] == states["fleet"]["online_received"] >= BUDGET  # whole episodes
    for way in ("train", "fleet"):
        summary, counters = summaries[way], states[way]["counters"]
        assert (summary["env_steps"], summary["episodes"], summary["demo_episodes"]) == (
            counters["env_steps"],
            counters["episodes"],
            counters["demo_episodes_done"],
        )
        assert counters["demo_episodes_done"] == 2 and counters["episodes"] == 2 + len(counters["episode_log"])

        # evaluations: at the episode ends the rule names, one episode each, two at the end
        ends = [episode["env_steps"] for episode in counters["episode_log"]]
        history = counters["history"]
        assert [entry["env_steps"] for entry in history] == evaluation_points(ends), (way, ends)
        assert [entry["episodes"] for entry in history] == [1] * (len(history) - 1) + [2]

        # checkpoints: due at the episode ends the rule names (two or more in 200 steps), then the final one
        due = due_checkpoint_points(ends)
        assert [steps for _, steps in checkpoints[way][:-1]] == due and len(due) >= 2, (way, ends)
    assert states["node"]["counters"]["history"] == []  # no env, no evaluation
    for way in ("train", "fleet", "node"):
        follows_the_checkpoint_rule(checkpoints[way], states[way]["counters"]["env_steps"])
