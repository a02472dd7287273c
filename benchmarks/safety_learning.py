"""Does the learned safety critic cut violations? pick_cube_hazard, with vs without, one run each, and beside
them constrained SAC (``sac_lagrangian``: a cost critic and a learned multiplier, no filter).

Every run is the main job (20 scripted demos + interventions, same seed and budget) on
``pick_cube_hazard`` (pressing on the table above 15 N, or entering the keep-out zone, is a
violation); "hard limits only" trains without the critic, "critic + filter" with
``safety.enabled=true``. The critic is first pretrained on recorded violations: a probe set of
noisy-expert episodes recorded in simulation (``robot-rl collect collect.action_noise=1.0
collect.noise_correlation=0.95``, other seeds than training), then fine-tuned online. The probe
set's own violations happen in the recording, not in training, and are reported apart.

The filter runs twice, once per ``safety.relabel``: ``proposed`` (Recovery RL, the default: the
task policy learns a filtered step as the action it proposed, with the penalty, so it can learn
not to propose it) and ``executed`` (it learns the safe action the filter executed, with the
penalty). If relabelling works, the policy proposes fewer risky actions as it learns: fewer filter
interventions late in training with ``proposed``.

Reported: violations and filter interventions per 100 training episodes (whole run, and per
quarter of the env-step budget), final deterministic success, and both per episode along
training (PNG).

    python -m benchmarks.safety_learning [--steps 16000] [--seed 0] [--probe-episodes 60] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS, kept_rows, run_training, save_figure, side_by_side, write_result

FILTER = ["safety.enabled=true", "safety.pretrain_store={probe}"]
VARIANTS = {
    "hard_limits_only": [],
    "critic_and_filter": [*FILTER, "safety.relabel=proposed"],
    "critic_and_filter_executed": [*FILTER, "safety.relabel=executed"],
    "sac_lagrangian": ["agent=sac_lagrangian"],  # constrained SAC: a cost critic and a multiplier, no filter (issue 54)
}
QUARTERS = 4  # filter interventions and violations per quarter of the env-step budget
PROBE_SEED = 100_000  # far from the training run's episode seeds


def record_probe_set(args: argparse.Namespace) -> dict:
    """Noisy-expert episodes with their violations, for the critic's offline pretraining."""
    out = Path(args.runs) / "probe.zarr"
    command = [
        sys.executable,
        "-m",
        "robot_rl.cli.main",
        "collect",
        "task=pick_cube_hazard",
        f"seed={PROBE_SEED}",
        f"collect.episodes={args.probe_episodes}",
        f"collect.out={out}",
        "collect.action_noise=1.0",
        "collect.noise_correlation=0.95",
    ]
    shutil.rmtree(out, ignore_errors=True)
    report = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    print("probe set", report, flush=True)
    return {
        "path": str(out),
        "episodes": report["episodes"],
        "violations_per_episode": round(report["violations_per_episode"], 2),
    }


