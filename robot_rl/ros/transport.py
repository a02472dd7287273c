"""The actor <-> learner :class:`~robot_rl.transport.Transport` over ROS 2 topics.

Transitions go actor -> learner on ``/rl/transitions`` and weights learner -> actor on
``/rl/policy_weights``, both ``std_msgs/UInt8MultiArray`` carrying :mod:`robot_rl.ros.codec`
payloads, so actor and learner can sit on different machines of one DDS domain with nothing but
standard message types between them. Weights are latched (TRANSIENT_LOCAL): an actor that
starts after the learner, or a learner that restarts from its checkpoint, is picked up without
restarting anyone. Each weights message carries the learner's session id and update count.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

from std_msgs.msg import UInt8MultiArray

from ..transport import LocalTransport, Transport
from . import qos
from .codec import decode_transitions, decode_weights, encode_transitions, encode_weights

TRANSITIONS_TOPIC = "/rl/transitions"
WEIGHTS_TOPIC = "/rl/policy_weights"


class RosTransport(Transport):
    """``role="actor"`` sends transitions and receives weights; ``role="learner"`` the reverse.

    Received messages are decoded in the executor's thread and queued; the interface methods
    may be called from any other thread.
    """

    def __init__(self, node, role: str):
        if role not in ("actor", "learner"):
            raise ValueError(f"role must be 'actor' or 'learner', got {role!r}")
        self.node, self.role = node, role
        self.session = uuid.uuid4().hex[:8]
        self.inbox = LocalTransport()  # what arrived, in arrival order
        self.weights_received = 0
        self.weights_meta: dict[str, Any] = {}
        self.transitions_received = 0
        if role == "actor":
            self._out = node.create_publisher(UInt8MultiArray, TRANSITIONS_TOPIC, qos.TRANSITIONS)
            node.create_subscription(UInt8MultiArray, WEIGHTS_TOPIC, self._on_weights, qos.LATCHED)
        else:
            self._out = node.create_publisher(UInt8MultiArray, WEIGHTS_TOPIC, qos.LATCHED)
            node.create_subscription(UInt8MultiArray, TRANSITIONS_TOPIC, self._on_transitions, qos.TRANSITIONS)

    # ----------------------------------------------------------------- actor side
    def send_transitions(self, transitions: list[dict[str, Any]]) -> None:
        self._require("actor")
        if transitions:
            self._out.publish(UInt8MultiArray(data=encode_transitions(transitions, {"session": self.session})))

    def latest_weights(self) -> tuple[int, dict[str, Any]] | None:
        """(count of weights messages received, weights): the count changes with every new message,
        also when a restarted learner starts counting its updates from its checkpoint again."""
        self._require("actor")
        return self.inbox.latest_weights()

    def _on_weights(self, msg) -> None:
        weights, meta = decode_weights(msg.data)  # executor thread only: one writer
        self.weights_received += 1
        self.weights_meta = meta
        self.inbox.publish_weights(self.weights_received, weights)

    # ----------------------------------------------------------------- learner side
    def receive_transitions(self, timeout: float) -> list[dict[str, Any]]:
        self._require("learner")
        return self.inbox.receive_transitions(timeout)

    def publish_weights(self, version: int, weights: dict[str, Any]) -> None:
        self._require("learner")
        self._out.publish(UInt8MultiArray(data=encode_weights(weights, {"version": version, "session": self.session})))

    def _on_transitions(self, msg) -> None:
        transitions, _ = decode_transitions(msg.data)
        self.transitions_received += len(transitions)
        self.inbox.send_transitions(transitions)

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

    def _require(self, role: str) -> None:
        if self.role != role:
            raise RuntimeError(f"this transport plays the {self.role}; that call belongs to the {role}")
