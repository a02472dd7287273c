"""The actor <-> learner transport over real DDS: start-up matching of the named subscribers, and
no transition lost from the first one on once they are matched."""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np

from robot_rl.data.delivery_ledger import Numbered
from robot_rl.data.transition import Provenance, Transition
from tests.conftest import require


def transition(index: int) -> Transition:
    state = np.full(5, index, np.float32)
    return Transition(
        obs={"state": state},
        next_obs={"state": state + 1},
        action=np.zeros(4, np.float32),
        reward=float(index),
        terminated=False,
        truncated=False,
        intervened=False,
        demo=True,
        first=index == 0,
        origin=Provenance(episode="e" * 32, step=index),
    )


def of_episode(uid: str, index: int, **changes: Any) -> Transition:
    """:func:`transition` ``index`` as step ``index`` of episode ``uid``, with ``changes``."""
    return replace(transition(index), origin=Provenance(episode=uid, step=index), **changes)


@contextmanager
def actor_transport() -> Iterator[tuple[Any, Any, list[list[Transition]]]]:
    """An actor's :class:`RosActorLink` on a real node of its own context, its outbox recording at once what no
    recorder confirmed (``record_timeout`` 0) into a list: (transport, outbox, episodes the actor's store got)."""
    rclpy = require("rclpy")
    from rclpy.context import Context

    from robot_rl.ros.links.transport import RosActorLink
    from robot_rl.ros.plumbing.delivery import Outbox

    context = Context()
    rclpy.init(context=context)
    try:
        stored: list[list[Numbered]] = []
        outbox = Outbox("actor-1", memory_limit=2**20, record_timeout=0.0, spill=stored.append)
        node = rclpy.create_node("robot_rl_actor", context=context)
        yield RosActorLink(node, expected_weights={}, outbox=outbox), outbox, stored
    finally:
        rclpy.shutdown(context=context)


def test_an_episode_left_without_its_last_step_goes_to_the_learner_and_to_no_store():
    """A stream that stalls mid-episode makes the actor play a new episode; the recorder drops the one left without
    its last step. The actor's outbox used to take it for finished and, as no recorder confirmed it, wrote it to the
    actor's own store: a 21st demonstration of a few steps in a full run on loaded cores
    (test_graph::test_distributed_training_learns_reach). The learner still gets its steps."""
    with actor_transport() as (actor, outbox, stored):
        stalled = [of_episode("a" * 32, i) for i in range(3)]  # no last step: a stream stalled
        finished = [of_episode("b" * 32, i, terminated=i == 2) for i in range(3)]
        actor.send_transitions(stalled)
        actor.send_transitions(finished)
        time.sleep(0.01)  # past record_timeout: the recorder (none here) did not confirm
        actor.service(lambda spilled: [])
        actor.send_transitions([of_episode("c" * 32, 0)])  # at the exit: mid-episode again
        actor.finish(record_wait=0.0)
        assert [episode[0].transition.origin.episode for episode in stored] == ["b" * 32]
        assert [t.seq for t in outbox.resend()[1]] == list(range(1, 8))  # every step still goes to a learner


class Published:
    """A publisher that keeps what it is given (the actor's ``rl/episode_cut``), with no DDS matching to wait for."""

    def __init__(self):
        self.messages = []

    def publish(self, msg) -> None:
        self.messages.append(msg)


