"""Endpoints that cannot talk to a node's own, found by looking at the ROS graph instead of by rclpy's default
event handlers.

rclpy gives every publisher and subscription two event handlers unless told otherwise: one logs a warning when
discovery matches an endpoint of incompatible QoS (a best-effort camera driver and a reliable subscription: no frame
ever arrives), the other one of another message type. The single-threaded executor adds every handler to its wait
set and checks it at every wake-up, in Python. A node with 12 publishers and 10 subscriptions besides a 500 Hz
stream spent 0.71-0.77 ms of CPU per message of it with them and 0.28-0.37 ms without (``python -m
benchmarks.wait_set``); the sim robot and the safety node wake hundreds of times a second.

The robot_rl nodes (:func:`~robot_rl.ros.plumbing.node_main.ros_node`) therefore create their publishers and subscriptions
without those handlers (:func:`quiet_node`) and log the same mismatches with a
:class:`MismatchWatch`: a steady-clock timer that checks one of the node's own endpoints per look against the
graph's endpoints on its topic (two graph queries, ~20 us each), each endpoint in turn, and warns once
per pair that cannot talk.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque

from rclpy.clock import Clock, ClockType
from rclpy.event_handler import PublisherEventCallbacks, SubscriptionEventCallbacks
from rclpy.node import Node
from rclpy.publisher import Publisher
from rclpy.qos import QoSCompatibility, qos_check_compatible

from .senders import UNNAMED, endpoint_node

LOOK_PERIOD_S = 0.1  # s between two looks (steady clock): with ~20 endpoints each is checked every ~2 s
NAMING_GRACE_S = 5.0  # s an endpoint's node may stay unnamed (discovery) before the mismatch is named without it


class QuietEndpoints:
    """For :class:`rclpy.node.Node` and its subclasses: publishers and subscriptions made without rclpy's default
    event handlers, unless the caller passes its own ``event_callbacks``."""

    def create_publisher(self, *args, event_callbacks=None, **kwargs):
        events = event_callbacks or PublisherEventCallbacks(use_default_callbacks=False)
        return super().create_publisher(*args, event_callbacks=events, **kwargs)

    def create_subscription(self, *args, event_callbacks=None, **kwargs):
        events = event_callbacks or SubscriptionEventCallbacks(use_default_callbacks=False)
        return super().create_subscription(*args, event_callbacks=events, **kwargs)


class QuietNode(QuietEndpoints, Node):
    """An rclpy node whose endpoints have no default event handlers (:class:`QuietEndpoints`)."""


def quiet_node(name: str, lifecycle: bool = False, **settings):
    """A :class:`QuietNode`, or with ``lifecycle`` a managed node serving the lifecycle services, likewise quiet
    (``rclpy.lifecycle`` is imported only then: ~50 ms of start-up that the other nodes skip)."""
    if not lifecycle:
        return QuietNode(name, **settings)
    from rclpy.lifecycle import LifecycleNode

    class QuietLifecycleNode(QuietEndpoints, LifecycleNode):
        """A lifecycle node whose endpoints have no default event handlers (:class:`QuietEndpoints`)."""

    return QuietLifecycleNode(name, **settings)


class MismatchWatch:
    """Warns once for each endpoint of the graph that cannot talk to one of ``node``'s own: another message type on
    the topic, or a QoS that the pair cannot match (:func:`rclpy.qos.qos_check_compatible`). ``found`` holds one line
    per mismatch."""

    def __init__(self, node, period_s: float = LOOK_PERIOD_S):
        self.node = node
        self.found: list[str] = []
        self._reported: set[tuple[str, bytes, bool]] = set()  # (topic, other endpoint's GID, whether ours publishes)
        self._unnamed_since: dict[tuple[str, bytes, bool], float] = {}  # monotonic s a mismatch was first seen
        self._queue: deque = deque()
        self.timer = node.create_timer(period_s, self.look, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def look(self) -> None:
        """Check the next of the node's publishers and subscriptions (a timer callback: never raises)."""
        with contextlib.suppress(Exception):  # an endpoint destroyed meanwhile, or the context shutting down
            if not self._queue:
                self._queue.extend([*self.node.publishers, *self.node.subscriptions])
            self.check(self._queue.popleft())

    def check(self, own) -> None:
        """Name what cannot talk to ``own`` (one of the node's publishers or subscriptions). Both sides' QoS and
        type are read from the graph: the profile an endpoint was made with holds "default" where the graph holds
        what the middleware chose, and :func:`rclpy.qos.qos_check_compatible` calls the two incompatible."""
        publishing, topic = isinstance(own, Publisher), own.topic_name
        publishers = self.node.get_publishers_info_by_topic(topic)
        subscriptions = self.node.get_subscriptions_info_by_topic(topic)
        ours, theirs = (publishers, subscriptions) if publishing else (subscriptions, publishers)
        me = self.node.get_fully_qualified_name()
        mine = next((info for info in ours if endpoint_node(info) == me), None)
        if mine is None:  # not in the graph yet
            return
        now = time.monotonic()
        for other in theirs:
            key = (topic, bytes(other.endpoint_gid), publishing)
            if key in self._reported:
                continue
            if other.topic_type != mine.topic_type:
                verbs = ("takes", "sends") if publishing else ("sends", "takes")
                problem = f"{verbs[0]} {other.topic_type}, this node {verbs[1]} {mine.topic_type}"
            else:
                pair = (mine.qos_profile, other.qos_profile) if publishing else (other.qos_profile, mine.qos_profile)
                compatibility, reason = qos_check_compatible(*pair)
                if compatibility != QoSCompatibility.ERROR:
                    continue
                problem = f"has a QoS that this node's {'publisher' if publishing else 'subscription'} cannot match ({reason.rstrip(';')})"
            if other.node_name == UNNAMED and now - self._unnamed_since.setdefault(key, now) < NAMING_GRACE_S:
                continue  # discovery names an endpoint's node after the endpoint: wait for the name a while
            who = endpoint_node(other) if other.node_name != UNNAMED else "a node"
            line = f"{topic}: {who} {problem}"
            self._reported.add(key)
            self.found.append(line)
            self.node.get_logger().warning(f"{line}: no message will pass between them")
