"""QoS profiles of the robot_rl topic contract (``../shared/reference/ros2.md``).

Publishers are RELIABLE so that both reliable and best-effort subscribers can match them;
subscribers to sensor streams are BEST_EFFORT with depth 1 (only the newest message matters);
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
COMMAND = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
EVENT = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
TRANSITIONS = QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_ALL)
EPISODE_LOG = QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
LATCHED = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