def test_an_online_episode_a_stall_leaves_is_cut_there_and_recorded_and_a_demonstration_is_not():
    """A resumed ``launch sim_train`` on loaded cores (test_graph_resume) kept 89 of its 100 online steps: a stream
    stalled 11 steps into an episode, the actor played a new one, and the recorder dropped the one left without its
    last step; the outbox abandoned it too (27e05ab), so no store held the 11 steps that the learner ingested and the
    step budget counted (a resumed actor counts its budget from the stores). Left mid-way, an online episode ends
    there as a budget cut one does: the recorder hears its last step on rl/episode_cut (at the stall, or at the next
    episode's first step at the latest) and, unconfirmed, the actor's store records it. A demonstration left so is
    played again: abandoned, no cut, no store."""
    from robot_rl.ros.plumbing.delivery import parse_cut

    def episode(uid: str, steps: int, demo: bool = False) -> list[Transition]:
        return [of_episode(uid * 32, i, demo=demo) for i in range(steps)]

    with actor_transport() as (actor, outbox, stored):
        actor._cuts = cuts = Published()
        actor.send_transitions(episode("a", 3))  # a stream stalls after the third step ...
        actor.send_transitions(episode("b", 2))  # ... and the actor plays a new episode
        time.sleep(0.01)  # past record_timeout: the recorder (none here) did not confirm
        actor.service(lambda spilled: [])
        assert [(t[0].transition.origin.episode, len(t)) for t in stored] == [("a" * 32, 3)]
        assert [parse_cut(msg.data) for msg in cuts.messages] == [("a" * 32, 3)]
        assert actor.leave_episode() == ("b" * 32, False)  # "b" stalls too: the actor's stall handler cuts it at once
        assert actor.leave_episode() is None  # said once
        actor.send_transitions(episode("c", 2, demo=True))  # a demonstration the next stall leaves mid-way
        assert actor.leave_episode() == ("c" * 32, True)  # abandoned: the actor's log names it
        assert actor.leave_episode() is None  # once
        actor.send_transitions(episode("d", 1, demo=True))  # played again
        time.sleep(0.01)
        actor.service(lambda spilled: [])
        assert [(t[0].transition.origin.episode, len(t)) for t in stored] == [("a" * 32, 3), ("b" * 32, 2)]
        assert [parse_cut(msg.data) for msg in cuts.messages] == [("a" * 32, 3), ("b" * 32, 5)]
        assert [t.seq for t in outbox.resend()[1]] == list(range(1, 9))  # every step still goes to a learner


def test_the_actor_waits_for_its_named_subscribers_and_they_get_every_transition():
    rclpy = require("rclpy")
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import UInt8MultiArray

    from robot_rl.data.wire import TransitionSchema, decode_transitions
    from robot_rl.ros.links.transport import TRANSITIONS_TOPIC, RosActorLink, RosLearnerLink
    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.plumbing.delivery import Outbox

    # two contexts: the actor and its subscribers are separate DDS participants, as in separate processes
    actor_context, cell_context = Context(), Context()
    rclpy.init(context=actor_context)
    rclpy.init(context=cell_context)
    try:
        outbox = Outbox("actor-1", memory_limit=2**20, record_timeout=10.0, spill=lambda episode: None)
        actor = RosActorLink(
            rclpy.create_node("robot_rl_actor", context=actor_context), expected_weights={}, outbox=outbox
        )
        schema = TransitionSchema({"state": (5,)}, 4)
        started = time.monotonic()
        assert actor.wait_for_subscribers(["robot_rl_recorder"], timeout=0.5) == ["robot_rl_recorder"]
        assert time.monotonic() - started >= 0.5  # it waited the whole timeout for a node that is not there

        learner = RosLearnerLink(rclpy.create_node("robot_rl_learner", context=cell_context), schema=schema)
        recorder_node = rclpy.create_node("robot_rl_recorder", context=cell_context)
        recorded: list[Numbered] = []
        recorder_node.create_subscription(
            UInt8MultiArray,
            TRANSITIONS_TOPIC,
            lambda msg: recorded.extend(decode_transitions(msg.data, schema)[0]),
            qos.TRANSITIONS,
        )
        assert actor.wait_for_subscribers(["robot_rl_learner", "robot_rl_recorder"], timeout=30) == []

        for index in range(20):  # at once, as an actor that starts its first episode right after the wait
            actor.send_transitions([transition(index)])
        executor = SingleThreadedExecutor(context=cell_context)
        executor.add_node(learner.node)
        executor.add_node(recorder_node)
        learned: list[Numbered] = []
        deadline = time.monotonic() + 30
        while (len(learned) < 20 or len(recorded) < 20) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
            learned += learner.arrivals.take_all()
        assert [n.transition.reward for n in learned] == [float(i) for i in range(20)]
        actors = {n.transition.origin.actor for n in learned}
        assert [n.seq for n in learned] == list(range(1, 21)) and actors == {"actor-1"}
        assert [n.transition.reward for n in recorded] == [float(i) for i in range(20)]
        executor.shutdown()
    finally:
        rclpy.shutdown(context=actor_context)
        rclpy.shutdown(context=cell_context)


