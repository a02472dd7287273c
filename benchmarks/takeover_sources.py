"""Where the main job's late takeovers come from (issue 72 item 6): the trained policy, played with and without its
exploration noise, under the same scripted human.

    python -m benchmarks.takeover_sources [--seeds 0 2] [--workers 2] [--episodes 60] [--runs runs/takeover_sources]

Trains the main job (``robot-rl train seed=<seed>``, the README's defaults) for each seed, then plays ``--episodes``
episodes of its final policy with the scripted human of the run (the same take-over rules) on the evaluation seeds,
once per way of acting:

- ``mode``: the policy's mode (as evaluations act);
- ``sampled``: every action dimension sampled (as training acts);
- ``noise_in_<k>``: the mode with action dimension k sampled (``noise_in_0_1``: x and y together).

Writes ``benchmarks/results/takeover_sources.json``: per seed and way, ``takeover_rate`` (the share of steps the
scripted human played) and ``success``; and each seed's run ``takeover_rate_last_2000`` beside them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from omegaconf import OmegaConf

from benchmarks.common import run_training, side_by_side, write_result
from robot_rl.core.checkpoint import load_agent
from robot_rl.core.folders import latest
from robot_rl.runtime.envs import make_env, make_expert, observation_shapes
from robot_rl.runtime.evaluate import EVAL_SEED, task_progress
from robot_rl.runtime.session import make_agent
from robot_rl.runtime.teleop import InterventionRules, ScriptedHuman


def ways_of_acting(action_dim: int) -> dict[str, list[int]]:
    """Each way of acting: the action dimensions that are sampled (the others act at the mode)."""
    dims = list(range(action_dim))
    ways = {"mode": [], "sampled": dims, "noise_in_0_1": [0, 1]}
    ways.update({f"noise_in_{k}": [k] for k in dims[2:]})
    return ways


def play(run_dir: Path, sampled: list[int], episodes: int) -> dict[str, float]:
    """``episodes`` episodes of the run's final policy, ``sampled`` dimensions drawn, the rest at the mode, under the
    run's scripted human: its takeover rate and success."""
    cfg = OmegaConf.load(run_dir / "config.yaml")
    task = OmegaConf.to_container(cfg.task, resolve=True)
    env = make_env(task)
    action_dim = int(env.action_space.shape[0])
    agent = make_agent(cfg, observation_shapes(env), action_dim, int(cfg.seed), acting=True)
    load_agent("--runs", agent, latest(run_dir / "checkpoint") / "agent.pt")
    human = ScriptedHuman(make_expert(task, env), InterventionRules(**OmegaConf.to_container(cfg.human)))
    steps = taken_over = successes = 0
    for episode in range(episodes):
        obs, _ = env.reset(seed=EVAL_SEED + episode)
        human.begin_episode(demo=False)
        while True:
            action = agent.act(obs, explore=False)
            if sampled:
                action[sampled] = agent.act(obs, explore=True)[sampled]
            active, human_action = human(obs, action)
            if active:
                action, taken_over = human_action, taken_over + 1
            obs, reward, terminated, truncated, info = env.step(action)
            human.observe(task_progress(env, reward))
            steps += 1
            if terminated or truncated:
                successes += bool(info["success"])
                break
    env.close()
    return {"takeover_rate": round(taken_over / steps, 4), "success": successes / episodes}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 2])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--episodes", type=int, default=60)
    parser.add_argument("--runs", default="runs/takeover_sources")
    args = parser.parse_args()

    def probe(seed: int) -> dict:
        run_dir = Path(args.runs) / f"seed{seed}"
        summary = run_training(run_dir, [f"seed={seed}"])
        action_dim = int(OmegaConf.load(run_dir / "config.yaml").task.action_dim)
        ways = {name: play(run_dir, dims, args.episodes) for name, dims in ways_of_acting(action_dim).items()}
        line = ", ".join(f"{name} {figures['takeover_rate']:.3f}" for name, figures in ways.items())
        print(
            f"seed {seed}: takeover rate in training's last 2,000 steps {summary['takeover_rate_last_2000']:.3f}; "
            f"the final policy: {line}",
            flush=True,
        )
        return {"takeover_rate_last_2000": summary["takeover_rate_last_2000"], "ways": ways}

    per_seed = {str(seed): record for seed, record in side_by_side(probe, args.seeds, workers=args.workers).items()}
    path = write_result(
        "takeover_sources",
        {"per_seed": per_seed},
        settings={"episodes": args.episodes, "command": "robot-rl train seed=<seed>", "workers": args.workers},
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
