"""What a training run in simulation is built from: its checked settings and run folder, its envs (randomized for
acting, nominal for evaluation) with their scripted humans, and its episode store. ``robot-rl train`` and the Ray
fleet's driver and actors build theirs here."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import torch

from robot_rl.core.config import Config, ConfigError, integer, plain, settings_of
from robot_rl.data import EpisodeStore
from robot_rl.runtime.env_workers import EnvWorker
from robot_rl.runtime.envs import fast_loop_of, make_env, make_expert, task_spec
from robot_rl.runtime.robustness import randomized
from robot_rl.runtime.run_folder import run_folder
from robot_rl.runtime.teleop import InterventionRules, NoHuman, ScriptedHuman
from robot_rl.runtime.train_settings import TrainSettings, settings_from
from robot_rl.safety.fast_critic import FastCriticSettings, fast_critic_config
from robot_rl.sim.fast_critic_loop import attach_fast_loop


def run_settings(cfg: Config) -> tuple[TrainSettings, int, dict[str, Any], Path]:
    """(train settings, seed, task, run folder) of a training run, checked: a new run folder, or with
    ``train.resume`` a run folder with a checkpoint (:func:`~robot_rl.runtime.run_folder.run_folder`)."""
    settings = settings_from(cfg["train"])
    seed = integer("seed", cfg["seed"])
    task = plain(cfg["task"])
    run_dir = run_folder(settings.run_dir, settings.resume)
    fast_critic_needs_a_rate(fast_critic_config(cfg))
    torch.manual_seed(seed)
    if torch.are_deterministic_algorithms_enabled() != settings.deterministic:  # the call imports torch's compiler
        torch.use_deterministic_algorithms(settings.deterministic)  # stack (1.5-3 s a process): only to change it
    return settings, seed, task, run_dir


def fast_critic_needs_a_rate(fast: FastCriticSettings) -> None:
    """In ``robot-rl train`` the fast critic runs in the sim's fast loop, at ``safety.fast_critic.sim_rate_hz``: asked
    for (``enabled``, ``learn`` or ``probe``) without that rate it would never run, so it is refused (ConfigError), as
    any setting that cannot take effect (the graph's safety node runs it at its own ``--rate-hz``)."""
    asked = [key for key, on in (("enabled", fast.enabled), ("learn", fast.learn), ("probe", fast.probe > 0)) if on]
    if asked and fast.sim_rate_hz is None:
        raise ConfigError(
            "safety.fast_critic.sim_rate_hz",
            None,
            f"a tick rate in Hz (e.g. 500) with safety.fast_critic.{asked[0]} in robot-rl train: the sim runs the "
            "fast critic in its control substeps at that rate, and without one it does not run at all",
        )


def sim_env(cfg: Config, task: dict[str, Any], seed: int, randomize: bool):
    """The task's env: randomized (``cfg.randomization``, draws from ``seed``) for acting, nominal for evaluation;
    with the safety node's tick in the control substeps (``safety.fast_critic.sim_rate_hz``)."""
    env = randomized(make_env(task), cfg.get("randomization"), seed) if randomize else make_env(task)
    attach_fast_loop(env, fast_loop_of(cfg))
    return env


def acting_envs(cfg: Config, settings: TrainSettings, task: dict[str, Any], seed: int) -> tuple[list, list]:
    """The ``train.num_envs`` envs that act (env k randomized from ``seed + 1000 k``) and their scripted humans: in
    this process, or with ``train.vectorization=async`` each env with its human in a worker process of its own
    (:class:`~robot_rl.runtime.env_workers.EnvWorker`)."""
    seeds = [seed + 1000 * k for k in range(settings.num_envs)]
    if settings.vectorization == "async" and settings.num_envs > 1:
        config = plain(cfg)  # to the workers as plain values
        envs = [EnvWorker(partial(worker_env, config, task, each), name=f"env{k}") for k, each in enumerate(seeds)]
        return envs, [each.human for each in envs]
    envs = [sim_env(cfg, task, each, randomize=True) for each in seeds]
    return envs, [scripted_human(cfg, task, each) for each in envs]


def worker_env(config: dict[str, Any], task: dict[str, Any], seed: int) -> tuple[Any, Any]:
    """An env worker's (randomized env, scripted human), built in the worker from the run's resolved config."""
    env = sim_env(config, task, seed, randomize=True)
    return env, scripted_human(config, task, env)


def scripted_human(cfg: Config, task: dict[str, Any], env):
    """The scripted human of ``human.*`` on ``env`` (demos and takeovers), or none when neither is asked for."""
    rules = settings_of("human", InterventionRules, cfg["human"])
    return ScriptedHuman(make_expert(task, env), rules) if cfg["train"]["demo_episodes"] or rules.enabled else NoHuman()


def episode_store(cfg: Config, run_dir: Path, task: dict[str, Any], env) -> EpisodeStore | None:
    """The run's ``episodes.zarr`` (``train.record_episodes``), or None."""
    if not cfg["train"]["record_episodes"]:
        return None
    metadata = {**task_spec(task, env).metadata(), "config": plain(cfg)}
    return EpisodeStore.create(run_dir / "episodes.zarr", metadata)
