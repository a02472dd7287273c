"""``robot-rl train``: human-in-the-loop off-policy RL with an actor and a learner.

The actor (main thread) steps the env with the latest policy weights, lets the teleop source
take over, records every episode to the run's episode store and sends transitions to the
learner. The learner (its own thread) fills the replay buffers (demos -> demo buffer,
interventions -> both, policy steps -> online), updates the agent on mixed batches and
publishes weights. They only talk through a :class:`~robot_rl.transport.Transport`.

Run folder: ``tb/`` (TensorBoard), ``episodes.zarr``, ``checkpoint/`` (agent, buffers,
counters; ``train.resume=true`` continues from it), ``summary.json``, ``learning_curve.png``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from .actor import run_episode
from .checkpoint import check_task_definition, load_agent, load_tensors, task_definition, write_task_definition
from .config import ConfigError, integer, is_integer, is_number, output_path, positive, require_all, settings_of
from .data import EpisodeStore, MixedSampler, ReplayBuffer
from .data.transition import Transition
from .envs import load_entry_point, make_env, make_expert, observation_shapes, store_metadata
from .evaluate import evaluate
from .folders import latest, replacing
from .interrupts import deferred_interrupt, interrupt_requests
from .robustness import randomized, robustness_sweep, write_sweep
from .safety.training import SafetyActor, SafetySettings, make_safety_learner, safety_settings
from .teleop import InterventionRules, NoHuman, ScriptedHuman
from .transport import DeliveryLedger, LocalTransport, Transport


@dataclass
class TrainSettings:
    run_dir: str = "runs/default"
    resume: bool = False
    env_steps: int = 16_000  # online env steps (demos not counted)
    demo_episodes: int = 20
    start_training: int = 200  # online transitions before the first update
    batch_size: int = 128
    demo_fraction: float = 0.5
    n_step: int = 1
    buffer_capacity: int = 200_000
    weights_every: int = 20  # learner update calls between weight publications
    sync: bool = True  # sim: the actor waits for the learner so the update-to-data ratio holds
    max_lag: int = 20  # env steps the actor may run ahead of the learner when sync
    eval_every: int = 2_000
    eval_episodes: int = 20
    final_eval_episodes: int = 50
    checkpoint_every: int = 4_000
    record_episodes: bool = True
    torch_threads: int = 1
    deterministic: bool = False  # same seed, same weights: the actor takes new weights only once the learner has
    # caught up with every step sent (slower), and torch uses deterministic algorithms


@dataclass
class Counters:
    env_steps: int = 0
    episodes: int = 0
    demo_episodes_done: int = 0
    intervention_steps: int = 0
    wall_seconds: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)  # per evaluation
    episode_log: list[dict[str, Any]] = field(default_factory=list)  # per online episode


def settings_from(cfg: DictConfig) -> TrainSettings:
    settings = settings_of("train", TrainSettings, OmegaConf.to_container(cfg, resolve=True))
    for key in (
        "env_steps",
        "batch_size",
        "n_step",
        "buffer_capacity",
        "weights_every",
        "eval_every",
        "eval_episodes",
        "final_eval_episodes",
        "checkpoint_every",
        "torch_threads",
        "max_lag",
    ):
        positive(f"train.{key}", getattr(settings, key), integer=True)
    require_all(
        "train",
        settings,
        {
            "run_dir": (
                isinstance(settings.run_dir, str) and settings.run_dir.strip() != "",
                "the path of the run folder",
            ),
            "demo_episodes": (is_integer(settings.demo_episodes) and settings.demo_episodes >= 0, "an integer >= 0"),
            "start_training": (is_integer(settings.start_training) and settings.start_training >= 0, "an integer >= 0"),
            "demo_fraction": (
                is_number(settings.demo_fraction) and 0.0 <= settings.demo_fraction <= 1.0,
                "a number in [0, 1]",
            ),
            **{
                key: (isinstance(getattr(settings, key), bool), "true or false")
                for key in ("resume", "sync", "record_episodes", "deterministic")
            },
        },
    )
    return settings


def updates_due(online_received: int, update_calls: int, start_training: int) -> int:
    """Updates a learner owes: one per online transition after the first ``start_training``, less those made."""
    return max(online_received - start_training, 0) - update_calls


def make_agent(cfg: DictConfig, observation_shapes: dict[str, tuple[int, ...]], action_dim: int, seed: int):
    """The agent named by ``cfg.agent`` (entry point + its config dataclass)."""
    agent_cfg = OmegaConf.to_container(cfg.agent, resolve=True)
    entry_point, config_entry_point = agent_cfg.pop("entry_point"), agent_cfg.pop("config")
    agent_cfg.pop("name", None)
    config = settings_of("agent", load_entry_point(config_entry_point), agent_cfg)
    return load_entry_point(entry_point)(observation_shapes, action_dim, config, seed=seed)


class Learner:
    """Replay buffers + agent updates; runs in its own thread.

    Ingesting: demo episodes go to the demo buffer, online steps to the online buffer, and every
    human takeover to the demo buffer as well, each takeover as a segment of its own (it starts
    at the observation where the human took over, not where the last takeover ended). A step the
    safety filter changed costs ``safety.penalty`` and, with ``safety.relabel=proposed``, is
    learned by the task policy as the action it proposed (Recovery RL: the filter is part of the
    environment); the buffers keep the executed action too, for the safety critic.
    """

    def __init__(
        self,
        agent,
        settings: TrainSettings,
        shapes: dict[str, tuple[int, ...]],
        action_dim: int,
        transport: Transport,
        seed: int,
        safety=None,
        safety_settings: SafetySettings | None = None,
    ):
        self.agent, self.settings, self.transport = agent, settings, transport
        self.safety = safety  # SafetyLearner or None
        enabled = safety_settings is not None and safety_settings.enabled
        self.safety_penalty = safety_settings.penalty if enabled else 0.0
        self.relabel_proposed = enabled and safety_settings.relabel == "proposed"
        space = {key: (shape, np.uint8 if len(shape) == 3 else np.float32) for key, shape in shapes.items()}
        self.online = ReplayBuffer(settings.buffer_capacity, space, action_dim)
        self.demo = ReplayBuffer(settings.buffer_capacity, space, action_dim)
        self.sampler = MixedSampler(self.online, self.demo, settings.demo_fraction, seed=seed)
        self.ledger = DeliveryLedger()  # what was ingested, per actor stream and episode
        self.last_step: dict[str, tuple[Any, Any, np.ndarray, bool]] = {}  # per stream: (episode, step, action, human)
        self.online_received = 0
        self.received = 0  # transitions received from the transport
        self.pending: deque[Transition] = deque()  # received, not ingested yet (one at a time, between updates)
        self.taken = 0  # transitions ingested or refused by the ledger
        self.running = False  # run() is receiving: nobody else may
        self.thread: threading.Thread | None = None
        self.update_calls = 0
        self.metrics: dict[str, float] = {}
        self.lock = threading.Lock()  # held during updates and checkpointing
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.updates_per_second = 0.0
        self.reported = (-1, -1)  # the progress last published on the transport

    def ingest(self, transitions: list[Transition]) -> None:
        for t in transitions:
            self._ingest_one(t)
            self.taken += 1  # after its online count: a reader of backlog() never sees it taken but not yet due

    def _ingest_one(self, t: Transition) -> None:
        if not self.ledger.accept(t):
            return
        if t.first:  # a new episode, even if the last one never ended (budget, crash)
            self.online.close_episode()
            self.demo.close_episode()
        learned = t.policy_action if t.filtered and self.relabel_proposed else t.action
        args = (
            t.obs,
            t.action,
            t.reward - self.safety_penalty * t.filtered,
            t.next_obs,
            t.terminated,
            t.truncated,
            t.intervened,
            t.cost,
            learned,
        )
        if t.demo:
            self.demo.add(*args)
            return
        self.online.add(*args)
        self.online_received += 1
        before = self.last_step.get(t.actor)
        follows = (
            before is not None
            and not t.first
            and before[0] == t.episode
            and (t.step is None or before[1] == t.step - 1)
        )
        if t.intervened:
            if not (follows and before[3]):  # a new takeover: a segment of its own
                self.demo.close_episode()
            self.demo.add(*args, opening_action=before[2] if follows else None)
        self.last_step[t.actor] = (t.episode, t.step, np.asarray(learned), t.intervened)

    def ingest_locked(self, transitions: list[Transition]) -> None:
        """:meth:`ingest` under the lock, so a checkpoint never sees a buffer half-way through an add."""
        if transitions:
            with self.lock:
                self.ingest(transitions)

    def published_weights(self) -> dict[str, Any]:
        """The actor's policy weights, plus the safety filter's risk model once it is trained enough."""
        weights = self.agent.policy_state()
        if self.safety is not None:
            weights.update(self.safety.weights(self.online_received))
        return weights

    def due_updates(self) -> int:
        return updates_due(self.online_received, self.update_calls, self.settings.start_training)

    def backlog(self, sent: int) -> int:
        """How far the learner is behind an actor that has sent ``sent`` transitions: those it has not
        taken yet (each online one will make an update due) plus the updates already due."""
        return sent - self.taken + self.due_updates()

    def sample(self) -> dict[str, Any]:
        return self.sampler.sample(
            self.settings.batch_size,
            n_step=self.settings.n_step,
            gamma=self.agent.config.discount,
            sequence_length=self.agent.sequence_length,
        )

    def start(self) -> None:
        """Run :meth:`run` in a daemon thread."""
        self.running = True  # before the thread starts: from now on only it receives
        self.thread = threading.Thread(target=self.run, name="learner", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop the thread; what it received and did not ingest yet stays in :attr:`pending`."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join()

    def run(self) -> None:
        """Ingest each transition, then make the updates it made due: update k always sees the first
        ``start_training + k`` online steps, however the actor's sends were batched."""
        self.running = True
        try:
            torch.set_num_threads(self.settings.torch_threads)
            started, calls_at_start = time.monotonic(), self.update_calls
            while not self.stop.is_set():
                self.receive(timeout=0.0 if self.pending else 0.01)
                self.ingest_next()
                self.report_progress()
                self.update_while_due()  # also a resumed run's updates, due before anything arrives
                elapsed = time.monotonic() - started
                self.updates_per_second = (
                    (self.update_calls - calls_at_start) * self.agent.config.utd / max(elapsed, 1e-6)
                )
        except BaseException as error:  # noqa: BLE001 - surfaced by the actor thread
            self.error = error
        finally:
            self.running = False

    def receive(self, timeout: float) -> None:
        received = self.transport.receive_transitions(timeout=timeout)
        with self.lock:
            self.pending.extend(received)
            self.received += len(received)

    def ingest_next(self) -> None:
        with self.lock:
            if self.pending:
                self.ingest([self.pending.popleft()])

    def ingest_everything_sent(self, sent: int) -> None:
        """Put every one of the ``sent`` transitions into the buffers now, their updates left due, so a
        checkpoint holds every step the actor counted. Works while :meth:`run` runs and after it stopped."""
        while self.received < sent and self.error is None:
            if self.running:
                time.sleep(0.0005)  # run() receives between two updates
            else:
                self.receive(timeout=0.01)
        with self.lock:
            while self.pending:
                self.ingest([self.pending.popleft()])

    def update_while_due(self) -> None:
        while self.due_updates() > 0 and not self.stop.is_set():
            with self.lock:
                metrics = self.agent.update(self.sample)
                if self.safety is not None:
                    metrics.update(self.safety.update(self.online))
                self.metrics = metrics  # replaced whole: the actor thread reads it
                if (self.update_calls + 1) % self.settings.weights_every == 0:  # out before the count says caught up
                    self.transport.publish_weights(self.update_calls + 1, self.published_weights())
                self.update_calls += 1
            self.report_progress()

    def report_progress(self) -> None:
        """Publish (online transitions ingested, updates made) on the transport when it changed (from the thread
        that changes it, so an actor waiting on it hears at once)."""
        now = (self.online_received, self.update_calls)
        if now != self.reported:
            self.reported = now
            self.transport.publish_progress(*now)

    def wait_until_caught_up(self, sent: int) -> None:
        """Block until every one of the ``sent`` transitions is ingested and its updates are made."""
        while self.backlog(sent) > 0 and self.error is None and not self.stop.is_set():
            time.sleep(0.0005)


