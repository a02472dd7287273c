"""What every robot_rl node process shares: Hydra config from the command line, rclpy set-up and
tear-down, a background executor, and start-up checks of the topics a node depends on.

A node is started as ``python -m <module> [key=value ...] [--ros-args ...]``: the Hydra overrides
configure it exactly like ``robot-rl train`` (same config tree), everything after ``--ros-args``
goes to rclpy (remapping, parameters, log level).
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from robot_rl.core.config import ConfigError
from robot_rl.core.interrupts import StopRequest, interrupt_once

from .name_claim import NameClaim, namesake_error
from .senders import UNNAMED
from .sim_clock import BackwardJumps

if TYPE_CHECKING:  # imported where used: robot_rl.data imports torch, which a node without a policy never needs
    from robot_rl.data.task_spec import TaskSpec


#: set by ``robot-rl launch`` on every node it starts: how many times it started this node again after it died (0: its
#: first start); the actor goes on from its actor state when it is not 0
RESTART_ENV = "ROBOT_RL_RESTART"


def restart_count() -> int:
    """How many times the launch started this node again after it died (``RESTART_ENV``; 0 outside a launch)."""
    value = os.environ.get(RESTART_ENV, "0")
    return int(value) if value.isdigit() else 0


def exit_with_error(module: str, error: Exception) -> int:
    """One line on stderr naming the node and what was wrong; exit code 2 (bad input, like ``robot-rl``)."""
    print(f"{module}: error: {error}", file=sys.stderr)
    return 2


def is_override(arg: str) -> bool:
    """Whether a command-line argument is a Hydra override (``key=value``, ``+key=value``, ``~key``), not a flag."""
    return not arg.startswith("-") and ("=" in arg or arg.startswith("~"))


def node_config(argv: Sequence[str]) -> tuple[DictConfig, list[str]]:
    """(composed config, rclpy arguments) from a node's command line."""
    from robot_rl.core.composed_config import load_config

    argv = list(argv)
    split = argv.index("--ros-args") if "--ros-args" in argv else len(argv)
    return load_config(argv[:split]), ["robot_rl", *argv[split:]]


def node_task_spec(cfg: DictConfig) -> TaskSpec:
    """The task spec of a node's config: read from ``ros.task_spec`` (a spec file or an episode store, as
    ``robot-rl launch`` hands every node), else built from the task's env (a node started by hand). A spec of
    another task, or a malformed one, raises :class:`ConfigError` naming ``ros.task_spec``. Its robot is the session's
    arm (``robot.name``: ``robot=fr3``) when the config names one, so the stores a session records say fr3, not the
    sim model's panda; else the spec's."""
    from dataclasses import replace

    from omegaconf import OmegaConf

    from robot_rl.data.task_spec import read_task_spec

    task = OmegaConf.to_container(cfg.task, resolve=True)
    path, robot = OmegaConf.select(cfg, "ros.task_spec"), OmegaConf.select(cfg, "robot.name")
    if path is None:
        from robot_rl.runtime.envs import task_spec

        try:
            spec = task_spec(task)
        except ImportError as error:  # a learner box without the simulator
            raise ConfigError(
                "ros.task_spec", None, f"a task_spec.json or an episode store of the task (building its env: {error})"
            ) from None
    else:
        spec = read_task_spec(str(path))
        if spec.task != task.get("name"):
            raise ConfigError("ros.task_spec", str(path), f"the spec of task {task.get('name')} (it holds {spec.task})")
    return replace(spec, robot=str(robot)) if robot else spec


