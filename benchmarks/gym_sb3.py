"""robot_rl's SAC (``robot-rl train task=gym``) against Stable-Baselines3 SAC on a third-party suite: gymnasium-robotics
FetchReachDense-v4 (MuJoCo Fetch arm, dense reward -distance to the goal in m, 50-step episodes, success within
5 cm). Same env, same online env-step budget, same seeds, side by side in one run (one process per agent, 2 cores).

    python -m benchmarks.gym_sb3            # seeds 0 1 2 x 10,000 env steps per agent
    python -m benchmarks.gym_sb3 --quick    # seed 0 x 4,000 env steps per agent (13 minutes on 2 busy cores)

Needs ``pip install -e .[suites,bench]``. The agents, each with its own defaults:

- ``robot_rl_sac``: ``robot-rl train task=gym task.id=FetchReachDense-v4 task.imports=[gymnasium_robotics]
  train.demo_episodes=0 human.enabled=false`` (SAC-RLPD: UTD 4, batch 128, 2 LayerNorm critics, discount 0.97,
  target entropy -|A|/2; no demos, no human), the observation dict flattened by ``robot_rl.runtime.gym_adapter``;
- ``sb3_sac``: ``SAC("MultiInputPolicy")`` on the same env id (UTD 1, batch 256, 100 random steps first, target
  entropy -|A|) with discount 0.97 like ours; one torch thread, like ``train.torch_threads=1``.

Both are evaluated every ``--eval-every`` online steps with 20 deterministic episodes on seeds 10**6.. (the same
seeds for both); success is the suite's ``info["is_success"]`` at an episode's last step (robot_rl reads it
through ``task.success_key``'s default list). Per agent and seed: the curve (env steps, success, wall s), final
success, env steps to 80% success, env steps per wall second (evaluations included); over seeds, their medians.
Writes ``benchmarks/results/gym_sb3.json`` (``gym_sb3_quick.json``) and a PNG of the curves.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

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

ENV_ID = "FetchReachDense-v4"
SUITE = "gymnasium_robotics"
AGENTS = ("robot_rl_sac", "sb3_sac")
DISCOUNT = 0.97  # robot_rl's SAC default (configs/agent/sac.yaml); SB3's is 0.99
EVAL_EPISODES, EVAL_SEED = 20, 10**6
FULL_STEPS, QUICK_STEPS = 10_000, 4_000
TASK = [
    "task=gym",
    f"task.id={ENV_ID}",
    f"task.imports=[{SUITE}]",
    "train.demo_episodes=0",
    "human.enabled=false",
    f"train.eval_episodes={EVAL_EPISODES}",
    f"train.final_eval_episodes={EVAL_EPISODES}",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with ``steps``, ``seeds`` and ``name`` (the result file's stem) filled in."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"seed 0, {QUICK_STEPS:,} steps per agent")
    parser.add_argument("--steps", type=int, default=None, help=f"online env steps per run (default {FULL_STEPS:,})")
    parser.add_argument("--eval-every", type=int, default=1_000, help="env steps between evaluations")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default 0 1 2; --quick 0)")
    parser.add_argument("--runs", default="runs/gym_sb3", help="folder of robot_rl's run folders")
    args = parser.parse_args(argv)
    args.steps = args.steps or (QUICK_STEPS if args.quick else FULL_STEPS)
    if args.steps <= 0 or args.eval_every <= 0 or args.eval_every % 50:
        parser.error("--steps and --eval-every must be positive, --eval-every a multiple of the 50-step episode")
    args.seeds = args.seeds if args.seeds is not None else ([0] if args.quick else [0, 1, 2])
    args.name = "gym_sb3_quick" if args.quick else "gym_sb3"
    return args


def record(history: list[dict[str, Any]], steps: int, wall_seconds: float) -> dict[str, Any]:
    """One run's figures from its evaluations (dicts with env_steps, success_rate, wall_seconds)."""
    return {
        "history": curve(history),
        "final_success": history[-1]["success_rate"],
        "to_80": to_threshold(history),
        "env_steps_per_s": round(steps / wall_seconds, 1),
        "wall_seconds": round(wall_seconds, 1),
    }


def run_robot_rl(seed: int, steps: int, eval_every: int, runs: Path) -> dict[str, Any]:
    """``robot-rl train`` in a child process (the real CLI path); its eval history."""
    summary = run_training(
        runs / f"robot_rl_seed{seed}",
        [*TASK, f"seed={seed}", f"train.env_steps={steps}", f"train.eval_every={eval_every}"],
    )
    return record(summary["eval_history"], steps, summary["wall_seconds"])