def train(cfg: DictConfig) -> dict[str, Any]:
    settings = settings_from(cfg.train)
    safety = safety_settings(cfg.get("safety"))
    rules = settings_of("human", InterventionRules, OmegaConf.to_container(cfg.human, resolve=True))
    seed = integer("seed", cfg.seed)
    task = OmegaConf.to_container(cfg.task, resolve=True)
    run_dir = output_path("train.run_dir", settings.run_dir, folder=True)
    checkpoint_dir = run_dir / "checkpoint"
    if run_dir.exists() and any(run_dir.iterdir()) and not settings.resume:
        raise ConfigError("train.run_dir", str(run_dir), "a new folder (or train.resume=true to continue that run)")
    if settings.resume and not (
        (run_dir / "config.yaml").is_file() and (latest(checkpoint_dir) / "counters.json").is_file()
    ):
        raise ConfigError(
            "train.resume", True, f"a robot_rl run folder (config.yaml and a checkpoint); {run_dir} is not one"
        )
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(settings.deterministic)

    env = randomized(make_env(task), cfg.get("randomization"), seed)  # evaluation stays nominal
    eval_env = make_env(task)
    shapes, action_dim = observation_shapes(env), int(env.action_space.shape[0])
    learner_agent = make_agent(cfg, shapes, action_dim, seed)
    actor_agent = make_agent(cfg, shapes, action_dim, seed)
    if settings.demo_episodes or rules.enabled:
        human = ScriptedHuman(make_expert(task, env), rules)
    else:
        human = NoHuman()
    transport = LocalTransport()
    learner = Learner(
        learner_agent,
        settings,
        shapes,
        action_dim,
        transport,
        seed,
        make_safety_learner(safety, shapes, action_dim, seed),
        safety,
    )
    safety_actor = SafetyActor(safety)
    definition = task_definition(cfg, learner_agent)
    counters = Counters()
    if settings.resume:
        counters = restore(checkpoint_dir, learner, cfg)
    else:  # every setting is checked by now: the first thing written
        run_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(cfg, run_dir / "config.yaml")
    actor_agent.load_policy_state(learner_agent.policy_state())
    weights_version = learner.update_calls

    store = None
    if settings.record_episodes:
        store = EpisodeStore.create(
            run_dir / "episodes.zarr",
            {**store_metadata(task, env), "config": OmegaConf.to_container(cfg, resolve=True)},
        )
    writer = store.writer() if store is not None else None

    from torch.utils.tensorboard import SummaryWriter

    tb = SummaryWriter(str(run_dir / "tb"))
    learner.start()
    rng = np.random.default_rng(seed + counters.episodes)
    started = time.monotonic() - counters.wall_seconds
    progress = tqdm(
        total=settings.env_steps,
        initial=counters.env_steps,
        desc=f"train {task.get('name')}",
        unit="step",
        mininterval=1.0,
    )
    last_eval = counters.history[-1]["env_steps"] if counters.history else 0
    last_checkpoint = counters.env_steps
    interrupted = False
    # Ctrl-C: a stop request checked after every step and between episodes, so it never lands inside
    # an episode commit, an evaluation or a checkpoint write; a second Ctrl-C raises at once
    with interrupt_requests() as stop:
        try:
            while counters.env_steps < settings.env_steps and not stop.is_set():
                demo = counters.demo_episodes_done < settings.demo_episodes
                episode_seed = int(rng.integers(2**31))
                stats = run_episode(
                    env,
                    actor_agent,
                    human,
                    safety_actor,
                    transport,
                    writer,
                    demo,
                    episode_seed,
                    counting_steps(settings, counters, learner, transport, progress, demo),
                    stop,
                )
                if stats is None:
                    break  # stopped mid-episode: its recording is dropped
                if settings.deterministic:
                    learner.wait_until_caught_up(transport.sent)
                if learner.error is not None:
                    raise RuntimeError("the learner failed") from learner.error
                published = transport.latest_weights()
                if published is not None and published[0] != weights_version:
                    weights_version, weights = published
                    actor_agent.load_policy_state(weights)
                    safety_actor.load(weights)
                counters.episodes += 1
                if demo:
                    counters.demo_episodes_done += 1
                else:
                    log_episode(tb, counters, stats, learner, started)
                finished = counters.env_steps >= settings.env_steps
                if counters.env_steps - last_eval >= settings.eval_every or finished:
                    last_eval = counters.env_steps
                    episodes = settings.final_eval_episodes if finished else settings.eval_episodes
                    result = evaluate(actor_agent, eval_env, episodes, seed=10**6)
                    record_eval(tb, counters, result, started)
                    progress.set_postfix(
                        eval_success=f"{result['success_rate']:.2f}",
                        interventions=f"{recent_intervention_rate(counters):.2f}",
                    )
                if counters.env_steps - last_checkpoint >= settings.checkpoint_every:
                    last_checkpoint = counters.env_steps
                    counters.wall_seconds = time.monotonic() - started
                    learner.ingest_everything_sent(transport.sent)
                    save_checkpoint(checkpoint_dir, learner, counters, definition)
        except KeyboardInterrupt:  # a second Ctrl-C, or SIGTERM
            interrupted = True
            if writer is not None:
                writer.discard()
        finally:
            learner.close()
            learner.ingest_everything_sent(transport.sent)
            progress.close()
            env.close()
            eval_env.close()
    interrupted = interrupted or stop.is_set()
    counters.wall_seconds = time.monotonic() - started
    with deferred_interrupt():
        save_checkpoint(checkpoint_dir, learner, counters, definition)
    tb.close()
    summary = write_summary(run_dir, counters, settings, task, interrupted)
    plot_learning_curve(run_dir / "learning_curve.png", counters, task.get("name"))
    return summary


