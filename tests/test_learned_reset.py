"""Learned resets (``scene_reset.mode=learned``, issue 76): the rule that calls the person (k backward failures in a
row, a scene out of the backward task's bounds), the bounds the backward tasks declare, the episode stores' reset
records, and a tiny in-process session that plays both policies and writes the counters. ``pytest -k learned_reset``
selects them."""

import json

import mujoco
import numpy as np
import pytest

from robot_rl.cli.main import main
from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.data import EpisodeStore
from robot_rl.runtime.learned_reset import LearnedResets, backward_task
from robot_rl.runtime.reset_rule import PERSON, POLICY, ResetRule, reset_settings
from robot_rl.sim.tasks.backward import PegInsertResetEnv, PickCubeResetEnv

TINY = [  # a learned-reset run of pick_cube small enough for a test: 2 demos of each policy, 300 online steps
    "task=pick_cube",
    "task.episode_steps=40",
    "scene_reset.mode=learned",
    "scene_reset.demo_episodes=2",
    "train.demo_episodes=2",
    "train.env_steps=300",
    "train.eval_every=300",
    "train.eval_episodes=2",
    "train.final_eval_episodes=2",
    "train.start_training=50",
    "train.batch_size=32",
    "train.checkpoint_every=200",
]


# ----------------------------------------------------------------- the rule
def test_learned_reset_rule_gives_up_after_k_backward_failures_in_a_row():
    rule = ResetRule(give_up_after=3)
    for _ in range(2):  # two failures, then a success: the count starts again
        assert rule.backward_due(within_bounds=True)
        rule.backward_ended(success=False)
    assert rule.backward_due(within_bounds=True)
    rule.backward_ended(success=True)
    assert rule.counts.failures_in_a_row == 0
    for _ in range(3):
        assert rule.backward_due(within_bounds=True)
        rule.backward_ended(success=False)
    assert not rule.backward_due(within_bounds=True)  # the third failure in a row: the person resets
    assert rule.counts.give_ups == 1 and rule.counts.failures_in_a_row == 0
    assert rule.backward_due(within_bounds=True)  # after the person's reset the backward policy is asked again
    assert rule.counts.figures()["backward_success_rate"] == pytest.approx(1 / 6)


def test_learned_reset_rule_calls_the_person_for_a_scene_out_of_bounds_and_counts_resets_per_forward_episode():
    rule = ResetRule(give_up_after=3)
    rule.backward_ended(success=False)
    assert not rule.backward_due(within_bounds=False)
    assert rule.counts.out_of_bounds == 1 and rule.counts.give_ups == 0 and rule.counts.failures_in_a_row == 0
    for reset_by in (PERSON, POLICY, POLICY, POLICY, POLICY):
        rule.forward_episode(reset_by)
    figures = rule.counts.figures()
    assert (figures["person_resets"], figures["policy_resets"]) == (1, 4)
    assert figures["person_resets_per_forward_episode"] == pytest.approx(0.2)


def test_learned_reset_bounds_the_backward_tasks_declare():
    pick = PickCubeResetEnv()
    pick.reset(seed=0)
    assert pick.within_bounds()  # a drawn forward end state
    pick.place_cube(pick.end_region.high + 0.05, 0.0)  # pushed beyond where forward episodes leave it
    mujoco.mj_forward(pick.model, pick.data)
    assert not pick.within_bounds()
    peg = PegInsertResetEnv()
    peg.reset(seed=0)
    assert peg.within_bounds()  # held, in or above the socket
    peg.place_arm(peg.tcp_pos, -1.0)  # the gripper opened: the peg drops out of the hand
    peg.simulate(200)
    assert not peg.within_bounds()


# ----------------------------------------------------------------- the driver's use of the rule
@pytest.fixture
def resets(tmp_path):
    cfg = load_config([*TINY, f"train.run_dir={tmp_path / 'run'}", "scene_reset.give_up_after=2"])
    resets = LearnedResets(cfg, reset_settings(cfg.scene_reset), seed=0)
    yield resets
    resets.env.close()


def forward_end(resets: LearnedResets, cube_xy) -> PickCubeResetEnv:
    """A scene as a forward episode may leave it: the cube at ``cube_xy`` (m), on the backward task's env."""
    env = resets.env.unwrapped
    env.reset(seed=1)
    env.place_cube(np.asarray(cube_xy, dtype=float), 0.0)
    return resets.env


def test_learned_reset_out_of_bounds_scene_goes_to_the_person_without_a_backward_episode(resets, monkeypatch):
    played = []
    monkeypatch.setattr(resets, "play", lambda *args: played.append(args))
    far = resets.env.unwrapped.end_region.high + 0.05
    assert resets.put_back(forward_end(resets, far), lambda: 0, stop=None)
    assert (resets.reset_by, resets.scene, played) == (PERSON, None, [])
    assert resets.rule.counts.out_of_bounds == 1


