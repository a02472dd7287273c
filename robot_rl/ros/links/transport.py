"""The actor <-> learner link over ROS 2 topics: the actor's end (:class:`RosActorLink`) and the learner's
(:class:`RosLearnerLink`), each node holding its own.

Transitions go actor -> learner on ``rl/transitions`` (in the actor's namespace: ``/rl/transitions``, or
``/<robot>/rl/transitions`` for each robot of a fleet, all of which the one learner subscribes) and weights
learner -> actor on ``/rl/policy_weights`` (one topic for every robot), both ``std_msgs/UInt8MultiArray``
carrying :mod:`robot_rl.data.wire` payloads, so actor and learner can sit on different machines of one DDS domain
with nothing but standard message types between them. Weights are latched (TRANSIENT_LOCAL): an actor that
starts after the learner, or a learner that restarts from its checkpoint, is picked up without
restarting anyone. Each weights message carries the learner's session id and update count.

Every received message is validated (:mod:`robot_rl.data.wire`: size, columns, dtypes, shapes,
finite values) inside an :class:`~robot_rl.ros.plumbing.guard.InputGuard`; a bad one is dropped and counted.
Delivery survives a learner or recorder that is down for a while (:mod:`robot_rl.ros.plumbing.delivery`):
the actor keeps what the learner has not checkpointed and sends it again to a restarted learner;
the learner acknowledges on each robot's ``rl/transitions_ack``. The learner's progress (``/rl/learner_progress``,
JSON: online transitions ingested, updates made, the last ``seq`` ingested per actor, the transitions in the online
and demo replay buffers) lets each actor keep the update-to-data ratio in sim time, also when several actors feed the
learner, and the console show how learning goes.
"""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from std_msgs.msg import String, UInt8MultiArray

from robot_rl.core.transport import ActorLink, Arrivals, LearnerLink, LearnerProgress, ProgressBoard

from ...data.delivery_ledger import Numbered
from ...data.transition import Transition
from ...data.wire import TransitionSchema, decode_transitions, decode_weights, encode_transitions, encode_weights
from ..plumbing import qos
from ..plumbing.delivery import ACK_TOPIC, CUT_TOPIC, Outbox, cut_message, parse_ack, parse_control
from ..plumbing.guard import InputGuard, MessageError
from .robot_tally import RobotTally

TRANSITIONS_TOPIC = "rl/transitions"  # relative: each robot's own, under its namespace
WEIGHTS_TOPIC = "/rl/policy_weights"
PROGRESS_TOPIC = "/rl/learner_progress"  # std_msgs/String, JSON: parse_progress


def parse_progress(text: str) -> dict[str, Any]:
    """A learner progress message, checked (it comes from the network): ``online`` (online transitions ingested),
    ``updates`` (update calls made), ``received`` ({actor: the highest ``seq`` ingested}) and, from a learner node
    that says them, ``online_size`` and ``demo_size`` (transitions in its online and demo replay buffers), each an
    integer >= 0."""
    progress = parse_control(text, "learner progress")
    if not isinstance(progress, dict):
        raise MessageError("learner progress is not a JSON object")
    counts = [progress.get(key) for key in ("online", "updates")]
    counts += [progress[key] for key in ("online_size", "demo_size") if key in progress]
    received = progress.get("received")
    if not (
        all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)
        and isinstance(received, dict)
        and all(isinstance(seq, int) and seq >= 0 for seq in received.values())
    ):
        raise MessageError(
            "learner progress needs online, updates (and any online_size, demo_size) counts >= 0 and received "
            "{actor: seq >= 0}"
        )
    return progress


def robot_topic(robot: str | None, topic: str) -> str:
    """``topic`` (relative) of robot ``robot``'s namespace: ``/<robot>/<topic>``, or ``/<topic>`` without a fleet of
    robots (``robot`` None)."""
    return f"/{robot}/{topic}" if robot else f"/{topic}"


class LeftEpisode(NamedTuple):
    """An episode the actor left without its last step (:meth:`RosActorLink.leave_episode`): ``abandoned`` (a
    demonstration, played again: no store records it) or cut there (an online one: recorded as it is)."""

    uid: str
    abandoned: bool