@contextmanager
def ros_node(name: str, ros_args: list[str], sim_time: bool = False, lifecycle: bool = False) -> Iterator:
    """An initialised rclpy context and one node (on ``/clock`` with ``sim_time``:
    :mod:`robot_rl.ros.plumbing.sim_clock`; with ``lifecycle`` a managed node serving the lifecycle services); the first SIGINT
    or SIGTERM raises KeyboardInterrupt and later ones are ignored (:func:`~robot_rl.core.interrupts.interrupt_once`),
    so the same clean-up (checkpoints, episode stores) runs whole for ``kill`` and Ctrl-C."""
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    from .mismatch_watch import MismatchWatch, quiet_node
    from .sim_clock import sim_time_parameters

    rclpy.init(args=ros_args, signal_handler_options=SignalHandlerOptions.NO)
    signal.signal(signal.SIGINT, interrupt_once)
    signal.signal(signal.SIGTERM, interrupt_once)
    # no parameter services: the nodes are configured by Hydra, and six services more in every wait set cost time
    settings = {"parameter_overrides": sim_time_parameters(sim_time), "start_parameter_services": False}
    # no default QoS-event handlers in every wait set: a look at the graph reports the same mismatches
    node = quiet_node(name, lifecycle, **settings)
    MismatchWatch(node)
    jumps = BackwardJumps(node) if sim_time else None
    claim = NameClaim(node)  # a namesake's claim heard at start-up, or an older one that discovery shows later
    try:
        executor = executor_of(node)  # spun while the node looks at the graph: the namesakes' claims come in
        try:
            taken = name_taken(
                node,
                wait=lambda s: executor.spin_once(timeout_sec=s),
                heard=lambda: claim.namesake_heard,
                restarted=restart_count() > 0,
            )
        finally:
            release(executor, node)
        if taken:
            print(f"{name}: error: {taken}", file=sys.stderr)
            raise SystemExit(2)
        claim.claim()
        yield node
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the clean-up short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if jumps is not None:
            jumps.handle.unregister()
        node.destroy_node()
        rclpy.try_shutdown()
        if claim.refused:  # stopped for an older namesake: the start-up refusal's line and code
            print(f"{name}: error: {claim.refused}", file=sys.stderr)
            raise SystemExit(2)


# s a starting node gives discovery to show it the graph's nodes, at most: on two loaded cores a node already running
# took more than 1 s to show (a second safety node then started beside the first)
DISCOVERY_S = 3.0
# s, at most, while the graph shows topic endpoints of nodes it has not named yet: on loaded cores the first safety
# node's publishers showed, unnamed, for more than DISCOVERY_S, and a second one started beside it
DISCOVERY_UNNAMED_S = 30.0
STABLE_S = 0.5  # s the nodes shown must stay the same before the graph counts as seen (when it shows any but this)
LEASE_S = 25.0  # s a node of the same name may take to leave the graph: a killed process's lingers until its lease ends
RESTART_LOOK_S = 3.0  # s a node the launch restarted looks for a live namesake's claim (its predecessor sends none)


def unnamed_endpoints(node) -> bool:
    """Whether the ROS graph shows a publisher or subscription whose node it has not named yet (discovery of a node
    lags its endpoints')."""
    for topic, _ in node.get_topic_names_and_types():
        endpoints = (*node.get_publishers_info_by_topic(topic), *node.get_subscriptions_info_by_topic(topic))
        if any(info.node_name == UNNAMED for info in endpoints):
            return True
    return False


