"""One training run's outer loop, the same for ``robot-rl train``, the Ray fleet's driver and the learner node.

A :class:`Run` (as Stable-Baselines3's ``learn()`` with its callbacks) owns what every way of running repeats: the
wall clock (a resumed run's goes on from its checkpoint's), the progress bar, TensorBoard and the episode log, the
evaluation cadence (every ``train.eval_every`` online steps, and a final one when the budget is spent), the checkpoint
cadence (every ``train.checkpoint_every`` online steps) and its write, Ctrl-C, and the end: the final checkpoint,
``summary.json`` and the learning curve. Its caller supplies the episodes (played in this process, handed in by fleet
actors, or ingested from the actors' topics) and counts their steps in the run's
:class:`~robot_rl.runtime.session.Counters`; it tells the run when an episode ended (:meth:`Run.episode_ended`) and
gives it a way to evaluate the newest policy (:func:`policy_evaluation`).

The loop itself is the run's (:meth:`Run.drive`); a caller gives it a *turn*, a generator that plays or takes in
what comes next and yields the episodes that ended, and goes on once the run has logged them, evaluated and
checkpointed:

    def turn(stop):
        stats = <play or receive an episode>
        yield [EpisodeEnd(stats)]

    run = Run(learning, counters, "reach", evaluate=policy_evaluation(agent, eval_env))
    with run.interruptible():
        run.drive(turn, finished=lambda: counters.env_steps >= budget)
    summary = run.finish()
"""

from __future__ import annotations

import errno
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from robot_rl.core.config import MB, disk_full, free_bytes
from robot_rl.core.folders import write_text_atomically
from robot_rl.core.interrupts import StopRequest, deferred_interrupt, interrupt_requests
from robot_rl.data import ReplayBuffer
from robot_rl.runtime.evaluate import EVAL_SEED, evaluate
from robot_rl.runtime.safety_learning import SAFETY_COUNTS
from robot_rl.runtime.session import Counters, LearnerSession

Evaluation = Callable[[int], dict[str, Any]]  # plays n deterministic episodes of the newest policy: their figures
LEARNER_KEYS_PER_EVALUATION = ("alpha", "entropy")  # learner metrics kept in each evaluation's entry
TAKEOVER_WINDOW = 2000  # online steps at the end of a run whose takeover rate summary.json reports


@dataclass(frozen=True)
class EpisodeEnd:
    """An episode that ended, for the run to log: its figures (``demo``, ``success``, ``return``, ``length``,
    ``interventions``, ...; its steps counted already) and the fleet actor that played it (None: this process)."""

    stats: dict[str, Any]
    actor: str | None = None


Turn = Callable[[StopRequest], Iterable[list[EpisodeEnd]]]  # what comes next: the episodes that ended, a list at a time


