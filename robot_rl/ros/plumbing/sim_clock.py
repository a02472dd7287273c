"""Sim time for the node graph (``ros.sim_time``).

In sim time the sim robot node owns the clock: it publishes ``/clock`` (rosgraph_msgs/Clock) and
advances physics only as fast as the actor commands it, one control period at a time, so a
rehearsal runs as fast as the machine allows and never falls behind. Every other node runs with
``use_sim_time``: its timers, the safety node's tick and staleness checks, the teleop hold and the
recorder's stamps follow ``/clock``. Waits for a peer (a stream, a service, the learner) stay on the
wall clock: a node whose peer died must still notice, although the sim clock stops with it.

Real time (``ros.sim_time=false``) is the real cell's clock and stays available in sim to rehearse
latency: there the sim robot steps physics on a wall-clock timer.
"""

from __future__ import annotations

import time

CLOCK_TOPIC = "/clock"


class ClockError(RuntimeError):
    """Sim time was asked for and no ``/clock`` came."""


class NodeClock:
    """Seconds for timeouts and staleness: the node's ROS clock (``/clock``) in sim time, the monotonic
    clock otherwise (wall-clock time can jump with NTP; only differences of these values mean anything)."""

    def __init__(self, node, sim_time: bool):
        self.node, self.sim_time = node, bool(sim_time)

    def now(self) -> float:
        if self.sim_time:
            return self.node.get_clock().now().nanoseconds * 1e-9
        return time.monotonic()


def sim_time_of(cfg) -> bool:
    """``ros.sim_time`` of a node's config: true | false (null, the default outside a launch: false)."""
    from robot_rl.core.config import ConfigError

    value = cfg.ros.get("sim_time")
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ConfigError("ros.sim_time", value, "true (the graph's sim robot node owns the clock) or false")
    return value


def lockstep_period(cfg) -> float:
    """The control period of the sim robot's lockstep, s (``1 / task.control_rate_hz``): the span of sim time one
    actor command covers, inside which the safety node ticks every arm state the sim robot sends."""
    from robot_rl.core.config import positive

    return 1.0 / float(positive("task.control_rate_hz", cfg.task.get("control_rate_hz")))


def lockstep_teleop(cfg) -> bool:
    """Whether the actor waits for the human's input of each observation: in sim time with a task that has an expert,
    whose scripted human the sim robot node runs, publishing one message on each teleop topic per observation."""
    return sim_time_of(cfg) and bool(cfg.task.get("expert"))


def sim_time_parameters(sim_time: bool) -> list:
    """``parameter_overrides`` that put a node on ``/clock`` (empty in real time)."""
    if not sim_time:
        return []
    from rclpy.parameter import Parameter

    return [Parameter("use_sim_time", Parameter.Type.BOOL, True)]


class BackwardJumps:
    """Counts and logs ``/clock`` going backwards (a second sim publishing, a sim restarted, a replayed bag): the
    node's ROS clock follows it (rclpy sets it from each message), its timers restart from the new time, and its
    staleness checks see old stamps as stale until the clock catches up. Each jump is counted in ``count`` and
    logged with its size (a warning at most every 5 s; the count says how many came meanwhile); nothing raises."""

    def __init__(self, node):
        from rclpy.clock import JumpThreshold
        from rclpy.duration import Duration

        self.node, self.count = node, 0
        threshold = JumpThreshold(min_forward=None, min_backward=Duration(nanoseconds=-1), on_clock_change=False)
        # rclpy keeps only a weak reference to the handle: it lives as long as this object
        self.handle = node.get_clock().create_jump_callback(threshold, post_callback=self._jumped)

    def _jumped(self, jump) -> None:
        self.count += 1
        seconds_back = -jump.delta.nanoseconds * 1e-9
        self.node.get_logger().warning(
            f"{CLOCK_TOPIC} jumped back by {seconds_back:.3f} s ({self.count} backward jumps since start): "
            f"another node publishing {CLOCK_TOPIC}, or a restarted sim?",
            throttle_duration_sec=5.0,
        )


def wait_for_clock(node, timeout: float, spinning: bool = False) -> None:
    """Block until the node's clock runs on ``/clock`` (a first message came), at most ``timeout`` wall s; spins
    the node meanwhile unless its executor already runs in another thread (``spinning``). Raises
    :class:`ClockError`."""
    import rclpy

    deadline = time.monotonic() + timeout
    while node.get_clock().now().nanoseconds == 0:
        if spinning:
            time.sleep(0.01)
        else:
            rclpy.spin_once(node, timeout_sec=0.01)
        if time.monotonic() > deadline:
            raise ClockError(
                f"ros.sim_time=true: no {CLOCK_TOPIC} within {timeout:g} s; {node.get_name()} expected "
                "the sim robot node (robot_rl.ros.emulation.sim_robot_node) to publish it. Start the graph with its sim node, "
                "or set ros.sim_time=false on a real cell"
            )