def name_taken(
    node,
    discovery: float = DISCOVERY_S,
    lease: float = LEASE_S,
    unnamed_wait: float = DISCOVERY_UNNAMED_S,
    wait: Callable[[float], object] = time.sleep,
    heard: Callable[[], bool] = lambda: False,
    restarted: bool = False,
) -> str | None:
    """Why ``node`` may not run, or None: another node of its fully qualified name in the ROS graph (two safety nodes
    would both command the arm). Waits up to ``discovery`` s for the graph to show its nodes (less once it shows some
    and they stay the same for ``STABLE_S``), up to ``unnamed_wait`` s while it shows endpoints of nodes not named yet
    (:func:`unnamed_endpoints`); a namesake found is given ``lease`` s more to go (the lingering entry of a killed
    process, restarted at once), then named in the answer. A namesake that discovery shows only later is found by
    :class:`~robot_rl.ros.plumbing.name_claim.NameClaim`. ``wait(s)`` passes the time between looks (spinning the node), and
    ``heard()`` says whether a namesake's claim came: such a namesake runs, and is named without waiting out a lease
    (a killed process's lingering entry sends nothing).

    ``restarted``: the launch started this node again after it saw the node die (:func:`restart_count`), so a
    namesake that sends no claim within ``RESTART_LOOK_S`` is the dead one's lingering entry, and unnamed endpoints
    are waited for no longer either: this node runs (a live namesake's claim still refuses it, at start-up or later,
    by :class:`~robot_rl.ros.plumbing.name_claim.NameClaim`). A restarted actor waited 18 s for the unnamed endpoints
    of its killed predecessor (``benchmarks/cell_faults.py``)."""
    name = node.get_fully_qualified_name()
    if restarted:
        lease, unnamed_wait = min(lease, RESTART_LOOK_S), min(unnamed_wait, RESTART_LOOK_S)

    def namesakes() -> tuple[int, int]:
        """(nodes of this name, nodes) in the graph as this node sees it, itself included."""
        nodes = node.get_node_names_and_namespaces()
        return sum(1 for n, ns in nodes if f"{ns.rstrip('/')}/{n}" == name), len(nodes)

    start = time.monotonic()
    seen, stable_since, said = 1, start, False
    while True:
        count, total = namesakes()
        if count > 1:
            break
        now = time.monotonic()
        if total != seen:
            seen, stable_since = total, now
        stable, waited = total > 1 and now - stable_since >= STABLE_S, now - start
        if stable or waited >= discovery:
            if waited >= unnamed_wait or not unnamed_endpoints(node):
                return None  # the graph is seen: every endpoint's node is named, and none has this one's name
            if not said:
                node.get_logger().info(
                    f"the ROS graph shows topic endpoints of nodes not named yet; waiting up to {unnamed_wait:g} s "
                    "for their names (is one of them this node's namesake?)"
                )
                said = True
        wait(0.02)
    deadline = time.monotonic() + lease
    while namesakes()[0] > 1:
        if heard():
            node.get_logger().info(f"a node named {name} sent its claim to the name: it runs (no lease to wait out)")
            return namesake_error(name)
        if time.monotonic() > deadline:
            if restarted:
                node.get_logger().info(
                    f"a node named {name} still shows in the ROS graph but sent no claim to the name: the one that "
                    "died before this restart; running"
                )
                return None
            return namesake_error(name)
        wait(0.1)
    return None


SPIN_PERIOD_S = 0.1  # s: the longest a background executor waits for work before it checks whether to stop


