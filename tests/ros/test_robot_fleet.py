"""Several robots over ROS 2 (``robot-rl launch sim_train fleet.robots=[left,right]``): a namespaced sim robot,
safety node, recorder and actor per robot, one learner subscribed to all; a robot that drops out does not stall
the others."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from robot_rl.cli.graph import graph_nodes
from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from tests.conftest import require

EPISODE_STEPS, STEPS_PER_ROBOT = 10, 60
SCENARIO = [
    "task=reach",
    f"task.episode_steps={EPISODE_STEPS}",
    "train.demo_episodes=2",
    f"train.env_steps={2 * STEPS_PER_ROBOT}",
    "train.start_training=10",
    "train.batch_size=16",
    "train.eval_every=100000",
    "train.checkpoint_every=100000",
    "ros.eval_every_episodes=0",
    "fleet.robots=[left,right]",
]


def test_each_robot_gets_a_namespace_seed_share_and_stores_and_the_learner_is_shared(tmp_path):
    cfg = load_config(["graph=sim_train", *SCENARIO, "seed=3", f"train.run_dir={tmp_path}"])
    nodes = {node.name: node for node in graph_nodes(cfg)}
    assert sorted(nodes) == sorted(
        [
            "learner",
            *(
                f"{robot}/{name}"
                for robot in ("left", "right")
                for name in ("sim_robot", "safety", "recorder", "actor")
            ),
        ]
    )
    assert (
        not nodes["learner"].sim_time and nodes["learner"].robot is None
    )  # on the wall clock: every robot has a clock
    left = nodes["left/actor"].command([])
    assert left[left.index("--ros-args") :] == ["--ros-args", "-r", "__ns:=/left", "-r", "/clock:=/left/clock"]
    assert nodes["right/sim_robot"].sim_time and nodes["right/sim_robot"].clock
    right = nodes["right/actor"].command(["train.env_steps=1000"])
    assert right.index("train.env_steps=1000") < right.index(f"train.env_steps={STEPS_PER_ROBOT}")  # its share wins
    assert {"seed=2003", "train.demo_episodes=1", f"ros.recorder.store={tmp_path}/right/episodes.zarr"} <= set(right)
    assert f"ros.delivery.actor_store={tmp_path}/right/actor_episodes.zarr" in right
    ur5e = {node.name: node for node in graph_nodes(load_config(["graph=real_train", "robot=ur5e", *SCENARIO]))}
    assert "-r" in ur5e["left/bridge"].ros_args and "__ns:=/left" in ur5e["left/bridge"].ros_args
    assert "franka_robot_state_broadcaster/current_pose:=tcp_pose_broadcaster/pose" in ur5e["left/safety"].ros_args
    for bad in ("[left,left]", "[1left]", "[left/arm]", "[]"):
        with pytest.raises(ConfigError, match="fleet.robots"):
            graph_nodes(load_config(["graph=sim_train", f"fleet.robots={bad}"]))


def episodes(store) -> int:
    return len(list((store / "episodes").glob("episode_*"))) if store.exists() else 0


@pytest.mark.slow
def test_two_robots_feed_one_learner_and_one_that_drops_out_does_not_stall_the_other(tmp_path):
    require("rclpy")
    run_dir = tmp_path / "run"
    process = subprocess.Popen(
        [sys.executable, "-m", "robot_rl.cli.main", "launch", "sim_train", *SCENARIO, f"train.run_dir={run_dir}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True)
    reader.start()
    killed = False
    deadline = time.monotonic() + 300
    try:
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            if not killed and episodes(run_dir / "left" / "episodes.zarr") >= 2:  # its demo and an online episode
                pid = next(
                    int(m.group(1)) for line in lines if (m := re.search(r"started left/sim_robot \(pid (\d+)\)", line))
                )
                os.kill(pid, signal.SIGKILL)  # the left arm's driver dies
                killed = True
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            process.wait(timeout=30)
            right = [line for line in lines if not line.startswith("[left/")]  # the robot that should have gone on
            pytest.fail("the graph did not end; the lines of the learner and robot right:\n" + "".join(right[-60:]))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    reader.join(timeout=10)
    output = "".join(lines)
    assert killed, output[-3000:]
    assert "left/sim_robot exited with code -9; stopping robot left" in output, output[-3000:]
    assert "every robot has ended; stopping the graph" in output
    assert process.returncode != 0  # a robot that ended on a failure is the graph's exit code
    done = re.search(r"\[right/actor\] .*actor done: (\d+) env steps", output)
    assert done is not None and int(done.group(1)) == STEPS_PER_ROBOT, output[-3000:]  # right played its whole share
    assert "Traceback" not in output, output[-3000:]

    robots = json.loads((run_dir / "robots.json").read_text())  # the learner's tally, per robot
    assert robots["right"]["steps"] == STEPS_PER_ROBOT and robots["right"]["demo_episodes"] == 1
    assert 0 < robots["left"]["steps"] < STEPS_PER_ROBOT and robots["left"]["demo_episodes"] == 1
    assert re.search(r"\[learner\] .*robot right: \d+ episodes .*, 60 online steps", output)
    counters = json.loads((run_dir / "checkpoint" / "counters.json").read_text())
    assert counters["online_received"] == robots["left"]["steps"] + robots["right"]["steps"]
    for robot in ("left", "right"):  # each robot's recorder has its own store, in its own namespace
        assert episodes(run_dir / robot / "episodes.zarr") >= 2
    assert f"{run_dir}/right/episodes.zarr" in output and not (run_dir / "episodes.zarr").exists()


@pytest.mark.slow
def test_two_robots_learn_reach_together_through_one_learner(tmp_path):
    require("rclpy")
    from tests.conftest import LEARNING_REACH
    from tests.ros.graph_helpers import run_python

    run_dir = tmp_path / "run"
    trained_as = [o for o in LEARNING_REACH if o.startswith(("task", "agent.hidden"))]  # what eval must build
    result = run_python(
        *("-m", "robot_rl.cli.main", "launch", "sim_train", *LEARNING_REACH, "fleet.robots=[left,right]"),
        # a budget of 3,000 steps (at 2,000 the final policy once scored 0.50), which each robot ends at its first
        # evaluation that reaches 0.9 (both did after 20 episodes, 260-280 steps, in a try on 2 cores)
        *("train.env_steps=3000", "ros.eval_every_episodes=20", "ros.eval_episodes=10", "train.stop_at_success=0.9"),
        f"train.run_dir={run_dir}",
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in output, output[-3000:]
    robots = json.loads((run_dir / "robots.json").read_text())
    for robot in ("left", "right"):  # train.env_steps=3000 shared: 1,500 each, unless its evaluation ended it
        reached = re.search(rf"\[{robot}/actor\].*reached train\.stop_at_success=0\.9: ending the run", output)
        assert 0 < robots[robot]["steps"] <= 1500 and (reached or robots[robot]["steps"] == 1500), robots
    assert [robots[r]["demo_episodes"] for r in ("left", "right")] == [5, 5], robots
    evaluation = run_python(
        *(
            "-m",
            "robot_rl.cli.main",
            "eval",
            *trained_as,
            f"eval.checkpoint={run_dir / 'checkpoint'}",
            "eval.episodes=20",
        ),
        timeout=300,
    )
    assert evaluation.returncode == 0, evaluation.stderr[-2000:]
    success = json.loads(evaluation.stdout)["success_rate"]
    print(f"two robots, one learner: final policy success {success:.2f}; per robot {robots}")
    assert success >= 0.7, (evaluation.stdout, robots)  # the policy learned from both robots' data
