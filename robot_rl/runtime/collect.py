"""``robot-rl collect``: record scripted-expert episodes into an episode store.

With ``collect.action_noise`` > 0 the expert's actions get temporally correlated Gaussian noise
(std ``action_noise`` in normalised action units, step-to-step correlation
``noise_correlation``: a slow push that wanders, as an untrained policy does) and the episodes
are stored as ``probe`` episodes, not demos: clumsy runs into the hazards whose violations
(``safety_flags``, recorded on every step) the safety critic can be pretrained on
(``safety.pretrain_store``) before it meets the arm's first online episode."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from tqdm import tqdm

from robot_rl.core.config import (
    Config,
    ConfigError,
    check_disk_space,
    integer,
    is_number,
    non_negative,
    output_path,
    plain,
    positive,
    select,
    stops_on_full_disk,
)
from robot_rl.core.interrupts import interrupt_requests
from robot_rl.data import EpisodeStore
from robot_rl.data.episode_store import EpisodeStoreError, bytes_per_step
from robot_rl.runtime.envs import fast_loop_of, make_env, make_expert, task_spec
from robot_rl.runtime.robustness import randomized
from robot_rl.sim.fast_critic_loop import attach_fast_loop


def run_episode(
    env,
    expert,
    writer,
    seed: int,
    action_noise: float = 0.0,
    noise_correlation: float = 0.0,
    stop: threading.Event | None = None,
) -> dict[str, Any] | None:
    """Roll out one expert episode into ``writer`` (not committed); returns its summary, or None if ``stop`` was set
    before the episode ended.
    ``action_noise``: std of the AR(1) noise added to the expert's actions (normalised units),
    ``noise_correlation``: its step-to-step correlation in [0, 1)."""
    obs, info = env.reset(seed=seed)
    randomization = info.get("randomization")
    expert.reset()
    rng = np.random.default_rng(seed)
    noise = np.zeros(env.action_space.shape, np.float32)
    innovation = action_noise * np.sqrt(1.0 - noise_correlation**2)  # keeps the stationary std at action_noise
    writer.start(obs)
    ret, violations = 0.0, 0
    while True:
        action = np.asarray(expert.act(obs), dtype=np.float32)
        if action_noise:
            noise = noise_correlation * noise + rng.normal(0.0, innovation, noise.shape)
            action = np.clip(action + noise, -1.0, 1.0).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(action)
        ret += reward
        flags = int(info.get("violation", 0))
        violations += bool(flags)
        writer.add(
            obs,
            action,
            reward,
            terminated,
            truncated,
            success=info["success"],
            intervened=not action_noise,
            safety_flags=flags,
        )
        if info.get("fast_loop") is not None:  # the fast loop's ticks of the step
            writer.add_streams(info["fast_loop"].as_streams())
        if stop is not None and stop.is_set():
            return None
        if terminated or truncated:
            summary = {
                "success": bool(info["success"]),
                "return": ret,
                "length": len(writer),
                "seed": seed,
                "violations": violations,
            }
            return summary if randomization is None else {**summary, "randomization": randomization}


@stops_on_full_disk(
    "collect.out", "every finished episode is kept: free space, then collect into the store again (it appends)"
)
def collect(cfg: Config) -> dict[str, Any]:
    """Record ``collect.episodes`` expert episodes of ``task`` into ``collect.out``. A full disk stops it with one line
    (:class:`~robot_rl.core.config.DiskSpaceError`): the episodes finished so far stay in the store."""
    episodes = positive("collect.episodes", cfg["collect"]["episodes"], integer=True)
    action_noise = non_negative("collect.action_noise", cfg["collect"].get("action_noise", 0.0))
    correlation = cfg["collect"].get("noise_correlation", 0.0)
    if not (is_number(correlation) and 0.0 <= correlation < 1.0):
        raise ConfigError("collect.noise_correlation", correlation, "a number in [0, 1)")
    out = output_path("collect.out", cfg["collect"]["out"], folder=True)
    seed = integer("seed", cfg["seed"])
    source = "probe" if action_noise else "demo"
    task = plain(cfg["task"])
    env = randomized(make_env(task), cfg.get("randomization"), seed)
    attach_fast_loop(env, fast_loop_of(cfg))  # with safety.fast_critic.sim_rate_hz: ticks recorded too
    expert = make_expert(task, env)
    metadata = task_spec(task, env).metadata()
    steps = episodes * int(task.get("episode_steps") or 0)  # at most
    try:
        need = steps * bytes_per_step(metadata["observation_shapes"], metadata["action_dim"])
        check_disk_space("collect.out", out, need, select(cfg, "data.min_free_mb", 0))
    except ConfigError:
        env.close()
        raise
    try:
        store = EpisodeStore.create(out, metadata)
    except EpisodeStoreError as error:
        env.close()
        raise ConfigError(
            "collect.out", str(out), f"a new folder, an empty one or an episode store of this task ({error})"
        ) from None
    writer = store.writer()
    results: list[dict[str, Any]] = []
    progress = tqdm(range(episodes), desc=f"collect {task['name']}", unit="ep")
    try:
        with interrupt_requests() as stop:  # Ctrl-C: finish the step, drop the unfinished episode, keep the rest
            for index in progress:
                summary = run_episode(env, expert, writer, seed + index, action_noise, correlation, stop)
                if summary is None:
                    break
                writer.commit(source, task=task["name"], config=task, **summary)
                results.append(summary)
                progress.set_postfix(success=f"{np.mean([r['success'] for r in results]):.2f}")
                if stop.is_set():
                    break
        interrupted = stop.is_set()
    except KeyboardInterrupt:  # a second Ctrl-C
        interrupted = True
    finally:
        writer.discard()  # the unfinished episode, if any
        progress.close()
        env.close()
    report = {
        "task": task["name"],
        "out": str(store.path),
        "episodes": len(results),
        "success_rate": float(np.mean([r["success"] for r in results])) if results else 0.0,
        "mean_length": float(np.mean([r["length"] for r in results])) if results else 0.0,
        "violations_per_episode": float(np.mean([r["violations"] for r in results])) if results else 0.0,
        "episodes_in_store": len(store),
        "interrupted": interrupted,
    }
    return report
