"""SAC's exploration noise on the main job: Gaussian (fresh noise every step) vs gSDE vs bang-bang.

Each variant runs the default ``robot-rl train`` (pick_cube from state, 20 scripted demos, the
scripted human's takeovers, 16,000 online env steps) for every seed, ``--jobs`` runs at a time (one
torch thread each). Reported per variant, as the mean over seeds:

- success: the run's final deterministic evaluation (summary.json ``final_eval_success``)
- jerk: mean |a_{t+1} - 2 a_t + a_{t-1}| per step, averaged over the action dimensions, of the
  policy's actions (``policy_action`` in episodes.zarr) in the online training episodes, over the
  triples where none of the three steps was a takeover: how smooth the exploration is
  (normalised action units per step^2)
- steps_to_90: env steps of the first evaluation with success >= 0.9 (mean over the seeds that reach
  it, and how many did)

plus the per-seed figures, and a PNG of eval success vs env steps (mean and per seed).

    python -m benchmarks.exploration [--seeds 0 1 2] [--jobs 2] [--runs runs/exploration] [--resume] [overrides ...]

``--resume`` continues in an existing ``--runs`` folder: a run with a summary.json is read, not run again.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS, kept_rows, save_figure, style_success_axis, write_result
from robot_rl.data.episode_store import EpisodeStore

VARIANTS = {
    "gaussian": ["exploration=gaussian"],
    "gsde": ["exploration=gsde"],
    "bang_bang": ["exploration=bang_bang"],  # Bernoulli on the action extremes (issue 54)
}
THRESHOLD = 0.9


def action_jerk(store: EpisodeStore) -> tuple[float, int]:
    """(mean |second difference| of the policy's actions per step and dimension, triples counted) over
    the online episodes of ``store``, skipping every triple that touches a takeover step."""
    total, count = 0.0, 0
    for name in store.episode_names():
        episode = store.read_episode(name, keys={"policy_action", "intervened"})
        if episode["attrs"].get("source") != "online":
            continue
        action, human = episode["policy_action"].astype(np.float64), episode["intervened"].astype(bool)
        own = ~(human[2:] | human[1:-1] | human[:-2])
        second_difference = np.abs(action[2:] - 2 * action[1:-1] + action[:-2]).mean(-1)
        total += float(second_difference[own].sum())
        count += int(own.sum())
    return (total / count if count else float("nan")), count


def first_at(history: list[dict], threshold: float = THRESHOLD) -> int | None:
    """Env steps of the first evaluation at or above ``threshold`` success, None if none is."""
    return next((entry["env_steps"] for entry in history if entry["success_rate"] >= threshold), None)


def run(variant: str, seed: int, runs: Path, overrides: list[str]) -> dict:
    """One ``robot-rl train`` in a subprocess, in a new run folder (or the finished run found there); its figures."""
    run_dir = runs / f"{variant}_seed{seed}"
    if not (run_dir / "summary.json").is_file():
        command = [
            sys.executable,
            "-m",
            "robot_rl.cli.main",
            "train",
            f"seed={seed}",
            f"train.run_dir={run_dir}",
            *VARIANTS[variant],
            *overrides,
        ]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    summary = json.loads((run_dir / "summary.json").read_text())
    jerk, triples = action_jerk(EpisodeStore.open(run_dir / "episodes.zarr"))
    history = summary["eval_history"]
    result = {
        "final_eval_success": summary["final_eval_success"],
        "jerk": jerk,
        "jerk_triples": triples,
        "steps_to_90": first_at(history),
        "env_steps": summary["env_steps"],
        "intervention_steps": summary["intervention_steps"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "eval_history": [(h["env_steps"], h["success_rate"]) for h in history],
    }
    print(
        f"{variant} seed {seed}: success {result['final_eval_success']:.2f}, jerk {jerk:.4f}, "
        f"steps to 90% {result['steps_to_90']}, {result['wall_seconds'] / 60:.1f} min",
        flush=True,
    )
    return result


def summarise(per_seed: dict[str, dict[str, dict]]) -> dict:
    """The means over seeds: success, jerk and steps to 90% (over the seeds that reach it, with their count)."""
    figures: dict = {"success": {}, "jerk": {}, "steps_to_90": {}}
    for variant, seeds in per_seed.items():
        reached = [r["steps_to_90"] for r in seeds.values() if r["steps_to_90"] is not None]
        figures["success"][variant] = float(np.mean([r["final_eval_success"] for r in seeds.values()]))
        figures["jerk"][variant] = float(np.mean([r["jerk"] for r in seeds.values()]))
        figures["steps_to_90"][variant] = {
            "env_steps": float(np.mean(reached)) if reached else None,
            "seeds_reached": len(reached),
            "seeds": len(seeds),
        }
    return figures


def plot(per_seed: dict[str, dict[str, dict]], path: Path) -> None:
    """Eval success vs env steps: per seed (thin) and the mean over seeds (thick), one colour per variant."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.5, 3.8), dpi=120)
    for colour, (variant, seeds) in zip(("tab:blue", "tab:orange", "tab:red"), per_seed.items()):
        curves = [np.array(r["eval_history"], dtype=float) for r in seeds.values()]
        for points in curves:
            axis.plot(points[:, 0], points[:, 1], color=colour, alpha=0.35, linewidth=0.8)
        length = min(len(points) for points in curves)
        mean = np.mean([points[:length] for points in curves], axis=0)
        axis.plot(mean[:, 0], mean[:, 1], "o-", color=colour, linewidth=2, label=f"{variant} (mean of {len(curves)})")
    style_success_axis(axis, "online env steps")
    axis.set_title("pick_cube, SAC exploration: Gaussian, gSDE, bang-bang (thin: one seed)", fontsize=9)
    save_figure(figure, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (one core each)")
    parser.add_argument("--runs", type=Path, default=Path("runs/exploration"), help="a new folder for the runs")
    parser.add_argument("--resume", action="store_true", help="read the finished runs of an existing --runs folder")
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), help="rerun these variants, keep the others' rows")
    parser.add_argument("overrides", nargs="*", help="key=value for every run")
    args = parser.parse_args()
    if args.runs.exists() != args.resume:
        expected = "an existing folder (--resume)" if args.resume else "a new folder (runs are never overwritten)"
        print(f"robot-rl: error: runs={args.runs}; expected {expected}", file=sys.stderr)
        sys.exit(2)
    if args.jobs < 1:
        print(f"robot-rl: error: jobs={args.jobs}; expected an integer >= 1", file=sys.stderr)
        sys.exit(2)
    args.runs.mkdir(parents=True, exist_ok=args.resume)
    variants = args.only or list(VARIANTS)
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            (variant, seed): pool.submit(run, variant, seed, args.runs, args.overrides)
            for seed in args.seeds
            for variant in variants
        }
        per_seed = {
            variant: {f"seed{seed}": futures[variant, seed].result() for seed in args.seeds} for variant in variants
        }
    provenance = None
    if args.only:
        same = {"seeds": args.seeds, "overrides": args.overrides}
        per_seed, provenance = kept_rows("exploration", per_seed, lambda figures: figures["per_seed"], same)
    figures = summarise(per_seed)
    print(json.dumps(figures))
    plot(per_seed, RESULTS / "exploration.png")
    path = write_result(
        "exploration",
        {**figures, "per_seed": per_seed},
        settings={
            "task": "pick_cube (state)",
            "command": "robot-rl train seed=<seed> exploration=<v>",
            "overrides": args.overrides,
            "seeds": args.seeds,
            "parallel_runs": args.jobs,
            "success": "final eval (summary.json final_eval_success)",
            "jerk": "mean |a[t+1] - 2 a[t] + a[t-1]| over action dims, policy_action of the "
            "online episodes, triples without a takeover step",
            "steps_to_90": f"first eval with success >= {THRESHOLD}; mean over seeds reaching it",
        },
        **({"provenance": provenance} if provenance else {}),
    )
    print("wrote", path)


if __name__ == "__main__":
    main()
