"""Who sent a message: publishers of a topic checked against the nodes allowed to publish there.

Without DDS security any participant can publish on any topic (``docs/security.md``). A node that must take
commands only from certain nodes watches the ROS graph (:class:`PublisherWatch`: node names and GIDs of each
topic's publishers) and matches every received message to its sender's GID (:func:`subscribe_with_sender`,
:meth:`PublisherWatch.admits`). The safety node uses it for its command inputs (and latches on a foreign
publisher); the arm drivers of robot_rl (sim robot) take arm commands only from the safety node with it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from .guard import InputGuard, MessageError

UNNAMED = "_NODE_NAME_UNKNOWN_"  # rmw's node name of an endpoint whose node is not discovered (yet)
REFRESH_AFTER = 0.01  # s: a message from an unknown sender refreshes the graph view if it is older than this


def endpoint_node(info) -> str:
    """Fully qualified node name of a topic endpoint (``rclpy.topic_endpoint_info.TopicEndpointInfo``)."""
    return f"{info.node_namespace.rstrip('/')}/{info.node_name}"


def is_one_of(info, names: frozenset[str]) -> bool:
    """Whether the endpoint's node is in ``names`` (plain node names, or fully qualified ones)."""
    return info.node_name in names or endpoint_node(info) in names


def sender_gid(message_info) -> bytes | None:
    """The GID of the publisher that sent a message (rclpy's ``MessageInfo``), if the middleware reports it."""
    gid = message_info.get("publisher_gid")
    return bytes(gid["data"]) if gid else None


def describe(gid: bytes | None) -> str:
    return gid.hex() if gid else "unknown"


class PublisherWatch:
    """Who publishes on the topics the safety node guards, checked against who may.

    ``own``: output topic -> GIDs of the node's own publishers there (no other publisher may exist);
    ``inputs``: input topic -> names of the nodes allowed to publish there. An input endpoint whose node
    is still unnamed (discovery of its node lags its endpoint's) is judged after ``discovery_grace`` s."""

    def __init__(
        self, node, own: dict[str, frozenset[bytes]], inputs: dict[str, frozenset[str]], discovery_grace: float
    ):
        self.node, self.own, self.inputs, self.discovery_grace = node, own, inputs, discovery_grace
        self.trusted: dict[str, frozenset[bytes]] = {topic: frozenset() for topic in inputs}  # allowed GIDs now
        self.pending: dict[str, frozenset[bytes]] = {topic: frozenset() for topic in inputs}  # unnamed, in grace
        self.foreign: dict[bytes, str] = {}  # GID -> "node (gid) on topic"
        self.checked_at = -math.inf  # monotonic s of the last check
        self._first_seen: dict[bytes, float] = {}

    def check(self, now: float) -> list[str]:
        """Refresh from the ROS graph; returns the foreign publishers that are new (or newly named) since the
        last check, each as ``node (gid ...) on topic``."""
        foreign, first_seen = {}, {}
        for topic in (*self.own, *self.inputs):
            trusted, pending = set(), set()
            for info in self.node.get_publishers_info_by_topic(topic):
                gid = bytes(info.endpoint_gid)
                first_seen[gid] = self._first_seen.get(gid, now)
                if topic in self.own:
                    allowed = gid in self.own[topic]
                elif is_one_of(info, self.inputs[topic]):
                    allowed = True
                    trusted.add(gid)
                else:
                    allowed = info.node_name == UNNAMED and now - first_seen[gid] < self.discovery_grace
                    if allowed:
                        pending.add(gid)
                if not allowed:
                    foreign[gid] = f"{endpoint_node(info)} (gid {gid.hex()}) on {topic}"
            if topic in self.inputs:
                self.trusted[topic], self.pending[topic] = frozenset(trusted), frozenset(pending)
        appeared = [text for gid, text in foreign.items() if self.foreign.get(gid) != text]
        self.foreign, self._first_seen, self.checked_at = foreign, first_seen, now
        return appeared

    def admits(self, topic: str, gid: bytes | None, refresh: Callable[[], object] | None = None) -> bool:
        """Whether a message on input ``topic`` comes from one of its allowed nodes: true if so, false while its
        publisher's node is still being discovered (ignore the message), :class:`MessageError` otherwise.
        An unknown sender first refreshes the view (``refresh``, default :meth:`check`) if it is not fresh."""
        if gid not in self.trusted[topic] and time.monotonic() - self.checked_at > REFRESH_AFTER:
            (refresh or (lambda: self.check(time.monotonic())))()  # a sender that appeared since the last check
        if gid in self.trusted[topic]:
            return True
        if gid in self.pending[topic]:
            return False
        raise MessageError(
            f"sender gid {describe(gid)} is not a known publisher of {', '.join(sorted(self.inputs[topic]))}"
        )


