"""``robot-rl train``: human-in-the-loop off-policy RL with an actor and a learner.

The actor (main thread) steps the env with the latest policy weights, lets the teleop source
take over, records every episode to the run's episode store and sends transitions to the
learner. The learner (its own thread) fills the replay buffers (demos -> demo buffer,
interventions -> both, policy steps -> online), updates the agent on mixed batches and
publishes weights. They only talk through a :class:`~robot_rl.core.transport.Transport`.

Run folder: ``tb/`` (TensorBoard), ``episodes.zarr``, ``checkpoint/`` (agent, buffers,
counters; ``train.resume=true`` continues from it), ``summary.json``, ``learning_curve.png``.
"""

from __future__ import annotations

import errno
import json
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from robot_rl.core.composed_config import steps_to_record
from robot_rl.core.config import (
    MB,
    ConfigError,
    check_disk_space,
    disk_full,
    free_bytes,
    integer,
    output_path,
    positive,
    settings_of,
    stops_on_full_disk,
)
from robot_rl.core.interrupts import deferred_interrupt, interrupt_requests
from robot_rl.core.transport import LocalTransport
from robot_rl.data import EpisodeRecorder, EpisodeStore, ReplayBuffer
from robot_rl.data.episode_store import bytes_per_step
from robot_rl.runtime.env_workers import EnvWorker
from robot_rl.runtime.envs import fast_loop_of, make_env, make_expert, observation_shapes, task_spec
from robot_rl.runtime.evaluate import EVAL_SEED, evaluate
from robot_rl.runtime.learner import Learner, TrainSettings, settings_from
from robot_rl.runtime.robustness import randomized, robustness_sweep, write_sweep
from robot_rl.runtime.run_folder import resumed_config, run_folder
from robot_rl.runtime.safety_learning import SAFETY_COUNTS
from robot_rl.runtime.session import ActorSession, Counters, LearnerSession, load_checkpoint_agent, make_agent
from robot_rl.runtime.teleop import InterventionRules, NoHuman, ScriptedHuman
from robot_rl.safety.fast_critic import FastCriticSettings, fast_critic_config
from robot_rl.sim.fast_critic_loop import attach_fast_loop