def counting_steps(
    settings: TrainSettings, counters: Counters, learner: Learner, transport: LocalTransport, progress, demo: bool
):
    """``after_step`` for :func:`~robot_rl.actor.run_episode`: counts online steps, keeps the
    actor within ``max_lag`` steps of the learner (sim) and ends the episode when the budget is spent."""

    def after_step(intervened: bool) -> bool:
        if demo:
            return False
        counters.env_steps += 1
        counters.intervention_steps += intervened
        progress.update(1)
        if settings.sync:
            while learner.backlog(transport.sent) > settings.max_lag and learner.error is None:
                time.sleep(0.001)
        return counters.env_steps >= settings.env_steps

    return after_step


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
    for key in ("violations", "filter_interventions", "filter_bypasses"):
        tb.add_scalar(f"safety/{key}", stats[key], step)
    tb.add_scalar("speed/env_steps_per_s", step / max(elapsed, 1e-6), step)
    tb.add_scalar("speed/updates_per_s", learner.updates_per_second, step)
    for key, value in learner.metrics.items():
        tb.add_scalar(f"learner/{key}", value, step)


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


def save_checkpoint(
    folder: Path, learner: Learner, counters: Counters, definition: dict[str, Any] | None = None
) -> None:
    """Agent, both buffers, counters and the run's task definition (:func:`~robot_rl.checkpoint.task_definition`,
    checked on resume), replaced atomically as one folder."""
    with replacing(folder) as tmp:
        if definition is not None:
            write_task_definition(tmp, definition)
        with learner.lock:
            torch.save(learner.agent.state_dict(), tmp / "agent.pt")
            if learner.safety is not None:
                torch.save(learner.safety.critic.state_dict(), tmp / "safety_critic.pt")
            learner.online.save(tmp / "online_buffer")
            learner.demo.save(tmp / "demo_buffer")
            state = {
                "counters": asdict(counters),
                "online_received": learner.online_received,
                "update_calls": learner.update_calls,
                "sampler_rng": learner.sampler.rng.bit_generator.state,
                "delivery": learner.ledger.state(),
            }
        (tmp / "counters.json").write_text(json.dumps(state))


