"""The fast loop with its learned critic in every tick: rate, tick time and critic time of the safety node at 1 kHz.

The safety node runs as its own process (``robot_rl.ros.safety.safety_node --rate-hz 1000`` with
``safety.fast_critic.enabled=true``) on a risk model of a realistic size (26 -> 128 -> 128 -> 1, ReLU, random
He-initialised weights, written to a temporary ``.npz``); every tick it scores the commanded delta and, when that
does not pass alone, its 0.5x and 0.25x versions, hold and retreat too (5 candidates), before the hard layer. This
process plays the arm (TCP pose and external wrench at 1 kHz, stamped, the TCP circling slowly under a varying push)
and the actor (a target within 2 cm of the arm at 10 Hz), and publishes new weights every ``--weights-every`` s, as
a learner would.

The figures come from the node's own reports (``/rl/safety_stats``, one a second: tick count, 1 us histograms of the
tick's and the critic's wall time and of the MLP's CPU time, bypasses by reason), summed over the measured span after
a warm-up. The critic's time is the wall time of its whole step in the tick (features, candidates, the MLP, the
decision); its deadline is on the tick thread's CPU time in the MLP. Before the node starts, the critic's step is
also timed alone in this process (``--steps``). The 1-minute load average is sampled every second: other jobs on this machine's 2
cores show in every figure, so it goes into the result.

    python -m benchmarks.safety_loop [--quick]    # full: 120 s measured; --quick: 15 s

Writes ``benchmarks/results/safety_loop.json`` (``safety_loop_quick.json``). Targets on 2 cores: rate >= 990 Hz,
tick p99 <= 1.0 ms, critic p99 <= 100 us.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import write_result

TARGET_HZ = 1000.0
ACTOR_HZ = 10.0
HIDDEN = (128, 128)
NODE = "robot_rl_bench_arm_and_actor"
TARGETS = {"rate_hz": 990.0, "tick_p99_ms": 1.0, "critic_p99_us": 100.0}
HOME = np.array([0.45, 0.0, 0.2])
RISKY = 0.1  # share of the actor's commands the benchmark's model scores above threshold_on


def risk_model(seed: int):
    """26 -> 128 -> 128 -> 1 ReLU, He-initialised, its last layer scaled and biased so that on the commands of this
    benchmark's actor the logits spread with a standard deviation of 2 and about ``RISKY`` of them score above
    ``threshold_on`` (0.25), most below ``threshold_off``: the filter engages now and then, as a trained one would
    near a hazard."""
    from robot_rl.safety.fast_critic import INPUT_WIDTH, STATE_WIDTH, FastCriticModel

    rng = np.random.default_rng(seed)
    widths = (INPUT_WIDTH, *HIDDEN, 1)
    layers = [
        (rng.normal(0.0, math.sqrt(2.0 / n_in), (n_in, n_out)).astype(np.float32), np.zeros(n_out, np.float32))
        for n_in, n_out in itertools.pairwise(widths)
    ]
    states = np.zeros((1000, STATE_WIDTH), np.float32)  # what this benchmark's arm and actor send, roughly
    states[:, 0:3] = HOME + rng.uniform(-0.02, 0.02, (1000, 3))
    states[:, 3] = math.pi
    states[:, 6:8] = rng.uniform(-0.01, 0.01, (1000, 2))
    states[:, 14] = rng.uniform(2.0, 8.0, 1000)
    states[:, 18] = rng.choice([-1.0, 1.0], 1000)
    deltas = np.concatenate(
        [
            rng.uniform(-0.02, 0.02, (1000, 3)),
            rng.normal(0.0, 0.05, (1000, 3)),
            rng.choice([-2.0, 0.0, 2.0], (1000, 1)),
        ],
        axis=1,
    )
    x = np.concatenate([states, deltas], axis=1)
    for weight, bias in layers[:-1]:
        x = np.maximum(x @ weight + bias, 0.0)
    weight = layers[-1][0] * (2.0 / float(np.std(x @ layers[-1][0])))  # logits with a standard deviation of 2
    bias = math.log(0.25 / 0.75) - float(np.percentile(x @ weight, 100 * (1 - RISKY)))
    layers[-1] = (weight.astype(np.float32), np.array([bias], np.float32))
    return FastCriticModel(layers)


def in_process(steps: int, seed: int) -> dict[str, float]:
    """p50 / p99 (us) of the critic's step alone, in this process, on the benchmark's model and a stream like the
    one the node gets: what the critic costs without the node, the transport and the other process around it. Twice:
    as the stream comes (``p50_us``, ``p99_us``; the filter stays released on it: the command alone is scored), and
    with the filter held engaged and ``threshold_off`` 0, so that no command passes alone (``engaged_*``: every
    candidate scored, the choice made, the command rebuilt: the slowest tick)."""
    from robot_rl.core.geometry import matrix_from_rotvec
    from robot_rl.safety import ArmState, Command
    from robot_rl.safety.fast_critic import FastCriticFilter, fast_critic_settings

    figures = {}
    for prefix in ("", "engaged_"):
        held = {"threshold_off": 0.0} if prefix else {}
        fast = FastCriticFilter(fast_critic_settings({"enabled": True, **held}), TARGET_HZ, 0.01, risk_model(seed))
        rng, down, times = np.random.default_rng(seed), np.diag([1.0, -1.0, -1.0]), []
        for step in range(steps):
            t = step / TARGET_HZ
            pos = HOME + 0.02 * np.array([math.cos(0.5 * t), math.sin(0.5 * t), 0.0])
            arm = ArmState(pos, down, t, np.array([0.0, 0.0, 5.0 + 3.0 * math.sin(2.0 * t)]), np.zeros(3))
            fast.motion.update(pos, down, t)
            if step % 100 == 0:  # the actor's 10 Hz
                target = Command(
                    pos + rng.uniform(-0.02, 0.02, 3), matrix_from_rotvec(rng.normal(0, 0.05, 3)) @ down, 1.0, t
                )
            fast.filter.engaged = fast.filter.engaged or prefix == "engaged_"
            started = time.perf_counter()
            fast.step(arm, target, 1.0, t)
            times.append(time.perf_counter() - started)
        micros = np.asarray(times) * 1e6
        figures[f"{prefix}p50_us"] = round(float(np.percentile(micros, 50)), 1)
        figures[f"{prefix}p99_us"] = round(float(np.percentile(micros, 99)), 1)
    return figures


def python_reference_us() -> float:
    """Median us of ``sum(range(1000))``, 2,000 times: the host's Python speed on the day (a cloud machine's varies
    by a factor of two between days), so critic figures of two runs can be compared."""
    times = []
    for _ in range(2000):
        started = time.perf_counter()
        sum(range(1000))
        times.append(time.perf_counter() - started)
    return round(float(np.median(times)) * 1e6, 2)


def summed(reports: list[dict], key: str) -> dict[int, int]:
    total: dict[int, int] = {}
    for report in reports:
        for micros, count in report[key].items():
            total[int(micros)] = total.get(int(micros), 0) + count
    return total


def run(seconds: float, warmup: float, weights_every: float, seed: int, steps: int) -> tuple[dict, dict]:
    """(figures, settings) of one run: the node started, warmed up for ``warmup`` s, measured for ``seconds`` s."""
    import rclpy
    from geometry_msgs.msg import PoseStamped, WrenchStamped
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Float64, String, UInt8MultiArray

    from robot_rl.cli.graph import reserved_ros_domain
    from robot_rl.core.blas import blas_kernels
    from robot_rl.core.geometry import matrix_from_rotvec
    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.plumbing.messages import numpy_to_pose, stamp
    from robot_rl.ros.safety.fast_critic import STATS_TOPIC, WEIGHTS_TOPIC, percentiles
    from robot_rl.safety.fast_critic import BYPASS_REASONS, FORWARD

    model = risk_model(seed)
    alone = in_process(steps, seed)  # before the node starts: nothing else of this benchmark runs meanwhile
    folder = Path(tempfile.mkdtemp(prefix="robot_rl_safety_loop_"))
    weights, log = folder / "fast_risk.npz", folder / "safety.log"
    model.save(weights, version=0)
    with reserved_ros_domain() as domain:
        os.environ.update(ROS_DOMAIN_ID=str(domain), ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        command = [
            sys.executable,
            "-m",
            "robot_rl.ros.safety.safety_node",
            "--rate-hz",
            str(TARGET_HZ),
            "--senders",
            NODE,
            "safety.fast_critic.enabled=true",
            f"safety.fast_critic.weights={weights}",
            "safety.fast_critic.report_period=1.0",
        ]
        process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
        rclpy.init()
        node = rclpy.create_node(NODE)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        pose_pub = node.create_publisher(PoseStamped, "/franka_robot_state_broadcaster/current_pose", 1)
        wrench_pub = node.create_publisher(
            WrenchStamped, "/franka_robot_state_broadcaster/external_wrench_in_base_frame", 1
        )
        action_pub = node.create_publisher(PoseStamped, "/rl/action", 1)
        gripper_pub = node.create_publisher(Float64, "/rl/gripper", 1)
        weights_pub = node.create_publisher(UInt8MultiArray, WEIGHTS_TOPIC, qos.LATCHED)
        rng = np.random.default_rng(seed)
        down = np.diag([1.0, -1.0, -1.0])
        reports: list[tuple[float, dict]] = []
        node.create_subscription(
            String, STATS_TOPIC, lambda m: reports.append((time.monotonic(), json.loads(m.data))), 10
        )
        # what the learner would publish, made before the run (making one takes this process 50 ms)
        payloads = [
            UInt8MultiArray(data=risk_model(seed + version).to_bytes(version))
            for version in range(1, 2 + math.ceil((seconds + warmup + 10.0) / weights_every))
        ]
        # the arm's messages are built once and updated in place: this process must leave the node a core
        pose, wrench = PoseStamped(), WrenchStamped()
        numpy_to_pose(pose.pose, HOME, down)
        started = time.monotonic()
        clock = {"state": started, "action": started, "weights": started + weights_every, "spin": started}
        counts = {"states": 0, "weights": 0}

        def publish_state(now: float) -> None:
            t = now - started
            pose.header.stamp = wrench.header.stamp = stamp(time.time())
            pose.pose.position.x = HOME[0] + 0.02 * math.cos(0.5 * t)  # the TCP circles slowly
            pose.pose.position.y = HOME[1] + 0.02 * math.sin(0.5 * t)
            wrench.wrench.force.z = 5.0 + 3.0 * math.sin(2.0 * t)  # N: a varying push from below
            pose_pub.publish(pose)
            wrench_pub.publish(wrench)
            counts["states"] += 1

        def act() -> None:
            target = PoseStamped()
            position = np.array([pose.pose.position.x, pose.pose.position.y, pose.pose.position.z])
            rotation = matrix_from_rotvec(rng.normal(0.0, 0.05, 3)) @ down
            numpy_to_pose(target.pose, position + rng.uniform(-0.02, 0.02, 3), rotation)
            gripper_pub.publish(Float64(data=float(rng.choice([-1.0, 1.0]))))
            action_pub.publish(target)

        def drive(until: float) -> None:
            """The arm at TARGET_HZ, the actor at ACTOR_HZ, new weights every ``weights_every`` s, the node's reports
            read every 20 ms, until ``until`` (monotonic s); a plain loop (an executor's timers cost more)."""
            period = 1.0 / TARGET_HZ
            while (now := time.monotonic()) < until:
                if now >= clock["state"]:
                    publish_state(now)
                    clock["state"] = max(clock["state"] + period, now - 5 * period)  # no burst after a stall
                if now >= clock["action"]:
                    act()
                    clock["action"] += 1.0 / ACTOR_HZ
                if now >= clock["weights"]:
                    weights_pub.publish(payloads[counts["weights"] % len(payloads)])
                    counts["weights"] += 1
                    clock["weights"] += weights_every
                if now >= clock["spin"]:
                    executor.spin_once(timeout_sec=0.0)
                    clock["spin"] += 0.02
                time.sleep(max(0.0, clock["state"] - time.monotonic()))

        loads: list[float] = []
        try:
            deadline = time.monotonic() + 120.0  # start-up: the first report of a ticking node
            while not any(report["ticks"] for _, report in reports):
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"the safety node did not start ticking:\n{log.read_text()[-2000:]}")
                drive(time.monotonic() + 0.1)
            begin = time.monotonic() + warmup
            end = begin + seconds
            drive(begin)
            load_at_start, states = os.getloadavg(), counts["states"]
            for second in range(math.ceil(seconds)):
                loads.append(os.getloadavg()[0])
                drive(min(begin + second + 1, end))
            states = counts["states"] - states
            load_at_end = os.getloadavg()
            drive(end + 1.5)  # the report covering the last second comes up to a second later
        finally:
            executor.shutdown()
            node.destroy_node()
            rclpy.shutdown()
            process.send_signal(signal.SIGINT)  # the node stops as an operator would stop it
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    measured = [report for arrived, report in reports if begin + 1.0 <= arrived <= end + 1.5]
    measured = [report for report in measured if report["period_s"] > 0][: max(1, round(seconds))]
    ticks = sum(report["ticks"] for report in measured)
    span = sum(report["period_s"] for report in measured)
    tick_us, critic_us, model_us = (
        percentiles(summed(measured, key))
        for key in ("tick_histogram_us", "critic_histogram_us", "model_cpu_histogram_us")
    )
    bypasses = {reason: sum(report[reason] for report in measured) for reason in BYPASS_REASONS}
    text = log.read_text()
    shutil.rmtree(folder, ignore_errors=True)
    figures = {
        "target_hz": TARGET_HZ,
        "rate_hz": round(ticks / span, 1),
        "state_hz": round(states / seconds, 1),  # the arm stream this process sent
        "tick_p50_ms": round(tick_us["p50"] / 1e3, 3),
        "tick_p99_ms": round(tick_us["p99"] / 1e3, 3),
        "tick_max_ms": round(tick_us["max"] / 1e3, 3),
        "critic_p50_us": critic_us["p50"],
        "critic_p90_us": critic_us["p90"],
        "critic_p99_us": critic_us["p99"],
        "critic_max_us": critic_us["max"],
        "model_cpu_p50_us": model_us["p50"],  # CPU time in the MLP alone (the deadline's clock): not inflated by
        "model_cpu_p99_us": model_us["p99"],  # waiting for a core, so a busy machine shows less in it
        "critic_in_loop": ticks > 0 and bypasses["no_model"] == 0 and sum(bypasses.values()) < ticks,
        "critic_evaluations": ticks - sum(bypasses.values()),
        "ticks": ticks,
        "measured_s": round(span, 2),
        "bypasses": sum(bypasses.values()),
        "bypasses_by_reason": bypasses,
        "filtered": sum(report["filtered"] for report in measured),
        "weights_swapped": sum(report["weights_accepted"] for report in measured),
        "weights_rejected": sum(report["rejected"] for report in measured),
        "critic_step_in_process_us": alone,
        "python_reference_us": python_reference_us(),  # how fast this host ran Python today: runs compare by it
        "blas_kernels": "/".join(blas_kernels() or ("none",)),
        "load_average": {
            "start": [round(value, 2) for value in load_at_start],
            "during_1min_mean": round(float(np.mean(loads)), 2),
            "during_1min_max": round(max(loads), 2),
            "end": [round(value, 2) for value in load_at_end],
        },
        "targets": {
            "rate_hz": f">= {TARGETS['rate_hz']:g}",
            "tick_p99_ms": f"<= {TARGETS['tick_p99_ms']:g}",
            "critic_p99_us": f"<= {TARGETS['critic_p99_us']:g}",
        },
        "met": {},
        "node_exit_code": process.returncode,
        "node_tracebacks": text.count("Traceback"),
    }
    figures["met"] = {
        "rate_hz": figures["rate_hz"] >= TARGETS["rate_hz"],
        "tick_p99_ms": figures["tick_p99_ms"] <= TARGETS["tick_p99_ms"],
        "critic_p99_us": figures["critic_p99_us"] <= TARGETS["critic_p99_us"],
    }
    settings = {
        "seconds": seconds,
        "warmup_s": warmup,
        "state_target_hz": TARGET_HZ,
        "actor_hz": ACTOR_HZ,
        "weights_every_s": weights_every,
        "model": {
            "hidden": model.hidden,
            "activation": model.activation,
            "parameters": model.parameters,
            "forward": FORWARD,  # "c" (robot_rl/safety/_mlp.c) or "numpy"
        },
        "candidates_per_tick": 5,
        "deadline_us": 200,
        "node_command": " ".join(command[1:]).replace(str(weights), "<tmp>/fast_risk.npz"),
    }
    return figures, settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="15 s measured instead of 120 s")
    parser.add_argument("--seconds", type=float, default=None, help="measured span (default 120; --quick 15)")
    parser.add_argument("--warmup", type=float, default=5.0, help="s after the node's first report before measuring")
    parser.add_argument("--weights-every", type=float, default=5.0, help="s between new weights on the topic")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=20_000, help="critic steps timed in-process before the node runs")
    args = parser.parse_args()
    seconds = args.seconds or (15.0 if args.quick else 120.0)
    figures, settings = run(seconds, args.warmup, args.weights_every, args.seed, args.steps)
    print(json.dumps({key: value for key, value in figures.items() if key != "targets"}, indent=1))
    path = write_result("safety_loop_quick" if args.quick else "safety_loop", figures, settings=settings)
    print("wrote", path)


if __name__ == "__main__":
    main()
