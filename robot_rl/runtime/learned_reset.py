"""``scene_reset.mode=learned`` in ``robot-rl train``: a backward policy puts the scene back between forward episodes.

After each forward episode the backward policy plays from the scene as that episode left it (no env reset), on the
backward task's env (``scene_reset.task``: pick_cube_reset, peg_insert_reset), with an agent, a learner, replay buffers
and a scripted human of its own: its ``scene_reset.demo_episodes`` demonstrations first (from drawn forward end states),
then online episodes with the human's takeovers, as the forward policy learns. Who resets before the next forward
episode is :class:`~robot_rl.runtime.reset_rule.ResetRule`'s call: the backward policy again, or the person (an env
reset) after ``scene_reset.give_up_after`` failures in a row or when the scene is outside the backward task's bounds.

Its episodes go to ``<run_dir>/backward/episodes.zarr`` (the backward task's store), its checkpoint to
``<run_dir>/backward/checkpoint`` beside the forward one; every episode of both stores carries ``policy``
(forward/backward) and ``reset_by`` (person/policy: who put the scene where the episode started).
"""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import Any

from robot_rl.core.composed_config import task_names
from robot_rl.core.config import Config, ConfigError, packaged_yaml, plain
from robot_rl.data import EpisodeRecorder
from robot_rl.runtime.envs import observation_shapes
from robot_rl.runtime.learner import in_process_transport
from robot_rl.runtime.reset_rule import BACKWARD, FORWARD, PERSON, POLICY, ResetCounts, ResetRule, ResetSettings
from robot_rl.runtime.run_setup import episode_store, scripted_human, sim_env
from robot_rl.runtime.session import ActorSession, Counters, LearnerSession

BACKWARD_SEED = 500  # the backward env's randomization draws from seed + this (the forward envs': seed + 1000 k)
NO_BUDGET = sys.maxsize  # the backward policy's train.env_steps: the forward budget ends the run


def backward_task(task: dict[str, Any], name: str | None) -> dict[str, Any]:
    """The backward task's config: the forward ``task`` (with its command line's values: a key set for the forward
    task applies to both, as ``configs/task/<name>.yaml`` says) with the keys the backward task's own YAML sets
    (name, id, expert, its own settings). ``name`` None: ``<task.name>_reset``."""
    name = name if name is not None else f"{task.get('name')}_reset"
    backward = [option for option in task_names() if option.endswith("_reset")]
    if name not in backward:
        raise ConfigError("scene_reset.task", name, "a backward task: " + ", ".join(backward))
    own = {key: value for key, value in packaged_yaml(f"task/{name}.yaml").items() if key != "defaults"}
    return {**plain(task), **own}


def backward_config(cfg: Config, settings: ResetSettings) -> dict[str, Any]:
    """The run's config for the backward policy: its task, its demonstrations (``scene_reset.demo_episodes``), its run
    folder ``<train.run_dir>/backward``, no step budget of its own and no warm start or demo store (the forward
    policy's)."""
    config = plain(cfg)
    config["task"] = backward_task(config["task"], settings.task)
    train = config["train"]
    config["train"] = {
        **train,
        "run_dir": f"{train['run_dir']}/backward",
        "demo_episodes": settings.demo_episodes,
        "demo_store": None,
        "env_steps": NO_BUDGET,
        "stop_at_success": None,
    }
    if "init" in config:
        config["init"] = {**config["init"], "checkpoint": None}
    return config