def test_an_actor_at_its_exit_resends_until_a_learner_that_answers_has_every_transition():
    rclpy = require("rclpy")
    import threading

    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    from robot_rl.data.wire import TransitionSchema
    from robot_rl.ros.links.transport import RosActorLink, RosLearnerLink
    from robot_rl.ros.plumbing.delivery import Outbox

    actor_context, cell_context = Context(), Context()
    rclpy.init(context=actor_context)
    rclpy.init(context=cell_context)
    executors = [SingleThreadedExecutor(context=actor_context), SingleThreadedExecutor(context=cell_context)]
    try:
        outbox = Outbox("actor-1", memory_limit=2**20, record_timeout=10.0, spill=lambda episode: None)
        actor = RosActorLink(
            rclpy.create_node("robot_rl_actor", context=actor_context), expected_weights={}, outbox=outbox
        )
        for index in range(10):  # sent while no learner listens: lost for it
            actor.send_transitions([transition(index)])
        learner = RosLearnerLink(
            rclpy.create_node("robot_rl_learner", context=cell_context),
            schema=TransitionSchema({"state": (5,)}, 4),
        )
        learned: list[Numbered] = []
        answering = threading.Event()
        answering.set()

        def acknowledge() -> None:  # as the learner node does every 0.5 s: what it has ingested
            learned.extend(learner.arrivals.take_all())
            if answering.is_set():
                received = max((t.seq for t in learned), default=0)
                learner.acknowledge({"actor-1": received}, {})

        learner.node.create_timer(0.1, acknowledge)
        executors[0].add_node(actor.node)
        executors[1].add_node(learner.node)
        threads = [threading.Thread(target=executor.spin, daemon=True) for executor in executors]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while outbox.learner_heard_at is None and time.monotonic() < deadline:  # DDS discovery
            time.sleep(0.05)
        assert actor.deliver_rest(lambda spilled: [], silence=5.0, timeout=30.0) == 0
        assert sorted(t.seq for t in learned) == list(range(1, 11))

        answering.clear()  # a learner that went silent is not waited for
        actor.send_transitions([transition(10)])
        started = time.monotonic()
        assert actor.deliver_rest(lambda spilled: [], silence=0.5, timeout=30.0) == 1
        assert time.monotonic() - started < 10.0
    finally:
        for executor in executors:
            executor.shutdown()
        rclpy.shutdown(context=actor_context)
        rclpy.shutdown(context=cell_context)


