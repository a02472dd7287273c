"""``safety.fast_critic`` of the config: the settings of the safety node's learned fast-loop filter, and the
starting model they name."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from robot_rl.core.config import (
    Config,
    ConfigError,
    is_integer,
    is_number,
    plain,
    require_all,
    select,
    settings_of,
    yaml_defaults,
)

from ..filter import FilterSettings
from .model import FastCriticError, FastCriticModel


@yaml_defaults("settings/safety.yaml", "safety.fast_critic", frozen=True)
class FastCriticSettings:
    """``safety.fast_critic`` of the config: the safety node's learned fast-loop filter."""

    enabled: bool
    weights: str | None  # .npz of the starting model; None: hard layer only until the weights topic brings one
    threshold_on: float  # engage above this risk of the commanded delta ...
    threshold_off: float  # ... release after ``dwell`` s below this one
    dwell: float  # s
    scales: tuple[float, ...]  # line search over the delta's translation and rotation
    escape_step: float  # m: steps along +-x, +-y, +-z as recovery candidates too (0: none)
    retreat_distance: float  # m along the measured external force
    deadline_us: float  # us of the tick thread's CPU time in the model; slower: bypassed
    report_period: float  # s between the node's count reports
    sim_rate_hz: float | None  # Hz of the tick in a MuJoCo task's control substeps (robot-rl train)
    learn: bool  # the learner fits the model online to the ticks the sim's fast loop records (fast_critic.*)
    learn_every: int  # online steps between two fits
    learn_updates: int  # gradient steps per fit
    pretrain_store: str | None  # with learn: episode store whose ticks the online learner starts from and keeps
    probe: float  # sim: share of policy steps whose ticks send a random candidate command instead of the policy's
    record_ticks: bool  # the node graph: the safety node publishes its ticks and the actor sends them with its steps

    def __post_init__(self) -> None:
        checks = {
            "enabled": (isinstance(self.enabled, bool), "true or false"),
            "weights": (
                self.weights is None or (isinstance(self.weights, str) and self.weights.strip() != ""),
                "null or the path of an .npz file (robot_rl.safety.fast_critic.FastCriticModel.save)",
            ),
            "dwell": (is_number(self.dwell) and self.dwell >= 0, "seconds >= 0"),
            "escape_step": (is_number(self.escape_step) and 0 <= self.escape_step <= 0.1, "metres in [0, 0.1]"),
            "retreat_distance": (
                is_number(self.retreat_distance) and 0 <= self.retreat_distance <= 0.1,
                "metres in [0, 0.1]",
            ),
            "deadline_us": (
                is_number(self.deadline_us) and 0 < self.deadline_us <= 100_000,
                "microseconds in (0, 1e5]",
            ),
            "report_period": (is_number(self.report_period) and self.report_period > 0, "a positive number of seconds"),
            "learn": (isinstance(self.learn, bool), "true or false"),
            "record_ticks": (isinstance(self.record_ticks, bool), "true or false"),
            "learn_every": (is_integer(self.learn_every) and self.learn_every >= 1, "an integer >= 1 (online steps)"),
            "learn_updates": (is_integer(self.learn_updates) and self.learn_updates >= 1, "an integer >= 1"),
            "pretrain_store": (
                self.pretrain_store is None
                or (isinstance(self.pretrain_store, str) and self.pretrain_store.strip() != "" and self.learn),
                "null, or with learn=true the path of an episode store with fast-loop ticks",
            ),
            "probe": (is_number(self.probe) and 0 <= self.probe <= 1, "a share of policy steps in [0, 1]"),
            "sim_rate_hz": (
                self.sim_rate_hz is None or (is_number(self.sim_rate_hz) and self.sim_rate_hz > 0),
                "null or a positive rate in Hz (a multiple of the task's control rate dividing its physics rate)",
            ),
            "threshold_on": (is_number(self.threshold_on), "a probability in (0, 1]"),
            "threshold_off": (is_number(self.threshold_off), "a probability <= threshold_on"),
            "scales": (
                isinstance(self.scales, tuple) and all(is_number(s) for s in self.scales),
                "a list of factors in [0, 1], the first 1.0",
            ),
        }
        require_all("safety.fast_critic", self, checks)
        self.filter_settings(1000.0)  # thresholds and scales: named as safety.fast_critic.<key> when wrong

    @property
    def records_ticks(self) -> bool:
        """In the node graph the safety node publishes its ticks and the actor sends them with its transitions:
        asked for (``record_ticks``), or needed by the learner (``learn``)."""
        return self.record_ticks or self.learn

    def filter_settings(self, rate_hz: float) -> FilterSettings:
        """The :class:`FilterSettings` of a loop ticking at ``rate_hz`` (``dwell`` s in ticks, the deadline in s)."""
        renamed = {"dwell_steps": "dwell", "deadline_s": "deadline_us"}
        try:
            return FilterSettings(
                threshold_on=self.threshold_on,
                threshold_off=self.threshold_off,
                dwell_steps=math.ceil(self.dwell * rate_hz),
                scales=tuple(self.scales),
                escape_step=self.escape_step,
                deadline_s=self.deadline_us * 1e-6,
                gripper_last=True,
            )
        except ConfigError as error:
            key = renamed.get(error.key.rpartition(".")[2], error.key.rpartition(".")[2])
            raise ConfigError(f"safety.fast_critic.{key}", getattr(self, key), error.expected) from None


def fast_critic_settings(values: Mapping[str, Any] | None) -> FastCriticSettings:
    """``safety.fast_critic`` (a mapping, or None for the defaults) as checked settings; an unknown key or a bad
    value raises :class:`ConfigError` naming ``safety.fast_critic.<key>``."""
    values = dict(values or {})
    if isinstance(values.get("scales"), list):
        values["scales"] = tuple(values["scales"])
    return settings_of("safety.fast_critic", FastCriticSettings, values)


def fast_critic_config(cfg: Config) -> FastCriticSettings:
    """``safety.fast_critic`` of a whole config (absent: the defaults) as checked settings."""
    block = select(cfg, "safety.fast_critic")
    if block is not None and not isinstance(block, Mapping):
        raise ConfigError("safety.fast_critic", block, "a mapping of the fast critic's settings")
    return fast_critic_settings(None if block is None else plain(block))


def load_fast_model(settings: FastCriticSettings) -> tuple[FastCriticModel | None, int]:
    """(model, version) of ``settings.weights`` (None, 0 without a file); an unreadable or malformed file raises
    :class:`ConfigError` naming ``safety.fast_critic.weights``."""
    if settings.weights is None:
        return None, 0
    try:
        return FastCriticModel.load(Path(settings.weights).expanduser())
    except FastCriticError as error:
        raise ConfigError("safety.fast_critic.weights", settings.weights, f"a fast-loop risk model ({error})") from None