class LearnedResets:
    """The backward policy of a ``robot-rl train`` run and the rule that calls on it or on the person (this module's
    docstring). The forward loop asks :meth:`forward_start` for each forward episode's start, tells
    :meth:`forward_ended`, and lets :meth:`put_back` play after each online one."""

    def __init__(self, cfg: Config, settings: ResetSettings, seed: int):
        self.settings = settings
        self.cfg = backward_config(cfg, settings)
        self.task = self.cfg["task"]
        self.env = sim_env(self.cfg, self.task, seed + BACKWARD_SEED, randomize=True)
        if not callable(getattr(self.env.unwrapped, "within_bounds", None)):
            raise ConfigError(
                "scene_reset.task", self.task.get("name"), "a backward task (one that declares its bounds)"
            )
        shapes, action_dim = observation_shapes(self.env), int(self.env.action_space.shape[0])
        self.transport = in_process_transport()
        self.learning = LearnerSession(self.cfg, shapes, action_dim, self.transport)
        self.acting = ActorSession(self.cfg, shapes, action_dim, scripted_human(self.cfg, self.task, self.env))
        self.learner = self.learning.learner
        self.counters = Counters()
        self.rule = ResetRule(settings.give_up_after)
        self.recorder: EpisodeRecorder | None = None
        self.tb = None  # the run's TensorBoard writer (open)
        self.reset_by, self.scene = PERSON, None  # who set the next forward episode's scene, and the scene

    def open(self, resume: bool, counters: Counters, tb=None) -> None:
        """Start (or resume, with the forward run's ``counters``: the rule's counts are kept there) the backward
        policy's run folder, learner and store; ``tb``: the run's TensorBoard writer."""
        self.acting.counters = self.counters = self.learning.open(resume)
        self.acting.start_from(self.learner, [self.env])
        self.rule = ResetRule(self.settings.give_up_after, ResetCounts(**counters.reset_counts))
        store = episode_store(self.cfg, self.learning.run_dir, self.task, self.env)
        self.recorder = None if store is None else EpisodeRecorder(store)
        self.tb = tb
        self.learner.start()

    @property
    def demo_due(self) -> bool:
        return self.acting.demo_due

    def play_demo(self, seed: int, stop) -> bool:
        """One demonstration of the backward task from a drawn forward end state (the person set the scene); False
        when ``stop`` came during it."""
        return self.play(seed, stop, scene=None) is not None

    def forward_start(self, recorder: EpisodeRecorder | None, demo: bool) -> Any:
        """Before a forward episode (a demonstration: always from the person's reset): who set its scene into its
        record; the scene it starts from (None: an env reset, the person's)."""
        reset_by, scene = (PERSON, None) if demo else (self.reset_by, self.scene)
        if recorder is not None:
            recorder.annotate(policy=FORWARD, reset_by=reset_by)
        return scene

    def forward_ended(self, stats: dict[str, Any], counters: Counters) -> dict[str, Any]:
        """A forward online episode ended: counted by who reset before it, into the forward run's ``counters``; its
        stats with ``reset_by``."""
        self.rule.forward_episode(self.reset_by)
        counters.reset_counts = asdict(self.rule.counts)
        if self.tb is not None:
            rate = self.rule.counts.figures()["person_resets_per_forward_episode"]
            self.tb.add_scalar("resets/person_per_forward_episode", rate, counters.env_steps)
        return {**stats, "reset_by": self.reset_by}

    def put_back(self, env, seeds, stop) -> bool:
        """After a forward episode on ``env``: the backward policy plays (``seeds()``: each episode's seed) until the
        rule says the scene is back (the next forward episode starts from the scene it left) or calls the person (an
        env reset). False when ``stop`` came during an episode."""
        scene = env.unwrapped.scene_state()
        self.reset_by, self.scene = PERSON, None
        while self.rule.backward_due(self.within_bounds(scene)):
            stats = self.play(seeds(), stop, scene)
            if stats is None:
                return False
            self.rule.backward_ended(stats["success"])
            scene = self.env.unwrapped.scene_state()
            if stats["success"]:
                self.reset_by, self.scene = POLICY, scene
                break
        return True

    def within_bounds(self, scene) -> bool:
        """Whether ``scene`` lies within the bounds the backward task declares (set on its bare env: no
        randomization drawn, nothing recorded)."""
        task_env = self.env.unwrapped
        task_env.reset(options={"scene": scene})
        return bool(task_env.within_bounds())

    def play(self, seed: int, stop, scene) -> dict[str, Any] | None:
        """One backward episode (a demonstration while they are due) from ``scene`` (None: a drawn start), recorded
        with who set its scene, logged; None when ``stop`` came during it."""
        if self.recorder is not None:
            self.recorder.annotate(policy=BACKWARD, reset_by=PERSON if scene is None else POLICY)
        between_steps = (lambda: self.learner.keep_pace(self.transport)) if self.acting.settings.sync else None
        stats = self.acting.play(self.env, self.transport, self.recorder, seed, between_steps, stop, scene)
        if stats is None:
            return None
        self.acting.between_episodes(self.learner, self.transport)
        if not stats["demo"]:
            self.counters.episode_log.append({"env_steps": self.counters.env_steps, **stats})
            if self.tb is not None:
                step = self.rule.counts.forward_episodes
                self.tb.add_scalar("backward/success", float(stats["success"]), step)
                self.tb.add_scalar("backward/intervention_rate", stats["interventions"] / stats["length"], step)
        return stats

    def before_checkpoint(self, counters: Counters) -> None:
        """Before the forward checkpoint: the rule's counts into its ``counters``."""
        counters.reset_counts = asdict(self.rule.counts)

    def save(self) -> None:
        """The backward policy's checkpoint (after the forward one), holding every step its actor sent."""
        self.learner.ingest_everything_sent(self.transport)
        self.learning.save(self.counters)

    def figures(self) -> dict[str, str]:
        """The progress line's figures: person resets per forward episode, the backward success rate."""
        figures = self.rule.counts.figures()
        shown = {"person_resets": "person_resets_per_forward_episode", "backward_success": "backward_success_rate"}
        return {name: f"{figures[key]:.2f}" for name, key in shown.items() if figures[key] is not None}

    def summary(self, counters: Counters) -> dict[str, Any]:
        """``summary.json``'s ``learned_resets``: the rule's counts and rates, the backward policy's steps and
        demonstrations, and the takeover steps of each policy (``counters``: the forward run's)."""
        return {
            "mode": self.settings.mode,
            "task": self.task.get("name"),
            "give_up_after": self.settings.give_up_after,
            **self.rule.counts.figures(),
            "backward_env_steps": self.counters.env_steps,
            "backward_demo_episodes": self.counters.demo_episodes_done,
            "takeover_steps": {FORWARD: counters.intervention_steps, BACKWARD: self.counters.intervention_steps},
        }

    def close(self) -> None:
        """Stop the learner (every step sent ingested: the last checkpoint was written before) and close the env; an
        episode still open in the recorder is dropped."""
        self.learner.close()
        self.learner.ingest_everything_sent(self.transport)
        if self.recorder is not None:
            self.recorder.discard()
        self.env.close()