@stops_on_full_disk(
    "train.run_dir",
    "every finished episode and the last checkpoint are kept: free space, then run again with train.resume=true",
)
def train(cfg: DictConfig) -> dict[str, Any]:
    cfg = run_config(cfg)  # a resumed run: its own config.yaml
    settings, seed, task, run_dir = run_settings(cfg)
    envs, humans = acting_envs(cfg, settings, task, seed)
    env, eval_env = envs[0], sim_env(cfg, task, seed, randomize=False)  # evaluation stays nominal
    shapes, action_dim = observation_shapes(env), int(env.action_space.shape[0])
    transport = LocalTransport()
    learning = LearnerSession(cfg, shapes, action_dim, transport)
    acting = ActorSession(cfg, shapes, action_dim, humans[0])
    check_run_disk(cfg, settings, run_dir, learning)
    acting.counters = counters = learning.open(settings.resume)  # every setting is checked by now
    acting.start_from(learning.learner)
    learner = learning.learner
    store = episode_store(cfg, run_dir, task, env)
    recorders = [None if store is None else EpisodeRecorder(store) for _ in envs]  # their episodes interleave

    from torch.utils.tensorboard import SummaryWriter

    tb = SummaryWriter(str(run_dir / "tb"))
    learner.start()
    rng = np.random.default_rng(seed + counters.episodes)

    def next_seed() -> int:
        """The reset seed of the next episode (of any env)."""
        return int(rng.integers(2**31))

    started = time.monotonic() - counters.wall_seconds
    progress = tqdm(
        total=settings.env_steps,
        initial=counters.env_steps,
        desc=f"train {task.get('name')}",
        unit="step",
        mininterval=1.0,
    )

    def between_steps() -> None:
        """Show the count, and keep within ``train.max_lag`` steps of the learner (sim, ``train.sync``)."""
        progress.update(counters.env_steps - progress.n)
        if settings.sync:
            while learner.backlog(transport.sent) > settings.max_lag and learner.error is None:
                time.sleep(0.001)

    evaluations = EvalSchedule(settings.eval_every, counters.history)

    def after_episode(stats: dict[str, Any]) -> None:
        """Between two episodes (of any env): new weights, the episode's log, evaluation and checkpoint when due."""
        if settings.deterministic:
            learner.wait_until_caught_up(transport.sent)
        if learner.error is not None:
            raise RuntimeError("the learner failed") from learner.error
        if acting.take_weights(transport):
            for each in envs[1:]:  # env 0's fast loop is armed at every episode start
                acting.arm_fast_loop(each)
        if not stats["demo"]:
            log_episode(tb, counters, stats, learner, started)
        finished = acting.budget_spent
        if evaluations.due(counters.env_steps, finished):
            acting.arm_fast_loop(eval_env)
            evaluate_and_record(acting.agent, eval_env, settings, finished, tb, counters, started, progress)
        if learning.checkpoint_due(counters.env_steps):
            counters.wall_seconds = time.monotonic() - started
            learner.ingest_everything_sent(transport.sent)
            save_checkpoint(learning, counters)

    interrupted = False
    # Ctrl-C: a stop request checked after every step and between episodes, so it never lands inside
    # an episode commit, an evaluation or a checkpoint write; a second Ctrl-C raises at once
    with interrupt_requests() as stop:
        try:
            while not acting.budget_spent and not stop.is_set():
                if acting.demo_due or len(envs) == 1:  # demonstrations: one at a time, on env 0
                    stats = acting.play(env, transport, recorders[0], next_seed(), between_steps, stop)
                    if stats is None:
                        break  # stopped mid-episode: its recording is dropped
                    after_episode(stats)
                    continue
                for stats in acting.play_envs(envs, humans, transport, recorders, next_seed, between_steps, stop):
                    after_episode(stats)
        except KeyboardInterrupt:  # a second Ctrl-C, or SIGTERM
            interrupted = True
            for recorder in recorders:
                if recorder is not None:
                    recorder.discard()
        except OSError:  # a full disk (raised as one line by stops_on_full_disk): the open episodes' files go now
            for recorder in recorders:
                if recorder is not None:
                    recorder.discard()
            raise
        finally:
            learner.close()
            learner.ingest_everything_sent(transport.sent)
            progress.close()
            for each in [*envs, eval_env]:
                each.close()
    return finish_run(run_dir, learning, counters, task, interrupted or stop.is_set(), started, tb)


def finish_run(
    run_dir: Path,
    learning: LearnerSession,
    counters: Counters,
    task: dict[str, Any],
    interrupted: bool,
    started: float,
    tb,
    **extra: Any,
) -> dict[str, Any]:
    """The end of a training run: the final checkpoint, ``summary.json`` (with ``extra`` entries) and the learning
    curve; returns the summary."""
    counters.wall_seconds = time.monotonic() - started
    with deferred_interrupt():
        save_checkpoint(learning, counters)
    tb.close()
    summary = write_summary(run_dir, counters, task, interrupted, learning.warm_start, **extra)
    plot_learning_curve(run_dir / "learning_curve.png", counters, task.get("name"))
    return summary


def checkpoint_bytes(learning: LearnerSession) -> int:
    """Bytes a checkpoint takes on disk, about: the agent's tensors (networks and optimizer state) and the columns of
    both replay buffers, saved whole."""
    learner = learning.learner
    buffers = sum(
        ReplayBuffer.nbytes(b.capacity, b.observation_space, b.action_dim) for b in (learner.online, learner.demo)
    )
    return buffers + tensor_bytes(learner.agent.state_dict())