class RosActorLink(ActorLink):
    """The actor's end: sends its transitions on its robot's ``rl/transitions`` and receives the latched weights.

    ``expected_weights`` (:func:`~robot_rl.data.wire.weight_shapes` of its own policy) and ``risk_input`` (state and
    action size, when it runs the safety filter) check what arrives; the
    :class:`~robot_rl.ros.plumbing.delivery.Outbox` numbers each step in the actor's stream and keeps it until the
    learner and the recorder hold it. Received messages are decoded in the executor's thread; the methods may be
    called from any other thread.
    """

    def __init__(
        self,
        node,
        *,
        expected_weights: dict,
        outbox: Outbox,
        risk_input: tuple[int, int] | None = None,
        guard: InputGuard | None = None,
    ):
        self.node, self.guard = node, guard or InputGuard(node)
        self.session = uuid.uuid4().hex[:8]
        self.expected_weights, self.risk_input, self.outbox = expected_weights, risk_input, outbox
        self._weights: tuple[int, dict[str, Any]] | None = None  # (weights_received, the newest)
        self.weights_received = 0
        self.weights_meta: dict[str, Any] = {}
        self.lock = threading.Lock()  # the outbox: actor thread and executor thread
        self.resend_requested = False
        self.current_episode: str | None = None
        self.board = ProgressBoard()  # the learner's progress as this actor hears it
        self._out = node.create_publisher(UInt8MultiArray, TRANSITIONS_TOPIC, qos.TRANSITIONS)
        self._cuts = node.create_publisher(String, CUT_TOPIC, qos.EVENT)
        self.guard.subscribe(UInt8MultiArray, WEIGHTS_TOPIC, self._on_weights, qos.LATCHED)
        self.guard.subscribe(String, ACK_TOPIC, self._on_ack, qos.EVENT)
        self.guard.subscribe(String, PROGRESS_TOPIC, self._on_progress, qos.EVENT)

    def send_transitions(self, transitions: list[Transition]) -> None:
        if not transitions:
            return
        numbered, cuts = [], []
        with self.lock:
            for t in transitions:
                if t.first and self.current_episode is not None:
                    cuts.append(self._leave(self.current_episode))  # unless it ended: its last step, or a budget cut
                self.current_episode = t.origin.episode or self.current_episode
                numbered.append(self.outbox.stamp(t))
        self._publish_cuts(cuts)
        self._publish(numbered)

    def cut_episode(self, uid: str) -> None:
        """The budget cut episode ``uid`` short: it is finished, and the recorder hears which step was its last."""
        with self.lock:
            cut = self._cut(uid)
        self._publish_cuts([cut])

    def leave_episode(self) -> LeftEpisode | None:
        """The actor leaves the episode in progress without its last step (a stream stalled, the operator paused) and
        plays a new one next. An online episode ends there, as one the budget cuts short: its steps count in the step
        budget and the learner has them, so a store must hold them too (a resumed graph's actor counts its budget and
        its episodes from the stores); the recorder hears which step was its last. A demonstration is played again
        (not counted), so the one left is abandoned: the learner has its steps, no store records it. Returns what
        became of the episode (None: there was none, or it had ended already), for the actor's counts and log."""
        with self.lock:
            uid, abandoned_before = self.current_episode, set(self.outbox.abandoned)
            cut = None if uid is None else self._leave(uid)
            abandoned = uid in self.outbox.abandoned - abandoned_before
        self._publish_cuts([cut])
        if cut is None and not abandoned:
            return None
        return LeftEpisode(uid, abandoned)

    def _leave(self, uid: str) -> tuple[str, int] | None:
        """(uid, seq of its last step) to tell the recorder when episode ``uid``, left unfinished, is online; under
        ``self.lock``."""
        sent = self.outbox.episodes.get(uid)
        if not sent or uid in self.outbox.finished_at:
            return None  # never sent, gone (confirmed and durable), or ended (its last step, a cut)
        if sent[0].transition.demo:
            self.outbox.abandon(uid)
            return None
        return self._cut(uid)

    def _cut(self, uid: str) -> tuple[str, int] | None:
        """End episode ``uid`` at the last step sent; (uid, that step's seq) for the recorder; under ``self.lock``."""
        sent = self.outbox.episodes.get(uid)
        if not sent:
            return None  # never sent, or already gone (confirmed and durable)
        self.outbox.end_episode(uid)
        return uid, sent[-1].seq

    def _publish_cuts(self, cuts: list[tuple[str, int] | None]) -> None:
        for uid, seq in filter(None, cuts):
            self._cuts.publish(String(data=cut_message(self.outbox.actor_id, uid, seq)))

    def _publish(self, transitions: list[Numbered]) -> None:
        self._out.publish(UInt8MultiArray(data=encode_transitions(transitions, {"session": self.session})))

    def latest_weights(self) -> tuple[int, dict[str, Any]] | None:
        """(count of weights messages received, weights): the count changes with every new message,
        also when a restarted learner starts counting its updates from its checkpoint again."""
        return self._weights  # replaced whole by the executor's thread

    def weights_version(self) -> int | None:
        return self.weights_meta.get("version")

    def weights_session(self) -> str | None:
        return self.weights_meta.get("session")

    def _on_weights(self, msg) -> None:
        weights, meta = decode_weights(msg.data, self.expected_weights, self.risk_input)
        self.weights_received += 1  # executor thread only: one writer
        self.weights_meta = meta
        self._weights = (self.weights_received, weights)

    def _on_ack(self, msg) -> None:
        ack = parse_ack(msg.data)
        with self.lock:
            if self.outbox.on_ack(ack):
                self.resend_requested = True

    def _on_progress(self, msg) -> None:
        progress = parse_progress(msg.data)
        self.board.post(
            LearnerProgress(progress["online"], progress["updates"], progress["received"], heard_at=time.monotonic())
        )

    def not_ingested(self, progress: LearnerProgress) -> int:
        """The actor's transitions (numbered by its outbox) beyond the highest the learner said it ingested."""
        return self.outbox.seq - progress.received.get(self.outbox.actor_id, 0)

    def service(self, read_spilled: Callable[[list[tuple[str, int]]], list[list[Numbered]]]) -> None:
        """The actor thread's housekeeping between steps: resend what a restarted learner lacks
        (spilled episodes through ``read_spilled``), record episodes the recorder did not
        acknowledge, keep the outbox under its memory limit."""
        with self.lock:
            resend, self.resend_requested = self.resend_requested, False
            for uid in self.outbox.unrecorded_due():
                self.outbox.record_locally(uid)
            self.outbox.enforce_memory_limit()
            spilled, pending = self.outbox.resend() if resend else ([], [])
        for episode in read_spilled(spilled):
            self._publish_batches(episode)
        self._publish_batches(pending)

    def deliver_rest(
        self,
        read_spilled: Callable[[list[tuple[str, int]]], list[list[Numbered]]],
        silence: float,
        timeout: float,
    ) -> int:
        """At the actor's exit: go on resending what the learner lacks (a restarted learner still catching
        up, a lost message) until it acknowledged every transition, it was silent for ``silence`` s (down,
        or none started) or ``timeout`` s passed; returns how many transitions it still lacks."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                lacking, heard = self.outbox.undelivered(), self.outbox.learner_heard_at
            now = time.monotonic()
            if not lacking or now >= deadline or heard is None or now - heard > silence:
                return lacking
            self.service(read_spilled)
            time.sleep(0.05)

    def _publish_batches(self, transitions: list[Numbered], size: int = 64) -> None:
        for start in range(0, len(transitions), size):
            self._publish(transitions[start : start + size])

    def finish(self, record_wait: float) -> None:
        """At the actor's exit: wait up to ``record_wait`` s for the recorder to acknowledge the finished
        episodes, then record the rest in the actor's own store. An episode left without its last step at the exit
        (Ctrl-C, SIGTERM mid-episode) is recorded by neither (the recorder drops it too)."""
        with self.lock:
            if self.current_episode is not None:
                self.outbox.abandon(self.current_episode)
        deadline = time.monotonic() + record_wait
        while time.monotonic() < deadline:
            with self.lock:
                waiting = self.outbox.unconfirmed()
            if not waiting:
                return
            time.sleep(0.05)
        with self.lock:
            for uid in self.outbox.unconfirmed():
                self.outbox.record_locally(uid)

    def wait_for_subscribers(self, nodes: Sequence[str], timeout: float) -> list[str]:
        """Wait up to ``timeout`` s until every named node subscribes to our topic and our publisher
        has matched each subscriber it knows of (DDS discovery); returns the names still missing.

        What is published before a reliable subscriber is matched never reaches it, so an actor
        that starts sending before the learner and the recorder are matched loses the start of
        its first episode for them.
        """
        topic = self._out.topic_name
        deadline = time.monotonic() + timeout
        while True:
            subscribers = self.node.get_subscriptions_info_by_topic(topic)
            missing = [name for name in nodes if name not in {info.node_name for info in subscribers}]
            matched = self._out.get_subscription_count() >= len(subscribers)
            if (not missing and matched) or time.monotonic() >= deadline:
                return missing
            time.sleep(0.05)

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s until every subscriber acknowledged what was sent (before exiting)."""
        from rclpy.duration import Duration

        return self._out.wait_for_all_acked(Duration(seconds=timeout))


