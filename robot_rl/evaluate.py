"""Deterministic evaluation of a policy, shared by ``robot-rl train`` and ``robot-rl eval``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .config import new_file_path
from .data.video import write_video

EVAL_SEED = 10**6  # the first episode seed of a training run's evaluations: the same episodes at every evaluation


def task_progress(env, reward: float) -> float:
    """How far along the task is: the sim task's dense reward when it has one, else the reward."""
    dense = getattr(env.unwrapped, "dense_reward", None)
    try:
        return float(dense()) if callable(dense) else float(reward)
    except NotImplementedError:
        return float(reward)


def evaluate(agent, env, episodes: int, seed: int, video: str | Path | None = None) -> dict[str, Any]:
    """Run ``episodes`` episodes with the policy's mode (no exploration), seeds ``seed + i``.

    Returns success rate, mean episode length (cycle time in steps), mean return, and the
    continuity cost of the executed actions; with ``video`` (a new .mp4 path in an existing folder, checked before
    the first episode) an mp4 of all episodes, and the path under ``video``.
    """
    if video is not None:
        video = new_file_path("eval.video", video, ".mp4")
    frames: list[np.ndarray] = []
    successes, lengths, returns, continuity = [], [], [], []
    for index in range(episodes):
        obs, info = env.reset(seed=seed + index)
        agent.begin_episode()
        actions, ret = [], 0.0
        while True:
            action = agent.act(obs, explore=False)
            obs, reward, terminated, truncated, info = env.step(action)
            actions.append(action)
            ret += reward
            if video is not None:
                frames.append(env.render())
            if terminated or truncated:
                break
        successes.append(bool(info["success"]))
        lengths.append(len(actions))
        returns.append(ret)
        continuity.append(continuity_cost(np.asarray(actions)))
    if video is not None:
        write_video(video, frames, fps=10)
    return {
        "episodes": episodes,
        "success_rate": float(np.mean(successes)),
        "mean_length": float(np.mean(lengths)),
        "mean_return": float(np.mean(returns)),
        "continuity_cost": float(np.mean(continuity)),
        **({"video": str(video)} if video is not None else {}),
    }


def continuity_cost(actions: np.ndarray) -> float:
    """100 * mean squared step-to-step change of actions in [-1, 1] (gSDE paper), 0 if < 2 steps."""
    if len(actions) < 2:
        return 0.0
    return float(100.0 * np.mean((np.diff(actions, axis=0) / 2.0) ** 2))
