"""The seed papers' remaining baselines (issue 54), each beside what it is compared with, several seeds each.

Sections (``--section``, run one at a time; each writes its part of ``benchmarks/results/seed_baselines.json`` and
keeps the others'):

- ``lagrangian``: constrained SAC (``agent=sac_lagrangian``, a cost critic and a learned multiplier against
  ``agent.cost_limit`` violating steps per episode) vs SAC under the hard limits only, on ``pick_cube_hazard`` (the
  main job's demos and takeovers): violations per 100 training episodes and final success. The safety critic and
  the fast-loop critic on the same task are in ``safety_learning.json`` and ``safety_hf.json``.
- ``bang_bang``: the Bernoulli bang-bang actor (``exploration=bang_bang``, Seyde et al. 2021) vs Gaussian and gSDE
  exploration, on reach and pick_cube: final success, env steps to 90% and jerk (``benchmarks/exploration.py``'s
  smoothness figure, policy actions of the online episodes).
- ``open_loop``: the open-loop floor (``agent=open_loop``: one piecewise-constant action sequence found by the
  cross-entropy method, no observation, no human) on reach and pick_cube: success and mean return at its first
  evaluation (after one generation) and at the end.
- ``ssl``: pixel pick_cube (front + wrist cameras, no object state), DrQ augmentation alone vs DrQ plus the
  latent-prediction loss (``ssl=latent``): success and env steps to 80% and 90%.

Every run is ``robot-rl train`` in a subprocess with ``seed=<seed>`` (one torch thread, ``--jobs`` at a time).

    python -m benchmarks.seed_baselines --section bang_bang --runs runs/seed_baselines [--seeds 0 1 2] [--jobs 2]
        [--steps N] [--resume]

``--runs`` must be a new folder (``--resume`` reads the finished runs of an existing one and runs the rest).
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from benchmarks.common import RESULTS, run_training, write_result
from benchmarks.exploration import action_jerk, first_at
from robot_rl.data.episode_store import EpisodeStore

PIXELS = [
    "task.cameras=[front,wrist]",
    "task.object_state=false",
    "task.image_size=64",
    "agent.camera_strides=[2,2,2,1]",
    "train.batch_size=64",
    "agent.utd=2",
]
NO_HUMAN = ["human.enabled=false", "train.demo_episodes=0"]

# section -> (default env steps, {task: task overrides}, {variant: overrides}, what the section compares)
SECTIONS: dict[str, tuple[int, dict[str, list[str]], dict[str, list[str]], str]] = {
    "lagrangian": (
        4000,
        {"pick_cube_hazard": ["task=pick_cube_hazard"]},
        {"hard_limits_only": [], "sac_lagrangian": ["agent=sac_lagrangian"]},
        "constrained SAC (Lagrangian on the expected cost) vs SAC under the hard limits only",
    ),
    "bang_bang": (
        3000,
        {"reach": ["task=reach"], "pick_cube": ["task=pick_cube"]},
        {
            "gaussian": ["exploration=gaussian"],
            "gsde": ["exploration=gsde"],
            "bang_bang": ["exploration=bang_bang"],
        },
        "Bernoulli bang-bang actor vs Gaussian and gSDE exploration (SAC, demos and takeovers)",
    ),
    "open_loop": (
        16000,  # 160 or more episodes: ten generations of 16 (no updates: a run takes minutes)
        {"reach": ["task=reach"], "pick_cube": ["task=pick_cube"]},
        {"open_loop": ["agent=open_loop", *NO_HUMAN, "train.eval_every=2000"]},
        "the best open-loop action sequence the cross-entropy method finds, no observation, no human",
    ),
    "ssl": (
        2000,
        {"pick_cube_pixels": ["task=pick_cube", *PIXELS]},
        {"drq": [], "drq_latent_prediction": ["ssl=latent"]},
        "DrQ augmentation alone vs DrQ plus a latent-prediction loss on the camera encoder (pixels, no object state)",
    ),
}


def run(section: str, task: str, variant: str, seed: int, runs: Path, steps: int, overrides: list[str]) -> dict:
    """One ``robot-rl train`` (or the finished run found in its folder); its figures."""
    _, tasks, variants, _ = SECTIONS[section]
    run_dir = runs / f"{task}_{variant}_seed{seed}"
    if (run_dir / "summary.json").is_file():
        summary = json.loads((run_dir / "summary.json").read_text())
    else:
        summary = run_training(
            run_dir,
            [
                f"seed={seed}",
                f"train.env_steps={steps}",
                *tasks[task],
                *variants[variant],
                *overrides,
            ],
        )
    history = summary["eval_history"]
    jerk, _ = action_jerk(EpisodeStore.open(run_dir / "episodes.zarr"))
    result = {
        "final_eval_success": summary["final_eval_success"],
        "first_eval_success": history[0]["success_rate"] if history else None,
        "best_eval_success": summary["best_eval_success"],
        "first_eval_return": history[0].get("mean_return") if history else None,
        "final_eval_return": history[-1].get("mean_return") if history else None,
        "steps_to_80": first_at(history, 0.8),
        "steps_to_90": first_at(history, 0.9),
        "jerk": jerk,
        "violations_per_100_episodes": summary["violations_per_100_episodes"],
        "filter_interventions_per_100_episodes": summary["filter_interventions_per_100_episodes"],
        "intervention_steps": summary["intervention_steps"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "eval_history": [(h["env_steps"], h["success_rate"]) for h in history],
    }
    print(
        f"{section} {task} {variant} seed {seed}: success {result['final_eval_success']:.2f}, "
        f"90% at {result['steps_to_90']}, jerk {jerk:.3f}, violations/100 ep {result['violations_per_100_episodes']}, "
        f"{result['wall_seconds'] / 60:.1f} min",
        flush=True,
    )
    return result


def mean(values: list) -> float | None:
    values = [v for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(values)) if values else None


def summarise(per_seed: dict[str, dict]) -> dict:
    """Per variant, means over seeds; steps to a threshold over the seeds reaching it, with their count."""
    figures = {}
    for variant, seeds in per_seed.items():
        runs = list(seeds.values())
        figures[variant] = {
            key: mean([r[key] for r in runs])
            for key in (
                "final_eval_success",
                "first_eval_success",
                "best_eval_success",
                "first_eval_return",
                "final_eval_return",
                "jerk",
                "violations_per_100_episodes",
                "filter_interventions_per_100_episodes",
                "wall_seconds",
            )
        }
        for threshold in ("steps_to_80", "steps_to_90"):
            reached = [r[threshold] for r in runs if r[threshold] is not None]
            figures[variant][threshold] = {"env_steps": mean(reached), "seeds_reached": len(reached)}
        figures[variant]["seeds"] = len(runs)
    return figures


def error(message: str) -> None:
    print(f"robot-rl: error: {message}", file=sys.stderr)
    sys.exit(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--section", required=True, choices=sorted(SECTIONS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (one core each)")
    parser.add_argument("--steps", type=int, default=None, help="online env steps per run (default: the section's)")
    parser.add_argument("--runs", type=Path, required=True, help="a new folder for the runs")
    parser.add_argument("--resume", action="store_true", help="read the finished runs of an existing --runs folder")
    parser.add_argument(
        "--add", action="store_true", help="add these seeds' runs to the section's seeds in the last result"
    )
    parser.add_argument("overrides", nargs="*", help="key=value for every run")
    args = parser.parse_args()
    if args.runs.exists() != args.resume:
        error(f"runs={args.runs}; expected " + ("an existing folder (--resume)" if args.resume else "a new folder"))
    if args.jobs < 1:
        error(f"jobs={args.jobs}; expected an integer >= 1")
    default_steps, tasks, variants, compares = SECTIONS[args.section]
    steps = default_steps if args.steps is None else args.steps
    if steps < 1:
        error(f"steps={steps}; expected an integer >= 1")
    previous = RESULTS / "seed_baselines.json"
    figures = json.loads(previous.read_text())["figures"] if previous.is_file() else {}
    last = figures.get(args.section)
    if args.add and (last is None or (last["env_steps"], last["overrides"]) != (steps, args.overrides)):
        error(f"add=true; expected the section {args.section} measured before with steps={steps} and these overrides")
    args.runs.mkdir(parents=True, exist_ok=args.resume)
    keys = [(task, variant, seed) for seed in args.seeds for task in tasks for variant in variants]
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = {
            key: pool.submit(run, args.section, *key, args.runs, steps, ["train.torch_threads=1", *args.overrides])
            for key in keys
        }
        results = {key: future.result() for key, future in futures.items()}
    per_seed = {task: {v: {f"seed{s}": results[task, v, s] for s in args.seeds} for v in variants} for task in tasks}
    seeds, commands = args.seeds, []
    if args.add:  # the seeds measured before, with the same steps and overrides, and their commands
        seeds = sorted(set(last["seeds"]) | set(args.seeds))
        commands = last.get("commands", [last["command"]])
        for task in tasks:
            for variant in variants:
                per_seed[task][variant] = {**last["tasks"][task]["per_seed"][variant], **per_seed[task][variant]}
    section = {
        "compares": compares,
        "env_steps": steps,
        "seeds": seeds,
        "overrides": args.overrides,
        "tasks": {
            task: {
                "overrides": tasks[task],
                "variants": {variant: overrides for variant, overrides in variants.items()},
                "figures": summarise(per_seed[task]),
                "per_seed": per_seed[task],
            }
            for task in tasks
        },
    }
    print(json.dumps({task: part["figures"] for task, part in section["tasks"].items()}, indent=1))
    command = " ".join(["python -m benchmarks.seed_baselines", *sys.argv[1:]])
    figures[args.section] = {**section, "command": command, **({"commands": [*commands, command]} if commands else {})}
    print("wrote", write_result("seed_baselines", figures))


if __name__ == "__main__":
    main()
