"""``robot-rl train``: human-in-the-loop off-policy RL with an actor and a learner.

The actor (main thread) steps the env with the latest policy weights, lets the teleop source
take over, records every episode to the run's episode store and sends transitions to the
learner. The learner (its own thread) fills the replay buffers (demos -> demo buffer,
interventions -> both, policy steps -> online), updates the agent on mixed batches and
publishes weights. They only talk through a :class:`~robot_rl.core.transport.LocalTransport` (both ends of the link).

Run folder: ``tb/`` (TensorBoard), ``episodes.zarr``, ``checkpoint/`` (agent, buffers,
counters; ``train.resume=true`` continues from it), ``summary.json``, ``learning_curve.png``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.composed_config import steps_to_record
from robot_rl.core.config import (
    Config,
    check_disk_space,
    integer,
    output_path,
    plain,
    positive,
    select,
    stops_on_full_disk,
)
from robot_rl.core.interrupts import StopRequest
from robot_rl.data import EpisodeRecorder
from robot_rl.data.episode_store import bytes_per_step
from robot_rl.runtime.envs import make_env, observation_shapes
from robot_rl.runtime.evaluate import evaluate
from robot_rl.runtime.learned_reset import LearnedResets
from robot_rl.runtime.learner import in_process_transport
from robot_rl.runtime.reset_rule import require_in_process, reset_settings
from robot_rl.runtime.robustness import robustness_sweep, write_sweep
from robot_rl.runtime.run_folder import run_config
from robot_rl.runtime.run_loop import EpisodeEnd, Run, checkpoint_bytes, policy_evaluation
from robot_rl.runtime.run_setup import acting_envs, episode_store, run_settings, sim_env
from robot_rl.runtime.session import ActorSession, LearnerSession, load_checkpoint_agent, make_agent
from robot_rl.runtime.train_settings import TrainSettings


@stops_on_full_disk(
    "train.run_dir",
    "every finished episode and the last checkpoint are kept: free space, then run again with train.resume=true",
)
def train(cfg: Config) -> dict[str, Any]:
    cfg = run_config(cfg)  # a resumed run: its own config.yaml
    settings, seed, task, run_dir = run_settings(cfg)
    reset = reset_settings(cfg.get("scene_reset"))
    require_in_process(reset, settings.num_envs, "local")
    envs, humans = acting_envs(cfg, settings, task, seed)
    env, eval_env = envs[0], sim_env(cfg, task, seed, randomize=False)  # evaluation stays nominal
    shapes, action_dim = observation_shapes(env), int(env.action_space.shape[0])
    transport = in_process_transport()
    learning = LearnerSession(cfg, shapes, action_dim, transport)
    acting = ActorSession(cfg, shapes, action_dim, humans[0])
    resets = LearnedResets(cfg, reset, seed) if reset.learned else None  # scene_reset.mode=learned: the backward policy
    check_run_disk(cfg, settings, run_dir, learning)
    acting.counters = counters = learning.open(settings.resume)  # every setting is checked by now
    acting.start_from(learning.learner, envs)
    learner = learning.learner
    store = episode_store(cfg, run_dir, task, env)
    recorders = [None if store is None else EpisodeRecorder(store) for _ in envs]  # their episodes interleave

    def before_checkpoint() -> None:
        """The checkpoint holds every step counted (and the learned-reset rule's counts)."""
        learner.ingest_everything_sent(transport)
        if resets is not None:
            resets.before_checkpoint(counters)

    run = Run(
        learning,
        counters,
        task.get("name"),
        evaluate=policy_evaluation(
            acting.agent, eval_env, prepare=lambda: acting.arm_fast_loop(eval_env), safety=acting.another_safety_actor
        ),
        before_checkpoint=before_checkpoint,
        after_checkpoint=None if resets is None else lambda reason: resets.save(),
        figures=None if resets is None else resets.figures,
    )
    if resets is not None:
        resets.open(settings.resume, counters, run.tb)
    learner.start()
    rng = np.random.default_rng(seed + counters.episodes)

    def next_seed() -> int:
        """The reset seed of the next episode (of any env)."""
        return int(rng.integers(2**31))

    def between_steps() -> None:
        """Show the count, and keep within ``train.max_lag`` steps of the learner (sim, ``train.sync``)."""
        run.show_steps()
        if settings.sync:
            learner.keep_pace(transport)

    def ended(stats: dict[str, Any]) -> Iterator[list[EpisodeEnd]]:
        """An episode's end to the run (its log, evaluation and checkpoint when due), after the actor took new weights;
        an evaluation that reached ``train.stop_at_success`` ends the run as if its budget were spent."""
        if acting.between_episodes(learner, transport):
            for each in envs[1:]:  # env 0's fast loop is armed at every episode start
                acting.arm_fast_loop(each)
        yield [EpisodeEnd(stats)]
        if run.target_reached:
            acting.ended = True

    def turn(stop: StopRequest) -> Iterator[list[EpisodeEnd]]:
        """What comes next: the backward task's demonstration, one episode on env 0 (a demonstration, or the only
        env), or the envs stepped together until the budget is spent. Stopped mid-episode, it yields nothing more
        (the episode's recording is dropped)."""
        if resets is not None and resets.demo_due:  # the backward task's demonstrations come first
            resets.play_demo(next_seed(), stop)
            return
        if acting.demo_due or len(envs) == 1:  # demonstrations: one at a time, on env 0
            demo = acting.demo_due
            scene = None if resets is None else resets.forward_start(recorders[0], demo)  # None: env reset
            stats = acting.play(env, transport, recorders[0], next_seed(), between_steps, stop, scene)
            if stats is None:
                return
            if resets is not None and not demo:
                stats = resets.forward_ended(stats, counters)
            yield from ended(stats)
            if resets is not None and not demo and not acting.budget_spent:
                resets.put_back(env, next_seed, stop)  # the next start: the scene put back
            return
        for stats in acting.play_envs(envs, humans, transport, recorders, next_seed, between_steps, stop):
            yield from ended(stats)

    with run.interruptible():
        try:
            run.drive(turn, finished=lambda: acting.budget_spent)
        except (KeyboardInterrupt, OSError):  # a second Ctrl-C or SIGTERM; a full disk (one line: stops_on_full_disk)
            for recorder in recorders:  # the open episodes' files go now
                if recorder is not None:
                    recorder.discard()
            raise
        finally:
            run.close_progress()
            learner.close()
            learner.ingest_everything_sent(transport)
            if resets is not None:
                resets.close()
            for each in [*envs, eval_env]:
                each.close()
    return run.finish(**({} if resets is None else {"learned_resets": resets.summary(counters)}))


def check_run_disk(cfg: Config, settings: TrainSettings, run_dir: Path, learning: LearnerSession) -> None:
    """Before the run writes anything: refuse a run folder whose disk has less than ``data.min_free_mb`` free, warn
    when it has less than the run may write (its episodes, :func:`~robot_rl.data.episode_store.bytes_per_step` times
    the step budget and the demonstrations' steps, and two checkpoints: a new one is written beside the last)."""
    steps = steps_to_record(cfg)
    online = learning.learner.online
    shapes = {key: shape for key, (shape, _) in online.observation_space.items()}
    episodes = steps * bytes_per_step(shapes, online.action_dim) if settings.record_episodes else 0
    need = episodes + 2 * checkpoint_bytes(learning)
    check_disk_space("train.run_dir", run_dir, need, select(cfg, "data.min_free_mb", 0))


def evaluate_checkpoint(cfg: Config) -> dict[str, Any]:
    """``robot-rl eval``: load ``eval.checkpoint`` and run deterministic episodes."""
    episodes = positive("eval.episodes", cfg["eval"]["episodes"], integer=True)
    points = positive("eval.grid_points", cfg["eval"]["grid_points"], integer=True)
    eval_seed = integer("eval.seed", cfg["eval"]["seed"])
    if cfg["eval"]["video"] is not None:
        output_path("eval.video", cfg["eval"]["video"], folder=False)
    if cfg["eval"]["report_dir"] is not None:
        output_path("eval.report_dir", cfg["eval"]["report_dir"], folder=True)
    task = plain(cfg["task"])
    env = make_env(task)
    seed = integer("seed", cfg["seed"])
    agent = make_agent(cfg, observation_shapes(env), int(env.action_space.shape[0]), seed, acting=True)
    folder = load_checkpoint_agent(agent, cfg)
    randomization = cfg.get("randomization")
    if randomization:
        env.close()
        rows = robustness_sweep(agent, task, plain(randomization), points, episodes, eval_seed)
        name = randomization.get("name", "randomization")
        files = write_sweep(
            Path(cfg["eval"]["report_dir"] or folder.parent / f"robustness_{name}"),
            rows,
            f"{task.get('name')}: success under {name} perturbations",
        )
        return {
            "task": task.get("name"),
            "checkpoint": str(folder),
            "randomization": name,
            "files": files,
            "table": [{k: row[k] for k in ("entry", "value", "success_rate", "mean_length")} for row in rows],
        }
    result = evaluate(agent, env, episodes, seed=eval_seed, video=cfg["eval"]["video"])
    env.close()
    return {"task": task.get("name"), "checkpoint": str(folder), **result}
