"""Ablations of the main job on pick_cube, side by side in one run (same env, same budget):

  (a) robot_rl: scripted demos + interventions      (the default main job)
  (b) robot_rl: scripted demos only                 (human.enabled=false)
  (c) robot_rl: neither                             (train.demo_episodes=0 human.enabled=false)
  (d) Stable-Baselines3 SAC                         (defaults, gamma 0.97, no demos)

Each is evaluated every ``--eval-every`` online steps with 20 deterministic episodes on the same
seeds; the report gives env steps and wall-clock to 80% success (or the final success).

    python -m benchmarks.sim_learning [--steps 16000] [--seed 0]     (needs: pip install -e .[bench])
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from benchmarks.common import curve, run_training, save_figure, style_success_axis, to_threshold, write_result

VARIANTS = {
    "a_demos_and_interventions": [],
    "b_demos_only": ["human.enabled=false"],
    "c_neither": ["train.demo_episodes=0", "human.enabled=false"],
}


def run_robot_rl(name: str, overrides: list[str], steps: int, eval_every: int, seed: int, runs: Path) -> dict:
    summary = run_training(
        runs / name,
        [
            f"seed={seed}",
            f"train.env_steps={steps}",
            f"train.eval_every={eval_every}",
            "train.final_eval_episodes=20",
            *overrides,
        ],
    )
    history = summary["eval_history"]
    return {"history": curve(history), "to_80": to_threshold(history), "final_success": history[-1]["success_rate"]}


def run_sb3(steps: int, eval_every: int, seed: int) -> dict:
    import gymnasium as gym
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    from robot_rl.core.composed_config import load_config
    from robot_rl.runtime.envs import make_env

    task = dict(load_config(["task=pick_cube"]).task)

    class StateOnly(gym.ObservationWrapper):
        def __init__(self, env):
            super().__init__(env)
            self.observation_space = env.observation_space["state"]

        def observation(self, observation):
            return observation["state"]

    env, eval_env = StateOnly(make_env(task)), StateOnly(make_env(task))
    history: list[dict] = []
    start = time.monotonic()

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % eval_every == 0:
                successes = []
                for index in range(20):
                    obs, _ = eval_env.reset(seed=10**6 + index)
                    while True:
                        action, _ = self.model.predict(obs, deterministic=True)
                        obs, _, terminated, truncated, info = eval_env.step(action)
                        if terminated or truncated:
                            break
                    successes.append(info["success"])
                history.append(
                    {
                        "env_steps": self.num_timesteps,
                        "success_rate": float(np.mean(successes)),
                        "wall_seconds": time.monotonic() - start,
                    }
                )
            return True

    model = SAC("MlpPolicy", env, gamma=0.97, seed=seed, verbose=0, device="cpu")
    model.learn(total_timesteps=steps, callback=Evaluate())
    return {
        "history": curve(history),
        "to_80": to_threshold(history),
        "final_success": history[-1]["success_rate"] if history else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=16_000)
    parser.add_argument("--eval-every", type=int, default=2_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--runs", default="runs/sim_learning")
    args = parser.parse_args()
    results = {}
    for name, overrides in VARIANTS.items():
        results[name] = run_robot_rl(name, overrides, args.steps, args.eval_every, args.seed, Path(args.runs))
        print(name, results[name]["to_80"], "final", results[name]["final_success"], flush=True)
    results["d_sb3_sac"] = run_sb3(args.steps, args.eval_every, args.seed)
    print("d_sb3_sac", results["d_sb3_sac"]["to_80"], "final", results["d_sb3_sac"]["final_success"], flush=True)
    plot(results, Path(__file__).parent / "results" / "sim_learning.png")
    path = write_result(
        "sim_learning",
        results,
        settings={
            "task": "pick_cube (state)",
            "env_steps": args.steps,
            "eval": "20 deterministic episodes, seeds 1e6..",
            "seed": args.seed,
        },
    )
    print("wrote", path)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5), dpi=120)
    for name, result in results.items():
        steps = [h[0] for h in result["history"]]
        axis.plot(steps, [h[1] for h in result["history"]], "o-", label=name)
    style_success_axis(axis, "online env steps")
    axis.set_title("pick_cube: robot_rl ablations vs SB3 SAC")
    save_figure(figure, path)


if __name__ == "__main__":
    main()
