"""``robot-rl fast-critic``: fit the safety node's fast-loop risk model to the ticks an episode store kept.

Train with the fast loop in the sim (``safety.fast_critic.sim_rate_hz=500``: every episode keeps its ticks), fit
(``fast_critic.store``, ``fast_critic.out``), then run with the model (``safety.fast_critic.enabled=true
safety.fast_critic.weights=<fast_critic.out>``, in the sim's fast loop or the safety node).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.config import Config, ConfigError, integer, output_path
from robot_rl.data import EpisodeStore
from robot_rl.policies.fast_critic import (
    FastCriticFitSettings,
    fast_critic_fit_settings,
    fit_fast_risk_model,
    ticks_from_store,
)


def fit_fast_critic(cfg: Config) -> dict[str, Any]:
    """Fit and save; returns a report (store, out, rows, positive share, loss, recall of each class)."""
    settings = cfg["fast_critic"]
    config = fast_critic_fit_settings(settings)
    out = output_path("fast_critic.out", settings["out"], folder=False)
    if out.exists():
        raise ConfigError("fast_critic.out", str(out), "a new file (a fitted model is never overwritten)")
    features, labels = store_ticks("fast_critic.store", settings["store"], config)
    model, report = fit_fast_risk_model(features, labels, config, seed=integer("seed", cfg["seed"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    return {"store": str(settings["store"]), "out": str(out), **report}


def store_ticks(key: str, store: Any, config: FastCriticFitSettings) -> tuple[np.ndarray, np.ndarray]:
    """(features, labels) of the fast-loop ticks the episode store ``store`` kept, labelled as ``config`` says
    (``horizon``, ``labels``); a path that is no store, episodes of two tasks' widths or a store without ticks raise
    :class:`ConfigError` naming ``key``."""
    if not store or not Path(str(store)).is_dir():
        raise ConfigError(key, store, "an episode store (a folder robot-rl collect or train wrote)")
    try:
        features, labels = ticks_from_store(EpisodeStore.open(store), config.horizon, config.labels)
    except ValueError as error:  # EpisodeStoreError too
        raise ConfigError(key, store, f"episodes of one task's ticks ({error})") from None
    if not len(labels):
        raise ConfigError(key, store, "episodes with fast-loop ticks (recorded with safety.fast_critic.sim_rate_hz)")
    return features, labels
