"""The README's main job (``robot-rl train``, default pick_cube with the scripted human) for
several seeds, one after the other: how soon it first reaches 90% success, whether it stays there, and its end.

    python -m benchmarks.main_job [--seeds 0 1 2 3 4] [--workers 1] [--name main_job] [overrides ...]

Writes ``benchmarks/results/<name>.json``; with overrides (e.g. ``agent.bc_weight=0``) give another ``--name`` so
the defaults' figures stay. Per seed (``per_seed``, keyed by seed): ``steps_to_90`` (online env steps of the first
evaluation at >= 90% success; null when never), ``seconds_to_90`` (the run's wall clock then, demonstrations
included), ``final_eval_success``, ``worst_drop_after_90`` (the largest fall of an evaluation below the best
one before it, from the first >= 90% on: 0 when it never fell), ``takeover_rate_last_2000`` (the share of the online
steps of the run's last 2,000 that the scripted human played) and ``eval_history`` ([env steps, success,
intervention rate of the last 20 episodes, wall s, SAC's temperature, the entropy of its exploration noise (nats)]). The medians over seeds are ``median_steps_to_90`` and ``median_seconds_to_90``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import RESULTS, run_training, save_figure, side_by_side, style_success_axis, write_result

THRESHOLD = 0.9


def worst_drop_after(history: list[dict], threshold: float = THRESHOLD) -> float | None:
    """The largest fall of an evaluation's success below the best before it, counted from the first evaluation at
    or above ``threshold`` (None: never reached it)."""
    best, worst = None, 0.0
    for entry in history:
        success = entry["success_rate"]
        if best is None and success < threshold:
            continue
        best = success if best is None else max(best, success)
        worst = max(worst, best - success)
    return None if best is None else worst


def seed_record(summary: dict, wall: float) -> dict:
    """The figures of one seed's run from its summary.json."""
    history = summary["eval_history"]
    first = next((entry for entry in history if entry["success_rate"] >= THRESHOLD), None)
    return {
        "steps_to_90": None if first is None else first["env_steps"],
        "seconds_to_90": None if first is None else round(first["wall_seconds"], 1),
        "final_eval_success": summary["final_eval_success"],
        "worst_drop_after_90": worst_drop_after(history),
        "final_eval_episodes": history[-1]["episodes"],
        "final_eval_mean_length": summary["final_eval_mean_length"],
        "env_steps": summary["env_steps"],
        "intervention_steps": summary["intervention_steps"],
        "takeover_rate_last_2000": summary["takeover_rate_last_2000"],
        "wall_seconds_total": round(wall, 1),
        "eval_history": [
            (
                h["env_steps"],
                h["success_rate"],
                round(h["intervention_rate"], 3),
                round(h["wall_seconds"], 1),
                round(h.get("alpha", float("nan")), 5),
                round(h.get("entropy", float("nan")), 3),
            )
            for h in history
        ],
    }


def median_or_none(values: list) -> float | None:
    """The median, counting a seed that never got there as infinitely late (None when half or more never did)."""
    ranked = sorted(float("inf") if value is None else value for value in values)
    middle = statistics.median(ranked)
    return None if middle == float("inf") else middle


def plot(per_seed: dict[str, dict], path: Path) -> None:
    """Eval success vs online env steps, one line per seed, the 90% line dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.5, 3.8), dpi=120)
    for seed, record in per_seed.items():
        history = record["eval_history"]
        axis.plot(
            [h[0] for h in history], [h[1] for h in history], "o-", markersize=2.5, linewidth=1.2, label=f"seed {seed}"
        )
    axis.axhline(THRESHOLD, color="grey", linestyle="--", linewidth=0.8)
    style_success_axis(axis, "online env steps")
    axis.set_title(
        "the main job: pick_cube from state, SAC-RLPD with the scripted human, one line per seed", fontsize=9
    )
    save_figure(figure, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--runs", default="runs/main_job")
    parser.add_argument("--name", default="main_job", help="results file benchmarks/results/<name>.json")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="seeds run at a time (each on a core; the seconds then share the machine)",
    )
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    taken = [str(Path(args.runs) / f"seed{seed}") for seed in args.seeds if (Path(args.runs) / f"seed{seed}").exists()]
    if taken:
        print(
            f"robot-rl: error: runs={args.runs}; expected no seed folders yet, found {' '.join(taken)}", file=sys.stderr
        )
        sys.exit(2)

    def run_seed(seed: int) -> dict:
        start = time.monotonic()
        summary = run_training(Path(args.runs) / f"seed{seed}", [f"seed={seed}", *args.overrides])
        record = seed_record(summary, time.monotonic() - start)
        print(
            f"seed {seed}: 90% at {record['steps_to_90']} steps / {record['seconds_to_90']} s, final "
            f"{record['final_eval_success']:.2f}, worst drop after 90% {record['worst_drop_after_90']}, takeover rate "
            f"over the last 2,000 steps {record['takeover_rate_last_2000']:.3f}",
            flush=True,
        )
        return record

    per_seed = {str(seed): record for seed, record in side_by_side(run_seed, args.seeds, workers=args.workers).items()}
    records = list(per_seed.values())
    figures = {
        "per_seed": per_seed,
        "median_steps_to_90": median_or_none([r["steps_to_90"] for r in records]),
        "median_seconds_to_90": median_or_none([r["seconds_to_90"] for r in records]),
        "min_final_eval_success": min(r["final_eval_success"] for r in records),
        "max_takeover_rate_last_2000": max(r["takeover_rate_last_2000"] for r in records),
        "max_worst_drop_after_90": max(
            (r["worst_drop_after_90"] for r in records if r["worst_drop_after_90"] is not None), default=None
        ),
    }
    print({key: value for key, value in figures.items() if key != "per_seed"})
    path = write_result(
        args.name,
        figures,
        settings={"overrides": args.overrides, "command": "robot-rl train seed=<seed>", "workers": args.workers},
    )
    plot(per_seed, RESULTS / f"{args.name}.png")
    print("wrote", path, "and its PNG")


if __name__ == "__main__":
    main()