class RunRecord:
    """What every run keeps as it goes, whatever it counts (a training run its online steps, pretraining its critic
    steps): the wall clock (``wall_seconds`` spent in its earlier sessions go on), Ctrl-C (:meth:`interruptible`),
    the progress bar of a budget of ``total`` ``unit``s from ``initial`` (or, without a bar, nothing here),
    TensorBoard (``<run_dir>/tb``), the evaluation cadence (:class:`EvalSchedule`, every ``eval_every`` from
    ``last_evaluation``) and each evaluation into ``history``, TensorBoard and the bar."""

    def __init__(
        self,
        run_dir: Path,
        title: str,
        *,
        total: int,
        unit: str,
        eval_every: int,
        history: list[dict[str, Any]],
        initial: int = 0,
        last_evaluation: int = 0,
        wall_seconds: float = 0.0,
        progress_bar: bool = True,
    ):
        self.title, self.history = title, history
        self.started = time.monotonic() - wall_seconds  # a resumed run's clock goes on
        self.evaluations = EvalSchedule(eval_every, last_evaluation)
        self.stop = StopRequest()  # a stop request (Ctrl-C under interruptible(), or the caller's)
        self.interrupted = False  # a second Ctrl-C or SIGTERM ended the loop at once
        self.progress = None
        from torch.utils.tensorboard import SummaryWriter

        self.tb = SummaryWriter(str(Path(run_dir) / "tb"))
        if progress_bar:
            self.progress = tqdm(total=total, initial=initial, desc=title, unit=unit, mininterval=1.0)

    def elapsed(self) -> float:
        """Wall seconds of the run so far (its earlier sessions' included)."""
        return time.monotonic() - self.started

    @contextmanager
    def interruptible(self) -> Iterator[StopRequest]:
        """Ctrl-C while the block runs: the first sets :attr:`stop` (the caller checks it after every step and between
        episodes, so it never lands inside an episode commit, an evaluation or a checkpoint write); a second, or
        SIGTERM, raises KeyboardInterrupt at once, ends the block and marks the run :attr:`interrupted`."""
        with interrupt_requests() as stop:
            self.stop = stop
            try:
                yield stop
            except KeyboardInterrupt:
                self.interrupted = True

    @property
    def stopped(self) -> bool:
        """Whether the run ended on Ctrl-C or SIGTERM rather than its budget."""
        return self.interrupted or self.stop.is_set()

    def close_progress(self) -> None:
        """Close the progress bar (again: a no-op), before anything else is printed: an error line (a full disk) must
        be the last line on stderr, not the bar's final redraw."""
        if self.progress is not None:
            self.progress.close()

    def log_evaluation(self, count_key: str, count: int, result: dict[str, Any], **extra: Any) -> None:
        """An evaluation's figures (:func:`~robot_rl.runtime.evaluate.evaluation_summary`'s) made at ``count`` (the
        run's ``count_key``: ``env_steps``, ``updates``) into the history (with ``extra`` entries), TensorBoard and
        the progress bar."""
        self.history.append({count_key: count, "wall_seconds": self.elapsed(), **extra, **result})
        self.tb.add_scalar("eval/success", result["success_rate"], count)
        self.tb.add_scalar("eval/episode_length", result["mean_length"], count)
        self.tb.add_scalar("eval/return", result["mean_return"], count)
        self.tb.add_scalar("eval/continuity_cost", result["continuity_cost"], count)
        if self.progress is not None:
            self.progress.set_postfix(self.progress_figures())

    def progress_figures(self) -> dict[str, str]:
        """What the progress bar shows beside the count: the last evaluation's success."""
        return {"eval_success": f"{self.history[-1]['success_rate']:.2f}"} if self.history else {}


