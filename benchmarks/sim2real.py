"""Domain randomization pays off on held-out perturbations; what it costs per reset and step.

1. Overhead, measured side by side: median time of ``reset`` and ``step`` of pick_cube (state)
   without and with the training randomization set.
2. Robustness: train pick_cube (the main job: demos + interventions, same budget and seed)
   without and with ``randomization=<training set>`` (two runs at a time), then sweep both
   policies over the ``heldout`` set (``robot-rl eval randomization=heldout``): each perturbation
   at ``--grid-points`` values, everything else nominal. Reports success per perturbation and the
   mean over all perturbed evaluations. With ``--privileged-critic`` (default) both runs train an
   asymmetric SAC: the critic also reads the clean state (``task.privileged_state``), the policy
   only the (noisy) state a cell would give it.

    python -m benchmarks.sim2real [--steps 16000] [--training-set compliance] [--grid-points 3] [--episodes 20]
                                  [--no-privileged-critic]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS, run_training, save_figure, side_by_side, write_result

HELDOUT_SET = "heldout"
VARIANTS = {"nominal": [], "randomized": ["randomization={training_set}"]}


def overhead(training_set: str, repeats: int = 200) -> dict:
    from robot_rl.core.composed_config import load_config
    from robot_rl.runtime.envs import make_env
    from robot_rl.runtime.robustness import randomized

    cfg = load_config(["task=pick_cube", f"randomization={training_set}"])
    task = dict(cfg.task)
    envs = {"nominal": make_env(task), "randomized": randomized(make_env(task), cfg.randomization, 0)}
    times: dict[str, dict[str, list[float]]] = {name: {"reset": [], "step": []} for name in envs}
    action = np.zeros(4, np.float32)
    for index in range(repeats):
        for name, env in envs.items():  # interleaved, so both see the same machine state
            started = time.perf_counter()
            env.reset(seed=index)
            times[name]["reset"].append(time.perf_counter() - started)
            for _ in range(5):
                started = time.perf_counter()
                env.step(action)
                times[name]["step"].append(time.perf_counter() - started)
    result = {
        name: {kind: round(float(np.median(values)) * 1e3, 4) for kind, values in kinds.items()}
        for name, kinds in times.items()
    }
    for kind in ("reset", "step"):
        result[f"{kind}_overhead_ms"] = round(result["randomized"][kind] - result["nominal"][kind], 4)
        result[f"{kind}_ratio"] = round(result["randomized"][kind] / result["nominal"][kind], 3)
    return {"median_ms": result, "repeats": repeats, "set": training_set}


def task_overrides(args: argparse.Namespace) -> list[str]:
    return ["task=pick_cube", *(["task.privileged_state=true"] if args.privileged_critic else [])]


def sweep(checkpoint: Path, args: argparse.Namespace, report_dir: Path) -> list[dict]:
    command = [
        sys.executable,
        "-m",
        "robot_rl.cli.main",
        "eval",
        *task_overrides(args),
        f"randomization={HELDOUT_SET}",
        f"eval.checkpoint={checkpoint}",
        f"eval.episodes={args.episodes}",
        f"eval.grid_points={args.grid_points}",
        f"eval.report_dir={report_dir}",
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads((report_dir / "robustness.json").read_text())


def train_and_sweep(name: str, args: argparse.Namespace) -> dict:
    run_dir = Path(args.runs) / name
    summary = run_training(
        run_dir,
        [
            *task_overrides(args),
            f"seed={args.seed}",
            f"train.env_steps={args.steps}",
            "train.final_eval_episodes=20",
            *(override.format(training_set=args.training_set) for override in VARIANTS[name]),
        ],
    )
    rows = sweep(run_dir / "checkpoint", args, run_dir / "robustness")
    perturbed = [row["success_rate"] for row in rows if row["entry"] != "nominal"]
    result = {
        "train_final_success": summary["final_eval_success"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "nominal_success": rows[0]["success_rate"],
        "heldout_mean_success": round(float(np.mean(perturbed)), 3),
        "sweep": [(row["entry"], row["value"], row["success_rate"]) for row in rows],
    }
    print(
        name, "held-out mean success", result["heldout_mean_success"], "nominal", result["nominal_success"], flush=True
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16_000)
    parser.add_argument("--training-set", default="compliance", help="configs/randomization/<name>.yaml")
    parser.add_argument("--grid-points", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", default="runs/sim2real")
    parser.add_argument(
        "--privileged-critic",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the critic also reads the clean state (task.privileged_state)",
    )
    args = parser.parse_args()
    cost = overhead(args.training_set)
    print("overhead (median ms):", cost["median_ms"], flush=True)
    results = side_by_side(train_and_sweep, VARIANTS, args)
    gain = results["randomized"]["heldout_mean_success"] - results["nominal"]["heldout_mean_success"]
    print(f"held-out mean success: randomized - nominal = {gain:+.3f}")
    plot(results, RESULTS / "sim2real.png")
    path = write_result(
        "sim2real",
        {"overhead": cost, "policies": results, "heldout_gain": round(gain, 3)},
        settings={
            "task": "pick_cube (state), demos + interventions",
            "env_steps": args.steps,
            "training_set": args.training_set,
            "heldout_set": HELDOUT_SET,
            "grid_points": args.grid_points,
            "episodes_per_point": args.episodes,
            "seed": args.seed,
            "privileged_critic": args.privileged_critic,
        },
    )
    print("wrote", path)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = list(dict.fromkeys(entry for entry, _, _ in results["nominal"]["sweep"] if entry != "nominal"))
    figure, axes = plt.subplots(1, len(entries), figsize=(3.0 * len(entries), 3.0), dpi=110, squeeze=False)
    for axis, entry in zip(axes[0], entries):
        for name, result in results.items():
            points = [(value, success) for e, value, success in result["sweep"] if e == entry]
            axis.plot(*zip(*points), "o-", label=f"trained {name}")
        axis.set_title(entry, fontsize=9)
        axis.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel("success rate")
    axes[0][0].legend(fontsize=7)
    figure.suptitle("pick_cube: held-out perturbations, policy trained with vs without randomization", fontsize=10)
    save_figure(figure, path)


if __name__ == "__main__":
    main()