def tensor_bytes(state: Any) -> int:
    """Bytes of the tensors in a (nested) state dict."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(tensor_bytes(value) for value in state.values())
    if isinstance(state, (list, tuple)):
        return sum(tensor_bytes(value) for value in state)
    return 0


def check_run_disk(cfg: DictConfig, settings: TrainSettings, run_dir: Path, learning: LearnerSession) -> None:
    """Before the run writes anything: refuse a run folder whose disk has less than ``data.min_free_mb`` free, warn
    when it has less than the run may write (its episodes, :func:`~robot_rl.data.episode_store.bytes_per_step` times
    the step budget and the demonstrations' steps, and two checkpoints: a new one is written beside the last)."""
    steps = steps_to_record(cfg)
    online = learning.learner.online
    shapes = {key: shape for key, (shape, _) in online.observation_space.items()}
    episodes = steps * bytes_per_step(shapes, online.action_dim) if settings.record_episodes else 0
    need = episodes + 2 * checkpoint_bytes(learning)
    check_disk_space("train.run_dir", run_dir, need, OmegaConf.select(cfg, "data.min_free_mb", default=0))


def save_checkpoint(learning: LearnerSession, counters: Counters) -> None:
    """``learning.save``; a write that failed because the checkpoint does not fit on the disk is raised as ENOSPC
    (torch.save says only "unexpected pos", numpy's save "N requested and M written"). The last checkpoint stays as
    it was."""
    try:
        learning.save(counters)
    except (RuntimeError, OSError) as error:
        need, free = checkpoint_bytes(learning), free_bytes(learning.checkpoint_dir)
        if disk_full(error) or free >= need + MB:
            raise
        raise OSError(
            errno.ENOSPC, f"a checkpoint of {need / MB:.1f} MB does not fit in {free / MB:.1f} MB free"
        ) from error


def run_settings(cfg: DictConfig) -> tuple[TrainSettings, int, dict[str, Any], Path]:
    """(train settings, seed, task, run folder) of a training run, checked: a new run folder, or with
    ``train.resume`` a run folder with a checkpoint (:func:`~robot_rl.runtime.run_folder.run_folder`)."""
    settings = settings_from(cfg.train)
    seed = integer("seed", cfg.seed)
    task = OmegaConf.to_container(cfg.task, resolve=True)
    run_dir = run_folder(settings.run_dir, settings.resume)
    fast_critic_needs_a_rate(fast_critic_config(cfg))
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(settings.deterministic)
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


def run_config(cfg: DictConfig, given: list[str] | tuple[str, ...] = ()) -> DictConfig:
    """The configuration a training run runs with: ``cfg``, or with ``train.resume=true`` on a run folder the run's own
    ``config.yaml`` with the budget and evaluation keys ``cfg`` changes (:func:`~robot_rl.runtime.run_folder.resumed_config`;
    ``given``: the command line's keys). Bad input raises ConfigError."""
    if cfg.train.get("resume") is not True:
        return cfg
    run_folder(cfg.train.run_dir, True)
    return resumed_config(cfg, given)


def sim_env(cfg: DictConfig, task: dict[str, Any], seed: int, randomize: bool):
    """The task's env: randomized (``cfg.randomization``, draws from ``seed``) for acting, nominal for evaluation;
    with the safety node's tick in the control substeps (``safety.fast_critic.sim_rate_hz``)."""
    env = randomized(make_env(task), cfg.get("randomization"), seed) if randomize else make_env(task)
    attach_fast_loop(env, fast_loop_of(cfg))
    return env


def acting_envs(cfg: DictConfig, settings: TrainSettings, task: dict[str, Any], seed: int) -> tuple[list, list]:
    """The ``train.num_envs`` envs that act (env k randomized from ``seed + 1000 k``) and their scripted humans: in
    this process, or with ``train.vectorization=async`` each env with its human in a worker process of its own
    (:class:`~robot_rl.runtime.env_workers.EnvWorker`)."""
    seeds = [seed + 1000 * k for k in range(settings.num_envs)]
    if settings.vectorization == "async" and settings.num_envs > 1:
        config = OmegaConf.to_container(cfg, resolve=True)
        envs = [EnvWorker(partial(worker_env, config, task, each), name=f"env{k}") for k, each in enumerate(seeds)]
        return envs, [each.human for each in envs]
    envs = [sim_env(cfg, task, each, randomize=True) for each in seeds]
    return envs, [scripted_human(cfg, task, each) for each in envs]


def worker_env(config: dict[str, Any], task: dict[str, Any], seed: int) -> tuple[Any, Any]:
    """An env worker's (randomized env, scripted human), built in the worker from the run's resolved config."""
    cfg = OmegaConf.create(config)
    env = sim_env(cfg, task, seed, randomize=True)
    return env, scripted_human(cfg, task, env)


def scripted_human(cfg: DictConfig, task: dict[str, Any], env):
    """The scripted human of ``human.*`` on ``env`` (demos and takeovers), or none when neither is asked for."""
    rules = settings_of("human", InterventionRules, OmegaConf.to_container(cfg.human, resolve=True))
    return ScriptedHuman(make_expert(task, env), rules) if cfg.train.demo_episodes or rules.enabled else NoHuman()


def episode_store(cfg: DictConfig, run_dir: Path, task: dict[str, Any], env) -> EpisodeStore | None:
    """The run's ``episodes.zarr`` (``train.record_episodes``), or None."""
    if not cfg.train.record_episodes:
        return None
    metadata = {**task_spec(task, env).metadata(), "config": OmegaConf.to_container(cfg, resolve=True)}
    return EpisodeStore.create(run_dir / "episodes.zarr", metadata)


def recent_intervention_rate(counters: Counters, window: int = 20) -> float:
    recent = counters.episode_log[-window:]
    steps = sum(e["length"] for e in recent)
    return sum(e["interventions"] for e in recent) / steps if steps else 0.0


def log_episode(tb, counters: Counters, stats: dict[str, Any], learner: Learner, started: float) -> None:
    counters.episode_log.append({"env_steps": counters.env_steps, **stats})
    step = counters.env_steps
    elapsed = time.monotonic() - started
    tb.add_scalar("train/success", float(stats["success"]), step)
    tb.add_scalar("train/return", stats["return"], step)
    tb.add_scalar("train/episode_length", stats["length"], step)
    tb.add_scalar("train/intervention_rate", stats["interventions"] / stats["length"], step)
    tb.add_scalar("train/continuity_cost", stats["continuity_cost"], step)
    for key in SAFETY_COUNTS:
        tb.add_scalar(f"safety/{key}", stats[key], step)
    tb.add_scalar("speed/env_steps_per_s", step / max(elapsed, 1e-6), step)
    tb.add_scalar("speed/updates_per_s", learner.updates_per_second, step)
    for key, value in learner.metrics.items():
        tb.add_scalar(f"learner/{key}", value, step)


class EvalSchedule:
    """When a run evaluates: every ``train.eval_every`` online steps, and once more when the step budget is spent
    (the last episodes of several envs or actors all end after it: the final evaluation is made once)."""

    def __init__(self, every: int, history: list[dict[str, Any]]):
        self.every = every
        self.last = history[-1]["env_steps"] if history else 0  # a resumed run's last evaluation
        self.final_made = False

    def due(self, env_steps: int, finished: bool) -> bool:
        """Whether to evaluate now, at ``env_steps`` online steps (``finished``: the budget is spent)."""
        if self.final_made or not (finished or env_steps - self.last >= self.every):
            return False
        self.last, self.final_made = env_steps, finished
        return True


def evaluate_and_record(
    agent, eval_env, settings: TrainSettings, finished: bool, tb, counters: Counters, started: float, progress
) -> None:
    """A training run's deterministic evaluation (``train.eval_episodes`` episodes, ``train.final_eval_episodes`` at
    the end, on the seeds from ``EVAL_SEED`` on): in the run's history, TensorBoard and the progress bar. The agent
    evaluates with acting state of its own (:meth:`~robot_rl.policies.base.OffPolicyAgent.evaluating`): the acting
    episodes in progress (N envs stepped together) go on with their gripper commands, action chunks and noise."""
    episodes = settings.final_eval_episodes if finished else settings.eval_episodes
    if finished:  # the bar is full: say what the run does meanwhile (50 episodes take half a minute)
        progress.set_postfix_str(f"final evaluation: {episodes} episodes", refresh=True)
    with agent.evaluating():
        result = evaluate(agent, eval_env, episodes, seed=EVAL_SEED)
    record_eval(tb, counters, result, started)
    progress.set_postfix(
        eval_success=f"{result['success_rate']:.2f}", interventions=f"{recent_intervention_rate(counters):.2f}"
    )


def record_eval(tb, counters: Counters, result: dict[str, Any], started: float) -> None:
    entry = {
        "env_steps": counters.env_steps,
        "wall_seconds": time.monotonic() - started,
        "intervention_rate": recent_intervention_rate(counters),
        **result,
    }
    counters.history.append(entry)
    tb.add_scalar("eval/success", result["success_rate"], counters.env_steps)
    tb.add_scalar("eval/episode_length", result["mean_length"], counters.env_steps)
    tb.add_scalar("eval/return", result["mean_return"], counters.env_steps)
    tb.add_scalar("eval/continuity_cost", result["continuity_cost"], counters.env_steps)


def write_summary(
    run_dir: Path,
    counters: Counters,
    task: dict,
    interrupted: bool,
    warm_start: dict[str, Any] | None = None,
    **extra: Any,
) -> dict:
    final = counters.history[-1] if counters.history else {}
    summary = {
        "task": task.get("name"),
        "run_dir": str(run_dir),
        "env_steps": counters.env_steps,
        "episodes": counters.episodes,
        "demo_episodes": counters.demo_episodes_done,
        "intervention_steps": counters.intervention_steps,
        "wall_seconds": counters.wall_seconds,
        "final_eval_success": final.get("success_rate"),
        "final_eval_mean_length": final.get("mean_length"),
        "final_eval_continuity_cost": final.get("continuity_cost"),
        "train_continuity_cost": per_episode(counters, "continuity_cost"),
        "violations_per_100_episodes": per_episode(counters, "violations", 100),
        "filter_interventions_per_100_episodes": per_episode(counters, "filter_interventions", 100),
        "fast_filtered_steps_per_100_episodes": per_episode(counters, "fast_filtered_steps", 100),
        "best_eval_success": max((h["success_rate"] for h in counters.history), default=None),
        "eval_history": counters.history,
        "warm_start": warm_start,  # what init.checkpoint loaded (None: random initial weights, or a resumed run)
        "interrupted": interrupted,
        **extra,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def per_episode(counters: Counters, key: str, scale: float = 1.0) -> float | None:
    """Mean of ``key`` over the online episodes, times ``scale`` (None before the first)."""
    values = [e[key] for e in counters.episode_log if key in e]
    return float(scale * np.mean(values)) if values else None


def plot_learning_curve(path: Path, counters: Counters, title: str | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5), dpi=120)
    if counters.history:
        steps = [h["env_steps"] for h in counters.history]
        axis.plot(steps, [h["success_rate"] for h in counters.history], "o-", label="eval success (deterministic)")
    if counters.episode_log:
        steps = [e["env_steps"] for e in counters.episode_log]
        rates = [e["interventions"] / e["length"] for e in counters.episode_log]
        window = max(1, len(rates) // 20)
        smoothed = np.convolve(rates, np.ones(window) / window, mode="same")
        axis.plot(steps, smoothed, label="intervention rate (train)")
    axis.set_xlabel("online env steps")
    axis.set_ylim(-0.02, 1.02)
    axis.set_title(f"robot_rl: {title}")
    axis.legend(loc="center right")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def evaluate_checkpoint(cfg: DictConfig) -> dict[str, Any]:
    """``robot-rl eval``: load ``eval.checkpoint`` and run deterministic episodes."""
    episodes = positive("eval.episodes", cfg.eval.episodes, integer=True)
    points = positive("eval.grid_points", cfg.eval.grid_points, integer=True)
    eval_seed = integer("eval.seed", cfg.eval.seed)
    if cfg.eval.video is not None:
        output_path("eval.video", cfg.eval.video, folder=False)
    if cfg.eval.report_dir is not None:
        output_path("eval.report_dir", cfg.eval.report_dir, folder=True)
    task = OmegaConf.to_container(cfg.task, resolve=True)
    env = make_env(task)
    agent = make_agent(cfg, observation_shapes(env), int(env.action_space.shape[0]), integer("seed", cfg.seed))
    folder = load_checkpoint_agent(agent, cfg)
    randomization = cfg.get("randomization")
    if randomization:
        env.close()
        rows = robustness_sweep(
            agent, task, OmegaConf.to_container(randomization, resolve=True), points, episodes, eval_seed
        )
        name = randomization.get("name", "randomization")
        files = write_sweep(
            Path(cfg.eval.report_dir or folder.parent / f"robustness_{name}"),
            rows,
            f"{task.get('name')}: success under {name} perturbations",
        )
        return {
            "task": task.get("name"),
            "checkpoint": str(folder),
            "randomization": name,
            "files": files,
            "table": [{k: row[k] for k in ("entry", "value", "success_rate", "mean_length")} for row in rows],
        }
    result = evaluate(agent, env, episodes, seed=eval_seed, video=cfg.eval.video)
    env.close()
    return {"task": task.get("name"), "checkpoint": str(folder), **result}
