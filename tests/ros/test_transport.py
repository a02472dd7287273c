"""The actor <-> learner transport over real DDS: start-up matching of the named subscribers, and
no transition lost from the first one on once they are matched."""

import time

import numpy as np

from robot_rl.data.transition import Transition
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
        episode="e" * 32,
        step=index,
    )


def test_the_actor_waits_for_its_named_subscribers_and_they_get_every_transition():
    rclpy = require("rclpy")
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import UInt8MultiArray

    from robot_rl.ros import qos
    from robot_rl.ros.codec import TransitionSchema, decode_transitions
    from robot_rl.ros.delivery import Outbox
    from robot_rl.ros.transport import TRANSITIONS_TOPIC, RosTransport

    # two contexts: the actor and its subscribers are separate DDS participants, as in separate processes
    actor_context, cell_context = Context(), Context()
    rclpy.init(context=actor_context)
    rclpy.init(context=cell_context)
    try:
        outbox = Outbox("actor-1", memory_limit=2**20, record_timeout=10.0, spill=lambda episode: None)
        actor = RosTransport(
            rclpy.create_node("robot_rl_actor", context=actor_context), "actor", expected_weights={}, outbox=outbox
        )
        schema = TransitionSchema({"state": (5,)}, 4)
        started = time.monotonic()
        assert actor.wait_for_subscribers(["robot_rl_recorder"], timeout=0.5) == ["robot_rl_recorder"]
        assert time.monotonic() - started >= 0.5  # it waited the whole timeout for a node that is not there

        learner = RosTransport(rclpy.create_node("robot_rl_learner", context=cell_context), "learner", schema=schema)
        recorder_node = rclpy.create_node("robot_rl_recorder", context=cell_context)
        recorded: list[Transition] = []
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
        learned: list[Transition] = []
        deadline = time.monotonic() + 30
        while (len(learned) < 20 or len(recorded) < 20) and time.monotonic() < deadline:
            executor.spin_once(timeout_sec=0.05)
            learned += learner.receive_transitions(timeout=0)
        assert [t.reward for t in learned] == [float(i) for i in range(20)]
        assert [t.seq for t in learned] == list(range(1, 21)) and {t.actor for t in learned} == {"actor-1"}
        assert [t.reward for t in recorded] == [float(i) for i in range(20)]
        executor.shutdown()
    finally:
        rclpy.shutdown(context=actor_context)
        rclpy.shutdown(context=cell_context)


def test_an_actor_at_its_exit_resends_until_a_learner_that_answers_has_every_transition():
    rclpy = require("rclpy")
    import threading

    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    from robot_rl.ros.codec import TransitionSchema
    from robot_rl.ros.delivery import Outbox
    from robot_rl.ros.transport import RosTransport

    actor_context, cell_context = Context(), Context()
    rclpy.init(context=actor_context)
    rclpy.init(context=cell_context)
    executors = [SingleThreadedExecutor(context=actor_context), SingleThreadedExecutor(context=cell_context)]
    try:
        outbox = Outbox("actor-1", memory_limit=2**20, record_timeout=10.0, spill=lambda episode: None)
        actor = RosTransport(
            rclpy.create_node("robot_rl_actor", context=actor_context), "actor", expected_weights={}, outbox=outbox
        )
        for index in range(10):  # sent while no learner listens: lost for it
            actor.send_transitions([transition(index)])
        learner = RosTransport(
            rclpy.create_node("robot_rl_learner", context=cell_context),
            "learner",
            schema=TransitionSchema({"state": (5,)}, 4),
        )
        learned: list[Transition] = []
        answering = threading.Event()
        answering.set()

        def acknowledge() -> None:  # as the learner node does every 0.5 s: what it has ingested
            learned.extend(learner.receive_transitions(timeout=0))
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
