"""Does the learned safety critic cut violations? pick_cube_hazard, with vs without, one run.

Both runs are the main job (20 scripted demos + interventions, same seed and budget) on
``pick_cube_hazard`` (pressing on the table above 15 N, or entering the keep-out zone, is a
violation); "hard limits only" trains without the critic, "critic + filter" with
``safety.enabled=true``. The critic is first pretrained on recorded violations: a probe set of
noisy-expert episodes recorded in simulation (``robot-rl collect collect.action_noise=1.0
collect.noise_correlation=0.95``, other seeds than training), then fine-tuned online. The probe
set's own violations happen in the recording, not in training, and are reported apart.
Reported: violations per 100 training episodes, filter interventions, final deterministic
success, and violations per episode along training (PNG).

    python -m benchmarks.safety_learning [--steps 16000] [--seed 0] [--probe-episodes 60]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS, run_training, save_figure, side_by_side, write_result

VARIANTS = {"hard_limits_only": [], "critic_and_filter": ["safety.enabled=true", "safety.pretrain_store={probe}"]}
PROBE_SEED = 100_000  # far from the training run's episode seeds


def record_probe_set(args: argparse.Namespace) -> dict:
    """Noisy-expert episodes with their violations, for the critic's offline pretraining."""
    out = Path(args.runs) / "probe.zarr"
    command = [sys.executable, "-m", "robot_rl.cli", "collect", "task=pick_cube_hazard", f"seed={PROBE_SEED}",
               f"collect.episodes={args.probe_episodes}", f"collect.out={out}", "collect.action_noise=1.0",
               "collect.noise_correlation=0.95"]
    shutil.rmtree(out, ignore_errors=True)
    report = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    print("probe set", report, flush=True)
    return {"path": str(out), "episodes": report["episodes"],
            "violations_per_episode": round(report["violations_per_episode"], 2)}


def run_variant(name: str, args: argparse.Namespace) -> dict:
    run_dir = Path(args.runs) / name
    overrides = [override.format(probe=args.probe) for override in VARIANTS[name]]
    summary = run_training(run_dir, ["task=pick_cube_hazard", f"seed={args.seed}", f"train.env_steps={args.steps}",
                                     "train.final_eval_episodes=50", *overrides])
    log = json.loads((run_dir / "checkpoint" / "counters.json").read_text())["counters"]["episode_log"]
    result = {
        "violations_per_100_episodes": round(summary["violations_per_100_episodes"], 1),
        "filter_interventions_per_100_episodes": round(summary["filter_interventions_per_100_episodes"], 1),
        "training_episodes": len(log),
        "final_success": summary["final_eval_success"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "violations_by_episode": [(e["env_steps"], e["violations"]) for e in log],
    }
    print(name, {k: v for k, v in result.items() if k != "violations_by_episode"}, flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--probe-episodes", type=int, default=60)
    parser.add_argument("--runs", default="runs/safety_learning")
    args = parser.parse_args()
    Path(args.runs).mkdir(parents=True, exist_ok=True)
    probe = record_probe_set(args)
    args.probe = probe["path"]
    results = side_by_side(run_variant, VARIANTS, args)
    base, critic = results["hard_limits_only"], results["critic_and_filter"]
    cut = 1.0 - critic["violations_per_100_episodes"] / max(base["violations_per_100_episodes"], 1e-9)
    drop = base["final_success"] - critic["final_success"]
    print(f"violations cut by {100 * cut:.0f}%, final success {critic['final_success']:.2f} vs {base['final_success']:.2f}")
    plot(results, RESULTS / "safety_learning.png")
    path = write_result("safety_learning", {"variants": results, "violation_cut": round(cut, 3),
                                            "success_drop": round(drop, 3), "probe_set": probe},
                        settings={"task": "pick_cube_hazard (state), demos + interventions", "env_steps": args.steps,
                                  "seed": args.seed, "final_eval_episodes": 50,
                                  "critic_pretraining": f"{args.probe_episodes} probe episodes (action_noise 1.0, "
                                                        "noise_correlation 0.95), safety.pretrain_updates 2000"})
    print("wrote", path)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5), dpi=120)
    for name, result in results.items():
        steps, violations = zip(*result["violations_by_episode"])
        window = 20
        smoothed = np.convolve(violations, np.ones(window) / window, mode="valid")
        axis.plot(steps[window - 1:], smoothed, label=f"{name} (final success {result['final_success']:.2f})")
    axis.set_xlabel("online env steps")
    axis.set_ylabel("violations per episode (20-episode mean)")
    axis.set_title("pick_cube_hazard: learned safety critic vs hard limits only")
    axis.legend(fontsize=7)
    save_figure(figure, path)


if __name__ == "__main__":
    main()
