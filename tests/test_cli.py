"""The robot-rl command: verbs, config composition and one-line errors for bad input."""

import subprocess
import sys

import numpy as np
import pytest

from robot_rl.cli.main import main
from robot_rl.core.composed_config import load_config, task_names


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
            "task='stack_blocks' is not allowed: expected one of gym, peg_insert, peg_insert_reset, pick_cube, pick_cube_hazard, pick_cube_reset, pick_cube_sudden, reach",
        ),
        (["task.cameras=[front,top]"], "task.cameras='top' is not allowed: expected names from front, wrist"),
        (["task.image_size=0"], "task.image_size=0 is not allowed: expected a positive integer"),
        (["task.image_size=[64,-8]"], "task.image_size=[64, -8] is not allowed"),
        (["task.control_rate_hz=0"], "task.control_rate_hz=0 is not allowed: expected a positive number"),
        (["task.control_rate_hz=-5"], "task.control_rate_hz=-5 is not allowed: expected a positive number"),
        (["collect.episodes=0"], "collect.episodes=0 is not allowed: expected a positive integer"),
        (["agent=ppo"], "agent='ppo' is not allowed: expected one of cqn, cqn_as, open_loop, sac, sac_lagrangian"),
        # every group lists its options (old code: raw Hydra text, "Could not find 'exploration/gsd'")
        (["exploration=gsd"], "exploration='gsd' is not allowed: expected one of bang_bang, gaussian, gsde"),
        (["randomization=heldot"], "randomization='heldot' is not allowed: expected one of actuation, compliance"),
        (["fleet=rey"], "fleet='rey' is not allowed: expected one of local, ray"),
    ],
)
def test_bad_input_gives_one_line_error_naming_key_and_allowed_values(overrides, expected, capsys, tmp_path):
    code = main(["collect", f"collect.out={tmp_path / 'demos.zarr'}", *overrides])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("robot-rl: error: ")
    assert expected in err


def test_every_config_folder_with_options_is_a_checked_group():
    from robot_rl.core.composed_config import config_groups

    assert config_groups() == ["agent", "exploration", "fleet", "graph", "randomization", "robot", "ssl", "task"]
    assert load_config(["~robot"]).task.name == "pick_cube"  # removing a group's default is no typo


def test_the_root_config_is_short_and_its_parts_are_always_in():
    """Issue 53: configs/config.yaml holds the defaults list and the seed; each part of the stack's keys lives in
    configs/settings/<part>.yaml, always composed in (no group: ``settings=...`` is no option) and commented."""
    from importlib import resources

    from robot_rl.core.composed_config import key_comments, root_config_files

    configs = resources.files("robot_rl.configs")
    assert len((configs / "config.yaml").read_text().splitlines()) <= 120
    assert root_config_files() == [
        "config.yaml",
        *(f"settings/{part}.yaml" for part in ("data", "ros", "safety", "tools", "train")),
    ]
    cfg = load_config([])
    for key in ("train", "init", "collect", "data", "safety", "robot", "ros", "console", "classifier", "cell", "eval"):
        assert key in cfg, key
    comments = key_comments()
    assert comments["train.env_steps"].startswith("online env steps")
    assert comments["robot.limits.max_force"].startswith("N of external force")
    assert load_config(["train.env_steps=123"]).train.env_steps == 123


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_verb_has_a_help_listing_its_main_keys(flag, capsys):
    """Old code: ``robot-rl train --help`` was a Hydra lexer error (exit 2)."""
    assert main(["train", flag]) == 0
    from robot_rl.cli.main import VERB_KEYS, VERBS

    for argv in [[verb, flag] for verb in VERBS] + [["data", "show", flag], ["launch", "sim_train", flag]]:
        assert main(argv) == 0, argv
        captured = capsys.readouterr()
        assert captured.err == "" and captured.out.startswith(f"robot-rl {argv[0]}"), argv
        assert "robot-rl config [KEY=VALUE ...]" in captured.out
        for key in VERB_KEYS[argv[0]]:
            assert f"\n  {key.removeprefix('data.')}=" in captured.out, (argv, key)
    assert main(["train", "train.env_steps=300", "task=reach", "--help"]) == 0
    out = capsys.readouterr().out
    assert "train.env_steps=300 " in out and "task=reach " in out and "online env steps (demos not counted)" in out


def test_unknown_verb(capsys):
    assert main(["fly"]) == 2
    assert "verb='fly' is not allowed: expected one of train, pretrain, eval, collect" in capsys.readouterr().err


def test_console_script_runs_as_a_separate_process():
    result = subprocess.run(
        [sys.executable, "-m", "robot_rl.cli.main", "config", "task=peg_insert"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "name: peg_insert" in result.stdout and "id: robot_rl/PegInsert-v0" in result.stdout


class _Still:
    """A one-action agent and a two-step env that renders grey frames: enough for evaluate()."""

    def begin_episode(self):
        pass

    def act(self, obs, explore):
        return np.zeros(2)

    def executed(self, action):
        pass

    unwrapped = None

    def reset(self, seed):
        self.t = 0
        return {}, {}

    def step(self, action):
        self.t += 1
        return {}, 0.0, self.t == 2, False, {"success": True}

    def render(self):
        return np.full((16, 24, 3), 128, np.uint8)


def test_eval_says_where_its_video_went_and_never_overwrites_one(tmp_path):
    """Old code: no ``video`` key in the summary, an existing file was overwritten."""
    import cv2

    from robot_rl.core.config import ConfigError
    from robot_rl.runtime.evaluate import evaluate

    still = _Still()
    result = evaluate(still, still, episodes=3, seed=0, video=tmp_path / "eval.mp4")
    assert result["video"] == str(tmp_path / "eval.mp4")
    assert int(cv2.VideoCapture(result["video"]).get(cv2.CAP_PROP_FRAME_COUNT)) == 6
    before = (tmp_path / "eval.mp4").read_bytes()
    with pytest.raises(ConfigError, match="eval.video=.*eval.mp4 exists"):
        evaluate(still, still, episodes=1, seed=0, video=tmp_path / "eval.mp4")
    assert (tmp_path / "eval.mp4").read_bytes() == before
    assert "video" not in evaluate(still, still, episodes=1, seed=0)