class Run(RunRecord):
    """The outer loop of the training run of ``learning`` with its ``counters`` (of task ``task_name``).

    ``evaluate`` plays the evaluations (None: the run does not evaluate, as the learner node, which has no env);
    ``before_checkpoint()`` runs before each checkpoint is written (take in every transition counted, flush the
    recorders), ``after_checkpoint(reason)`` after (reason: ``due``, ``operator`` or ``final``); ``progress_bar``: a tqdm
    bar of the online steps; without one (the learner node, whose output is a launch's log) ``progress_log(line)`` gets
    the same bar as a line every ``progress_every`` s; TensorBoard (``<run_dir>/tb``), ``summary.json``
    and the learning curve are kept either way; ``title`` begins the progress bar (``train``, ``fleet``); ``figures()``
    adds figures of the caller's to the progress (learned resets: person resets per forward episode)."""

    def __init__(
        self,
        learning: LearnerSession,
        counters: Counters,
        task_name: str | None,
        *,
        evaluate: Evaluation | None = None,
        before_checkpoint: Callable[[], None] | None = None,
        after_checkpoint: Callable[[str], None] | None = None,
        progress_bar: bool = True,
        title: str = "train",
        progress_log: Callable[[str], None] | None = None,
        progress_every: float = 30.0,
        figures: Callable[[], dict[str, str]] | None = None,
    ):
        super().__init__(
            learning.run_dir,
            f"{title} {task_name}",
            total=learning.settings.env_steps,
            unit="step",
            eval_every=learning.settings.eval_every,
            history=counters.history,
            initial=counters.env_steps,
            last_evaluation=counters.history[-1]["env_steps"] if counters.history else 0,  # a resumed run's last
            wall_seconds=counters.wall_seconds,
            progress_bar=progress_bar,
        )
        self.learning, self.counters, self.task_name, self.way = learning, counters, task_name, title
        self.settings, self.learner = learning.settings, learning.learner
        self.evaluate = evaluate
        self.before_checkpoint, self.after_checkpoint = before_checkpoint, after_checkpoint
        self.target_reached = False  # an evaluation reached train.stop_at_success: the caller ends the run
        self.progress_log, self.progress_every = progress_log, progress_every
        self.figures = figures
        self.logged_at = -np.inf  # the run's elapsed s at the last progress line (progress_log)

    def show_steps(self) -> None:
        """Bring the progress bar to the online steps counted (without a bar: a progress line when one is due)."""
        if self.progress is not None:
            self.progress.update(self.counters.env_steps - self.progress.n)
        elif self.progress_log is not None and self.elapsed() - self.logged_at >= self.progress_every:
            self.logged_at = self.elapsed()
            self.progress_log(self.progress_line())

    def progress_figures(self) -> dict[str, str]:
        """What the progress shows beside the online steps: episodes, learner updates, updates per online step, the
        last evaluation's success, the recent take-over rate and the caller's ``figures()``."""
        counters, updates = self.counters, self.learner.update_calls
        figures = {
            "episodes": str(counters.episodes),
            "updates": str(updates),
            "updates_per_step": f"{updates / max(counters.env_steps, 1):.2f}",
            **super().progress_figures(),
        }
        figures["interventions"] = f"{recent_intervention_rate(counters):.2f}"
        return figures if self.figures is None else {**figures, **self.figures()}

    def progress_line(self) -> str:
        """The progress bar as one line (tqdm's own format, ASCII)."""
        postfix = ", ".join(f"{key}={value}" for key, value in self.progress_figures().items())
        return tqdm.format_meter(
            self.counters.env_steps,
            self.settings.env_steps,
            self.elapsed(),
            ncols=0,
            prefix=self.title,
            ascii=True,
            unit="step",
            postfix=postfix,
        )

    def drive(self, turn: Turn, finished: Callable[[], bool], can_go_on: Callable[[], bool] = lambda: True) -> None:
        """The run's loop of episodes, the one every way of running in a process goes through. ``turn(stop)`` plays
        or takes in what comes next and yields the episodes that ended, a list at a time (one episode; a fleet
        actor's hand-in); the run logs them, evaluates and checkpoints when due, and the turn goes on. Turns come
        until ``finished()`` (the budget is spent; an evaluation that reached ``train.stop_at_success`` ends it too,
        by the caller's count), ``can_go_on()`` is false (the fleet has no actor left) or a stop (Ctrl-C under
        :meth:`interruptible`; a turn stopped mid-episode yields nothing more)."""
        while not finished() and can_go_on() and not self.stop.is_set():
            for ended in turn(self.stop):
                for episode in ended:
                    self.episode_ended(episode.stats, actor=episode.actor)
                self.after_episode(finished=finished())

    def episode_ended(self, stats: dict[str, Any], actor: str | None = None) -> None:
        """Log an episode that ended (its steps counted already): an online one into the episode log and TensorBoard
        (with ``actor``, also under ``actors/<actor>/``); a demonstration is not logged."""
        if stats["demo"]:
            return
        counters = self.counters
        counters.episode_log.append({"env_steps": counters.env_steps, **stats})
        step, tb = counters.env_steps, self.tb
        tb.add_scalar("train/success", float(stats["success"]), step)
        tb.add_scalar("train/return", stats["return"], step)
        tb.add_scalar("train/episode_length", stats["length"], step)
        tb.add_scalar("train/intervention_rate", stats["interventions"] / stats["length"], step)
        tb.add_scalar("train/continuity_cost", stats["continuity_cost"], step)
        for key in SAFETY_COUNTS:
            tb.add_scalar(f"safety/{key}", stats[key], step)
        tb.add_scalar("speed/env_steps_per_s", step / max(self.elapsed(), 1e-6), step)
        tb.add_scalar("speed/updates_per_s", self.learner.updates_per_second, step)
        for key, value in self.learner.metrics.items():
            tb.add_scalar(f"learner/{key}", value, step)
        if actor is not None:
            tb.add_scalar(f"actors/{actor}/success", float(stats["success"]), step)
            tb.add_scalar(f"actors/{actor}/intervention_rate", stats["interventions"] / stats["length"], step)
        if self.progress is not None:
            self.progress.set_postfix(self.progress_figures(), refresh=False)

    def after_episode(self, finished: bool) -> None:
        """Between two episodes: an evaluation when one is due (``finished``: the budget is spent, the final one),
        then a checkpoint when one is due. An evaluation that reaches ``train.stop_at_success`` sets
        :attr:`target_reached`, and the caller ends the run as if its budget were spent (the episodes in progress end
        at their next step); the final evaluation follows at once, unless that one played as many episodes (it is
        the final one: the same seeds on the same weights)."""
        if self.evaluate is not None and self.evaluations.due(self.counters.env_steps, finished):
            self.record_evaluation(finished)
            if self.target_reached and not finished:
                if self.settings.eval_episodes < self.settings.final_eval_episodes:
                    self.after_episode(finished=True)
                    return
                self.evaluations.final_made = True
        self.checkpoint_if_due()

    def checkpoint_if_due(self) -> None:
        """A checkpoint when ``train.checkpoint_every`` online steps passed since the last one."""
        if self.learning.checkpoint_due(self.counters.env_steps):
            self.checkpoint("due")

    def checkpoint(self, reason: str) -> None:
        """Write a checkpoint now (``reason``: ``due``, ``operator`` or ``final``)."""
        self.counters.wall_seconds = self.elapsed()
        if self.before_checkpoint is not None:
            self.before_checkpoint()
        write_checkpoint(self.learning, self.counters)
        if self.after_checkpoint is not None:
            self.after_checkpoint(reason)

    def record_evaluation(self, finished: bool) -> None:
        """Evaluate now (``train.eval_episodes`` episodes, ``train.final_eval_episodes`` at the end): into the run's
        history, TensorBoard and the progress bar."""
        episodes = self.settings.final_eval_episodes if finished else self.settings.eval_episodes
        if finished and self.progress is not None:  # the bar is full: say what the run does meanwhile
            self.progress.set_postfix_str(f"final evaluation: {episodes} episodes", refresh=True)
        result = self.evaluate(episodes)
        self.evaluation_made(result)
        if not finished and self.settings.target_reached(result["success_rate"]):
            self.target_reached = True
            tqdm.write(
                f"robot-rl {self.way}: evaluation success {result['success_rate']:.2f} at "
                f"{self.counters.env_steps} online steps reached train.stop_at_success="
                f"{self.settings.stop_at_success:g}: the final evaluation, then the end of the run",
                file=sys.stderr,
            )

    def evaluation_made(self, result: dict[str, Any]) -> None:
        """An evaluation's figures (:func:`~robot_rl.runtime.evaluate.evaluation_summary`'s: this run's, or an actor's
        on the cell that the learner node hears of) into the run's history, TensorBoard and the progress bar."""
        metrics = self.learner.metrics
        self.log_evaluation(
            "env_steps",
            self.counters.env_steps,
            result,
            intervention_rate=recent_intervention_rate(self.counters),
            # the learner's last temperature and exploration entropy (SAC's; absent for agents without them)
            **{key: float(metrics[key]) for key in LEARNER_KEYS_PER_EVALUATION if key in metrics},
        )

    def finish(self, **extra: Any) -> dict[str, Any]:
        """The end of the run: the final checkpoint (a Ctrl-C meanwhile waits for it), ``summary.json`` (with
        ``extra`` entries) and the learning curve; returns the summary."""
        self.close_progress()
        with deferred_interrupt():
            self.checkpoint("final")
        self.tb.close()
        run_dir = self.learning.run_dir
        reached = {"stop_at_success_reached": self.target_reached}  # the run ended at train.stop_at_success
        summary = write_summary(
            run_dir, self.counters, self.task_name, self.stopped, self.learning.warm_start, **reached, **extra
        )
        plot_learning_curve(run_dir / "learning_curve.png", self.counters, self.task_name)
        return summary