def test_learned_reset_k_backward_failures_go_to_the_person_and_a_success_to_the_policy(resets, monkeypatch):
    outcomes = [False, False, False, True]
    monkeypatch.setattr(resets, "play", lambda seed, stop, scene: {"success": outcomes.pop(0)})
    inside = resets.env.unwrapped.start_region.centre
    assert resets.put_back(forward_end(resets, inside), lambda: 0, stop=None)
    assert (resets.reset_by, resets.scene, len(outcomes)) == (PERSON, None, 2)  # gave up after 2 failures
    assert resets.rule.counts.give_ups == 1
    assert resets.put_back(forward_end(resets, inside), lambda: 0, stop=None)  # a failure, then a success
    assert resets.reset_by == POLICY and resets.scene is not None and outcomes == []


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["scene_reset.mode=learned", "train.num_envs=2"], "scene_reset.mode"),
        (["scene_reset.mode=learned", "fleet=ray"], "scene_reset.mode"),
        (["scene_reset.mode=sometimes"], "scene_reset.mode"),
        (["scene_reset.give_up_after=0"], "scene_reset.give_up_after"),
    ],
)
def test_learned_reset_bad_settings_are_refused_in_one_line(overrides, key, tmp_path, capsys):
    assert main(["train", f"train.run_dir={tmp_path / 'run'}", *overrides]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"robot-rl: error: {key}=") and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_learned_reset_backward_task_keeps_the_forward_tasks_values_and_refuses_a_task_without_one():
    task = dict(load_config(["task=pick_cube", "task.cube_low=[0.4,-0.1]"]).task)
    backward = backward_task(task, None)
    assert (backward["name"], backward["cube_low"], backward["release_height"]) == (
        "pick_cube_reset",
        [0.4, -0.1],
        0.05,
    )
    with pytest.raises(
        ConfigError, match="scene_reset.task='reach_reset' .* a backward task: peg_insert_reset, pick_cube_reset"
    ):
        backward_task(dict(load_config(["task=reach"]).task), None)


# ----------------------------------------------------------------- a session
@pytest.mark.slow
def test_learned_reset_session_plays_both_policies_records_who_reset_and_writes_the_counters(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", f"train.run_dir={run}", *TINY]) == 0
    assert "person_resets=" in capsys.readouterr().err  # the progress line
    summary = json.loads((run / "summary.json").read_text())
    resets = summary["learned_resets"]
    forward = [EpisodeStore.open(run / "episodes.zarr").episode_attrs(n) for n in sorted_names(run / "episodes.zarr")]
    backward = [
        EpisodeStore.open(run / "backward/episodes.zarr").episode_attrs(n)
        for n in sorted_names(run / "backward/episodes.zarr")
    ]
    online = [e for e in forward if e["source"] == "online"]
    # the stores: which policy played, who reset before it
    assert {e["policy"] for e in forward} == {"forward"} and {e["policy"] for e in backward} == {"backward"}
    assert [e["reset_by"] for e in forward if e["source"] == "demo"] == ["person"] * 2
    assert [e["reset_by"] for e in backward if e["source"] == "demo"] == ["person"] * 2  # drawn end states
    assert {e["reset_by"] for e in backward if e["source"] == "online"} == {"policy"}  # where a forward one left it
    assert online[0]["reset_by"] == "person"  # the first online episode starts from the person's reset
    assert sum(e["reset_by"] == "person" for e in online) == resets["person_resets"]
    assert sum(e["reset_by"] == "policy" for e in online) == resets["policy_resets"] > 0
    # the counters
    assert resets["forward_episodes"] == len(online) == summary["episodes"] - summary["demo_episodes"]
    assert resets["backward_episodes"] == sum(e["source"] == "online" for e in backward) > 0
    assert resets["backward_successes"] == sum(e["success"] for e in backward if e["source"] == "online")
    assert resets["person_resets_per_forward_episode"] == pytest.approx(resets["person_resets"] / len(online))
    assert resets["takeover_steps"] == {
        "forward": summary["intervention_steps"],
        "backward": sum(e["interventions"] for e in backward if e["source"] == "online"),
    }
    assert resets["backward_demo_episodes"] == 2 and resets["backward_env_steps"] > 0
    # both learners learned: the backward one's checkpoint beside the forward one's, with its updates
    state = json.loads((run / "backward/checkpoint/counters.json").read_text())
    assert state["update_calls"] > 0 and state["counters"]["env_steps"] == resets["backward_env_steps"]
    assert summary["eval_history"]  # the forward evaluation, from env resets as always


def sorted_names(path):
    return sorted(EpisodeStore.open(path).episode_names())
