"""Deterministic evaluation of a policy, shared by ``robot-rl train`` and ``robot-rl eval``."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from .config import new_file_path

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


def write_video(path: str | Path, frames: list[np.ndarray], fps: float) -> None:
    """The new mp4 ``path`` of RGB ``frames`` (H, W, 3) uint8 at ``fps`` frames per s (see :func:`new_video`)."""
    height, width = frames[0].shape[:2]
    with new_video(path, fps, (width, height)) as write:
        for frame in frames:
            write(frame)


@contextmanager
def new_video(path: str | Path, fps: float, size: tuple[int, int]) -> Iterator[Callable[[np.ndarray], None]]:
    """Yield ``write(frame)`` for the new mp4 ``path`` of RGB frames (H, W, 3) uint8, ``size`` = (width, height) px,
    at ``fps`` frames per s. The video is written in a temporary sibling folder and linked into place when the block
    ends: FileExistsError (nothing written) if ``path`` exists by then, and a failure leaves no file."""
    import cv2

    path = Path(path)
    sibling = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.absolute().parent))
    try:
        staged = sibling / path.name
        writer = cv2.VideoWriter(str(staged), cv2.VideoWriter_fourcc(*"mp4v"), fps, size)
        if not writer.isOpened():
            raise OSError(f"{path}: cv2 cannot write an mp4 video here (no mp4v encoder?)")
        try:
            yield lambda frame: writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
        finally:
            writer.release()
        try:
            os.link(staged, path)  # unlike a rename, never replaces what is there
        except FileExistsError:
            raise FileExistsError(f"{path}: exists; expected a new path") from None
    finally:
        shutil.rmtree(sibling, ignore_errors=True)
