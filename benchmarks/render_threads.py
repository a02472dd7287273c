"""CPU per camera frame of MuJoCo's EGL rendering on a machine without a GPU, Mesa's llvmpipe rasterizing in its
own thread pool (the default: a thread per core) against rasterizing in the calling thread (``LP_NUM_THREADS=0``).

``scripts/test.sh`` runs the suite's processes with ``LP_NUM_THREADS=0`` (unless set) for the reason it runs them on
one OpenMP thread: on 2 loaded cores a pool of render threads per process costs more CPU than it saves wall time,
and a loaded run is short of CPU. Each round renders ``--frames`` frames of ``pick_cube``'s two cameras at each
``--sizes`` in a fresh process per setting (one after the other, rounds alternating), unloaded and then beside a
Python busy loop keeping one core busy; CPU is the process's user + system time (``os.times``) over the frames
rendered, wall time its ``perf_counter``. The figures are medians over ``--rounds`` rounds.

    python -m benchmarks.render_threads [--rounds 5] [--frames 200] [--sizes 48 128]
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

SETTINGS = {"llvmpipe_pool": None, "calling_thread": "0"}  # LP_NUM_THREADS: unset (Mesa's default), 0


def render(frames: int, size: int) -> dict[str, float]:
    """Render ``frames`` steps' frames of two cameras at ``size`` px in this process: CPU and wall ms per frame."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    from robot_rl.sim.tasks import PickCubeEnv

    env = PickCubeEnv(cameras=["front", "wrist"], image_size=size)
    env.reset(seed=0)
    env.observation()  # the context and its first frame outside the timing
    cpu, wall = sum(os.times()[:2]), time.perf_counter()
    for _ in range(frames):
        env.observation()  # the state vector and a frame of each camera
    cpu, wall = sum(os.times()[:2]) - cpu, time.perf_counter() - wall
    env.close()
    return {"cpu_ms_per_frame": 1e3 * cpu / (2 * frames), "wall_ms_per_frame": 1e3 * wall / (2 * frames)}


def one_run(setting: str, frames: int, size: int) -> dict[str, float]:
    env = {key: value for key, value in os.environ.items() if key != "LP_NUM_THREADS"}
    if SETTINGS[setting] is not None:
        env["LP_NUM_THREADS"] = SETTINGS[setting]
    code = f"import json; from benchmarks.render_threads import render; print(json.dumps(render({frames}, {size})))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--frames", type=int, default=200, help="steps rendered per run (two frames each)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[48, 128])
    args = parser.parse_args()

    figures: dict[str, dict] = {}
    for load in ("unloaded", "one_core_busy"):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load == "one_core_busy" else None
        try:
            time.sleep(0.5 if busy else 0.0)
            for size in args.sizes:
                runs: dict[str, list[dict[str, float]]] = {setting: [] for setting in SETTINGS}
                for round_ in range(args.rounds):
                    order = list(SETTINGS) if round_ % 2 == 0 else list(reversed(SETTINGS))
                    for setting in order:
                        runs[setting].append(one_run(setting, args.frames, size))
                row = {
                    setting: {key: statistics.median(run[key] for run in results) for key in results[0]}
                    for setting, results in runs.items()
                }
                row["cpu_ratio_calling_thread_to_pool"] = (
                    row["calling_thread"]["cpu_ms_per_frame"] / row["llvmpipe_pool"]["cpu_ms_per_frame"]
                )
                figures.setdefault(load, {})[f"{size}px"] = row
                print(load, f"{size}px", json.dumps(row), flush=True)
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    path = write_result(
        "render_threads",
        figures,
        settings={
            "task": "pick_cube",
            "cameras": ["front", "wrist"],
            "frames_per_run": 2 * args.frames,
            "rounds": args.rounds,
            "statistic": "median over rounds",
            "MUJOCO_GL": "egl",
        },
    )
    print("wrote", path)


if __name__ == "__main__":
    main()
