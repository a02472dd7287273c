"""A training run's settings, ``train:`` of ``configs/settings/train.yaml``, checked. Without torch: a command line
with a bad value is refused before the learner's imports (``robot-rl train``, the learner node)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from robot_rl.core.config import is_integer, is_number, positive, require_all, settings_of, yaml_defaults

VECTORIZATIONS = ("sync", "async")  # train.vectorization


@yaml_defaults("settings/train.yaml", "train")
class TrainSettings:
    """``train:`` of ``configs/settings/train.yaml`` (the defaults and what each setting means are written there)."""

    run_dir: str = "runs/default"  # the YAML's is built from the task and seed
    resume: bool
    env_steps: int  # online env steps (demos not counted)
    demo_episodes: int
    demo_store: str | None  # demonstrations recorded before: into the demo buffer at the run's start
    start_training: int  # online transitions before the first update
    update_every: int  # online transitions per update call (agent.utd critic steps each)
    batch_size: int
    demo_fraction: float
    n_step: int
    buffer_capacity: int
    weights_every: int  # learner update calls between weight publications
    sync: bool  # sim: the actor waits for the learner so the update-to-data ratio holds
    max_lag: int  # env steps the actor may run ahead of the learner when sync
    num_envs: int  # robot-rl train: sim envs stepped together, one batched policy call per step
    vectorization: str  # sync: the envs step in this process | async: each in a worker process, in parallel
    eval_every: int
    eval_episodes: int
    final_eval_episodes: int
    stop_at_success: float | None  # an evaluation's success rate that ends the run (None: the whole budget)
    checkpoint_every: int
    record_episodes: bool
    torch_threads: int
    deterministic: bool  # same seed, same weights: the actor takes new weights only once the learner has caught up
    # with every step sent (slower), and torch uses deterministic algorithms

    def target_reached(self, success_rate: float) -> bool:
        """Whether an evaluation with this success rate ends the run (``stop_at_success``)."""
        return self.stop_at_success is not None and success_rate >= self.stop_at_success


def settings_from(section: Mapping[str, Any]) -> TrainSettings:
    """``train.*`` as checked settings."""
    settings = settings_of("train", TrainSettings, section)
    for key in (
        "env_steps",
        "batch_size",
        "n_step",
        "buffer_capacity",
        "weights_every",
        "eval_every",
        "eval_episodes",
        "final_eval_episodes",
        "checkpoint_every",
        "torch_threads",
        "max_lag",
        "num_envs",
        "update_every",
    ):
        positive(f"train.{key}", getattr(settings, key), integer=True)
    require_all(
        "train",
        settings,
        {
            "run_dir": (
                isinstance(settings.run_dir, str) and settings.run_dir.strip() != "",
                "the path of the run folder",
            ),
            "demo_episodes": (is_integer(settings.demo_episodes) and settings.demo_episodes >= 0, "an integer >= 0"),
            "start_training": (is_integer(settings.start_training) and settings.start_training >= 0, "an integer >= 0"),
            "vectorization": (settings.vectorization in VECTORIZATIONS, " or ".join(VECTORIZATIONS)),
            "stop_at_success": (
                settings.stop_at_success is None
                or (is_number(settings.stop_at_success) and 0.0 < settings.stop_at_success <= 1.0),
                "a success rate in (0, 1], or null (the whole budget)",
            ),
            "demo_fraction": (
                is_number(settings.demo_fraction) and 0.0 <= settings.demo_fraction <= 1.0,
                "a number in [0, 1]",
            ),
            **{
                key: (isinstance(getattr(settings, key), bool), "true or false")
                for key in ("resume", "sync", "record_episodes", "deterministic")
            },
        },
    )
    return settings
