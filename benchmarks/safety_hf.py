"""The safety critic at the policy rate against the same idea in the fast loop, on hazards that come between steps.

``pick_cube_sudden`` (pick_cube_hazard, its keep-out zone sliding towards the cube area and back, shoves on the hand
at random) trained five ways, every run through the sim's fast loop at 500 Hz (``safety.fast_critic.sim_rate_hz``:
the hard layer of ``robot.limits`` every 2 ms, as on the cell):

- ``hard_only``: the hard layer alone;
- ``policy_rate_critic``: plus the learned safety critic and filter in the actor, once per 0.1 s policy step
  (``safety.enabled=true``), pretrained on the probe set;
- ``fast_loop_critic``: plus the fast-loop critic every tick before the hard layer
  (``safety.fast_critic.enabled=true``, escape steps of 5 cm among its candidates), fitted to the fast probe set's
  ticks (``robot-rl fast-critic``) and refitted online (``safety.fast_critic.learn=true``) on those ticks and the
  run's own (``safety.fast_critic.pretrain_store``);
- ``both_critics``: the policy-rate critic and the fast-loop critic together, as a cell would run them;
- ``sac_lagrangian``: no critic in the loop: constrained SAC (``agent=sac_lagrangian``, a cost critic and a learned
  multiplier against ``agent.cost_limit`` violating steps per episode) under the hard layer.

The probe sets: noisy-expert episodes recorded with the fast loop (``robot-rl collect``, other seeds than training),
what the critics start from. The policy-rate critic's is the noisy expert's own steps; in the fast critic's, half of
the policy steps send a random one of the fast filter's candidates instead (``safety.fast_critic.probe=0.5``), so
the recorded commands vary in a given state and the critic learns to rank them, not only to tell risky states.
Reported per way: constraint violations per 100 training episodes and the final deterministic success, per seed and
their mean, and a bar chart (PNG).

    python -m benchmarks.safety_hf [--quick] [--seeds 0 1 2] [--steps 16000] [--workers 2] [--task T] [--name N]
                                   [--only WAY ...]

``--only``: rerun these ways and keep the others' rows from the last result (measured with the same task, seeds and
steps; the result's ``provenance`` says which command measured each row).

``--quick``: one seed, 4,000 online steps, 30 probe episodes (a smoke run, not the figure the issue asks for).
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

TASK = "pick_cube_sudden"  # the default --task
FAST_LOOP = "safety.fast_critic.sim_rate_hz=500"
ESCAPE = "safety.fast_critic.escape_step=0.05"  # m: steps along +-x, +-y, +-z among the fast critic's candidates
WAYS = {
    "hard_only": [],
    "policy_rate_critic": ["safety.enabled=true", "safety.pretrain_store={probe}"],
    "fast_loop_critic": [
        "safety.fast_critic.enabled=true",
        "safety.fast_critic.weights={weights}",
        "safety.fast_critic.learn=true",
        "safety.fast_critic.pretrain_store={fast_probe}",
        ESCAPE,
    ],
}
WAYS["both_critics"] = WAYS["policy_rate_critic"] + WAYS["fast_loop_critic"]
WAYS["sac_lagrangian"] = [
    "agent=sac_lagrangian"
]  # constrained SAC: a cost critic and a multiplier, no filter (issue 54)
PROBE_SEED = 100_000  # far from the training runs' episode seeds


def cli(*arguments: str) -> dict:
    """``robot-rl <arguments>``; its JSON report."""
    command = [sys.executable, "-m", "robot_rl.cli.main", *arguments]
    return json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)


def collect_probe_set(task: str, out: Path, episodes: int, *overrides: str) -> dict:
    """Noisy-expert episodes of ``task`` through the fast loop, written to ``out`` (replaced); collect's report."""
    shutil.rmtree(out, ignore_errors=True)
    return cli(
        "collect",
        f"task={task}",
        f"seed={PROBE_SEED}",
        f"collect.episodes={episodes}",
        f"collect.out={out}",
        "collect.action_noise=1.0",
        "collect.noise_correlation=0.95",
        FAST_LOOP,
        *overrides,
    )


def prepare(args: argparse.Namespace) -> dict:
    """The two probe sets (with their ticks) and the fast critic fitted to the fast one."""
    runs = Path(args.runs)
    probe, fast_probe, weights = runs / "probe.zarr", runs / "probe_fast.zarr", runs / "fast_risk.npz"
    collect = collect_probe_set(args.task, probe, args.probe_episodes)
    fast_collect = collect_probe_set(args.task, fast_probe, args.probe_episodes, "safety.fast_critic.probe=0.5", ESCAPE)
    weights.unlink(missing_ok=True)
    fit = cli("fast-critic", f"fast_critic.store={fast_probe}", f"fast_critic.out={weights}")
    print("probe sets", collect, fast_collect, "fast critic", fit, flush=True)
    args.probe, args.fast_probe, args.weights = str(probe), str(fast_probe), str(weights)
    return {
        "episodes": collect["episodes"],
        "violations_per_episode": collect["violations_per_episode"],
        "fast_probe_set": {
            "probe": 0.5,
            "episodes": fast_collect["episodes"],
            "violations_per_episode": fast_collect["violations_per_episode"],
        },
        "fit": fit,
    }


