"""Scripted-human intervention rules and crash-safe folder replacement."""

import numpy as np

from robot_rl.core.folders import latest, replacing
from robot_rl.runtime.teleop import InterventionRules, ScriptedHuman


class CountingExpert:
    def __init__(self):
        self.resets = 0

    def reset(self):
        self.resets += 1

    def act(self, obs):
        return np.ones(4, np.float32)


def drive(human, progress_values):
    """Feed progress after each step; return which steps the human controlled."""
    active_steps = []
    for progress in progress_values:
        active, action = human({}, np.zeros(4, np.float32))
        active_steps.append(active)
        if active:
            assert np.all(action == 1)
        human.observe(progress)
    return active_steps


def test_demo_episodes_are_fully_human():
    human = ScriptedHuman(CountingExpert(), InterventionRules())
    human.begin_episode(demo=True)
    assert all(drive(human, [0.1] * 30))


def test_a_stalled_policy_is_taken_over_for_takeover_steps():
    rules = InterventionRules(stall_steps=5, takeover_steps=3, min_progress=0.05, max_takeovers=1)
    human = ScriptedHuman(CountingExpert(), rules)
    human.begin_episode(demo=False)
    active = drive(human, [0.1, 0.2, 0.3] + [0.3] * 20)
    # 3 improving steps, then no progress: the 5th stalled step triggers 3 human steps, once
    assert active.index(True) == 3 + 5 and sum(active) == 3 and active[8:11] == [True] * 3


def test_a_policy_making_progress_is_left_alone():
    human = ScriptedHuman(CountingExpert(), InterventionRules(stall_steps=5, min_progress=0.01))
    human.begin_episode(demo=False)
    assert not any(drive(human, np.linspace(0, 1, 40)))


def test_falling_progress_triggers_a_takeover():
    human = ScriptedHuman(CountingExpert(), InterventionRules(stall_steps=50, drop_tolerance=0.2, takeover_steps=2))
    human.begin_episode(demo=False)
    active = drive(human, [0.5, 0.6, 0.3, 0.3, 0.3])
    assert active == [False, False, False, True, True]


def test_disabled_rules_never_intervene():
    human = ScriptedHuman(CountingExpert(), InterventionRules(enabled=False, stall_steps=1))
    human.begin_episode(demo=False)
    assert not any(drive(human, [0.0] * 20))


def test_replacing_swaps_whole_folders_and_latest_survives_a_crash(tmp_path):
    target = tmp_path / "checkpoint"
    with replacing(target) as tmp:
        (tmp / "a").write_text("1")
    with replacing(target) as tmp:
        (tmp / "a").write_text("2")
    assert (target / "a").read_text() == "2" and not (tmp_path / "checkpoint.tmp").exists()
    # a crash between the two renames leaves only the previous version as checkpoint.old
    target.rename(tmp_path / "checkpoint.old")
    assert (latest(target) / "a").read_text() == "2"
