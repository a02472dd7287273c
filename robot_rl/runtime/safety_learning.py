"""The learned safety layer inside ``robot-rl train`` (``safety.enabled=true``).

Learner side (:class:`SafetyLearner`): a :class:`~robot_rl.policies.safety_critic.SafetyCritic` trained
on the online buffer's ``cost`` flags (violations reported by the env in ``info["violation"]``),
optionally pretrained on an episode store with recorded violations (``safety.pretrain_store``),
which then keeps ``safety.prior_fraction`` of every online batch (without the recorded
violations, online episodes made safe by the filter would teach the critic that nothing is risky,
and the filter would let go again);
its numpy risk model is published with the policy weights once ``safety.warmup`` online
transitions have arrived, or from the start when it was pretrained.

Actor side (:class:`SafetyActor`): a :class:`~robot_rl.safety.filter.SafetyFilter` on the
policy's actions (never on the human's). Filtered steps are flagged so the learner subtracts
``safety.penalty`` from their reward, and so are the policy's steps whose command the sim's fast-loop critic
changed on any tick (``safety.fast_critic.enabled``); violations, interventions and bypasses (of both critics)
are counted per episode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, fields
from typing import Any

import numpy as np

from robot_rl.core.config import ConfigError, is_integer, is_number, require_all, settings_of, yaml_defaults
from robot_rl.safety.fast_critic import fast_critic_settings
from robot_rl.safety.filter import FilterSettings, SafetyFilter

RISK_MODEL_KEY = "safety.risk_model"
RELABEL = ("proposed", "executed")
SAFETY_COUNTS = (  # per episode, in SafetyActor.stats(): steps, or fast-loop ticks where named
    "violations",
    "filter_interventions",
    "filter_bypasses",
    "fast_filtered_steps",
    "fast_filtered_ticks",
    "fast_bypassed_ticks",
)


@yaml_defaults("settings/safety.yaml", "safety")
class SafetySettings:
    enabled: bool
    penalty: float  # reward penalty on the policy's steps a learned safety layer changed (filter or fast-loop critic)
    relabel: str  # what the task policy learns a filtered step as: the action it proposed (Recovery RL,
    # the filter is part of the environment) or the action executed; the safety critic always learns the executed one
    warmup: int  # online transitions before a critic trained from scratch acts (a pretrained one acts at once)
    pretrain_store: str | None  # episode store with recorded violations (safety_flags)
    pretrain_updates: int
    prior_fraction: float  # share of each online batch drawn from the pretraining store
    critic: dict[str, Any] = field(default_factory=dict)  # SafetyCriticConfig fields
    filter: dict[str, Any] = field(default_factory=dict)  # FilterSettings fields
    fast_critic: dict[str, Any] = field(default_factory=dict)  # the safety node's: FastCriticSettings fields


def safety_settings(section: Mapping[str, Any] | None) -> SafetySettings:
    """``safety.*`` (None: the defaults) as checked settings."""
    settings = settings_of("safety", SafetySettings, section or None)
    require_all(
        "safety",
        settings,
        {
            "enabled": (isinstance(settings.enabled, bool), "true or false"),
            "penalty": (is_number(settings.penalty) and settings.penalty >= 0, "a number >= 0"),
            "relabel": (settings.relabel in RELABEL, " or ".join(RELABEL)),
            "warmup": (is_integer(settings.warmup) and settings.warmup >= 0, "an integer >= 0"),
            "pretrain_store": (
                settings.pretrain_store is None
                or (isinstance(settings.pretrain_store, str) and settings.pretrain_store.strip() != ""),
                "null or the path of an episode store",
            ),
            "pretrain_updates": (
                is_integer(settings.pretrain_updates) and settings.pretrain_updates >= 1,
                "a positive integer",
            ),
            "prior_fraction": (
                is_number(settings.prior_fraction) and 0.0 < settings.prior_fraction < 1.0,
                "a number in (0, 1)",
            ),
        },
    )
    from robot_rl.policies.safety_critic import SafetyCriticConfig

    settings_of("safety.critic", SafetyCriticConfig, settings.critic).validate()
    filter_settings(settings)  # inconsistent thresholds fail at start-up, not at run time
    fast_critic_settings(settings.fast_critic)
    return settings


def filter_settings(settings: SafetySettings) -> FilterSettings:
    known = {f.name for f in fields(FilterSettings)}
    for key in settings.filter:
        if key not in known:
            raise ConfigError(f"safety.filter.{key}", settings.filter[key], "one of " + ", ".join(sorted(known)))
    values = dict(settings.filter)
    if "scales" in values:
        values["scales"] = tuple(values["scales"])
    return FilterSettings(**values)


class SafetyLearner:
    def __init__(self, settings: SafetySettings, state_dim: int, action_dim: int, seed: int):
        from robot_rl.policies.safety_critic import SafetyCritic, SafetyCriticConfig

        known = {f.name for f in fields(SafetyCriticConfig)}
        for key in settings.critic:
            if key not in known:
                raise ConfigError(f"safety.critic.{key}", settings.critic[key], "one of " + ", ".join(sorted(known)))
        self.settings = settings
        self.prior = None  # the pretraining buffer: prior_fraction of each online batch once pretrained
        self.critic = SafetyCritic(state_dim, action_dim, SafetyCriticConfig(**settings.critic), seed=seed)

    def pretrain(self, buffer) -> dict[str, float]:
        """Offline training on a buffer filled from recorded episodes."""
        metrics: dict[str, float] = {}
        for _ in range(self.settings.pretrain_updates):
            metrics = self.critic.update(self.critic.sample(buffer))
        self.prior = buffer
        return metrics

    def update(self, online) -> dict[str, float]:
        if not len(online):
            return {}
        if self.prior is None:
            return self.critic.update(self.critic.sample(online))
        from robot_rl.policies.safety_critic import RiskBatch

        from_prior = round(self.settings.prior_fraction * self.critic.config.batch_size)
        prior = self.critic.sample(self.prior, from_prior)
        fresh = self.critic.sample(online, self.critic.config.batch_size - from_prior)
        return self.critic.update(RiskBatch.joined([prior, fresh]))

    def weights(self, online_received: int) -> dict[str, Any]:
        ready = self.prior is not None or online_received >= self.settings.warmup
        return {RISK_MODEL_KEY: self.critic.risk_model()} if ready else {}


def make_safety_learner(
    settings: SafetySettings, shapes: dict[str, tuple[int, ...]], action_dim: int, seed: int
) -> SafetyLearner | None:
    """The learner's safety critic when ``safety.enabled``, pretrained on ``safety.pretrain_store`` if given."""
    if not settings.enabled:
        return None
    if "state" not in shapes:
        raise ConfigError("safety.enabled", True, "a task with a state observation (the safety critic reads it)")
    learner = SafetyLearner(settings, shapes["state"][0], action_dim, seed)
    if settings.pretrain_store:
        from robot_rl.data import EpisodeStore, ReplayBuffer, load_episode_store

        try:
            store = EpisodeStore.open(settings.pretrain_store)
        except Exception as error:  # noqa: BLE001 - whatever fails to open is the user's store, named
            raise ConfigError(
                "safety.pretrain_store", settings.pretrain_store, f"an episode store with recorded violations ({error})"
            ) from None
        buffer = ReplayBuffer(
            sum(store.episode_attrs(n)["length"] + 1 for n in store.episode_names()) + 2,
            {"state": (shapes["state"], np.float32)},
            action_dim,
        )
        load_episode_store(store, buffer)
        learner.pretrain(buffer)
    return learner


