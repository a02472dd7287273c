"""Env steps per second of the robot_rl MuJoCo tasks beside robosuite Lift, in one run.

Every configuration steps with uniform random actions at the same control rate (10 Hz policy,
500 Hz physics). Each is timed in ``--blocks`` blocks of steps; the median block rate is
reported, and the ratio of each state-only task to robosuite Lift (state-only).

    python -m benchmarks.sim_speed [--steps 1000] [--camera-steps 200] [--blocks 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import mujoco
import numpy as np

from benchmarks.common import write_result

TASKS = {"reach": "ReachEnv", "pick_cube": "PickCubeEnv", "peg_insert": "PegInsertEnv"}


def steps_per_second(make_env, steps: int, blocks: int) -> float:
    env = make_env()
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    rates = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(steps):
            action = rng.uniform(-1, 1, env.action_space.shape).astype(np.float32)
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset()
        rates.append(steps / (time.perf_counter() - start))
    env.close()
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1000, help="steps per block, state-only runs")
    parser.add_argument("--camera-steps", type=int, default=200, help="steps per block with cameras and robosuite")
    parser.add_argument("--blocks", type=int, default=5)
    args = parser.parse_args()

    import robot_rl.sim.tasks

    figures: dict[str, dict[str, float]] = {}
    for task, class_name in TASKS.items():
        env_class = getattr(robot_rl.sim.tasks, class_name)
        figures[task] = {"state": steps_per_second(env_class, args.steps, args.blocks)}
        for size in (64, 128):
            figures[task][f"2cams_{size}"] = steps_per_second(
                lambda env_class=env_class, size=size: env_class(cameras=["front", "wrist"], image_size=size),
                args.camera_steps,
                args.blocks,
            )
        print(task, {k: round(v, 1) for k, v in figures[task].items()}, flush=True)

    from robot_rl.sim.robosuite_env import RobosuiteEnv

    lift = {"state": steps_per_second(lambda: RobosuiteEnv("Lift", action_dim=7), args.camera_steps, args.blocks)}
    lift["2cams_64"] = steps_per_second(
        lambda: RobosuiteEnv("Lift", action_dim=7, cameras=["front", "wrist"], image_size=64),
        args.camera_steps,
        args.blocks,
    )
    figures["robosuite_lift"] = lift
    print("robosuite_lift", {k: round(v, 1) for k, v in lift.items()}, flush=True)

    ratios = {task: figures[task]["state"] / lift["state"] for task in TASKS}
    print("state-only speed-up over robosuite Lift:", {k: round(v, 1) for k, v in ratios.items()})
    path = write_result(
        "sim_speed",
        {"steps_per_second": figures, "state_speedup_vs_robosuite_lift": ratios},
        settings={
            "control_rate_hz": 10,
            "physics_rate_hz": 500,
            "statistic": f"median of {args.blocks} blocks",
            "steps_per_block": {"state": args.steps, "cameras_and_robosuite": args.camera_steps},
            "mujoco": mujoco.__version__,
            "MUJOCO_GL": os.environ["MUJOCO_GL"],
        },
    )
    print("wrote", path)


if __name__ == "__main__":
    main()