def policy_evaluation(
    agent, env, prepare: Callable[[], None] | None = None, safety: Callable[[], Any] | None = None
) -> Evaluation:
    """A run's evaluation: deterministic episodes of ``agent`` on ``env`` on the seeds from ``EVAL_SEED`` on (the same
    episodes at every evaluation), ``prepare()`` first (load the newest weights, arm the fast loop), through the
    safety actor ``safety()`` gives (the learned filter on the newest risk model, as in training). The agent
    evaluates with acting state of its own (:meth:`~robot_rl.policies.base.OffPolicyAgent.evaluating`): acting
    episodes in progress (N envs stepped together) go on with their gripper commands, action chunks and noise."""

    def play(episodes: int) -> dict[str, Any]:
        if prepare is not None:
            prepare()
        with agent.evaluating():
            return evaluate(agent, env, episodes, seed=EVAL_SEED, safety=None if safety is None else safety())

    return play


class EvalSchedule:
    """When to evaluate, the one rule of every way of running: every ``every`` units of progress since the last
    evaluation (at ``last``), and once more when the budget is spent (the last episodes of several envs or actors all
    end after it: the final evaluation is made once); ``every`` 0: only the final one. A run counts online steps
    (``train.eval_every``), the actor node on a cell its training episodes (``ros.eval_every_episodes``), pretraining
    its critic steps (``pretrain.eval_every``)."""

    def __init__(self, every: int, last: int = 0):
        self.every, self.last = every, last
        self.final_made = False

    def due(self, count: int, finished: bool = False) -> bool:
        """Whether to evaluate now, at ``count`` (``finished``: the budget is spent)."""
        regular = self.every > 0 and count - self.last >= self.every
        if self.final_made or not (finished or regular):
            return False
        self.last, self.final_made = count, finished
        return True