def run_variant(name: str, args: argparse.Namespace) -> dict:
    run_dir = Path(args.runs) / name
    overrides = [override.format(probe=args.probe) for override in VARIANTS[name]]
    summary = run_training(
        run_dir,
        [
            "task=pick_cube_hazard",
            f"seed={args.seed}",
            f"train.env_steps={args.steps}",
            "train.final_eval_episodes=50",
            *overrides,
        ],
    )
    log = json.loads((run_dir / "checkpoint" / "counters.json").read_text())["counters"]["episode_log"]
    result = {
        "violations_per_100_episodes": round(summary["violations_per_100_episodes"], 1),
        "filter_interventions_per_100_episodes": round(summary["filter_interventions_per_100_episodes"], 1),
        "training_episodes": len(log),
        "final_success": summary["final_eval_success"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "violations_per_100_episodes_by_quarter": by_quarter(log, "violations", args.steps),
        "filter_interventions_per_100_episodes_by_quarter": by_quarter(log, "filter_interventions", args.steps),
        "violations_by_episode": [(e["env_steps"], e["violations"]) for e in log],
        "filter_interventions_by_episode": [(e["env_steps"], e["filter_interventions"]) for e in log],
    }
    print(name, {k: v for k, v in result.items() if not k.endswith("_by_episode")}, flush=True)
    return result


def by_quarter(log: list[dict], key: str, steps: int) -> list[float | None]:
    """``key`` per 100 episodes over the episodes that ended in each quarter of the ``steps`` budget
    (None for a quarter without episodes)."""
    quarters: list[list[int]] = [[] for _ in range(QUARTERS)]
    for episode in log:
        quarters[min(QUARTERS - 1, (episode["env_steps"] - 1) * QUARTERS // steps)].append(episode[key])
    return [round(100 * float(np.mean(values)), 1) if values else None for values in quarters]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--probe-episodes", type=int, default=60)
    parser.add_argument("--runs", default="runs/safety_learning")
    parser.add_argument("--workers", type=int, default=2, help="training runs at a time")
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), help="rerun these variants, keep the others' rows")
    args = parser.parse_args()
    Path(args.runs).mkdir(parents=True, exist_ok=True)
    variants = args.only or list(VARIANTS)
    args.probe, probe, provenance = None, None, None
    if any("{probe}" in override for variant in variants for override in VARIANTS[variant]):
        probe = record_probe_set(args)
        args.probe = probe["path"]
    results = side_by_side(run_variant, variants, args, workers=args.workers)
    if args.only:
        same = {"env_steps": args.steps, "seed": args.seed}
        results, provenance = kept_rows("safety_learning", results, lambda figures: figures["variants"], same)
        if probe is None:  # the critics' rows kept: their probe set's figures too
            probe = json.loads((RESULTS / "safety_learning.json").read_text())["figures"]["probe_set"]
    base, critic = results["hard_limits_only"], results["critic_and_filter"]
    cut, drop = violation_cut(base, critic), base["final_success"] - critic["final_success"]
    print(
        f"violations cut by {100 * cut:.0f}%, final success {critic['final_success']:.2f} "
        f"vs {base['final_success']:.2f}"
    )
    relabel = compare_relabel(base, critic, results["critic_and_filter_executed"])
    print("relabel", relabel)
    plot(results, RESULTS / "safety_learning.png")
    path = write_result(
        "safety_learning",
        {
            "variants": results,
            "violation_cut": round(cut, 3),
            "success_drop": round(drop, 3),
            "relabel": relabel,
            "probe_set": probe,
        },
        settings={
            "task": "pick_cube_hazard (state), demos + interventions",
            "env_steps": args.steps,
            "seed": args.seed,
            "final_eval_episodes": 50,
            "critic_pretraining": f"{args.probe_episodes} probe episodes (action_noise 1.0, "
            "noise_correlation 0.95), safety.pretrain_updates 2000",
            "relabel": "critic_and_filter: safety.relabel=proposed (the default); "
            "critic_and_filter_executed: safety.relabel=executed",
            "workers": args.workers,
        },
        **({"provenance": provenance} if provenance else {}),
    )
    print("wrote", path)


def violation_cut(base: dict, filtered: dict) -> float:
    """The share of the hard-limits-only run's violations per episode that the filtered run avoided."""
    return 1.0 - filtered["violations_per_100_episodes"] / max(base["violations_per_100_episodes"], 1e-9)


def compare_relabel(base: dict, proposed: dict, executed: dict) -> dict:
    """``safety.relabel=proposed`` vs ``executed``: filter interventions (whole run, last quarter), violations,
    final success."""
    runs = {"proposed": proposed, "executed": executed}
    interventions = "filter_interventions_per_100_episodes"
    return {
        interventions: {k: r[interventions] for k, r in runs.items()},
        f"late_{interventions}": {k: r[f"{interventions}_by_quarter"][-1] for k, r in runs.items()},
        "violations_per_100_episodes": {k: r["violations_per_100_episodes"] for k, r in runs.items()},
        "violation_cut": {k: round(violation_cut(base, r), 3) for k, r in runs.items()},
        "final_success": {k: r["final_success"] for k, r in runs.items()},
    }


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 3.8), dpi=120)
    window = 20
    for axis, key, label in (
        (axes[0], "violations_by_episode", "violations"),
        (axes[1], "filter_interventions_by_episode", "filter interventions"),
    ):
        for name, result in results.items():
            steps, counts = zip(*result[key])
            smoothed = np.convolve(counts, np.ones(window) / window, mode="valid")
            axis.plot(steps[window - 1 :], smoothed, label=f"{name} (final success {result['final_success']:.2f})")
        axis.set_xlabel("online env steps")
        axis.set_ylabel(f"{label} per episode")
        axis.set_title(f"pick_cube_hazard: {label} ({window}-episode mean)", fontsize=9)
        axis.legend(fontsize=7)
    save_figure(figure, path)


if __name__ == "__main__":
    main()