def run_sb3(seed: int, steps: int, eval_every: int) -> dict[str, Any]:
    """Stable-Baselines3 SAC on the suite's own env (dict observations as they are), evaluated like ours."""
    import gymnasium as gym
    import gymnasium_robotics
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)
    gym.register_envs(gymnasium_robotics)
    env, eval_env = gym.make(ENV_ID), gym.make(ENV_ID)
    history: list[dict[str, Any]] = []
    started = time.monotonic()

    def success_rate(model: SAC) -> float:
        successes = []
        for index in range(EVAL_EPISODES):
            obs, _ = eval_env.reset(seed=EVAL_SEED + index)
            while True:
                action, _ = model.predict(obs, deterministic=True)
                obs, _, terminated, truncated, info = eval_env.step(action)
                if terminated or truncated:
                    break
            successes.append(bool(info["is_success"]))
        return float(np.mean(successes))

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % eval_every == 0 or self.num_timesteps == steps:
                rate = success_rate(self.model)
                history.append(
                    {"env_steps": self.num_timesteps, "success_rate": rate, "wall_seconds": time.monotonic() - started}
                )
            return True

    model = SAC("MultiInputPolicy", env, gamma=DISCOUNT, seed=seed, device="cpu", verbose=0)
    model.learn(total_timesteps=steps, callback=Evaluate())
    return record(history, steps, time.monotonic() - started)


def run_agent(agent: str, seed: int, steps: int, eval_every: int, runs: Path) -> dict[str, Any]:
    if agent == "robot_rl_sac":
        return run_robot_rl(seed, steps, eval_every, runs)
    return run_sb3(seed, steps, eval_every)


def medians(runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Median over seeds of final success, env steps to 80% (seeds that never got there left out) and speed."""
    reached = [run["to_80"]["env_steps"] for run in runs.values() if run["to_80"]["reached"]]
    return {
        "final_success": statistics.median(run["final_success"] for run in runs.values()),
        "steps_to_80": statistics.median(reached) if reached else None,
        "seeds_reaching_80": f"{len(reached)}/{len(runs)}",
        "env_steps_per_s": statistics.median(run["env_steps_per_s"] for run in runs.values()),
    }


def plot(results: dict[str, dict[int, dict[str, Any]]], steps: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5), dpi=120)
    for color, (agent, runs) in zip(("tab:blue", "tab:orange"), results.items()):
        for index, (seed, run) in enumerate(runs.items()):
            points = run["history"]
            label = agent if index == 0 else None
            axis.plot([p[0] for p in points], [p[1] for p in points], "o-", color=color, label=label, alpha=0.8)
            axis.annotate(f"s{seed}", (points[-1][0], points[-1][1]), fontsize=6, color=color)
    style_success_axis(axis, "online env steps")
    axis.set_title(f"{ENV_ID}: robot_rl SAC vs SB3 SAC, {steps:,} steps")
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    load_at_start = os.getloadavg()[0]  # the 2 cores are shared: the wall-clock figures depend on it
    results: dict[str, dict[int, dict[str, Any]]] = {agent: {} for agent in AGENTS}
    for seed in args.seeds:
        pair = side_by_side(run_agent, AGENTS, seed, args.steps, args.eval_every, Path(args.runs))
        for agent, run in pair.items():
            results[agent][seed] = run
            print(
                agent, f"seed {seed}", "final", run["final_success"], run["to_80"], run["env_steps_per_s"], flush=True
            )
    figures = {agent: {"median": medians(runs), "seeds": runs} for agent, runs in results.items()}
    plot(results, args.steps, RESULTS / f"{args.name}.png")
    import gymnasium_robotics
    import stable_baselines3

    path = write_result(
        args.name,
        figures,
        settings={
            "env": f"{ENV_ID} (gymnasium-robotics {gymnasium_robotics.__version__})",
            "env_steps": args.steps,
            "seeds": args.seeds,
            "eval": f"every {args.eval_every} steps, {EVAL_EPISODES} deterministic episodes, seeds 1e6..",
            "robot_rl_sac": "configs/agent/sac.yaml defaults, no demos, no human",
            "sb3_sac": f"stable-baselines3 {stable_baselines3.__version__} SAC defaults, MultiInputPolicy, gamma 0.97",
            "load_average_1min": {"start": round(load_at_start, 2), "end": round(os.getloadavg()[0], 2)},
        },
    )
    print("wrote", path)


if __name__ == "__main__":
    main()
