"""Human-in-the-loop teleoperation sources.

A teleop source is called every control step with the observation and the policy's proposed
action and answers ``(active, action)``: when active, the env executes the human's action and
the transition is flagged ``intervened``. Real devices (SpaceMouse, gamepad, keyboard) implement
the same call; in sim a :class:`ScriptedHuman` built on a task expert plays the human.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from robot_rl.core.config import is_integer, is_number, require_all, yaml_defaults


class TeleopSource(Protocol):
    def begin_episode(self, demo: bool) -> None: ...

    def __call__(self, obs: dict[str, np.ndarray], policy_action: np.ndarray) -> tuple[bool, np.ndarray | None]: ...

    def observe(self, progress: float) -> None: ...


@yaml_defaults("settings/train.yaml", "human")
class InterventionRules:
    """When the scripted human takes over from the policy.

    Progress is the task's dense reward (privileged in sim). The human takes over for
    ``takeover_steps`` steps when progress has not improved by ``min_progress`` for
    ``stall_steps`` steps (the policy stalls), or dropped more than ``drop_tolerance`` below the
    episode's best (it heads for failure); at most ``max_takeovers`` times per episode.
    """

    enabled: bool
    stall_steps: int
    takeover_steps: int
    min_progress: float
    drop_tolerance: float
    max_takeovers: int

    def __post_init__(self) -> None:
        require_all(
            "human",
            self,
            {
                "enabled": (isinstance(self.enabled, bool), "true or false"),
                "stall_steps": (is_integer(self.stall_steps) and self.stall_steps >= 1, "an integer >= 1"),
                "takeover_steps": (is_integer(self.takeover_steps) and self.takeover_steps >= 1, "an integer >= 1"),
                "min_progress": (is_number(self.min_progress) and self.min_progress >= 0, "a number >= 0"),
                "drop_tolerance": (is_number(self.drop_tolerance) and self.drop_tolerance >= 0, "a number >= 0"),
                "max_takeovers": (is_integer(self.max_takeovers) and self.max_takeovers >= 0, "an integer >= 0"),
            },
        )


class ScriptedHuman:
    """Full demonstrations on request, then interventions by the rules."""

    def __init__(self, expert: Callable[[dict[str, np.ndarray]], np.ndarray], rules: InterventionRules):
        self.expert, self.rules = expert, rules
        self.begin_episode(demo=False)

    def begin_episode(self, demo: bool) -> None:
        if hasattr(self.expert, "reset"):
            self.expert.reset()
        self.demo = demo
        self.best = -np.inf
        self.since_improvement = 0
        self.takeover_left = 0
        self.takeovers = 0

    def __call__(self, obs: dict[str, np.ndarray], policy_action: np.ndarray) -> tuple[bool, np.ndarray | None]:
        if self.demo or self.takeover_left > 0:
            self.takeover_left = max(self.takeover_left - 1, 0)
            return True, np.asarray(self.expert.act(obs), dtype=np.float32)
        return False, None

    def observe(self, progress: float) -> None:
        """Progress after the step; may start a takeover for the next steps."""
        rules = self.rules
        if self.demo or self.takeover_left > 0 or not rules.enabled:
            self.best, self.since_improvement = progress, 0  # judge the policy from here on
            return
        if progress > self.best + rules.min_progress:
            self.best, self.since_improvement = progress, 0
        else:
            self.since_improvement += 1
        stalled = self.since_improvement >= rules.stall_steps
        failing = progress < self.best - rules.drop_tolerance
        if (stalled or failing) and self.takeovers < rules.max_takeovers:
            self.takeover_left = rules.takeover_steps
            self.takeovers += 1
            self.since_improvement = 0


class NoHuman:
    """No teleoperation: the policy acts alone."""

    def begin_episode(self, demo: bool) -> None:
        if demo:
            raise ValueError("demonstrations need a teleop source; this task has none")

    def __call__(self, obs, policy_action):
        return False, None

    def observe(self, progress: float) -> None:
        pass
