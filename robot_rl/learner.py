"""The learner: replay buffers and agent updates in a thread of their own, fed by a transport.

The same :class:`Learner` runs in ``robot-rl train`` (fed by the actor through a
:class:`~robot_rl.transport.LocalTransport`) and in the learner node (fed by ``/rl/transitions``); the
session (:class:`robot_rl.session.LearnerSession`) owns it with the agent, the checkpoint and resume.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from .checkpoint import load_agent, load_tensors
from .config import is_integer, is_number, positive, require_all, settings_of, yaml_defaults
from .data import MixedSampler, ReplayBuffer
from .data.streams import StreamWriter
from .data.transition import Transition
from .safety.fast_risk import FAST_RISK_KEY, FastCriticSettings, FastRiskModel
from .safety.training import SafetySettings
from .transport import DeliveryLedger, Transport

VECTORIZATIONS = ("sync", "async")  # train.vectorization
FAST_RISK_FILE = "fast_risk.npz"  # in a checkpoint: the fast-loop critic the learner published last


@yaml_defaults("settings/train.yaml", "train")
class TrainSettings:
    """``train:`` of ``configs/settings/train.yaml`` (the defaults and what each setting means are written there)."""

    run_dir: str = "runs/default"  # the YAML's is built from the task and seed
    resume: bool
    env_steps: int  # online env steps (demos not counted)
    demo_episodes: int
    start_training: int  # online transitions before the first update
    update_every: int  # online transitions per update call (agent.utd critic steps each)
    batch_size: int
    demo_fraction: float
    n_step: int
    buffer_capacity: int
    weights_every: int  # learner update calls between weight publications
    sync: bool  # sim: the actor waits for the learner so the update-to-data ratio holds
    max_lag: int  # env steps the actor may run ahead of the learner when sync
    num_envs: int  # robot-rl train: sim envs stepped together, one batched policy call per step
    vectorization: str  # sync: the envs step in this process | async: each in a worker process, in parallel
    eval_every: int
    eval_episodes: int
    final_eval_episodes: int
    checkpoint_every: int
    record_episodes: bool
    torch_threads: int
    deterministic: bool  # same seed, same weights: the actor takes new weights only once the learner has caught up
    # with every step sent (slower), and torch uses deterministic algorithms


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
        "num_envs",
        "update_every",
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
            "vectorization": (settings.vectorization in VECTORIZATIONS, " or ".join(VECTORIZATIONS)),
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


def updates_due(online_received: int, update_calls: int, start_training: int, update_every: int = 1) -> int:
    """Update calls a learner owes: one per ``update_every`` online transitions after the first ``start_training``,
    less those made."""
    return max(online_received - start_training, 0) // update_every - update_calls


@dataclass(frozen=True)
class SafetyRelabel:
    """What the task policy learns from a step the safety filter (or the sim's fast-loop critic) changed, online and
    offline alike: the reward minus ``penalty`` and, with ``proposed`` (``safety.relabel=proposed``), the action the
    policy proposed (Recovery RL: the filter is part of the environment) instead of the executed one."""

    penalty: float = 0.0
    proposed: bool = False

    @classmethod
    def of(cls, safety: SafetySettings | None, fast: FastCriticSettings | None = None) -> SafetyRelabel:
        """The relabelling of a run's ``safety.*``: the penalty when either critic is on (a step the fast-loop critic
        changed is flagged filtered too), the proposed action only with the learned filter on."""
        enabled = safety is not None and safety.enabled
        fast_enabled = fast is not None and fast.enabled
        penalty = safety.penalty if safety is not None and (enabled or fast_enabled) else 0.0
        return cls(penalty, enabled and safety.relabel == "proposed")

    def row(self, t: Transition) -> tuple:
        """``t`` as :meth:`ReplayBuffer.add <robot_rl.data.ReplayBuffer.add>`'s arguments, relabelled; the
        buffers keep the executed action too, for the safety critic. The last one is the action learned."""
        learned = t.policy_action if t.filtered and self.proposed else t.action
        reward = t.reward - self.penalty * t.filtered
        return t.obs, t.action, reward, t.next_obs, t.terminated, t.truncated, t.intervened, t.cost, learned


class Learner:
    """Replay buffers + agent updates; runs in its own thread.

    Ingesting: demo episodes go to the demo buffer, online steps to the online buffer, and every
    human takeover to the demo buffer as well, each takeover as a segment of its own (it starts
    at the observation where the human took over, not where the last takeover ended). A step the
    safety filter (or the sim's fast-loop critic) changed costs ``safety.penalty`` and, with
    ``safety.relabel=proposed``, is learned by the task policy as the action it proposed (:class:`SafetyRelabel`,
    which offline data goes through too); the buffers keep the executed action too, for the safety critic. Several actors may
    feed one learner: each actor's transitions are one stream (its episodes in order), the buffers store every
    stream's episodes whole (:class:`~robot_rl.data.streams.StreamWriter`) and batches mix them.
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
        fast_risk=None,
        fast_settings: FastCriticSettings | None = None,
    ):
        self.agent, self.settings, self.transport = agent, settings, transport
        # the fast-loop critic learned online from the ticks the transitions carry (FastRiskLearner or None)
        self.fast_risk, self.fast_settings = fast_risk, fast_settings
        self.fast_ticks: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}  # per actor stream: the open episode's
        self.fast_ticks_refused = 0  # ticks of another width than the fast critic's rows
        self.fast_published: tuple[Any, int] | None = None  # (FastRiskModel, version) of the newest fit
        self.fast_fitted_at = 0  # online steps at the newest fit
        self.safety = safety  # SafetyLearner or None
        self.relabel = SafetyRelabel.of(safety_settings, fast_settings)
        space = {key: (shape, np.uint8 if len(shape) == 3 else np.float32) for key, shape in shapes.items()}
        device = getattr(agent, "device", None)  # the buffers live, and batches arrive, where the agent learns
        online = ReplayBuffer(settings.buffer_capacity, space, action_dim, device)
        demo = ReplayBuffer(settings.buffer_capacity, space, action_dim, device)
        self.sampler = MixedSampler(online, demo, settings.demo_fraction, seed=seed)
        self.use_buffers(online, demo)
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
        self.reported = (-1, -1, -1)  # the progress last published on the transport

    def use_buffers(self, online: ReplayBuffer, demo: ReplayBuffer) -> None:
        """Learn from these buffers (new ones, or a checkpoint's), written through one :class:`StreamWriter` each so
        several actors' interleaved transitions are stored as whole episodes."""
        self.online, self.demo = online, demo
        self.sampler.online, self.sampler.demo = online, demo
        self.online_streams, self.demo_streams = StreamWriter(online), StreamWriter(demo)

    def save(self, folder: Path) -> dict[str, Any]:
        """Write the learner into ``folder`` (a checkpoint's, being made): the agent (``agent.pt``), the safety critic
        and the online fast-risk learner with the model it published, when there are, and both buffers with every
        transition received; returns its plain state (counts, the sampler's RNG, the delivery ledger) for the
        checkpoint's ``counters.json``. The caller holds :attr:`lock`."""
        torch.save(self.agent.state_dict(), folder / "agent.pt")
        if self.safety is not None:
            torch.save(self.safety.critic.state_dict(), folder / "safety_critic.pt")
        if self.fast_risk is not None:  # the fast-loop critic learned online, and the model it published
            torch.save(self.fast_risk.state_dict(), folder / "fast_risk_learner.pt")
            if self.fast_published is not None:
                self.fast_published[0].save(folder / FAST_RISK_FILE, self.fast_published[1])
        self.flush_streams()  # every transition received is in the checkpoint
        self.online.save(folder / "online_buffer")
        self.demo.save(folder / "demo_buffer")
        return {
            "online_received": self.online_received,
            "update_calls": self.update_calls,
            "sampler_rng": self.sampler.rng.bit_generator.state,
            "delivery": self.ledger.state(),
            "fast_fitted_at": self.fast_fitted_at,
        }

    def load(self, folder: Path, state: dict[str, Any], key: str = "train.resume") -> None:
        """What :meth:`save` wrote into ``folder`` and returned (``state``); a file that is no robot_rl file of
        tensors is refused naming config ``key``."""
        load_agent(key, self.agent, folder / "agent.pt")
        if self.safety is not None and (folder / "safety_critic.pt").exists():
            self.safety.critic.load_state_dict(load_tensors(key, folder / "safety_critic.pt"))
        if self.fast_risk is not None and (folder / "fast_risk_learner.pt").exists():
            self.fast_risk.load_state_dict(load_tensors(key, folder / "fast_risk_learner.pt"))
            if (folder / FAST_RISK_FILE).exists():
                self.fast_published = FastRiskModel.load(folder / FAST_RISK_FILE)
            self.fast_fitted_at = state.get("fast_fitted_at", 0)
        self.use_buffers(
            ReplayBuffer.load(folder / "online_buffer", self.online.device),
            ReplayBuffer.load(folder / "demo_buffer", self.demo.device),
        )
        self.sampler.rng.bit_generator.state = state["sampler_rng"]
        self.online_received, self.update_calls = state["online_received"], state["update_calls"]
        self.ledger.load(state.get("delivery", {}))

    def flush_streams(self) -> None:
        """Write the transitions of other actors' open episodes that wait for their turn (before a checkpoint)."""
        self.online_streams.flush()
        self.demo_streams.flush()

    def ingest(self, transitions: list[Transition]) -> None:
        for t in transitions:
            self._ingest_one(t)
            self.taken += 1  # after its online count: a reader of backlog() never sees it taken but not yet due

    def _ingest_one(self, t: Transition) -> None:
        if not self.ledger.accept(t):
            return
        if self.fast_risk is not None:
            self._collect_ticks(t)
        stream = t.actor  # one sequence of episodes per actor
        if t.first:  # a new episode, even if the last one never ended (budget, crash)
            self.online_streams.close(stream)
            self.demo_streams.close(stream)
        args = self.relabel.row(t)
        learned = args[-1]
        if t.demo:
            self.demo_streams.add(stream, *args)
            return
        self.online_streams.add(stream, *args)
        self.online_received += 1
        self.agent.observe(t)
        before = self.last_step.get(t.actor)
        follows = (
            before is not None
            and not t.first
            and before[0] == t.episode
            and (t.step is None or before[1] == t.step - 1)
        )
        if t.intervened:
            if not (follows and before[3]):  # a new takeover: a segment of its own
                self.demo_streams.close(stream)
            self.demo_streams.add(stream, *args, opening_action=before[2] if follows else None)
        elif follows and before[3]:  # the takeover ended: its segment is complete
            self.demo_streams.close(stream)
        self.last_step[t.actor] = (t.episode, t.step, np.asarray(learned), t.intervened)

    def _collect_ticks(self, t: Transition) -> None:
        """Keep the step's fast-loop ticks; at the episode's end hand them to the fast critic's learner (labels
        look ahead, so an episode's ticks are labelled once it is over)."""
        ticks = self.fast_ticks.setdefault(t.actor, [])
        if t.first:
            ticks.clear()
        streams = t.streams or {}
        if "fast_features" in streams and "fast_violation" in streams:
            ticks.append((streams["fast_features"][0], streams["fast_violation"][0]))
        if (t.terminated or t.truncated) and ticks:
            features, violation = np.concatenate([f for f, _ in ticks]), np.concatenate([v for _, v in ticks])
            ticks.clear()
            try:
                self.fast_risk.add_episode(features, violation)
            except ValueError:  # ticks of another width (another task context) than the critic learns: not learned
                self.fast_ticks_refused += len(features)

    def fit_fast_risk_when_due(self) -> dict[str, float]:
        """Every ``learn_every`` online steps (once it holds ticks): fit the fast critic ``learn_updates`` steps and
        make the new model the one published; its metrics."""
        if self.fast_risk is None or not self.fast_risk.size:
            return {}
        if self.online_received - self.fast_fitted_at < self.fast_settings.learn_every:
            return {}
        self.fast_fitted_at = self.online_received
        loss = self.fast_risk.train(self.fast_settings.learn_updates)
        version = 1 if self.fast_published is None else self.fast_published[1] + 1
        self.fast_published = (self.fast_risk.model(), version)
        return {
            "fast_risk_loss": loss,
            "fast_risk_ticks": float(self.fast_risk.size),
            "fast_risk_refused_ticks": float(self.fast_ticks_refused),
        }

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
        if self.fast_published is not None:
            weights[FAST_RISK_KEY] = self.fast_published
        return weights

    def due_updates(self) -> int:
        settings = self.settings
        return updates_due(self.online_received, self.update_calls, settings.start_training, settings.update_every)

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

    def update_in_this_thread(self) -> None:
        """The calling thread makes the updates: torch runs them on ``train.torch_threads`` threads. Unset, torch
        takes every core, and its idle OpenMP workers spin between ops, taking cores from the envs and actors."""
        torch.set_num_threads(self.settings.torch_threads)

    def run(self) -> None:
        """Ingest each transition, then make the updates it made due: update k (from 1) always sees the first
        ``start_training + k * update_every`` online steps, however the actor's sends were batched."""
        self.running = True
        try:
            self.update_in_this_thread()
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
        while self.update_if_due():
            pass

    def update_if_due(self) -> bool:
        """Make one update if one is due (and the learner is not stopping); whether it made one."""
        if self.due_updates() <= 0 or self.stop.is_set():
            return False
        with self.lock:
            metrics = self.agent.update(self.sample)
            if self.safety is not None:
                metrics.update(self.safety.update(self.online))
            metrics.update(self.fit_fast_risk_when_due())
            self.metrics = metrics  # replaced whole: the actor thread reads it
            if (self.update_calls + 1) % self.settings.weights_every == 0:  # out before the count says caught up
                self.transport.publish_weights(self.update_calls + 1, self.published_weights())
            self.update_calls += 1
        self.report_progress()
        return True

    def report_progress(self) -> None:
        """Publish (online transitions ingested, updates made, per actor the last ``seq`` ingested) on the transport
        when it changed (from the thread that changes it, so an actor waiting on it hears at once)."""
        now = (self.online_received, self.update_calls, self.ledger.ingested)
        if now != self.reported:
            self.reported = now
            self.transport.publish_progress(self.online_received, self.update_calls, dict(self.ledger.received))

    def wait_until_caught_up(self, sent: int) -> None:
        """Block until every one of the ``sent`` transitions is ingested and its updates are made."""
        while self.backlog(sent) > 0 and self.error is None and not self.stop.is_set():
            time.sleep(0.0005)