def restore(folder: Path, learner: Learner, cfg: DictConfig) -> Counters:
    """Load a checkpoint into ``learner``; a checkpoint of another task definition is refused before anything
    is loaded."""
    folder = latest(folder)
    check_task_definition(folder, task_definition(cfg, learner.agent))
    state = json.loads((folder / "counters.json").read_text())
    load_agent("train.resume", learner.agent, folder / "agent.pt")
    if learner.safety is not None and (folder / "safety_critic.pt").exists():
        learner.safety.critic.load_state_dict(load_tensors("train.resume", folder / "safety_critic.pt"))
    learner.online = ReplayBuffer.load(folder / "online_buffer")
    learner.demo = ReplayBuffer.load(folder / "demo_buffer")
    learner.sampler.online, learner.sampler.demo = learner.online, learner.demo
    learner.sampler.rng.bit_generator.state = state["sampler_rng"]
    learner.online_received, learner.update_calls = state["online_received"], state["update_calls"]
    learner.ledger.load(state.get("delivery", {}))
    return Counters(**state["counters"])


def write_summary(run_dir: Path, counters: Counters, settings: TrainSettings, task: dict, interrupted: bool) -> dict:
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
        "best_eval_success": max((h["success_rate"] for h in counters.history), default=None),
        "eval_history": counters.history,
        "interrupted": interrupted,
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


def load_checkpoint_agent(agent, checkpoint: str | Path) -> Path:
    """Load ``<checkpoint>/agent.pt`` (the newest complete checkpoint) into ``agent``; returns the folder."""
    folder = latest(checkpoint)
    if not (folder / "agent.pt").is_file():
        raise ConfigError("eval.checkpoint", str(folder), "a checkpoint folder with agent.pt")
    load_agent("eval.checkpoint", agent, folder / "agent.pt")
    return folder


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
    folder = load_checkpoint_agent(agent, cfg.eval.checkpoint)
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