def test_the_learner_publishes_its_fast_critic_to_the_safety_nodes_once_per_version_not_in_the_policy_weights():
    """The learner's weights carry the fast-loop critic it fitted (``FAST_CRITIC_KEY``); the learner node's outlet
    sends it on the safety nodes' topic, where a safety node swaps it in, and the transport gets the policy weights
    without it (it crashed the learner node before: the policy weights' codec took the (model, version) pair for a
    risk model). The transport carries weights and knows nothing of what they hold (issue 77)."""
    rclpy = require("rclpy")
    import threading

    import torch
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import UInt8MultiArray

    from robot_rl.data.wire import TransitionSchema, decode_weights
    from robot_rl.ros.links.transport import WEIGHTS_TOPIC, RosLearnerLink
    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.safety.fast_critic import WEIGHTS_TOPIC as FAST_TOPIC
    from robot_rl.ros.safety.fast_critic import FastRiskOutlet
    from robot_rl.ros.safety.safety_node import SafetyNode
    from robot_rl.safety import SafetyLimits
    from robot_rl.safety.fast_critic import (
        FAST_CRITIC_KEY,
        INPUT_WIDTH,
        FastCriticFilter,
        FastCriticModel,
        fast_critic_settings,
    )

    def model(bias: float) -> FastCriticModel:
        return FastCriticModel([(np.zeros((INPUT_WIDTH, 1), np.float32), np.full(1, bias, np.float32))])

    learner_context, cell_context = Context(), Context()
    rclpy.init(context=learner_context)
    rclpy.init(context=cell_context)
    executors = [SingleThreadedExecutor(context=learner_context), SingleThreadedExecutor(context=cell_context)]
    try:
        learner = RosLearnerLink(
            rclpy.create_node("robot_rl_learner", context=learner_context),
            schema=TransitionSchema({"state": (5,)}, 4),
        )
        outlet = FastRiskOutlet(learner.node)  # the learner node's route for the fast critic

        def publish(version: int, weights: dict) -> None:
            learner.publish_weights(version, outlet(weights))

        cell = rclpy.create_node("robot_rl_safety", context=cell_context)
        fast = FastCriticFilter(fast_critic_settings({"enabled": True}), 200.0, 0.05)
        safety = SafetyNode(cell, SafetyLimits(state_timeout=0.05), 200.0, fast_critic=fast)
        policy_messages, fast_messages = [], []
        cell.create_subscription(UInt8MultiArray, WEIGHTS_TOPIC, lambda m: policy_messages.append(m.data), qos.LATCHED)
        cell.create_subscription(UInt8MultiArray, FAST_TOPIC, lambda m: fast_messages.append(m.data), qos.LATCHED)
        executors[0].add_node(learner.node)
        executors[1].add_node(cell)
        threads = [threading.Thread(target=executor.spin, daemon=True) for executor in executors]
        for thread in threads:
            thread.start()

        def wait_for(condition, what: str) -> None:
            deadline = time.monotonic() + 20
            while not condition():
                assert time.monotonic() < deadline, f"timed out waiting for {what}"
                time.sleep(0.05)

        policy = {"pi.weight": torch.ones(2, 3)}
        publish(1, {**policy, FAST_CRITIC_KEY: (model(-3.0), 7)})
        wait_for(lambda: fast.current is not None and policy_messages, "the first weights")
        assert fast.current[1] == 7 and float(fast.current[0].layers[0][1][0]) == -3.0  # swapped in by the node
        weights, meta = decode_weights(bytes(policy_messages[-1]), {"pi.weight": ((2, 3), np.dtype(np.float32))})
        assert set(weights) == {"pi.weight"} and meta["version"] == 1  # the policy's weights alone

        publish(2, {**policy, FAST_CRITIC_KEY: (model(-3.0), 7)})  # the same fit: not sent again
        publish(3, {**policy, FAST_CRITIC_KEY: (model(2.0), 8)})

        def newest_policy_version() -> int:
            return decode_weights(bytes(policy_messages[-1]), {"pi.weight": ((2, 3), np.dtype(np.float32))})[1][
                "version"
            ]

        wait_for(lambda: fast.current[1] == 8 and newest_policy_version() == 3, "the newer fit")
        assert len(fast_messages) == 2 and outlet.version == 8
        assert safety.fast.totals_now()["weights_accepted"] == 2
    finally:
        for executor in executors:
            executor.shutdown(timeout_sec=5.0)
        rclpy.shutdown(context=learner_context)
        rclpy.shutdown(context=cell_context)


