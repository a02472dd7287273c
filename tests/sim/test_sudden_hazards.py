"""Hazards that appear between two policy steps (sim/constraints.py, sim/disturbances.py): a keep-out zone that slides
on the sim clock, shoves on the hand, a fragile object; and the fast loop reacting to a shove within the step."""

import numpy as np
import pytest

from robot_rl.cli.main import load_config
from robot_rl.core.config import ConfigError
from robot_rl.runtime.envs import fast_loop_of, make_env, make_expert
from robot_rl.safety import Violation
from robot_rl.sim.constraints import Constraint
from robot_rl.sim.disturbances import Pushes
from robot_rl.sim.fast_critic_loop import attach_fast_loop

HOLD = np.array([0.0, 0.0, 0.0, -1.0])  # no TCP step, gripper open


def env_of(*overrides: str, task: str = "pick_cube"):
    return make_env(load_config([f"task={task}", *overrides]).task)


def test_the_keep_out_zone_slides_on_the_sim_clock_into_the_arms_path():
    env = env_of(
        "+task.constraints.keep_out=[[0.30,-0.1,0.15],[0.42,0.1,0.35]]",
        "+task.constraints.keep_out_velocity=[0.2,0.0,0.0]",
        "+task.constraints.keep_out_period=2.0",
    )
    env.reset(seed=0)
    task = env.unwrapped
    assert task.violation() & Constraint.KEEP_OUT == 0  # t = 0: the zone ends short of the TCP (x 0.45 +- 0.02)
    low, high = task.constraint_monitor.keep_out_at(0.5)  # a quarter period: 0.2 m/s * 2 s / (2 pi) further in x
    assert low[0] == pytest.approx(0.30 + 0.4 / (2 * np.pi)) and high[1] == pytest.approx(0.1)
    task.data.time = 0.5
    assert task.violation() & Constraint.KEEP_OUT  # the arm did not move: the zone came to it
    env.close()


def test_pushes_arrive_at_the_configured_rate_and_move_the_hand_within_a_step():
    pushes = Pushes.from_config({"force": 50.0, "duration": 0.05, "per_second": 4.0})
    drawn = pushes.schedule(np.random.default_rng(0), 0.0, 100.0)
    assert 300 < len(drawn) < 500  # 4 per second over 100 s
    assert all(p.end - p.start == pytest.approx(0.05) and np.linalg.norm(p.force) == pytest.approx(50.0) for p in drawn)
    assert all(p.force[2] == 0.0 for p in drawn)  # horizontal

    calm, shoved = env_of(), env_of("task.pushes={force:60.0,duration:0.05,per_second:50.0}")
    for env in (calm, shoved):
        env.reset(seed=0)
        for _ in range(3):
            env.step(HOLD)
    moved = np.linalg.norm(shoved.unwrapped.tcp_pos - calm.unwrapped.tcp_pos)
    assert moved > 0.003  # metres: the holding arm was pushed off its pose
    for env in (calm, shoved):
        env.close()


def test_the_fast_loop_sees_a_shove_within_the_step_and_the_hard_layer_flags_the_force():
    cfg = load_config(["task=pick_cube", "safety.fast_critic.sim_rate_hz=500", "robot.limits.max_force=20.0"])
    env = env_of("task.pushes={force:60.0,duration:0.05,per_second:50.0}")
    attach_fast_loop(env, fast_loop_of(cfg))
    env.reset(seed=0)
    forced = []
    for _ in range(3):
        *_, info = env.step(HOLD)
        forced.append((info["fast_loop"].flags & int(Violation.FORCE)) != 0)
    forced = np.concatenate(forced)
    assert forced.any() and not forced.all()  # some ticks of the steps, not whole steps: seen at the tick rate
    env.close()


def test_a_fragile_object_counts_the_contact_force_on_it():
    for threshold, flagged in ((20.0, True), (500.0, False)):
        env = env_of(f"+task.constraints.fragile_force={threshold}")
        expert = make_expert(load_config(["task=pick_cube"]).task, env)
        obs, _ = env.reset(seed=0)
        seen = 0
        for _ in range(100):  # the expert's grasp squeezes the cube with some 35 N
            obs, _, terminated, truncated, info = env.step(expert(obs))
            seen |= info["violation"]
            if terminated or truncated:
                break
        assert bool(seen & Constraint.FRAGILE_FORCE) == flagged
        env.close()


@pytest.mark.parametrize(
    "override, key",
    [
        ("task.pushes={force:-1.0,duration:0.05,per_second:1.0}", "task.pushes.force"),
        ("task.pushes={force:10.0,duration:0.05,per_second:1.0,angle:3}", "task.pushes.angle"),
        ("+task.constraints.keep_out_velocity=[0.1,0.0,0.0]", "task.constraints.keep_out_velocity"),  # no keep_out box
        ("+task.constraints.fragile_force=10.0", None),
    ],
)
def test_bad_hazard_settings_are_named(override, key):
    if key is None:  # a fragile body the scene lacks
        with pytest.raises(ConfigError) as error:
            env_of(override, "+task.constraints.fragile_body=vase")
        assert error.value.key == "task.constraints.fragile_body"
        return
    with pytest.raises(ConfigError) as error:
        env_of(override)
    assert error.value.key == key


def test_pick_cube_sudden_composes_the_sliding_zone_and_the_pushes():
    env = env_of(task="pick_cube_sudden")
    task = env.unwrapped
    assert task.pushes.force == 50.0 and task.constraints.keep_out_velocity == (0.1, 0.0, 0.0)
    env.reset(seed=0)
    env.step(HOLD)
    env.close()
