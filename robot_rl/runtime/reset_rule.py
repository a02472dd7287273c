"""Who puts the scene back before the next forward episode: the person, or a learned backward policy (issue 76).

The rule, in one place for every way of running (``robot-rl train`` today, a ROS actor on the cell later), with no
env, no agent and no torch in it: its caller tells it what happened (the scene within the backward task's bounds or
not, a backward episode's success) and asks what comes next.

With ``scene_reset.mode=learned``, after each forward episode:

1. the scene is outside the bounds the backward task declares (``within_bounds``: a cube pushed far off, a peg
   dropped) -> the person resets;
2. the backward policy failed ``scene_reset.give_up_after`` times in a row -> the person resets;
3. else the backward policy plays from the scene as it is; its success puts the scene back (a *policy* reset: the
   next forward episode starts from the scene it left), its failure goes back to 1.

The counts (:class:`ResetCounts`) give the figures a run reports: person resets per forward episode, the backward
policy's success rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from robot_rl.core.config import ConfigError, is_integer, require_all, settings_of, yaml_defaults

RESET_MODES = ("person", "learned")  # scene_reset.mode
PERSON, POLICY = "person", "policy"  # who reset the scene before an episode (the episode store's reset_by)
FORWARD, BACKWARD = "forward", "backward"  # which policy played an episode (the episode store's policy)


@yaml_defaults("settings/train.yaml", "scene_reset")
class ResetSettings:
    """``scene_reset:`` of ``configs/settings/train.yaml`` (what each key means is written there)."""

    mode: str
    task: str | None
    give_up_after: int
    demo_episodes: int

    def __post_init__(self) -> None:
        require_all(
            "scene_reset",
            self,
            {
                "mode": (self.mode in RESET_MODES, " or ".join(RESET_MODES)),
                "task": (self.task is None or (isinstance(self.task, str) and self.task != ""), "a task name or null"),
                "give_up_after": (is_integer(self.give_up_after) and self.give_up_after >= 1, "an integer >= 1"),
                "demo_episodes": (is_integer(self.demo_episodes) and self.demo_episodes >= 0, "an integer >= 0"),
            },
        )

    @property
    def learned(self) -> bool:
        return self.mode == "learned"


def reset_settings(section: Mapping[str, Any] | None) -> ResetSettings:
    """``scene_reset.*`` as checked settings (a run folder's config.yaml from before these keys: the defaults)."""
    return settings_of("scene_reset", ResetSettings, section)


def require_in_process(settings: ResetSettings, num_envs: int, fleet: str) -> None:
    """Learned resets chain one env's episodes in this process: refused (ConfigError) with several envs or a fleet."""
    if not settings.learned:
        return
    if fleet != "local":
        raise ConfigError("scene_reset.mode", settings.mode, f"person with fleet={fleet} (learned resets: fleet=local)")
    if num_envs != 1:
        raise ConfigError("scene_reset.mode", settings.mode, f"person with train.num_envs={num_envs} (learned: 1 env)")


@dataclass
class ResetCounts:
    """What the rule saw: forward episodes (online) and who reset before them, backward episodes and their successes,
    and why the person was asked (``give_ups``: k failures in a row; ``out_of_bounds``: a scene outside the bounds)."""

    forward_episodes: int = 0
    person_resets: int = 0  # before a forward episode
    policy_resets: int = 0  # before a forward episode (a backward success)
    backward_episodes: int = 0
    backward_successes: int = 0
    give_ups: int = 0
    out_of_bounds: int = 0
    failures_in_a_row: int = 0

    def figures(self) -> dict[str, Any]:
        """The counts and their rates (None before the first episode of the kind)."""
        return {
            **asdict(self),
            "person_resets_per_forward_episode": rate(self.person_resets, self.forward_episodes),
            "backward_success_rate": rate(self.backward_successes, self.backward_episodes),
        }


def rate(count: int, total: int) -> float | None:
    return count / total if total else None


class ResetRule:
    """The learned-reset rule (this module's docstring) over ``give_up_after`` (backward failures in a row before the
    person resets), counting into ``counts`` (a resumed run's go on)."""

    def __init__(self, give_up_after: int, counts: ResetCounts | None = None):
        self.give_up_after = give_up_after
        self.counts = counts if counts is not None else ResetCounts()

    def forward_episode(self, reset_by: str) -> None:
        """A forward (online) episode played after a reset by ``reset_by`` (:data:`PERSON` or :data:`POLICY`)."""
        counts = self.counts
        counts.forward_episodes += 1
        counts.person_resets += reset_by == PERSON
        counts.policy_resets += reset_by == POLICY

    def backward_due(self, within_bounds: bool) -> bool:
        """After a forward episode or a failed backward one, with the scene ``within_bounds`` of the backward task or
        not: True when the backward policy plays next, False when the person resets (out of bounds, or the backward
        policy failed ``give_up_after`` times in a row: the count starts again)."""
        counts = self.counts
        if not within_bounds:
            counts.out_of_bounds += 1
        elif counts.failures_in_a_row >= self.give_up_after:
            counts.give_ups += 1
        else:
            return True
        counts.failures_in_a_row = 0
        return False

    def backward_ended(self, success: bool) -> None:
        """A backward episode ended, its scene put back (``success``) or not."""
        counts = self.counts
        counts.backward_episodes += 1
        counts.backward_successes += success
        counts.failures_in_a_row = 0 if success else counts.failures_in_a_row + 1