def test_an_actor_whose_budget_is_spent_waits_for_a_slow_recorder_and_a_stopped_one_exits_within_the_grace():
    """The CI run of stop 40 lost the graph's last episode from the recorder's store: the actor gave a recorder
    that was still committing 3 s and then recorded the episode in its own store. Its budget spent, nothing hurries
    the actor: it waits ``ros.delivery.record_timeout`` for the recorder's confirmation."""
    rclpy = require("rclpy")
    import json
    import threading

    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import String

    from robot_rl.cli.graph import Launcher
    from robot_rl.ros.links.transport import RosActorLink
    from robot_rl.ros.nodes.actor_node import STOPPED_WAIT, ExitWaits
    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.plumbing.delivery import ACK_TOPIC, Outbox

    stopped = ExitWaits.at_exit(exit_timeout=60.0, record_timeout=10.0, stopped=True)
    assert 2 * stopped.flush + stopped.catch_up + stopped.record + stopped.monitor < Launcher([], []).grace
    spent = ExitWaits.at_exit(exit_timeout=60.0, record_timeout=10.0, stopped=False)
    assert (spent.catch_up, spent.record, spent.monitor) == (60.0, 10.0, 60.0)

    actor_context, cell_context = Context(), Context()
    rclpy.init(context=actor_context)
    rclpy.init(context=cell_context)
    executors = [SingleThreadedExecutor(context=actor_context), SingleThreadedExecutor(context=cell_context)]
    try:
        spilled: list[list[Transition]] = []
        outbox = Outbox("actor-1", 2**20, record_timeout=10.0, spill=spilled.append, for_learner=False)
        actor = RosActorLink(
            rclpy.create_node("robot_rl_actor", context=actor_context), expected_weights={}, outbox=outbox
        )
        recorder = rclpy.create_node("robot_rl_recorder", context=cell_context)
        acks = recorder.create_publisher(String, ACK_TOPIC, qos.EVENT)
        executors[0].add_node(actor.node)
        executors[1].add_node(recorder)
        threads = [threading.Thread(target=executor.spin, daemon=True) for executor in executors]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 30
        while acks.get_subscription_count() == 0 and time.monotonic() < deadline:  # DDS discovery
            time.sleep(0.05)
        for index in range(5):  # an episode the budget cut short
            actor.send_transitions([transition(index)])
        actor.cut_episode("e" * 32)
        confirm = threading.Timer(
            STOPPED_WAIT + 1.0,  # the recorder commits the episode after longer than a stopped actor waits
            lambda: acks.publish(String(data=json.dumps({"node": "recorder", "episodes": ["e" * 32]}))),
        )
        confirm.start()
        started = time.monotonic()
        actor.finish(record_wait=spent.record)
        waited = time.monotonic() - started
        confirm.join()
        assert STOPPED_WAIT < waited < spent.record
        assert outbox.recorded_locally == 0 and spilled == []  # the recorder has it
        assert outbox.episodes == {} and outbox.finished_at == {}  # confirmed, so it left the actor's memory
    finally:
        for executor in executors:
            executor.shutdown()
        rclpy.shutdown(context=actor_context)
        rclpy.shutdown(context=cell_context)


def test_each_node_holds_its_own_end_of_the_link():
    """One class played both sides (``RosTransport(role=...)``, each method checking the role at run time; issue 77
    item 3). The actor node holds the actor's end, the learner node the learner's: neither has the other side's
    methods, and in one process ``LocalTransport`` is both ends."""
    require("rclpy")
    from robot_rl.core.transport import ActorLink, LearnerLink, LocalTransport
    from robot_rl.ros.links.transport import RosActorLink, RosLearnerLink

    assert issubclass(RosActorLink, ActorLink) and not issubclass(RosActorLink, LearnerLink)
    assert issubclass(RosLearnerLink, LearnerLink) and not issubclass(RosLearnerLink, ActorLink)
    assert not any(hasattr(RosActorLink, name) for name in ("publish_weights", "publish_progress", "acknowledge"))
    assert not any(hasattr(RosLearnerLink, name) for name in ("send_transitions", "latest_weights", "backlog"))
    assert issubclass(LocalTransport, ActorLink) and issubclass(LocalTransport, LearnerLink)
