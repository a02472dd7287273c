"""The learner: replay buffers and agent updates in a thread of their own, fed by a transport.

The same :class:`Learner` runs in ``robot-rl train`` (fed by the actor through a
:class:`~robot_rl.core.transport.LocalTransport` that delivers each step unnumbered), in the Ray fleet's driver (the
hand-ins) and in the learner node (fed by ``/rl/transitions``, each step numbered in its actor's stream): it takes
steps in their delivery envelope (:class:`~robot_rl.data.delivery_ledger.Numbered`); the
session (:class:`robot_rl.runtime.session.LearnerSession`) owns it with the agent, the checkpoint and resume.

What it counts, each number one thing:

- ``taken``: transitions the delivery ledger judged, every kind, ingested or refused (a duplicate, a gap): with
  what waits in the transport's :attr:`~robot_rl.core.transport.LearnerLink.arrivals`, the transitions delivered so
  far (what ``LocalTransport`` compares with what it sent);
- ``online_received``: online transitions ingested (not demos, not refused): what the update-to-data ratio counts
  (``updates_due``), checkpointed;
- ``update_calls``: ``agent.update`` calls made, checkpointed;
- ``ledger.ingested``: transitions ingested, every kind (demos too), and ``ledger.received``: per actor stream the
  highest ``seq`` ingested (a position, not a count); the ledger's own, checkpointed with it.

An ingest or an update changes several of them one after the other; :attr:`Learner.settled` is all of them as they
stand between two whole ingests or updates, replaced in one assignment, and :meth:`Learner.report_progress`
publishes only that, so a reader in another thread (the run's progress read from the transport) never sees a step
counted by one number and not yet by another, whatever the order of the statements that count it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from robot_rl.core.checkpoint import load_agent
from robot_rl.core.transport import ActorLink, LearnerLink, LearnerProgress, LocalTransport, updates_due
from robot_rl.data import ReplayBuffer
from robot_rl.data.batches import Batch
from robot_rl.data.delivery_ledger import DeliveryLedger, Numbered
from robot_rl.data.transition import Transition
from robot_rl.runtime.auxiliary_learners import AuxiliaryLearner
from robot_rl.runtime.replay_router import ReplayRouter, SafetyRelabel
from robot_rl.runtime.train_settings import TrainSettings

WAKE_AT_LEAST = 0.05  # s: a wait for the learner's progress also looks at what is not posted (a failure, a stop)


def in_process_transport() -> LocalTransport:
    """The transport between an actor and a :class:`Learner` in one process: each step sent is delivered in an
    unnumbered envelope (:class:`Numbered`, what the learner takes from every transport)."""
    return LocalTransport(deliver=Numbered)


class Learner:
    """Receives transitions, stores them (:class:`~robot_rl.runtime.replay_router.ReplayRouter`, with ``relabel``), makes
    the agent's updates and then those of ``auxiliaries`` (:mod:`robot_rl.runtime.auxiliary_learners`, by name, in order),
    and publishes weights and progress; in a thread of its own (:meth:`start`) or driven by the caller."""

    def __init__(
        self,
        agent,
        settings: TrainSettings,
        shapes: dict[str, tuple[int, ...]],
        action_dim: int,
        transport: LearnerLink[Numbered],
        seed: int,
        relabel: SafetyRelabel | None = None,
        auxiliaries: dict[str, AuxiliaryLearner] | None = None,
    ):
        self.agent, self.settings, self.transport = agent, settings, transport
        self.auxiliaries = dict(auxiliaries or {})
        device = getattr(agent, "device", None)  # the buffers live, and batches arrive, where the agent learns
        relabel, capacity = relabel or SafetyRelabel(), settings.buffer_capacity
        frozen = getattr(agent, "frozen_features", None)  # a frozen camera backbone: the buffers store its features
        self.router = ReplayRouter(capacity, shapes, action_dim, device, relabel, settings.demo_fraction, seed, frozen)
        self.ledger = DeliveryLedger()  # what was ingested, per actor stream and episode
        self.online_received = 0  # online transitions ingested (module docstring: the counters)
        self.taken = 0  # transitions the ledger judged, ingested or refused
        self.running = False  # run() is taking in what arrives: nobody else may
        self.thread: threading.Thread | None = None
        self.update_calls = 0
        self.metrics: dict[str, float] = {}
        self.lock = threading.Lock()  # held during updates and checkpointing
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.updates_per_second = 0.0
        self.settled = self.progress()  # the counters between two whole ingests or updates
        self.reported: LearnerProgress | None = None  # the progress last published on the transport
        # takes from the published weights what its owner routes elsewhere and returns the rest for the transport
        # (the learner node: the fast-loop critic to the safety nodes); None: everything to the transport (in this
        # process the actor reads the fast critic from the weights)
        self.weights_outlet: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    @property
    def online(self) -> ReplayBuffer:
        return self.router.online

    @property
    def demo(self) -> ReplayBuffer:
        return self.router.demo

    def save(self, folder: Path) -> dict[str, Any]:
        """Write the agent (``agent.pt``), the auxiliaries and both buffers into ``folder`` (a checkpoint's, being
        made; the caller holds :attr:`lock`); return the plain state for the checkpoint's ``counters.json``."""
        torch.save(self.agent.state_dict(), folder / "agent.pt")
        state = {"online_received": self.online_received, "update_calls": self.update_calls}
        state["delivery"] = self.ledger.state()
        for auxiliary in self.auxiliaries.values():
            state.update(auxiliary.save(folder))
        return {**state, **self.router.save(folder)}

    def load(self, folder: Path, state: dict[str, Any], key: str = "train.resume") -> None:
        """What :meth:`save` wrote into ``folder`` and returned (``state``); a file that is no robot_rl file of
        tensors is refused naming config ``key``."""
        load_agent(key, self.agent, folder / "agent.pt")
        for auxiliary in self.auxiliaries.values():
            auxiliary.load(folder, state, key)
        self.router.load(folder, state)
        self.online_received, self.update_calls = state["online_received"], state["update_calls"]
        self.ledger.load(state.get("delivery", {}))
        self.settled = self.progress()

    def ingest(self, transitions: list[Transition]) -> None:
        """:meth:`ingest_delivered` of steps delivered unnumbered (one process, a store)."""
        self.ingest_delivered([Numbered(t) for t in transitions])

    def ingest_delivered(self, delivered: list[Numbered]) -> None:
        """Judge each delivered step (the ledger), store and count what it accepts; :attr:`settled` after each."""
        for n in delivered:
            self.taken += 1
            t = n.transition
            if self.ledger.accept(n):
                self.router.add(t)
                if not t.demo:
                    self.online_received += 1
                    self.agent.observe(t)
                for auxiliary in self.auxiliaries.values():  # demos too: their ticks teach the fast critic
                    auxiliary.observe(t)
            self.settled = self.progress()

    def progress(self) -> LearnerProgress:
        """The counters now, as :meth:`report_progress` publishes them (module docstring)."""
        return LearnerProgress(self.online_received, self.update_calls, dict(self.ledger.received), self.taken)

    def ingest_locked(self, delivered: list[Numbered]) -> None:
        """:meth:`ingest_delivered` under the lock, so a checkpoint never sees a buffer half-way through an add."""
        if delivered:
            with self.lock:
                self.ingest_delivered(delivered)

    def published_weights(self) -> dict[str, Any]:
        """The actor's policy weights, plus the auxiliary learners' models that are ready."""
        weights = self.agent.policy_state()
        for auxiliary in self.auxiliaries.values():
            weights.update(auxiliary.weights(self.online_received))
        return weights

    def publish_weights(self, version: int) -> None:
        """:meth:`published_weights` as ``version``: through :attr:`weights_outlet`, then on the transport."""
        weights = self.published_weights()
        if self.weights_outlet is not None:
            weights = self.weights_outlet(weights)
        self.transport.publish_weights(version, weights)

    def due_updates(self) -> int:
        settings = self.settings
        return updates_due(self.online_received, self.update_calls, settings.start_training, settings.update_every)

    def sample(self) -> Batch:
        return self.router.sampler.sample(
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
        """Stop the thread; what arrived and was not ingested yet stays in the transport's arrivals."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join()

    def update_in_this_thread(self) -> None:
        """Updates in the calling thread run on ``train.torch_threads`` threads (unset, torch's idle OpenMP workers
        spin on every core, taking them from the envs and actors)."""
        torch.set_num_threads(self.settings.torch_threads)

    def run(self) -> None:
        """Ingest each transition, then make the updates it made due: update k (from 1) always sees the first
        ``start_training + k * update_every`` online steps, however the actor's sends were batched."""
        self.running = True
        try:
            self.update_in_this_thread()
            started, calls_at_start = time.monotonic(), self.update_calls
            while not self.stop.is_set():
                self.ingest_next()
                self.report_progress()
                self.update_while_due()  # also a resumed run's updates, due before anything arrives
                made = (self.update_calls - calls_at_start) * self.agent.config.utd
                self.updates_per_second = made / max(time.monotonic() - started, 1e-6)
                if not self.transport.arrivals:  # woken by the next arrival (and at least every WAKE_AT_LEAST s)
                    self.transport.arrivals.wait(WAKE_AT_LEAST)
        except BaseException as error:  # noqa: BLE001 - surfaced by the actor thread
            self.error = error
        finally:
            self.running = False

    def ingest_next(self) -> None:
        """The oldest arrival into the buffers, if there is one."""
        with self.lock:
            delivered = self.transport.arrivals.take()
            if delivered is not None:
                self.ingest_delivered([delivered])

    def ingest_everything_sent(self, actor: LocalTransport) -> None:
        """Put every transition the in-process ``actor`` sent into the buffers now, their updates left due, so a
        checkpoint holds every step the actor counted. Works while :meth:`run` runs and after it stopped."""
        arrivals, sent = self.transport.arrivals, actor.sent

        def all_arrived() -> bool:
            return self.taken + len(arrivals) >= sent

        while not all_arrived() and self.error is None:
            if self.running:  # run() ingests between two updates, and posts its progress after each ingest
                actor.wait_for_learner(all_arrived, WAKE_AT_LEAST)
            else:
                arrivals.wait(WAKE_AT_LEAST)
        with self.lock:
            self.ingest_delivered(arrivals.take_all())

    def update_while_due(self) -> None:
        while self.update_if_due():
            pass

    def update_if_due(self) -> bool:
        """Make one update if one is due (and the learner is not stopping); whether it made one."""
        if self.due_updates() <= 0 or self.stop.is_set():
            return False
        with self.lock:
            metrics = self.agent.update(self.sample)
            for auxiliary in self.auxiliaries.values():
                metrics.update(auxiliary.update(self.online, self.online_received))
            self.metrics = metrics  # replaced whole: the actor thread reads it
            if (self.update_calls + 1) % self.settings.weights_every == 0:  # out before the count says caught up
                self.publish_weights(self.update_calls + 1)
            self.update_calls += 1
            self.settled = self.progress()
        self.report_progress()
        return True

    def report_progress(self) -> None:
        """Publish :attr:`settled` (online transitions ingested, updates made, per actor the last ``seq`` ingested,
        transitions taken) on the transport when it changed (from the thread that changes it, so an actor waiting on
        it hears at once; a call from another thread in the middle of an ingest publishes the counters before it)."""
        settled = self.settled  # one read: the counters between two whole ingests or updates
        if settled != self.reported:
            self.reported = settled
            self.transport.publish_progress(
                settled.online_received, settled.update_calls, settled.received, settled.taken
            )

    def keep_pace(self, actor: ActorLink) -> None:
        """Block while ``actor`` runs more than ``train.max_lag`` steps ahead of this learner (sim, ``train.sync``: the
        update-to-data ratio holds), unless the learner failed."""
        settings = self.settings

        def within_lag() -> bool:
            return actor.backlog(settings.start_training, settings.update_every) <= settings.max_lag

        while not within_lag() and self.error is None:
            actor.wait_for_learner(within_lag, WAKE_AT_LEAST)

    def wait_until_caught_up(self, actor: ActorLink) -> None:
        """Block until every transition ``actor`` sent is ingested and its updates are made (in one process:
        :meth:`run` publishes its progress as it goes)."""
        settings = self.settings

        def caught_up() -> bool:
            return actor.backlog(settings.start_training, settings.update_every) <= 0

        while not caught_up() and self.error is None and not self.stop.is_set():
            actor.wait_for_learner(caught_up, WAKE_AT_LEAST)
