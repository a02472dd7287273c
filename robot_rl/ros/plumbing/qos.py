"""QoS profiles of the robot_rl topic contract (the topics and their QoS are listed in docs/ros_graph.md).

Publishers are RELIABLE so that both reliable and best-effort subscribers can match them;
subscribers to sensor streams are BEST_EFFORT with depth 1 (only the newest message matters), except in sim
time, where the actor takes every message of the lockstep in order (a pose skipped under load would change the
velocity's finite difference, and with it the run);
commands to an arm are RELIABLE (MoveIt Servo requires it). Transitions are RELIABLE with a deep
queue so a busy learner loses none while it runs; weights are RELIABLE + TRANSIENT_LOCAL so an
actor that starts (or restarts) after the learner still gets the newest ones; the episode log
(``/rl/episode_stats``) keeps its last 100 records TRANSIENT_LOCAL, so a monitor that joins late,
or whose discovery finishes after the actor's first episode, still gets them.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

STREAM_PUBLISHER = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
STREAM_SUBSCRIBER = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
LOCKSTEP_SUBSCRIBER = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE)  # sim time: every message, in order
COMMAND = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
CLOCK = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE)  # sim time: every instant reaches every node
EVENT = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
# the safety node's reader of /rl/estop, where the teleop's heartbeats (false, every period) pass the presses (true):
# KEEP_LAST 10 let a press drop out behind ten heartbeats while a loaded node took nothing; every message is kept
ESTOP_READER = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_ALL)
TICKS = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE)  # the safety node's ticks: every batch, in order
TRANSITIONS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_ALL)
EPISODE_LOG = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
# a reader of a topic that many nodes latch (each node's claim to its name): KEEP_LAST is per topic, not per publisher,
# so depth 1 would keep only the newest of the claims that reach a late joiner at once
LATCHED_READER = QoSProfile(
    depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


def stream_subscriber(sim_time: bool) -> QoSProfile:
    """The actor's profile for the observation and teleop streams."""
    return LOCKSTEP_SUBSCRIBER if sim_time else STREAM_SUBSCRIBER
