"""``robot-rl fast-critic``: fit the safety node's fast-loop risk model to the ticks an episode store kept.

Train with the fast loop in the sim (``safety.fast_critic.sim_rate_hz=500``: every episode keeps its ticks), fit
(``fast_fit.store``, ``fast_fit.out``), then run with the model (``safety.fast_critic.enabled=true
safety.fast_critic.weights=<fast_fit.out>``, in the sim's fast loop or the safety node).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from .config import ConfigError, integer, output_path
from .data import EpisodeStore
from .policies.fast_risk_critic import fast_fit_config, fit_fast_risk_model, ticks_from_store


def fit_fast_critic(cfg: DictConfig) -> dict[str, Any]:
    """Fit and save; returns a report (store, out, rows, positive share, loss, recall of each class)."""
    settings = cfg.fast_fit
    config = fast_fit_config(OmegaConf.to_container(settings, resolve=True))
    out = output_path("fast_fit.out", settings.out, folder=False)
    if out.exists():
        raise ConfigError("fast_fit.out", str(out), "a new file (a fitted model is never overwritten)")
    if not settings.store or not Path(str(settings.store)).is_dir():
        raise ConfigError("fast_fit.store", settings.store, "an episode store")
    features, labels = ticks_from_store(EpisodeStore.open(settings.store), config.horizon, config.labels)
    if not len(labels):
        raise ConfigError(
            "fast_fit.store",
            settings.store,
            "episodes with fast-loop ticks (train with safety.fast_critic.sim_rate_hz)",
        )
    model, report = fit_fast_risk_model(features, labels, config, seed=integer("seed", cfg.seed))
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    return {"store": str(settings.store), "out": str(out), **report}