class SafetyActor:
    def __init__(self, settings: SafetySettings):
        self.settings = filter_settings(settings)
        self.filter: SafetyFilter | None = None
        self.reset_counts()

    def reset_counts(self) -> None:
        self.counts = dict.fromkeys(SAFETY_COUNTS, 0)

    def load(self, weights: dict[str, Any]) -> None:
        """Take a new risk model from published weights (if they carry one)."""
        model = weights.get(RISK_MODEL_KEY)
        if model is None:
            return
        if self.filter is None:
            self.filter = SafetyFilter(model, self.settings)
        else:
            self.filter.risk = model

    def begin_episode(self) -> None:
        self.reset_counts()
        if self.filter is not None:
            self.filter.reset()

    def __call__(self, obs: dict[str, np.ndarray], action: np.ndarray) -> tuple[np.ndarray, bool]:
        """(action to execute, whether the filter changed it)."""
        if self.filter is None:
            return action, False
        result = self.filter(obs["state"], action)
        self.counts["filter_interventions"] += result.intervened
        self.counts["filter_bypasses"] += result.bypassed
        return result.action, result.intervened

    def observe(self, violation: int, fast=None) -> None:
        """Count a step's outcome: its constraint ``violation`` bits and, when the sim's fast loop ran (``fast``: the
        step's :class:`~robot_rl.sim.fast_critic_loop.FastStream`, or anything with ``filtered_ticks`` and
        ``bypassed_ticks``), the ticks the fast-loop critic changed or was bypassed in."""
        counts = self.counts
        counts["violations"] += bool(violation)
        if fast is not None:
            filtered = fast.filtered_ticks
            counts["fast_filtered_steps"] += filtered > 0
            counts["fast_filtered_ticks"] += filtered
            counts["fast_bypassed_ticks"] += fast.bypassed_ticks

    def stats(self) -> dict[str, int]:
        """This episode's counts, keyed by :data:`SAFETY_COUNTS`."""
        return dict(self.counts)
