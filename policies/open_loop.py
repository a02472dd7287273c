"""The open-loop floor (``agent=open_loop``): one action sequence for every episode, blind to the observations,
found by the cross-entropy method (CEM) over episode returns.

The sequence is piecewise constant: ``segments`` actions, each held for ``episode_steps / segments`` steps. Each
exploring episode plays a candidate drawn from N(mean, std^2) (clipped to [-1, 1]); deterministic episodes play the
mean. The learner hands every online transition it ingests to :meth:`OpenLoopAgent.observe`; once an episode has
ended, its candidate (the actions the policy proposed at each segment's first step, so a human's takeover does not
change what is scored) and its return join the generation. After ``population`` episodes the mean and spread move
towards the best ``elite_fraction`` of them. Scored like any policy (success of the deterministic evaluation), it is
the floor every learned figure should sit above: what a fixed motion, found by trial and error, already does.

Run it without the scripted human (``human.enabled=false``, ``train.demo_episodes=0``): takeovers would score the
human. An episode the budget cuts short is never scored; a resumed run starts its generation again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from robot_rl.core.config import is_integer, is_number, require_all, yaml_defaults
from robot_rl.data.batches import BatchSource
from robot_rl.data.transition import Transition
from robot_rl.policies.base import AgentConfig, OffPolicyAgent, slot_states


@yaml_defaults("agent/open_loop.yaml")
class OpenLoopConfig(AgentConfig):
    segments: int
    population: int
    elite_fraction: float
    init_std: float
    min_std: float
    smoothing: float
    utd: int  # the learner's count of updates per env step: each update is empty (the plan moves in observe)
    episode_steps: int = 100  # the task's (the composed config passes task.episode_steps)

    def validate(self) -> None:
        checks = {
            **self.shared_checks(),
            "segments": (is_integer(self.segments) and self.segments >= 1, "an integer >= 1"),
            "episode_steps": (is_integer(self.episode_steps) and self.episode_steps >= 1, "an integer >= 1"),
            "population": (is_integer(self.population) and self.population >= 2, "an integer >= 2"),
            "elite_fraction": (
                is_number(self.elite_fraction) and 0 < self.elite_fraction <= 1,
                "a number in (0, 1]",
            ),
            "init_std": (is_number(self.init_std) and self.init_std > 0, "a number > 0"),
            "min_std": (is_number(self.min_std) and 0 <= self.min_std <= self.init_std, "a number in [0, init_std]"),
            "smoothing": (is_number(self.smoothing) and 0 <= self.smoothing < 1, "a number in [0, 1)"),
        }
        require_all("agent", self, checks)


class Plan(nn.Module):
    """The search's distribution over sequences: mean and spread, (segments, A) each (buffers: no gradients)."""

    def __init__(self, segments: int, action_dim: int, init_std: float):
        super().__init__()
        self.register_buffer("mean", torch.zeros(segments, action_dim))
        self.register_buffer("std", torch.full((segments, action_dim), float(init_std)))


@dataclass
class SlotEpisode:
    """What one acting slot plays this episode: its candidate and the step it is at."""

    candidate: torch.Tensor | None = None
    step: int = 0


@dataclass
class ScoredEpisodes:
    """The learner's side: the open episodes' proposed actions and returns, and the scored ones of this generation."""

    open: dict[tuple[str, str], tuple[list[np.ndarray], float]] = field(default_factory=dict)
    scored: list[tuple[np.ndarray, float]] = field(default_factory=list)


