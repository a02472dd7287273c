"""The robot-rl command: verbs, config composition and one-line errors for bad input."""

import subprocess
import sys

import pytest

from robot_rl.cli import main
from robot_rl.composed_config import load_config, task_names


def test_task_configs_are_listed():
    assert {"reach", "pick_cube", "peg_insert", "robosuite_lift", "robosuite_stack", "robosuite_door"} <= set(
        task_names()
    )


def test_overrides_reach_the_task_config():
    cfg = load_config(["task=reach", "task.control_rate_hz=20", "task.cameras=[front]"])
    assert cfg.task.name == "reach" and cfg.task.control_rate_hz == 20 and list(cfg.task.cameras) == ["front"]


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            ["task=stack_blocks"],
            "task='stack_blocks' is not allowed: expected one of gym, peg_insert, pick_cube, pick_cube_hazard, pick_cube_sudden, reach",
        ),
        (["task.cameras=[front,top]"], "task.cameras='top' is not allowed: expected names from front, wrist"),
        (["task.image_size=0"], "task.image_size=0 is not allowed: expected a positive integer"),
        (["task.image_size=[64,-8]"], "task.image_size=[64, -8] is not allowed"),
        (["task.control_rate_hz=0"], "task.control_rate_hz=0 is not allowed: expected a positive number"),
        (["task.control_rate_hz=-5"], "task.control_rate_hz=-5 is not allowed: expected a positive number"),
        (["collect.episodes=0"], "collect.episodes=0 is not allowed: expected a positive integer"),
        (["agent=ppo"], "agent='ppo' is not allowed: expected one of cqn, cqn_as, sac"),
    ],
)
def test_bad_input_gives_one_line_error_naming_key_and_allowed_values(overrides, expected, capsys, tmp_path):
    code = main(["collect", f"collect.out={tmp_path / 'demos.zarr'}", *overrides])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("robot-rl: error: ")
    assert expected in err


def test_unknown_verb(capsys):
    assert main(["fly"]) == 2
    assert "verb='fly' is not allowed: expected one of train, pretrain, eval, collect" in capsys.readouterr().err


def test_console_script_runs_as_a_separate_process():
    result = subprocess.run(
        [sys.executable, "-m", "robot_rl.cli", "config", "task=peg_insert"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "name: peg_insert" in result.stdout and "id: robot_rl/PegInsert-v0" in result.stdout
