"""``robot-rl collect``: record scripted-expert episodes into an episode store."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from .config import positive
from .data import EpisodeStore
from .envs import make_env, make_expert, store_metadata
from .interrupts import deferred_interrupt
from .robustness import randomized


def run_episode(env, expert, writer, seed: int) -> dict[str, Any]:
    """Roll out one expert episode into ``writer`` (not committed); returns its summary."""
    obs, info = env.reset(seed=seed)
    randomization = info.get("randomization")
    expert.reset()
    writer.start(obs)
    ret = 0.0
    while True:
        action = np.asarray(expert.act(obs), dtype=np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        ret += reward
        writer.add(obs, action, reward, terminated, truncated, success=info["success"], intervened=True)
        if terminated or truncated:
            summary = {"success": bool(info["success"]), "return": ret, "length": len(writer), "seed": seed}
            return summary if randomization is None else {**summary, "randomization": randomization}


def collect(cfg: DictConfig | Mapping[str, Any]) -> dict[str, Any]:
    """Record ``collect.episodes`` expert episodes of ``task`` into ``collect.out``."""
    cfg = OmegaConf.create(cfg) if not isinstance(cfg, DictConfig) else cfg
    episodes = positive("collect.episodes", cfg.collect.episodes, integer=True)
    task = OmegaConf.to_container(cfg.task, resolve=True)
    env = randomized(make_env(task), cfg.get("randomization"), int(cfg.seed))
    expert = make_expert(task, env)
    store = EpisodeStore.create(cfg.collect.out, store_metadata(task, env))
    writer = store.writer()
    results: list[dict[str, Any]] = []
    interrupted = False
    progress = tqdm(range(episodes), desc=f"collect {task['name']}", unit="ep")
    try:
        for index in progress:
            summary = run_episode(env, expert, writer, seed=int(cfg.seed) + index)
            with deferred_interrupt():
                writer.commit("demo", task=task["name"], config=task, **summary)
                results.append(summary)
            progress.set_postfix(success=f"{np.mean([r['success'] for r in results]):.2f}")
    except KeyboardInterrupt:
        writer.discard()
        interrupted = True
    finally:
        progress.close()
        env.close()
    report = {
        "task": task["name"],
        "out": str(store.path),
        "episodes": len(results),
        "success_rate": float(np.mean([r["success"] for r in results])) if results else 0.0,
        "mean_length": float(np.mean([r["length"] for r in results])) if results else 0.0,
        "episodes_in_store": len(store),
        "interrupted": interrupted,
    }
    return report
