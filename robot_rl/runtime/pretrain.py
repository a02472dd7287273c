"""``robot-rl pretrain``: offline RL on recorded episode stores, the first half of a warm start (WSRL).

The run's agent (``agent=sac|cqn|cqn_as``, state or camera observations) learns from the stores in
``pretrain.store`` (one or a list, sampled in proportion to ``pretrain.weights``) for ``pretrain.updates`` critic
gradient steps, its critic loss made conservative by ``pretrain.algorithm`` (:mod:`robot_rl.policies.conservative`:
Cal-QL as WSRL pretrains, plain CQL, or none). Nothing is collected online; the sim task is only used to evaluate
the policy every ``pretrain.eval_every`` steps.

Run folder ``pretrain.out`` (new): ``checkpoint/`` (``agent.pt`` and ``task_definition.json`` as a training
checkpoint has them, plus ``pretrain.json``: the stores, weights and algorithm), ``tb/`` (TensorBoard),
``config.yaml`` and ``summary.json``. ``robot-rl train init.checkpoint=<pretrain.out>`` fine-tunes from it;
``robot-rl eval eval.checkpoint=<pretrain.out>/checkpoint`` evaluates it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

import torch

from robot_rl.core.checkpoint import PRETRAIN_FILE, write_task_definition
from robot_rl.core.composed_config import save_config
from robot_rl.core.config import (
    Config,
    ConfigError,
    integer,
    is_integer,
    output_path,
    plain,
    positive,
    require_all,
    settings_of,
    yaml_defaults,
)
from robot_rl.core.folders import replacing
from robot_rl.core.interrupts import deferred_interrupt
from robot_rl.data.batches import Batch
from robot_rl.data.samplers import WeightedSampler
from robot_rl.policies.conservative import ConservativeConfig
from robot_rl.runtime.envs import make_env, observation_shapes
from robot_rl.runtime.evaluate import EVAL_SEED, evaluate
from robot_rl.runtime.offline_data import load_offline, store_paths, store_weights
from robot_rl.runtime.replay_router import SafetyRelabel
from robot_rl.runtime.run_loop import RunRecord
from robot_rl.runtime.safety_learning import safety_settings
from robot_rl.runtime.session import make_agent, run_definition
from robot_rl.safety.fast_critic import fast_critic_config


@yaml_defaults("settings/train.yaml", "pretrain")
class PretrainSettings:
    store: Any = None  # an episode store or a list of them (pretrain_settings: a list of Paths)
    weights: list[float] | None  # per store; null: equal
    algorithm: str  # calql | cql | none
    alpha: float
    actions: int
    temperature: float
    bc_weight: float
    updates: int  # critic gradient steps
    batch_size: int
    out: str = "runs/pretrain"
    eval_every: int  # critic steps between evaluations in the sim (0: only at the end)
    eval_episodes: int
    log_every: int  # critic steps between TensorBoard points

    @property
    def conservative(self) -> ConservativeConfig:
        return ConservativeConfig(self.algorithm, self.alpha, self.actions, self.temperature, self.bc_weight)


def pretrain_settings(cfg: Config) -> PretrainSettings:
    settings = settings_of("pretrain", PretrainSettings, cfg["pretrain"])
    settings.conservative.validate()
    for key in ("updates", "batch_size", "log_every"):
        positive(f"pretrain.{key}", getattr(settings, key), integer=True)
    require_all(
        "pretrain",
        settings,
        {
            key: (is_integer(getattr(settings, key)) and getattr(settings, key) >= 0, "an integer >= 0")
            for key in ("eval_every", "eval_episodes")
        },
    )
    settings.store = store_paths("pretrain.store", settings.store)
    settings.weights = store_weights("pretrain.weights", settings.weights, len(settings.store))
    return settings


def pretrain(cfg: Config) -> dict[str, Any]:
    """Pretrain and write the run folder; returns the summary (also ``summary.json``)."""
    settings = pretrain_settings(cfg)
    out = output_path("pretrain.out", settings.out, folder=True)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError("pretrain.out", str(out), "a new folder (a pretraining run is never overwritten)")
    seed = integer("seed", cfg["seed"])
    n_step = positive("train.n_step", cfg["train"]["n_step"], integer=True)
    task = plain(cfg["task"])
    env = make_env(task)
    shapes, action_dim = observation_shapes(env), int(env.action_space.shape[0])
    torch.manual_seed(seed)
    torch.set_num_threads(positive("train.torch_threads", cfg["train"]["torch_threads"], integer=True))
    agent = make_agent(cfg, shapes, action_dim, seed)
    agent.conservative = settings.conservative
    relabel = SafetyRelabel.of(safety_settings(cfg.get("safety")), fast_critic_config(cfg))  # as online steps are
    buffers = load_offline(
        "pretrain.store",
        settings.store,
        shapes,
        action_dim,
        agent.device,
        relabel,
        agent.config.discount,
        agent.frozen_features,
    )
    sampler = WeightedSampler(buffers, settings.weights, seed=seed)

    def sample_batch() -> Batch:
        return sampler.sample(settings.batch_size, n_step, agent.config.discount, agent.sequence_length)

    with replacing(out) as tmp:  # a crash or Ctrl-C leaves no half-written run folder
        save_config(cfg, tmp / "config.yaml")
        utd = int(getattr(agent.config, "utd", 1))
        calls = math.ceil(settings.updates / utd)
        history: list[dict[str, Any]] = []
        run = RunRecord(
            tmp,
            f"pretrain {task.get('name')}",
            total=calls * utd,
            unit="update",
            eval_every=settings.eval_every,
            history=history,
        )
        with run.interruptible() as stop:
            for call in range(1, calls + 1):
                metrics = agent.update(sample_batch)
                steps = call * utd
                run.progress.update(utd)
                if steps % settings.log_every < utd or call == calls:
                    for name, value in metrics.items():
                        run.tb.add_scalar(f"pretrain/{name}", float(value), steps)
                last = call == calls or stop.is_set()
                if settings.eval_episodes and run.evaluations.due(steps, finished=last):
                    run.log_evaluation("updates", steps, evaluate(agent, env, settings.eval_episodes, seed=EVAL_SEED))
                if stop.is_set():
                    break
        run.close_progress()
        run.tb.close()
        env.close()
        with deferred_interrupt():
            summary = {
                "task": task.get("name"),
                "out": str(out),
                "algorithm": settings.algorithm,
                "stores": [str(path) for path in settings.store],
                "weights": settings.weights,
                "transitions": [len(buffer) for buffer in buffers],
                "updates": agent.updates,
                "wall_seconds": run.elapsed(),
                "final_eval_success": history[-1]["success_rate"] if history else None,
                "eval_history": history,
                "interrupted": run.stopped,
            }
            (tmp / "checkpoint").mkdir()
            write_task_definition(tmp / "checkpoint", run_definition(cfg, agent))
            agent.conservative = None  # not part of the agent's state: fine-tuning learns without it
            torch.save(agent.state_dict(), tmp / "checkpoint" / "agent.pt")
            pretrained_on = {key: summary[key] for key in ("algorithm", "stores", "weights", "updates")}
            (tmp / "checkpoint" / PRETRAIN_FILE).write_text(
                json.dumps({**pretrained_on, "conservative": asdict(settings.conservative)}, indent=2)
            )
            (tmp / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary
