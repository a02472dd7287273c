"""Warm starts (WSRL): online training that begins from a pretrained agent instead of random weights.

``init.checkpoint`` names a checkpoint (``robot-rl pretrain``'s run folder or its ``checkpoint/``, or a past training
run's): the learner loads its whole agent (networks, targets, temperature, optimizers) after the task definition
check a resumed run gets. Then, as WSRL prescribes:

1. **warm-up**: the first ``init.warmup_steps`` online steps are rollouts of the pretrained policy, frozen (no update
   is made before they are in: they replace ``train.start_training``); they seed the online buffer and recalibrate
   the Q-function to the states the policy itself visits;
2. **fine-tuning** (SAC family: the policy pulled with ``init.anchor_weight`` towards a slow copy of itself that
   starts at the pretrained policy and follows it by ``init.anchor_tau``, the pull decaying to 0 over
   ``init.anchor_steps`` online steps, :mod:`robot_rl.policies.anchor`) without the offline data
   (``init.retain_offline=false``, the default); with ``true`` the offline
   stores (``init.store``, or by default those the checkpoint was pretrained on) are kept in the demo buffer and
   mixed into every batch at ``train.demo_fraction`` (the offline-retained baseline).

As WSRL keeps no offline data, a warm start also collects no scripted demonstrations: ``train.demo_episodes``
is 0 unless the command line gives it (:func:`robot_rl.core.composed_config.warm_start_without_demos`).

The same in ``robot-rl train``, in the learner node of ``robot-rl launch sim_train|real_train`` (it publishes the
loaded weights before the actor's first step), on a real cell as in the sim. A resumed run (``train.resume``)
continues from its own checkpoint and loads nothing from ``init.checkpoint``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from robot_rl.core.checkpoint import PRETRAIN_FILE, check_task_definition, load_agent
from robot_rl.core.config import Config, ConfigError, is_integer, is_number, require_all, settings_of, yaml_defaults
from robot_rl.core.folders import latest
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.offline_data import add_offline, store_paths


@yaml_defaults("settings/train.yaml", "init")
class InitSettings:
    checkpoint: str | None  # null: random weights (no warm start)
    warmup_steps: int  # online steps of the frozen pretrained policy before the first update
    retain_offline: bool  # keep the offline stores in replay (false: WSRL)
    store: Any  # with retain_offline: stores to keep; null: those the checkpoint was pretrained on (resolved by
    # init_settings to a list of Paths, empty without retain_offline)
    anchor_weight: float  # SAC family: pull towards the pretrained policy, decaying to 0 (policies/anchor.py)
    anchor_steps: int  # online steps over which it decays
    anchor_tau: float  # per actor update, how far the anchor follows the policy (0: the pretrained policy stays it)


def init_settings(cfg: Config) -> InitSettings:
    settings = settings_of("init", InitSettings, cfg.get("init") or {})
    require_all(
        "init",
        settings,
        {
            "warmup_steps": (is_integer(settings.warmup_steps) and settings.warmup_steps >= 0, "an integer >= 0"),
            "retain_offline": (isinstance(settings.retain_offline, bool), "true or false"),
            "anchor_weight": (is_number(settings.anchor_weight) and settings.anchor_weight >= 0, "a number >= 0"),
            "anchor_steps": (is_integer(settings.anchor_steps) and settings.anchor_steps >= 0, "an integer >= 0"),
            "anchor_tau": (is_number(settings.anchor_tau) and 0 <= settings.anchor_tau <= 1, "a number in [0, 1]"),
        },
    )
    stores, settings.store = settings.store, []
    if settings.checkpoint is None:
        return settings
    folder = checkpoint_folder(settings.checkpoint)
    if settings.retain_offline:
        if stores is None:
            record = folder / PRETRAIN_FILE
            if not record.is_file():
                raise ConfigError(
                    "init.store", None, f"the stores to retain ({folder} was not made by robot-rl pretrain)"
                )
            stores = json.loads(record.read_text())["stores"]
        settings.store = store_paths("init.store", stores)
    return settings


def checkpoint_folder(value: Any) -> Path:
    """The folder holding ``agent.pt``: ``value`` itself or its ``checkpoint/`` (a run folder)."""
    path = Path(str(value)).expanduser()
    for folder in (latest(path), latest(path / "checkpoint")):
        if (folder / "agent.pt").is_file():
            return folder
    raise ConfigError("init.checkpoint", str(value), "a checkpoint folder with agent.pt, or a run folder with one")


def warm_settings(learner: Learner, settings: InitSettings) -> None:
    """A warm-started learner makes its first update after the warm-up (its ``start_training``); on resume too."""
    if settings.checkpoint is not None:
        learner.settings = replace(learner.settings, start_training=settings.warmup_steps)


def warm_start(learner: Learner, settings: InitSettings, definition: dict[str, Any]) -> dict[str, Any]:
    """Load the checkpoint's agent into a fresh learner (and the retained stores into its demo buffer); a report."""
    folder = checkpoint_folder(settings.checkpoint)
    check_task_definition(folder, definition, key="init.checkpoint")
    load_agent("init.checkpoint", learner.agent, folder / "agent.pt")
    retained = add_offline("init.store", settings.store, learner.router) if settings.retain_offline else 0
    anchor_policy = getattr(learner.agent, "anchor_policy", None)  # CQN's policy is its critic's argmax: no actor
    if anchor_policy is not None:  # it decides whether weight and steps make an anchor at all
        anchor_policy(settings.anchor_weight, settings.anchor_steps, settings.anchor_tau)
    anchored = getattr(learner.agent, "anchor", None) is not None
    return {
        "checkpoint": str(folder),
        "warmup_steps": settings.warmup_steps,
        "retained_episodes": retained,
        # None: no anchor (switched off, or an agent whose policy is its critic's argmax: CQN has no actor)
        "anchor": {key: getattr(settings, f"anchor_{key}") for key in ("weight", "steps", "tau")} if anchored else None,
    }
