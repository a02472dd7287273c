"""``robot.limits``: the hard layer's limits as configuration, per second, checked at start-up."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robot_rl.core.composed_config import group_options, load_config
from robot_rl.core.config import ConfigError
from robot_rl.safety import SafetyLimits
from robot_rl.safety.robot_limits import safety_limits, workspace_of


def limits_of(*overrides: str) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(load_config(list(overrides)).robot.limits, resolve=True)


def test_the_default_limits_at_500_hz_are_the_hard_layers_defaults():
    assert safety_limits(limits_of(), 500.0) == SafetyLimits()


@pytest.mark.parametrize("robot", group_options("robot"))
def test_every_robot_config_has_its_limits_and_the_speeds_do_not_depend_on_the_rate(robot):
    cfg = load_config([f"robot={robot}"])
    rate = float(cfg.robot.safety[cfg.robot.safety.index("--rate-hz") + 1])
    limits = safety_limits(limits_of(f"robot={robot}"), rate)
    assert limits.state_timeout == cfg.robot.limits.state_timeout
    # per tick at the robot's rate: the same metres per second at 500 Hz and at 1 kHz (a per-tick limit allowed
    # twice the speed at 1 kHz)
    assert limits.max_translation_step * rate == pytest.approx(cfg.robot.limits.max_speed)
    assert limits.max_rotation_step * rate == pytest.approx(cfg.robot.limits.max_rotation_rate)
    if cfg.robot.arm == "franka":
        assert cfg.robot.limits.max_rotation_rate == 2.5 and rate == 1000


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("robot.limits.max_speed=-1", "max_speed"),
        ("robot.limits.max_force=nan", "max_force"),
        ("robot.limits.command_timeout=0", "command_timeout"),
        ("robot.limits.cone_half_angle=2.0", "cone_half_angle"),
        ("robot.limits.cone_axis=[0,0,0]", "cone_axis"),
        ("robot.limits.workspace=[[0.7,0,0],[0.3,0.3,0.3]]", "workspace"),
        ("robot.limits.workspace=[0.3,0.3,0.3]", "workspace"),
        ("robot.limits.max_speed=fast", "max_speed"),
        ("+robot.limits.max_sped=1.0", "max_sped"),
        ("~robot.limits.state_timeout", "state_timeout"),
        ("robot.limits.max_lead=-0.01", "max_lead"),
    ],
)
def test_a_bad_limit_is_named(override, key):
    with pytest.raises(ConfigError, match=rf"robot\.limits\.{key}"):
        safety_limits(limits_of(override), 500.0)


def test_the_retreat_may_be_zero_and_the_axis_is_normalised():
    limits = safety_limits(limits_of("robot.limits.retreat_distance=0", "robot.limits.cone_axis=[0,0,-2]"), 500.0)
    assert limits.retreat_distance == 0 and np.allclose(limits.unit_cone_axis, [0, 0, -1])
    assert math.isclose(limits.cone_half_angle, 0.8)


def test_the_workspace_is_the_box_of_the_limits():
    box = workspace_of(limits_of("robot.limits.workspace=[[0.3,-0.2,0.05],[0.6,0.2,0.4]]"))
    assert box.tolist() == [[0.3, -0.2, 0.05], [0.6, 0.2, 0.4]]


def test_a_launch_with_a_bad_limit_stops_before_any_node_starts(tmp_path, capsys, monkeypatch):
    from robot_rl.cli.main import main

    monkeypatch.chdir(tmp_path)  # a launch writes its run folder here: nothing may appear
    code = main(["launch", "sim_train", "robot.limits.max_speed=-1", "task=reach"])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("robot-rl: error: robot.limits.max_speed=-1"), lines[0]
    assert list(tmp_path.iterdir()) == []