class RosLearnerLink(LearnerLink[Numbered]):
    """The learner's end: subscribes to the ``rl/transitions`` of each of ``robots`` (None: the one robot of the root
    namespace), checks each message against ``schema`` and puts its steps in :attr:`arrivals` (in the executor's
    thread: the learner's one queue), publishes the latched weights, its progress and its acknowledgements."""

    def __init__(
        self,
        node,
        *,
        schema: TransitionSchema,
        robots: Sequence[str] | None = None,
        guard: InputGuard | None = None,
    ):
        self.node, self.guard, self.schema = node, guard or InputGuard(node), schema
        self.session = uuid.uuid4().hex[:8]
        self.arrivals: Arrivals[Numbered] = Arrivals()
        self.transitions_received = 0
        # the learner's replay buffer sizes ({"online_size": n, "demo_size": n}) for its progress: its node sets it
        self.replay_sizes: Callable[[], dict[str, int]] | None = None
        self._out = node.create_publisher(UInt8MultiArray, WEIGHTS_TOPIC, qos.LATCHED)
        self._progress = node.create_publisher(String, PROGRESS_TOPIC, qos.EVENT)
        self.acks = []
        self.tally = RobotTally()  # what each robot gave (fleet.robots)
        for robot in robots or [None]:
            self.acks.append(node.create_publisher(String, robot_topic(robot, ACK_TOPIC), qos.EVENT))
            topic = robot_topic(robot, TRANSITIONS_TOPIC)
            receive = functools.partial(self._on_transitions, robot=robot)
            self.guard.subscribe(UInt8MultiArray, topic, receive, qos.TRANSITIONS)

    def publish_weights(self, version: int, weights: dict[str, Any]) -> None:
        """The actor's weights on ``/rl/policy_weights`` (latched: an actor that starts later gets them)."""
        self._out.publish(UInt8MultiArray(data=encode_weights(weights, {"version": version, "session": self.session})))

    def publish_progress(self, online_received: int, update_calls: int, received: dict[str, int], taken: int) -> None:
        """What this learner has ingested and made of it, for actors that keep the update-to-data ratio (each
        counts its own transitions by ``received``: ``taken`` is not sent)."""
        progress = {"online": int(online_received), "updates": int(update_calls), "received": received}
        if self.replay_sizes is not None:
            progress.update(self.replay_sizes())
        self._progress.publish(String(data=json.dumps(progress)))

    def _on_transitions(self, msg, robot: str | None = None) -> None:
        transitions, _ = decode_transitions(msg.data, self.schema)
        self.transitions_received += len(transitions)
        if robot is not None:
            self.tally.add(robot, transitions)
        self.arrivals.put(transitions)

    def acknowledge(self, received: dict[str, int], durable: dict[str, int]) -> None:
        """Tell the actors what this learner has ingested and what is in its checkpoint."""
        actors = {
            actor: {"received": int(seq), "durable": int(durable.get(actor, 0))} for actor, seq in received.items()
        }
        ack = String(data=json.dumps({"node": "learner", "session": self.session, "actors": actors}))
        for publisher in self.acks:
            publisher.publish(ack)