def run_way(job: str, args: argparse.Namespace) -> dict:
    way, seed = job.rsplit("/", 1)
    overrides = [
        override.format(probe=args.probe, fast_probe=args.fast_probe, weights=args.weights) for override in WAYS[way]
    ]
    summary = run_training(
        Path(args.runs) / way / f"seed{seed}",
        [
            f"task={args.task}",
            f"seed={seed}",
            f"train.env_steps={args.steps}",
            f"train.final_eval_episodes={args.eval_episodes}",
            FAST_LOOP,
            *overrides,
        ],
    )
    result = {
        "violations_per_100": round(summary["violations_per_100_episodes"], 1),
        "success": summary["final_eval_success"],
        "episodes": summary["episodes"],
        "wall_seconds": round(summary["wall_seconds"], 1),
    }
    print(job, result, flush=True)
    return result


def plot(figures: dict, task: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    names = list(WAYS)
    for axis, key, label in (
        (axes[0], "violations_per_100", "violations / 100 episodes"),
        (axes[1], "success", "final success"),
    ):
        axis.bar(
            names,
            [figures[key][name] for name in names],
            color=["grey", "tab:blue", "tab:green", "tab:olive", "tab:purple"][: len(names)],
        )
        for index, name in enumerate(names):
            axis.scatter(
                [index] * len(figures["per_seed"][name]), [r[key] for r in figures["per_seed"][name]], color="k", s=8
            )
        axis.set_ylabel(label)
        axis.tick_params(axis="x", labelsize=7)
    axes[1].set_ylim(0, 1.02)
    figure.suptitle(f"{task}: hazards between policy steps" if task == TASK else task, fontsize=9)
    save_figure(figure, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one seed, 4,000 steps, 30 probe episodes")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=16_000)
    parser.add_argument("--probe-episodes", type=int, default=60)
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--runs", default="runs/safety_hf")
    parser.add_argument("--workers", type=int, default=2, help="training runs at a time")
    parser.add_argument("--task", default=TASK, help="e.g. pick_cube_hazard: the success cost on a task RL learns here")
    parser.add_argument("--name", help="the result's name (default: safety_hf, or safety_hf_quick with --quick)")
    parser.add_argument("--only", nargs="+", choices=list(WAYS), help="rerun these ways, keep the others' rows")
    args = parser.parse_args()
    if args.quick:
        args.seeds, args.steps, args.probe_episodes, args.eval_episodes = [0], 4_000, 30, 20
    name = args.name or ("safety_hf_quick" if args.quick else "safety_hf")
    Path(args.runs).mkdir(parents=True, exist_ok=True)
    ways = args.only or list(WAYS)
    needs_probe = any("{" in override for way in ways for override in WAYS[way])
    args.probe = args.fast_probe = args.weights = None
    probe = prepare(args) if needs_probe else None
    jobs = [f"{way}/{seed}" for seed in args.seeds for way in ways]
    results = side_by_side(run_way, jobs, args, workers=args.workers)
    per_seed = {way: [results[f"{way}/{seed}"] for seed in args.seeds] for way in ways}
    provenance = None
    if args.only:
        same = {"task": args.task, "seeds": args.seeds, "steps": args.steps}
        per_seed, provenance = kept_rows(name, per_seed, lambda figures: figures["per_seed"], same)
        if probe is None:  # the critics' rows kept: their probe set's figures too
            probe = json.loads((RESULTS / f"{name}.json").read_text())["settings"]["probe_set"]
    figures = {
        key: {way: round(float(np.mean([r[key] for r in per_seed[way]])), 3) for way in WAYS}
        for key in ("violations_per_100", "success")
    }
    figures["per_seed"] = per_seed
    policy, fast = (
        figures["violations_per_100"]["policy_rate_critic"],
        figures["violations_per_100"]["fast_loop_critic"],
    )
    figures["fast_over_policy_violations"] = round(fast / policy, 3) if policy else None
    figures["success_drop_points"] = round(
        100 * (figures["success"]["policy_rate_critic"] - figures["success"]["fast_loop_critic"]), 1
    )
    both = figures["violations_per_100"]["both_critics"]
    figures["both_over_policy_violations"] = round(both / policy, 3) if policy else None
    plot(figures, args.task, RESULTS / f"{name}.png")
    path = write_result(
        name,
        figures,
        settings={"task": args.task, "seeds": args.seeds, "steps": args.steps, "fast_loop_hz": 500, "probe_set": probe},
        **({"provenance": provenance} if provenance else {}),
    )
    print(json.dumps({k: v for k, v in figures.items() if k != "per_seed"}, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
