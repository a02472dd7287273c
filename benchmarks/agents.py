"""SAC, SAC + gSDE, CQN and CQN-AS side by side on pick_cube: same demos, same budget, one run.

Every agent trains with ``robot-rl train`` on state observations from the same 20 scripted
demos (same seed), without interventions so that the executed actions are the agent's own,
for ``--steps`` online env steps, evaluated every ``--eval-every`` steps (20 deterministic
episodes, the same seeds). Reported per agent: success vs env steps and wall-clock, steps and
wall-clock to 80% success, the continuity cost of the executed training actions (exploration)
and of the final deterministic evaluation, and the SAC / SAC+gSDE smoothness ratio.

Two runs at a time (one torch thread each).

    python -m benchmarks.agents [--steps 10000] [--eval-every 2000] [--seed 0]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.common import (
    RESULTS,
    curve,
    run_training,
    save_figure,
    side_by_side,
    style_success_axis,
    to_threshold,
    write_result,
)

AGENTS = {
    "sac": ["agent=sac"],
    "sac_gsde": ["agent=sac", "exploration=gsde"],
    "cqn": ["agent=cqn"],
    "cqn_as": ["agent=cqn_as"],
}


def run_agent(name: str, args: argparse.Namespace) -> dict:
    summary = run_training(
        Path(args.runs) / name,
        [
            "task=pick_cube",
            *AGENTS[name],
            f"seed={args.seed}",
            f"train.env_steps={args.steps}",
            f"train.eval_every={args.eval_every}",
            "train.final_eval_episodes=20",
            "human.enabled=false",
        ],
    )
    history = summary["eval_history"]
    result = {
        "history": curve(history),
        "to_80": to_threshold(history),
        "final_success": history[-1]["success_rate"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "train_continuity_cost": summary["train_continuity_cost"],
        "eval_continuity_cost": summary["final_eval_continuity_cost"],
    }
    print(
        name,
        result["to_80"],
        "final",
        result["final_success"],
        "continuity train/eval",
        round(result["train_continuity_cost"], 3),
        round(result["eval_continuity_cost"], 3),
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--eval-every", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", default="runs/agents")
    args = parser.parse_args()
    results = side_by_side(run_agent, AGENTS, args)
    ratio = results["sac"]["train_continuity_cost"] / results["sac_gsde"]["train_continuity_cost"]
    print(f"continuity cost of training actions, SAC / SAC+gSDE: {ratio:.2f}x")
    plot(results, RESULTS / "agents.png")
    path = write_result(
        "agents",
        {"agents": results, "sac_over_gsde_train_continuity": round(ratio, 2)},
        settings={
            "task": "pick_cube (state)",
            "env_steps": args.steps,
            "demos": 20,
            "interventions": False,
            "eval": "20 deterministic episodes, seeds 1e6..",
            "seed": args.seed,
            "parallel_runs": 2,
        },
    )
    print("wrote", path)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (by_steps, by_time, smoothness) = plt.subplots(1, 3, figsize=(13, 3.6), dpi=120)
    for name, result in results.items():
        steps, success, wall = zip(*result["history"])
        by_steps.plot(steps, success, "o-", label=name)
        by_time.plot([w / 60 for w in wall], success, "o-", label=name)
    for axis, label in ((by_steps, "online env steps"), (by_time, "wall-clock (min, 2 runs share 2 cores)")):
        style_success_axis(axis, label)
    names = list(results)
    smoothness.bar(
        [i - 0.2 for i in range(len(names))],
        [results[n]["train_continuity_cost"] for n in names],
        0.4,
        label="training (exploring)",
    )
    smoothness.bar(
        [i + 0.2 for i in range(len(names))],
        [results[n]["eval_continuity_cost"] for n in names],
        0.4,
        label="final eval (deterministic)",
    )
    smoothness.set_xticks(range(len(names)), names)
    smoothness.set_ylabel("continuity cost (lower = smoother)")
    smoothness.legend(fontsize=7)
    figure.suptitle("pick_cube: agents side by side (same 20 demos, same budget)")
    save_figure(figure, path)


if __name__ == "__main__":
    main()