@contextmanager
def spinning_in_background(node) -> Iterator[threading.Thread]:
    """Run the node's callbacks in a thread (single-threaded executor) while the caller's thread runs its own
    loop. On exit the thread stops spinning by itself and is joined, and only then is the executor shut down, before
    the node goes: a spinning thread left inside the middleware when the process exits aborts it (``terminate called
    without an active exception``), and rclpy's ``Executor.shutdown`` from another thread does not wait for the spin
    in progress: it destroyed the executor's guard condition under a callback about to trigger it (``InvalidHandle``
    or ``'NoneType' object has no attribute 'trigger'`` in the executor thread)."""
    from rclpy.executors import ExternalShutdownException

    executor = executor_of(node)
    stopping = threading.Event()

    def spin() -> None:
        try:
            while not stopping.is_set() and executor.context.ok():
                executor.spin_once(timeout_sec=SPIN_PERIOD_S)
        except ExternalShutdownException:
            pass

    thread = threading.Thread(target=spin, name=f"{node.get_name()}_executor", daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        stopping.set()
        thread.join(timeout=5.0)  # a callback running longer than that: the executor is shut down under it
        executor.shutdown(timeout_sec=5.0)


@contextmanager
def stop_requests() -> Iterator[StopRequest]:
    """For the block, SIGINT and SIGTERM set the returned request instead of raising: a KeyboardInterrupt raised
    inside rclpy's C++ code (``spin_once`` converting a callback's arguments) surfaces as a ``RuntimeError``
    traceback instead of a clean stop. A node stopped by its process group's Ctrl-C and by its launcher gets two
    signals: the request takes no lock (:class:`~robot_rl.core.interrupts.StopRequest`)."""
    requested = StopRequest()
    previous = {
        number: signal.signal(number, lambda signum, frame: requested.set())
        for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield requested
    finally:
        for number, handler in previous.items():  # once stopping, a second signal must not cut the clean-up short
            signal.signal(number, signal.SIG_IGN if requested.is_set() else handler)


def executor_of(node):
    """A single-threaded executor serving ``node``, to call ``spin_once`` on in a loop (``rclpy.spin_once`` adds
    the node to the global executor and removes it again at every call, about a millisecond each)."""
    from rclpy.executors import SingleThreadedExecutor

    executor = SingleThreadedExecutor()
    executor.add_node(node)
    return executor


def release(executor, node) -> None:
    """Take ``node`` off ``executor`` and shut the executor down while rclpy's context still lives. An executor that
    handled a callback sits in a reference cycle (its pending-work generator); left to the garbage collector, it
    destroys its SIGINT guard condition after the context is gone and prints an "Exception ignored ... InvalidHandle"
    traceback at the node's exit."""
    executor.remove_node(node)
    executor.shutdown(timeout_sec=0)


@contextmanager
def serving(node) -> Iterator[tuple[Any, StopRequest]]:
    """For a loop of the caller's that serves ``node`` (``executor.spin_once``): the node's executor and Ctrl-C /
    SIGTERM as a stop request (:func:`stop_requests`); rclpy's shutdown ends the block quietly, and the executor lets
    the node go after it."""
    from rclpy.executors import ExternalShutdownException

    executor = executor_of(node)
    with stop_requests() as stop:
        try:
            yield executor, stop
        except ExternalShutdownException:
            pass
        finally:
            release(executor, node)


def spin(node, until: Callable[[], bool] = lambda: False) -> None:
    """Spin until Ctrl-C / SIGTERM or ``until()`` (waking every 0.1 s so both are seen when no messages come)."""
    import rclpy

    with serving(node) as (executor, stop):
        while rclpy.ok() and not stop.is_set() and not until():
            executor.spin_once(timeout_sec=0.1)


STALL_WARNING_PERIOD = 60.0  # s between two warnings of a tick loop that cannot keep its rate


@dataclass
class TickCounts:
    """What :func:`spin_at_rate` did: ``ticks`` made, ``skipped`` deadlines dropped after a stall."""

    ticks: int = 0
    skipped: int = 0


def collect_garbage_between_ticks() -> int | None:
    """Run Python's cyclic garbage collector now, between two ticks, once the youngest generation holds half of its
    threshold: left to itself the collector starts whenever an allocation crosses the threshold, which on a loop
    that allocates every tick means inside a tick (:func:`spin_at_rate` pauses it during ticks). Collects the oldest
    generation whose count has reached its threshold, as the automatic collector would. Returns the generation
    collected, or None (also while the process has the collector disabled)."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    if not gc.isenabled() or counts[0] < thresholds[0] // 2:
        return None
    generation = 2 if counts[2] >= thresholds[2] else 1 if counts[1] >= thresholds[1] else 0
    gc.collect(generation)
    return generation


@contextmanager
def collector_paused() -> Iterator[None]:
    """The automatic garbage collector off for the block (a tick), on again after it when it was on: the cycles a tick
    leaves are collected between ticks (:func:`collect_garbage_between_ticks`), also by a loop that runs late and never
    waits (a loaded machine), instead of whenever an allocation inside the tick crosses the threshold."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def spin_at_rate(node, tick: Callable[[], None], rate_hz: float, max_lag: int = 1) -> TickCounts:
    """Serve the node's callbacks and call ``tick()`` every ``1 / rate_hz`` s, both on this thread, until Ctrl-C /
    SIGTERM: a fixed-rate loop, as ros2_control's control loop is, for the safety node's real-time ticks.

    The deadlines are absolute, ``start + k / rate_hz`` on the monotonic clock; until the next one the executor
    serves what comes in, waiting at most until the deadline. A tick that comes late is still made, at once (it
    reads the newest command and state). When the loop ends up more than ``max_lag`` periods behind (a stall), the
    missed deadlines are dropped, counted in ``skipped`` and logged (a warning at most every ``STALL_WARNING_PERIOD``
    s, with the rate the loop holds and what to do): ticks are never
    made back to back to catch up. The objects made before the loop are frozen out of garbage collection
    (``gc.freeze``), and the collector runs while the loop waits (:func:`collect_garbage_between_ticks`), never in a
    tick (paused during each, :func:`collector_paused`: what a tick leaves is collected after it, also by a loop that
    runs late and never waits): with the safety node's fast critic, the critic's p99 fell from 81-85 to 66-75 us and the tick's from
    0.31-0.37 to 0.28-0.29 ms (``benchmarks/safety_loop.py --quick``, runs back to back).

    Measured with ``benchmarks/safety_loop.py --quick`` (1 kHz setting, the arm's pose and wrench at 1 kHz each, 2
    cores): an rclpy timer on the same executor made 928-965 ticks/s, this loop 999-1,000, with the tick's p99 0.37-0.44
    ms against 0.46-0.48. A thread of its own for the ticks made 986-1,000 ticks/s but took the tick's p99 to 1.2-2 ms:
    the tick waits for the GIL while the executor's thread runs a callback."""
    import rclpy
    from rclpy.executors import ExternalShutdownException

    executor, period, counts = executor_of(node), 1.0 / rate_hz, TickCounts()
    gc.freeze()  # what the node built at start-up lives as long as it does: no collection walks it again
    deadline = started = time.monotonic()
    with stop_requests() as stop:
        try:
            while rclpy.ok() and not stop.is_set():
                now = time.monotonic()
                if now < deadline and collect_garbage_between_ticks() is not None:
                    now = time.monotonic()
                if now < deadline:
                    executor.spin_once(timeout_sec=deadline - now)
                    continue
                with collector_paused():
                    tick()
                counts.ticks += 1
                deadline += period
                behind = int((time.monotonic() - deadline) / period)
                if behind > max_lag:  # a stall: drop the missed deadlines rather than tick them back to back
                    counts.skipped += behind
                    deadline += behind * period
                    held = counts.ticks / max(time.monotonic() - started, period)
                    node.get_logger().warning(
                        f"the {rate_hz:g} Hz loop holds {held:.0f} ticks/s: {counts.skipped} deadlines skipped since "
                        f"start ({counts.ticks} ticks made; the last stall {behind * period * 1e3:.1f} ms). The machine "
                        "cannot keep this rate: lower it (--rate-hz; in a graph robot.safety=[--rate-hz,N]) or give "
                        "the node a core of its own",
                        throttle_duration_sec=STALL_WARNING_PERIOD,
                    )
        except ExternalShutdownException:
            pass
        finally:
            gc.unfreeze()
            release(executor, node)
    return counts


class TopicError(RuntimeError):
    """A topic a node needs is missing or has the wrong type."""


def require_topics(node, expected: dict[str, str], timeout: float) -> None:
    """Wait up to ``timeout`` s until every topic in ``expected`` (name -> ``pkg/msg/Type``) has a
    publisher of that type; otherwise raise naming the topic, what it expected and what exists."""
    deadline = time.monotonic() + timeout
    while True:
        publishers = {
            topic: {info.topic_type for info in node.get_publishers_info_by_topic(topic)} for topic in expected
        }
        for topic, kinds in publishers.items():
            if kinds and expected[topic] not in kinds:
                name = node.resolve_topic_name(topic)
                raise TopicError(
                    f"topic {name} has type {', '.join(sorted(kinds))}; {node.get_name()} expected {expected[topic]}"
                )
        missing = [topic for topic, kinds in publishers.items() if not kinds]
        if not missing:
            return
        if time.monotonic() > deadline:
            name = node.resolve_topic_name(missing[0])
            raise TopicError(
                f"no publisher on {name} after {timeout:g} s; {node.get_name()} expected "
                f"{expected[missing[0]]} there (remap with --ros-args -r {name}:=<topic>)"
            )
        time.sleep(0.05)
