"""Deterministic evaluation of a policy, shared by ``robot-rl train`` and ``robot-rl eval``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.config import new_file_path
from robot_rl.data.video import write_video

EVAL_SEED = 10**6  # the first episode seed of a training run's evaluations: the same episodes at every evaluation


def task_progress(env, reward: float) -> float:
    """How far along the task is: the sim task's dense reward when it has one, else the reward."""
    dense = getattr(env.unwrapped, "dense_reward", None)
    try:
        return float(dense()) if callable(dense) else float(reward)
    except NotImplementedError:
        return float(reward)


def evaluate(agent, env, episodes: int, seed: int, video: str | Path | None = None, safety=None) -> dict[str, Any]:
    """Run ``episodes`` episodes with the policy's mode (no exploration), seeds ``seed + i``, through ``safety`` (a
    :class:`~robot_rl.runtime.safety_learning.SafetyActor`: the learned filter, as in training; None: the policy's
    actions as they are).

    Returns success rate, mean episode length (cycle time in steps), mean return, and the
    continuity cost of the executed actions; with ``video`` (a new .mp4 path in an existing folder, checked before
    the first episode) an mp4 of all episodes, and the path under ``video``.
    """
    if video is not None:
        video = new_file_path("eval.video", video, ".mp4")
    frames: list[np.ndarray] | None = [] if video is not None else None
    played = [evaluation_episode(agent, env, seed + index, frames, safety) for index in range(episodes)]
    if video is not None:
        write_video(video, frames, fps=10)
    return {**evaluation_summary(played), **({"video": str(video)} if video is not None else {})}


def evaluation_episode(agent, env, seed: int, frames: list[np.ndarray] | None = None, safety=None) -> dict[str, float]:
    """One episode with the policy's mode from ``env.reset(seed=seed)``, its actions through ``safety`` when given:
    its success, length (steps), return, continuity cost and the steps the learned filter changed
    (``filter_interventions``); each rendered frame appended to ``frames`` when given."""
    obs, info = env.reset(seed=seed)
    agent.begin_episode()
    if safety is not None:
        safety.begin_episode()
    actions, ret, filtered = [], 0.0, 0
    while True:
        action = agent.act(obs, explore=False)
        if safety is not None:
            action, changed = safety(obs, action)
            filtered += changed
        obs, reward, terminated, truncated, info = env.step(action)
        agent.executed(action)
        actions.append(action)
        ret += reward
        if frames is not None:
            frames.append(env.render())
        if terminated or truncated:
            break
    return {
        "success": bool(info["success"]),
        "length": len(actions),
        "return": ret,
        "continuity_cost": continuity_cost(np.asarray(actions)),
        "filter_interventions": filtered,
    }


def evaluation_summary(played: list[dict[str, float]]) -> dict[str, Any]:
    """The evaluation's figures from its episodes (:func:`evaluation_episode`)."""
    return {
        "episodes": len(played),
        "success_rate": float(np.mean([e["success"] for e in played])),
        "mean_length": float(np.mean([e["length"] for e in played])),
        "mean_return": float(np.mean([e["return"] for e in played])),
        "continuity_cost": float(np.mean([e["continuity_cost"] for e in played])),
        "filter_interventions": int(sum(e["filter_interventions"] for e in played)),
    }


def continuity_cost(actions: np.ndarray) -> float:
    """100 * mean squared step-to-step change of actions in [-1, 1] (gSDE paper), 0 if < 2 steps."""
    if len(actions) < 2:
        return 0.0
    return float(100.0 * np.mean((np.diff(actions, axis=0) / 2.0) ** 2))