def checkpoint_bytes(learning: LearnerSession) -> int:
    """Bytes a checkpoint takes on disk, about: the agent's tensors (networks and optimizer state) and the columns of
    both replay buffers, saved whole."""
    learner = learning.learner
    buffers = sum(
        ReplayBuffer.nbytes(b.capacity, b.observation_space, b.action_dim) for b in (learner.online, learner.demo)
    )
    return buffers + tensor_bytes(learner.agent.state_dict())


def tensor_bytes(state: Any) -> int:
    """Bytes of the tensors in a (nested) state dict."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(tensor_bytes(value) for value in state.values())
    if isinstance(state, (list, tuple)):
        return sum(tensor_bytes(value) for value in state)
    return 0


def write_checkpoint(learning: LearnerSession, counters: Counters) -> None:
    """``learning.save``; a write that failed because the checkpoint does not fit on the disk is raised as ENOSPC
    (torch.save says only "unexpected pos", numpy's save "N requested and M written"). The last checkpoint stays as
    it was."""
    try:
        learning.save(counters)
    except (RuntimeError, OSError) as error:
        need, free = checkpoint_bytes(learning), free_bytes(learning.checkpoint_dir)
        if disk_full(error) or free >= need + MB:
            raise
        raise OSError(
            errno.ENOSPC, f"a checkpoint of {need / MB:.1f} MB does not fit in {free / MB:.1f} MB free"
        ) from error


def recent_intervention_rate(counters: Counters, window: int = 20) -> float:
    """The share of steps the human acted in the last ``window`` online episodes."""
    recent = counters.episode_log[-window:]
    steps = sum(e["length"] for e in recent)
    return sum(e["interventions"] for e in recent) / steps if steps else 0.0


def write_summary(
    run_dir: Path,
    counters: Counters,
    task_name: str | None,
    interrupted: bool,
    warm_start: dict[str, Any] | None = None,
    **extra: Any,
) -> dict:
    """``<run_dir>/summary.json``: the run's counts, its last and best evaluation, its per-episode safety and
    smoothness figures and its evaluation history (with ``extra`` entries); returns it."""
    final = counters.history[-1] if counters.history else {}
    summary = {
        "task": task_name,
        "run_dir": str(run_dir),
        "env_steps": counters.env_steps,
        "episodes": counters.episodes,
        "demo_episodes": counters.demo_episodes_done,
        "intervention_steps": counters.intervention_steps,
        f"takeover_rate_last_{TAKEOVER_WINDOW}": takeover_rate_at_the_end(counters),
        "wall_seconds": counters.wall_seconds,
        "final_eval_success": final.get("success_rate"),
        "final_eval_mean_length": final.get("mean_length"),
        "final_eval_continuity_cost": final.get("continuity_cost"),
        "train_continuity_cost": per_episode(counters, "continuity_cost"),
        "violations_per_100_episodes": per_episode(counters, "violations", 100),
        "filter_interventions_per_100_episodes": per_episode(counters, "filter_interventions", 100),
        "fast_filtered_steps_per_100_episodes": per_episode(counters, "fast_filtered_steps", 100),
        "best_eval_success": max((h["success_rate"] for h in counters.history), default=None),
        "eval_history": counters.history,
        "warm_start": warm_start,  # what init.checkpoint loaded (None: random initial weights, or a resumed run)
        "interrupted": interrupted,
        **extra,
    }
    write_text_atomically(run_dir / "summary.json", json.dumps(summary, indent=2))  # a crash keeps the last one
    return summary


def takeover_rate_at_the_end(counters: Counters, window: int = TAKEOVER_WINDOW) -> float | None:
    """The share of online steps the human acted in the episodes that ended in the run's last ``window`` online steps
    (None before the first online episode)."""
    recent = [e for e in counters.episode_log if e["env_steps"] > counters.env_steps - window]
    steps = sum(e["length"] for e in recent)
    return sum(e["interventions"] for e in recent) / steps if steps else None


def per_episode(counters: Counters, key: str, scale: float = 1.0) -> float | None:
    """Mean of ``key`` over the online episodes, times ``scale`` (None before the first)."""
    values = [e[key] for e in counters.episode_log if key in e]
    return float(scale * np.mean(values)) if values else None


def plot_learning_curve(path: Path, counters: Counters, title: str | None) -> None:
    """The run's evaluations (success) and its training episodes' intervention rate over online steps, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5), dpi=120)
    if counters.history:
        steps = [h["env_steps"] for h in counters.history]
        axis.plot(steps, [h["success_rate"] for h in counters.history], "o-", label="eval success (deterministic)")
    if counters.episode_log:
        steps = [e["env_steps"] for e in counters.episode_log]
        rates = [e["interventions"] / e["length"] for e in counters.episode_log]
        window = max(1, len(rates) // 20)
        smoothed = np.convolve(rates, np.ones(window) / window, mode="same")
        axis.plot(steps, smoothed, label="intervention rate (train)")
    axis.set_xlabel("online env steps")
    axis.set_ylim(-0.02, 1.02)
    axis.set_title(f"robot_rl: {title}")
    axis.legend(loc="center right")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
