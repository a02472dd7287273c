"""A learner on a GPU box without the simulator: ``robot-rl launch learner_only`` with the task spec of the cell's
demonstrations starts, trains nothing yet and checkpoints on Ctrl-C, and nothing in it imports MuJoCo."""

import os
import signal
import subprocess
import sys
import time

import pytest

from robot_rl.core.composed_config import load_config
from robot_rl.data import EpisodeStore
from robot_rl.runtime.envs import task_spec
from tests.conftest import require
from tests.data.test_task_spec import NO_SIMULATOR


@pytest.mark.slow
def test_learner_only_runs_without_mujoco_from_the_spec_of_the_cells_demonstrations(tmp_path):
    require("rclpy")
    demos = EpisodeStore.create(tmp_path / "demos.zarr", task_spec(load_config(["task=reach"]).task).metadata())
    box = tmp_path / "box"  # what the box's interpreter starts with: a simulator that is not installed
    box.mkdir()
    (box / "sitecustomize.py").write_text(NO_SIMULATOR)
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(box), os.environ.get("PYTHONPATH", "")])}
    launch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "robot_rl.cli.main",
            "launch",
            "learner_only",
            "task=reach",
            f"train.run_dir={run_dir}",
            f"ros.task_spec={demos.path}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "config.yaml").exists() and launch.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2.0)  # the learner publishes its first weights and starts its thread
        os.killpg(launch.pid, signal.SIGINT)
        output, _ = launch.communicate(timeout=60)
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.communicate()
    assert launch.returncode == 130, output[-4000:]  # stopped by Ctrl-C, as an operator stops it
    assert "IMPORTED" not in output, output[-4000:]  # no process of the launch tried to import the simulator
    assert "checkpoint (final)" in output and (run_dir / "checkpoint").is_dir(), output[-4000:]
