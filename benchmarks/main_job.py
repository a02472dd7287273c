"""The README's main job (``robot-rl train``, default pick_cube with the scripted human) for
several seeds, one after the other: wall-clock time and final deterministic success of each.

    python -m benchmarks.main_job [--seeds 0 1 2] [--name main_job] [overrides ...]

Writes ``benchmarks/results/<name>.json``; with overrides (e.g. ``agent.autocast=bf16``) give another ``--name`` so
the defaults' figures stay. Per seed also the first evaluation at >= 90% success (``to_90``: env steps and wall s).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import to_threshold, write_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--runs", default="runs/main_job")
    parser.add_argument("--name", default="main_job", help="results file benchmarks/results/<name>.json")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    results = {}
    for seed in args.seeds:
        run_dir = Path(args.runs) / f"seed{seed}"
        shutil.rmtree(run_dir, ignore_errors=True)
        command = [
            sys.executable,
            "-m",
            "robot_rl.cli",
            "train",
            f"seed={seed}",
            f"train.run_dir={run_dir}",
            *args.overrides,
        ]
        start = time.monotonic()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - start
        summary = json.loads((run_dir / "summary.json").read_text())
        results[f"seed{seed}"] = {
            "wall_seconds_total": wall,
            "final_eval_success": summary["final_eval_success"],
            "final_eval_episodes": summary["eval_history"][-1]["episodes"],
            "final_eval_mean_length": summary["final_eval_mean_length"],
            "env_steps": summary["env_steps"],
            "intervention_steps": summary["intervention_steps"],
            "to_90": to_threshold(summary["eval_history"], 0.9),
            "eval_history": [
                (h["env_steps"], h["success_rate"], round(h["intervention_rate"], 3)) for h in summary["eval_history"]
            ],
        }
        print(f"seed {seed}: success {summary['final_eval_success']:.2f} in {wall / 60:.1f} min", flush=True)
    successes = [r["final_eval_success"] for r in results.values()]
    walls = [r["wall_seconds_total"] / 60 for r in results.values()]
    print(f"final success {successes}, minutes {[round(w, 1) for w in walls]}")
    path = write_result(
        args.name,
        {"per_seed": results, "min_success": min(successes), "max_minutes": max(walls)},
        settings={"overrides": args.overrides, "command": "robot-rl train seed=<seed>"},
    )
    print("wrote", path)


if __name__ == "__main__":
    main()