class OpenLoopAgent(OffPolicyAgent):
    """act() plays the plan by step count; observe() scores episodes; the plan moves by CEM per generation."""

    name = "open_loop"
    modules = ("plan",)
    policy_modules = ("plan",)
    acting_slots = ("_slots",)

    def __init__(
        self,
        observation_shapes: dict[str, tuple[int, ...]],
        action_dim: int,
        config: OpenLoopConfig | None = None,
        seed: int = 0,
    ):
        super().__init__(observation_shapes, action_dim, config or OpenLoopConfig(), seed)
        cfg = self.config
        self.plan = Plan(cfg.segments, action_dim, cfg.init_std).to(self.device)
        self.segment_steps = max(1, math.ceil(cfg.episode_steps / cfg.segments))
        self._slots: list[SlotEpisode] = []
        self.episodes = ScoredEpisodes()
        self.generation = 0
        self.last_elite_return = float("nan")

    # ----------------------------------------------------------------- acting
    def begin_episode(self, slot: int = 0) -> None:
        state = slot_states(self._slots, slot + 1, lambda _: SlotEpisode())[slot]
        noise = self.normal_noise(self.plan.mean)
        state.candidate, state.step = (self.plan.mean + self.plan.std * noise).clamp(-1.0, 1.0), 0

    def _act_batch(self, obs: dict[str, np.ndarray], explore: bool) -> np.ndarray:
        count = len(next(iter(obs.values())))
        actions = []
        for state in slot_states(self._slots, count, lambda _: SlotEpisode()):
            if state.candidate is None:  # acting before any begin_episode: the mean
                state.candidate = self.plan.mean.clone()
            sequence = state.candidate if explore else self.plan.mean
            actions.append(sequence[min(state.step // self.segment_steps, self.config.segments - 1)])
            state.step += 1
        return torch.stack(actions).cpu().numpy().astype(np.float32)

    # ----------------------------------------------------------------- learning
    def observe(self, t: Transition) -> None:
        """One online transition, as the learner ingests them: an ended episode is scored."""
        key = (t.origin.actor, t.origin.episode)
        if t.first or key not in self.episodes.open:
            self.episodes.open[key] = ([], 0.0)
        proposed, total = self.episodes.open[key]
        proposed.append(np.asarray(t.policy_action, np.float32))
        self.episodes.open[key] = (proposed, total + float(t.reward))
        if t.terminated or t.truncated:
            del self.episodes.open[key]
            self.score(proposed, total + float(t.reward))

    def score(self, proposed: list[np.ndarray], episode_return: float) -> None:
        """An ended episode's candidate (its proposed action at each segment's first step; segments it never
        reached keep its last) and return; a full generation refits the plan."""
        starts = [min(k * self.segment_steps, len(proposed) - 1) for k in range(self.config.segments)]
        self.episodes.scored.append((np.stack([proposed[i] for i in starts]), episode_return))
        if len(self.episodes.scored) >= self.config.population:
            self.refit()

    def refit(self) -> None:
        """The next generation's mean and spread: towards the elites' (smoothed), the spread at least ``min_std``."""
        cfg = self.config
        ranked = sorted(self.episodes.scored, key=lambda scored: scored[1], reverse=True)
        elites = ranked[: max(1, math.ceil(cfg.elite_fraction * len(ranked)))]
        candidates = torch.as_tensor(np.stack([candidate for candidate, _ in elites]), device=self.device)
        with torch.no_grad():
            mean = cfg.smoothing * self.plan.mean + (1 - cfg.smoothing) * candidates.mean(0)
            std = cfg.smoothing * self.plan.std + (1 - cfg.smoothing) * candidates.std(0, unbiased=False)
            self.plan.mean.copy_(mean)
            self.plan.std.copy_(std.clamp(min=cfg.min_std))
        self.last_elite_return = float(np.mean([episode_return for _, episode_return in elites]))
        self.episodes.scored.clear()
        self.generation += 1

    def update(self, sample_batch: BatchSource) -> dict[str, torch.Tensor]:
        """No gradient step: the plan moves in :meth:`observe`; the search's figures (the batch is not drawn)."""
        self.updates += 1
        return {
            "plan_generation": torch.tensor(float(self.generation)),
            "plan_elite_return": torch.tensor(self.last_elite_return),
            "plan_std": self.plan.std.mean(),
        }

    # ----------------------------------------------------------------- state
    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "segments": self.config.segments}

    def extra_state(self) -> dict[str, Any]:
        return {"generation": self.generation}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.generation = int(state.get("generation", 0))
