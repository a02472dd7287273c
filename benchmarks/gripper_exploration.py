"""The gripper critic's exploration on pick_cube (issue 49 item 7): epsilon-greedy class choices against greedy.

With ``agent.gripper_critic=true`` the last action dimension comes from a DQN over {open, stay, close}. Acting
epsilon-greedily at 10 Hz, an object carried for 3 s gets a random ``open`` with probability 1 - (1 - eps/3)^30
(~64% at eps = 0.1); HIL-SERL's grasp critic acts greedily (argmax), its gripper exploration coming from the demos
and the operator's takeovers. Each variant trains the main job (scripted human) with the gripper critic, seeds one
after the other, side by side in one run.

    python -m benchmarks.gripper_exploration [--seeds 0 1] [--steps 10000] [--epsilons 0.1 0.0]

Writes ``benchmarks/results/gripper_exploration.json``: per variant (``epsilon_<eps>``) and seed the first
evaluation at >= 90% (``to_90``), the final success and the curve; per variant ``median_steps_to_90`` (runs that never
got there count as the budget) and ``mean_final_success``.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from benchmarks.common import curve, run_training, to_threshold, write_result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.1, 0.0])
    parser.add_argument("--runs", default="runs/gripper_exploration")
    args = parser.parse_args()
    figures: dict[str, dict] = {}
    for epsilon in args.epsilons:
        variant = f"epsilon_{epsilon:g}"
        per_seed = {}
        for seed in args.seeds:
            summary = run_training(
                Path(args.runs) / f"{variant}_seed{seed}",
                [
                    f"seed={seed}",
                    "agent.gripper_critic=true",
                    f"agent.gripper_epsilon={epsilon}",
                    f"train.env_steps={args.steps}",
                ],
            )
            per_seed[f"seed{seed}"] = {
                "to_90": to_threshold(summary["eval_history"], 0.9),
                "final_eval_success": summary["final_eval_success"],
                "intervention_steps": summary["intervention_steps"],
                "eval_history": curve(summary["eval_history"]),
            }
            print(f"{variant} seed {seed}: final {summary['final_eval_success']:.2f}", flush=True)
        steps = [r["to_90"].get("env_steps", args.steps) for r in per_seed.values()]
        figures[variant] = {
            "per_seed": per_seed,
            "median_steps_to_90": statistics.median(steps),
            "mean_final_success": statistics.fmean(r["final_eval_success"] for r in per_seed.values()),
        }
        print(f"{variant}: median steps to 90% {figures[variant]['median_steps_to_90']}", flush=True)
    path = write_result("gripper_exploration", figures, settings=vars(args))
    print("wrote", path)


if __name__ == "__main__":
    main()