def subscribe_with_sender(node, guard: InputGuard, msg_type, topic: str, callback: Callable, qos) -> str:
    """A guarded subscription whose ``callback(msg, gid)`` also gets the sending publisher's GID; returns the
    resolved (remapped) topic name."""
    guarded = guard.wrap(topic, lambda received: callback(*received))
    subscription = node.create_subscription(msg_type, topic, lambda msg, info: guarded((msg, sender_gid(info))), qos)
    return subscription.topic_name


class CommandGate:
    """Who may move the arm, for the safety node (its module docstring has the rules): its own publishers are the
    only ones on its outputs (:meth:`own_publisher`), the ``senders`` the only ones on its command inputs
    (:meth:`watch_inputs`, :meth:`admits`), a foreign publisher latches ``latch`` (:meth:`check`), and only the
    ``operators`` release it (:meth:`reset_sender`)."""

    def __init__(self, node, latch, operators: frozenset[str]):
        self.node, self.latch, self.operators = node, latch, operators
        self.own: dict[str, frozenset[bytes]] = {}  # output topic -> GIDs of the node's own publishers there
        self.watch: PublisherWatch | None = None

    def own_publisher(self, msg_type, topic: str, profile=1):
        """A publisher on ``topic`` (QoS ``profile``: default depth 1), its GID kept as the node's own there (a local
        endpoint is in the graph at once, so it is the one that was not there before)."""
        before = self._gids(self.node.resolve_topic_name(topic))
        publisher = self.node.create_publisher(msg_type, topic, profile)
        self.own[publisher.topic_name] = frozenset(self._gids(publisher.topic_name) - before)
        return publisher

    def _gids(self, topic: str) -> set[bytes]:
        return {bytes(info.endpoint_gid) for info in self.node.get_publishers_info_by_topic(topic)}

    def watch_inputs(self, inputs: dict[str, frozenset[str]], discovery_grace: float) -> None:
        """Watch the own outputs made so far and the ``inputs`` (topic -> nodes allowed to publish there)."""
        self.watch = PublisherWatch(self.node, self.own, inputs, discovery_grace)
        self.check()

    def check(self) -> None:
        """Latch the hold while the graph shows a foreign publisher; log each one by name when it appears."""
        for publisher in self.watch.check(time.monotonic()):
            self.node.get_logger().error(
                f"foreign publisher: {publisher} is not allowed there; holding the arm, "
                f"latched until an e-stop reset by {', '.join(sorted(self.operators))}"
            )
        if self.watch.foreign:
            self.latch.trigger(f"foreign publisher: {next(iter(self.watch.foreign.values()))}")

    def admits(self, topic: str, gid: bytes | None) -> bool:
        """:meth:`PublisherWatch.admits`, refreshing through :meth:`check` (which latches on a foreigner)."""
        return self.watch.admits(topic, gid, self.check)

    def reset_sender(self, topic: str, gid: bytes | None) -> str:
        """The operator node that sent a reset on ``topic``, if the reset may be obeyed: its sender is an operator,
        only operators publish on the topic and no foreign publisher remains; :class:`MessageError` otherwise."""
        publishers = self.node.get_publishers_info_by_topic(topic)
        operators = ", ".join(sorted(self.operators))
        others = sorted({endpoint_node(info) for info in publishers if not is_one_of(info, self.operators)})
        if others:
            raise MessageError(
                f"e-stop reset refused: {', '.join(others)} also publish on {topic}, where only {operators} may"
            )
        sender = next((info for info in publishers if bytes(info.endpoint_gid) == gid), None)
        if sender is None:
            raise MessageError(f"e-stop reset refused: its sender (gid {describe(gid)}) is not known as {operators}")
        self.check()
        if self.watch.foreign:
            raise MessageError(
                "e-stop reset refused: foreign publisher(s) still present: " + "; ".join(self.watch.foreign.values())
            )
        return endpoint_node(sender)
