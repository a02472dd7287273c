"""CPU per message of a node whose wait set holds rclpy's default QoS-event handlers, against a robot_rl node
(:func:`robot_rl.ros.plumbing.mismatch_watch.quiet_node` and its :class:`~robot_rl.ros.plumbing.mismatch_watch.MismatchWatch`).

rclpy gives every publisher and subscription two event handlers by default, and its single-threaded executor walks
each of them at every wake-up, in Python. The subscriber here has the endpoints of a robot_rl node (``--publishers``
publishers and ``--subscriptions`` subscriptions besides the stream it takes) and takes one ``Float64MultiArray``
stream at ``--rate-hz`` from a publisher process of its own, for ``--seconds`` s; its CPU (user + system, from
``os.times``) is divided by the messages it took. The two kinds of subscriber run one after the other, ``--rounds``
times; the figures are medians.

    python -m benchmarks.wait_set [--rounds 3] [--seconds 8] [--rate-hz 500]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from benchmarks.common import write_result

KINDS = ("rclpy_default", "robot_rl")


def run_publisher(rate_hz: float, seconds: float) -> None:
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from std_msgs.msg import Float64MultiArray

    rclpy.init()
    node = rclpy.create_node("bench_wait_set_publisher")
    publisher = node.create_publisher(Float64MultiArray, "/bench/stream", 10)
    message = Float64MultiArray(data=[0.0] * 14)
    node.create_timer(1.0 / rate_hz, lambda: publisher.publish(message))
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
    except ExternalShutdownException:  # terminated by the benchmark once the subscriber is done
        return
    node.destroy_node()
    rclpy.shutdown()


def run_subscriber(kind: str, publishers: int, subscriptions: int, seconds: float) -> None:
    import rclpy
    from std_msgs.msg import Float64, Float64MultiArray

    from robot_rl.ros.plumbing.mismatch_watch import MismatchWatch, quiet_node
    from robot_rl.ros.plumbing.node_main import executor_of

    rclpy.init()
    if kind == "robot_rl":
        node = quiet_node("bench_wait_set_subscriber", start_parameter_services=False)
        MismatchWatch(node)
    else:
        node = rclpy.create_node("bench_wait_set_subscriber", start_parameter_services=False)
    for k in range(publishers):
        node.create_publisher(Float64, f"/bench/out_{k}", 1)
    for k in range(subscriptions):
        node.create_subscription(Float64, f"/bench/in_{k}", lambda msg: None, 1)
    taken = [0]
    node.create_subscription(Float64MultiArray, "/bench/stream", lambda msg: taken.__setitem__(0, taken[0] + 1), 10)
    executor = executor_of(node)
    deadline = time.monotonic() + 30.0
    while not taken[0] and time.monotonic() < deadline:  # discovery: count from the first message on
        executor.spin_once(timeout_sec=0.1)
    taken[0], before, end = 0, os.times(), time.monotonic() + seconds
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.1)
    after = os.times()
    cpu = after.user + after.system - before.user - before.system
    print(json.dumps({"messages": taken[0], "cpu_s": cpu, "waitables": len(list(node.waitables))}))


def measure(kind: str, args: argparse.Namespace) -> dict:
    """One round: a publisher process and a subscriber process of ``kind``; the subscriber's figures."""
    command = [sys.executable, "-m", "benchmarks.wait_set", "--rate-hz", str(args.rate_hz)]
    publisher = subprocess.Popen([*command, "--role", "publisher", "--seconds", str(args.seconds + 35)])
    try:
        done = subprocess.run(
            [*command, "--role", kind, "--seconds", str(args.seconds), "--publishers", str(args.publishers)]
            + ["--subscriptions", str(args.subscriptions)],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        publisher.terminate()
        publisher.wait()
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rate-hz", type=float, default=500.0)
    parser.add_argument("--publishers", type=int, default=12, help="besides the stream: the sim robot has ~12")
    parser.add_argument("--subscriptions", type=int, default=10, help="besides the stream: the safety node has ~10")
    parser.add_argument("--role", choices=("bench", "publisher", *KINDS), default="bench")
    args = parser.parse_args()
    if args.role == "publisher":
        return run_publisher(args.rate_hz, args.seconds)
    if args.role in KINDS:
        return run_subscriber(args.role, args.publishers, args.subscriptions, args.seconds)
    os.environ.setdefault("ROS_DOMAIN_ID", "91")
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    rounds = {kind: [] for kind in KINDS}
    for _ in range(args.rounds):
        for kind in KINDS:
            rounds[kind].append(measure(kind, args))
    figures = {}
    for kind, runs in rounds.items():
        per_message = [run["cpu_s"] / max(run["messages"], 1) * 1e3 for run in runs]
        figures[kind] = {
            "cpu_ms_per_message_median": round(statistics.median(per_message), 3),
            "cpu_ms_per_message": [round(value, 3) for value in per_message],
            "messages_per_s_median": round(statistics.median(run["messages"] for run in runs) / args.seconds, 1),
            "waitables": runs[0]["waitables"],
        }
    figures["robot_rl_over_rclpy_default"] = round(
        figures["robot_rl"]["cpu_ms_per_message_median"] / figures["rclpy_default"]["cpu_ms_per_message_median"], 3
    )
    settings = {key: getattr(args, key) for key in ("rounds", "seconds", "rate_hz", "publishers", "subscriptions")}
    path = write_result("wait_set", figures, settings=settings)
    print(json.dumps(figures, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
