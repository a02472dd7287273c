"""Latency of one safety step in-process: the learned filter (numpy risk model, line search) and
the hard layer, separately and together, p50 / p99 over many steps (target p99 <= 200 us).

The risk model has the default critic size ([256, 256], twin heads) on pick_cube's state; each
step scores the proposed action, its 0.5x and 0.25x versions and the hold action in one batch.

    python -m benchmarks.safety_latency [--steps 20000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks.common import write_result


def percentiles(seconds: list[float]) -> dict[str, float]:
    micros = np.asarray(seconds) * 1e6
    return {"p50_us": round(float(np.percentile(micros, 50)), 1), "p99_us": round(float(np.percentile(micros, 99)), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()

    from policies.safety_critic import SafetyCritic
    from robot_rl.safety import ArmState, Command, EStopLatch, SafetyLimits, enforce
    from robot_rl.safety.filter import SafetyFilter

    rng = np.random.default_rng(0)
    state_dim, action_dim = 23, 4  # pick_cube: proprioception + object state; dx dy dz gripper
    safety_filter = SafetyFilter(SafetyCritic(state_dim, action_dim, seed=0).risk_model())
    limits, latch = SafetyLimits(), EStopLatch()
    rot = np.diag([1.0, -1.0, -1.0])
    timings: dict[str, list[float]] = {"filter": [], "hard_layer": [], "filter_and_hard_layer": []}
    previous = Command(np.array([0.45, 0.0, 0.2]), rot, -1.0, 0.0)
    for step in range(args.steps):
        state = rng.normal(size=state_dim)
        action = rng.uniform(-1, 1, action_dim)
        now = time.monotonic()
        arm = ArmState(previous.pos + rng.normal(0, 1e-4, 3), rot, now)
        started = time.perf_counter()
        filtered = safety_filter(state, action).action
        middle = time.perf_counter()
        command = Command(arm.pos + 0.02 * filtered[:3], rot, float(filtered[-1]), now)
        previous, _ = enforce(limits, latch, arm, command, previous, now)
        ended = time.perf_counter()
        timings["filter"].append(middle - started)
        timings["hard_layer"].append(ended - middle)
        timings["filter_and_hard_layer"].append(ended - started)
    figures = {name: percentiles(values) for name, values in timings.items()}
    figures["bypasses"] = safety_filter.bypasses
    for name, value in figures.items():
        print(name, value)
    path = write_result("safety_latency", figures, settings={"steps": args.steps, "critic_hidden": [256, 256],
                                                             "candidates_per_step": 4, "state_dim": state_dim})
    print("wrote", path)


if __name__ == "__main__":
    main()
