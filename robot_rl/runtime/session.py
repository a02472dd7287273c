"""The driver's two halves, the same in every way of running: ``robot-rl train`` (both in one process), the
actor and learner nodes of the ROS 2 graph (one each), and the fleet runners to come.

* :class:`ActorSession`: the acting agent and its safety filter, the human, the weights version it acts on,
  which episode is a demonstration, the step and episode counts and the budget.
* :class:`LearnerSession`: the learning agent in its :class:`~robot_rl.runtime.learner.Learner`, the run folder, resume
  and the checkpoint rule (every ``train.checkpoint_every`` online transitions).
* Recording is :class:`robot_rl.data.EpisodeRecorder`'s, fed with the transitions in-process and from the topic
  in the graph.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from robot_rl.core.checkpoint import check_task_definition, load_agent, task_definition, write_task_definition
from robot_rl.core.composed_config import save_config
from robot_rl.core.config import Config, ConfigError, plain, settings_of
from robot_rl.core.folders import latest, replacing
from robot_rl.core.transport import ActorLink, LearnerLink
from robot_rl.data import EpisodeRecorder
from robot_rl.policies.fast_critic import FastCriticLearner, fast_critic_fit_settings
from robot_rl.runtime.actor import (
    env_random_state,
    load_env_random_state,
    run_envs,
    run_episode,
    set_training_step,
)
from robot_rl.runtime.auxiliary_learners import AuxiliaryLearner, FastCriticLearning, SafetyCriticLearning
from robot_rl.runtime.envs import load_entry_point
from robot_rl.runtime.fast_critic_fit import store_ticks
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.offline_data import add_offline, store_paths
from robot_rl.runtime.replay_router import SafetyRelabel
from robot_rl.runtime.run_folder import record_resume
from robot_rl.runtime.safety_learning import (
    RISK_MODEL_KEY,
    SafetyActor,
    SafetySettings,
    make_safety_learner,
    safety_settings,
)
from robot_rl.runtime.train_settings import TrainSettings, settings_from
from robot_rl.runtime.warm_start import init_settings, warm_settings, warm_start
from robot_rl.safety.fast_critic import FAST_CRITIC_KEY, FastCriticSettings, fast_critic_config


@dataclass
class Counters:
    """A run's counts, kept in its checkpoint: online env steps (demonstrations not counted), episodes
    (demonstrations included), demonstrations, steps the human acted, wall-clock seconds, and the history of
    evaluations and of online episodes."""

    env_steps: int = 0
    episodes: int = 0
    demo_episodes_done: int = 0
    intervention_steps: int = 0
    wall_seconds: float = 0.0
    history: list[dict[str, Any]] = field(default_factory=list)  # per evaluation
    episode_log: list[dict[str, Any]] = field(default_factory=list)  # per online episode
    # the acting agent's random state after the last episode (OffPolicyAgent.acting_random_state; in one process), with
    # under "envs" each acting env's domain randomization's (env_random_state; None for an env without one)
    actor_random_state: dict[str, Any] = field(default_factory=dict)
    # each fleet actor's (its ActorSession.random_state and its reset seeds', under "seeds"), as of its last hand-in
    fleet_random_states: dict[str, dict[str, Any]] = field(default_factory=dict)
    # the learned-reset rule's counts (reset.mode=learned: reset_rule.ResetCounts; empty otherwise)
    reset_counts: dict[str, int] = field(default_factory=dict)

    def count_step(self, intervened: bool) -> None:
        """One online env step played in this process (``intervened``: the human acted)."""
        self.env_steps += 1
        self.intervention_steps += intervened

    def count_episode(self, demo: bool, online_steps: int = 0) -> None:
        """One episode ended: a demonstration, or an online one with ``online_steps`` steps not counted yet (played in
        another process: a fleet actor's hand-in; in this process :meth:`count_step` counted them)."""
        self.episodes += 1
        if demo:
            self.demo_episodes_done += 1
        else:
            self.env_steps += online_steps


def make_agent(
    cfg: Config, observation_shapes: dict[str, tuple[int, ...]], action_dim: int, seed: int, acting: bool = False
):
    """The agent named by ``cfg.agent`` (entry point + its config dataclass); ``acting``: only what acts (an actor's,
    an evaluation's: :meth:`~robot_rl.policies.base.OffPolicyAgent.drop_learning`)."""
    agent_cfg = plain(cfg["agent"])
    entry_point, config_entry_point = agent_cfg.pop("entry_point"), agent_cfg.pop("config")
    agent_cfg.pop("name", None)
    config = settings_of("agent", load_entry_point(config_entry_point), agent_cfg)
    agent = load_entry_point(entry_point)(observation_shapes, action_dim, config, seed=seed)
    return agent.drop_learning() if acting else agent


def require_one_env(settings: TrainSettings, where: str) -> None:
    """Refuse ``train.num_envs`` > 1 ``where`` an actor steps one env (the ROS graph's actor, a Ray fleet actor)."""
    if settings.num_envs != 1:
        raise ConfigError("train.num_envs", settings.num_envs, f"1 {where}")


class ActorSession:
    """What acts: the agent on the newest weights, its safety filter, the human, and the counts.

    The first ``train.demo_episodes`` episodes are demonstrations (the human acts throughout, their steps are
    not counted against ``train.env_steps``); then every step is, and the episode in which the budget is spent
    ends there. :attr:`ended` (the operator stopped the run: the console's stop) spends the budget at once: the
    episode in progress ends at its next step, also a demonstration, recorded as it is.
    """

    def __init__(
        self,
        cfg: Config,
        shapes: dict[str, tuple[int, ...]],
        action_dim: int,
        human,
        counters: Counters | None = None,
    ):
        self.settings = settings_from(cfg["train"])
        self.agent = make_agent(cfg, shapes, action_dim, int(cfg["seed"]), acting=True)
        self.safety_settings = safety_settings(cfg.get("safety"))
        self.safety = SafetyActor(self.safety_settings)
        self.safeties = [self.safety]  # one per env stepped (play_envs), each filter with its own hysteresis
        self.human = human
        self.counters = counters if counters is not None else Counters()
        self.weights_key: int | None = None  # of the publication acted on (None: the initial weights)
        self.weights_version: int | None = None  # the learner's update count when it published them
        self.weights_session: str | None = None  # the learner run that published them (graph; None in one process)
        self.fast_model = None  # (FastCriticModel, version) the learner fitted, for the envs' fast loops
        self.ended = False  # set by the driver: the run ends now, as if its step budget were spent

    @property
    def demo_due(self) -> bool:
        return self.counters.demo_episodes_done < self.settings.demo_episodes

    @property
    def budget_spent(self) -> bool:
        return self.ended or self.counters.env_steps >= self.settings.env_steps

    def start_from(self, learner: Learner, envs: Sequence[Any] = ()) -> None:
        """In one process: the learner publishes its weights as they are (a resumed run's, a warm start's or the
        initial ones) and the actor acts on them, as the ROS learner and the fleet publish at start: with the risk
        model as soon as it is ready (a critic pretrained on ``safety.pretrain_store``, or a resumed run's past
        ``safety.warmup``), not only at the first publication after an episode. A resumed run's actor, and its
        ``envs``' domain randomization, draw on from the random state of its checkpoint's counts."""
        learner.publish_weights(learner.update_calls)
        self.take_weights(learner.transport)
        self.load_random_state(self.counters.actor_random_state, envs)  # a resumed run's draws go on

    def random_state(self, envs: Sequence[Any]) -> dict[str, Any]:
        """What acting draws from: the agent's (exploration noise, gripper exploration) and each of ``envs``' domain
        randomization (JSON-able, :attr:`Counters.actor_random_state`)."""
        return {**self.agent.acting_random_state(), "envs": [env_random_state(env) for env in envs]}

    def load_random_state(self, state: dict[str, Any], envs: Sequence[Any]) -> None:
        """Draw on from :meth:`random_state`'s ``state`` (an empty one: from the seed)."""
        self.agent.load_acting_random_state(state)
        for env, saved in zip(envs, state.get("envs", [])):
            load_env_random_state(env, saved)

    def take_weights(self, transport: ActorLink) -> bool:
        """Act on the newest weights the learner published if they are new; True when they were."""
        published = transport.latest_weights()
        if published is None or published[0] == self.weights_key:
            return False
        self.weights_key, weights = published
        self.weights_version, self.weights_session = transport.weights_version(), transport.weights_session()
        self.agent.load_policy_state(weights)
        for safety in self.safeties:
            safety.load(weights)
        self.fast_model = weights.get(FAST_CRITIC_KEY, self.fast_model)
        return True

    def between_episodes(self, learner: Learner, transport: ActorLink) -> bool:
        """After an episode in one process: wait until ``learner`` caught up (``train.deterministic``), raise its
        failure, and act on its newest weights; True when they were new."""
        if self.settings.deterministic:
            learner.wait_until_caught_up(transport)
        if learner.error is not None:
            raise RuntimeError("the learner failed") from learner.error
        return self.take_weights(transport)

    def arm_fast_loop(self, env) -> None:
        """Hand the newest fast critic the learner fitted to ``env``'s fast loop (when it runs a fast critic)."""
        loop = getattr(env.unwrapped, "fast_loop", None)
        risk_filter = None if loop is None else loop.risk_filter
        if self.fast_model is not None and risk_filter is not None and risk_filter.current != self.fast_model:
            risk_filter.swap(*self.fast_model)

    def play(
        self,
        env,
        transport: ActorLink,
        recorder: EpisodeRecorder | None,
        seed: int | None,
        between_steps: Callable[[], None] | None = None,
        stop=None,
        scene: Any = None,
    ) -> dict[str, Any] | None:
        """One episode through :func:`~robot_rl.runtime.actor.run_episode` (from ``scene``, a sim env's scene state,
        when one is given), counted; ``between_steps()`` runs after each step is counted (keep pace with the learner,
        serve the transport). Its stats with ``demo``, ``weights`` (the learner's update count of the weights it acted
        on) and ``learner_session`` (the learner run that sent them, read with the count), or None when ``stop`` was
        set (the episode is not counted)."""
        demo, counters, weights, session = self.demo_due, self.counters, self.weights_version, self.weights_session
        after_step = self.step_counter(demo, between_steps, [env])
        self.arm_fast_loop(env)
        stats = run_episode(
            env, self.agent, self.human, self.safety, transport, recorder, demo, seed, after_step, stop, scene
        )
        if stats is None:
            return None
        counters.count_episode(demo)
        counters.actor_random_state = self.random_state([env])
        return {**stats, "demo": demo, "weights": weights, "learner_session": session}

    def step_counter(self, demo: bool, between_steps: Callable[[], None] | None, envs: list) -> Callable[[bool], bool]:
        """The ``after_step(intervened)`` of an episode on ``envs``: counts an online step (a demonstration's are not
        counted) and tells the envs' curricula the count (:func:`~robot_rl.runtime.actor.set_training_step`: the run's, not
        each randomization wrapper's own, which restarted at a resume, counted demonstrations and moved N times slower
        with N envs), runs ``between_steps()``, and answers whether the budget is spent (never during a
        demonstration). The envs are told the count now too, before their first reset."""
        counters = self.counters
        for env in envs:
            set_training_step(env, counters.env_steps)

        def after_step(intervened: bool) -> bool:
            if not demo:
                counters.count_step(intervened)
            for env in envs:  # after a demonstration's step too: the wrapper counted it, the run does not
                set_training_step(env, counters.env_steps)
            if between_steps is not None:
                between_steps()
            return self.ended or (not demo and self.budget_spent)

        return after_step

    def safety_actors(self, count: int) -> list[SafetyActor]:
        """The safety actors of ``count`` envs, all on the newest risk model (the first is :attr:`safety`)."""
        while len(self.safeties) < count:
            self.safeties.append(self.another_safety_actor())
        return self.safeties[:count]

    def another_safety_actor(self) -> SafetyActor:
        """A safety actor of its own on the newest risk model: another env's, or an evaluation's (the learned filter
        between the policy and the arm as in every acting episode, the episodes in progress keeping their filters'
        state and counts)."""
        safety = SafetyActor(self.safety_settings)
        if self.safety.filter is not None:
            safety.load({RISK_MODEL_KEY: self.safety.filter.risk})
        return safety

    def play_envs(
        self,
        envs: list,
        humans: list,
        transport: ActorLink,
        recorders: list[EpisodeRecorder | None],
        seeds: Callable[[], int],
        between_steps: Callable[[], None] | None = None,
        stop=None,
    ) -> Iterator[dict[str, Any]]:
        """Online episodes on ``envs`` stepped together (:func:`~robot_rl.runtime.actor.run_envs`, one batched policy call
        per step), counted; yields each episode's stats as it ends, as :meth:`play` returns them, with ``env`` (its
        index) and ``weights`` (the update count of the newest weights taken). Ends when the budget is spent (the
        episodes in progress are yielded as they are) or ``stop`` is set (they are dropped)."""
        after_step = self.step_counter(False, between_steps, envs)
        for env in envs:
            self.arm_fast_loop(env)
        safeties = self.safety_actors(len(envs))
        for index, stats in run_envs(envs, self.agent, humans, safeties, transport, recorders, seeds, after_step, stop):
            self.counters.count_episode(False)
            self.counters.actor_random_state = self.random_state(envs)
            yield {
                **stats,
                "demo": False,
                "env": index,
                "weights": self.weights_version,
                "learner_session": self.weights_session,
            }


class LearnerSession:
    """What learns: the agent in its :class:`~robot_rl.runtime.learner.Learner`, the run folder and its checkpoint.

    A checkpoint (``<run_dir>/checkpoint``: agent, buffers, counters, task definition) is written every
    ``train.checkpoint_every`` online transitions and at the end; a session resumes from it (a checkpoint of
    another task definition is refused before anything is loaded).
    """

    def __init__(self, cfg: Config, shapes: dict[str, tuple[int, ...]], action_dim: int, transport: LearnerLink):
        self.cfg, self.settings = cfg, settings_from(cfg["train"])
        seed = int(cfg["seed"])
        safety = safety_settings(cfg.get("safety"))
        self.agent = make_agent(cfg, shapes, action_dim, seed)
        fast = fast_critic_config(cfg)
        self.learner = Learner(
            self.agent,
            self.settings,
            shapes,
            action_dim,
            transport,
            seed,
            SafetyRelabel.of(safety, fast),
            auxiliary_learners(cfg, safety, fast, shapes, action_dim, seed),
        )
        self.definition = run_definition(cfg, self.agent)
        self.init = init_settings(cfg)  # a warm start from a pretrained checkpoint (WSRL), checked now
        warm_settings(self.learner, self.init)
        self.warm_start: dict[str, Any] | None = None  # what the warm start loaded (None: none made)
        self.demos_loaded = 0  # episodes of train.demo_store put into the demo buffer at the run's start
        self.run_dir = Path(self.settings.run_dir)
        self.checkpoint_dir = self.run_dir / "checkpoint"
        self.last_checkpoint = 0  # online transitions in the newest checkpoint

    def has_checkpoint(self) -> bool:
        return (latest(self.checkpoint_dir) / "counters.json").is_file()

    def open(self, resume: bool) -> Counters:
        """Resume from the run folder's checkpoint (the budget and evaluation keys the resume changed are written into
        its ``config.yaml`` with the date: :func:`~robot_rl.runtime.run_folder.record_resume`), or start the run folder (its
        ``config.yaml``), warm-started from ``init.checkpoint`` when one is given; the counts."""
        counters = Counters()
        if resume:
            counters = restore(self.checkpoint_dir, self.learner, self.cfg)
            record_resume(self.run_dir, self.cfg)
        else:
            demo_store = self.settings.demo_store
            if demo_store is not None:  # before the run folder is made: a refused store leaves none
                paths = store_paths("train.demo_store", demo_store)
                self.demos_loaded = add_offline("train.demo_store", paths, self.learner.router)
            if self.init.checkpoint is not None:  # before the run folder is made: a refused checkpoint leaves none
                self.warm_start = warm_start(self.learner, self.init, self.definition)
                self.warm_start["demo_episodes"] = int(self.cfg["train"]["demo_episodes"])  # 0 unless asked (WSRL)
            self.run_dir.mkdir(parents=True, exist_ok=True)
            save_config(self.cfg, self.run_dir / "config.yaml")
        self.last_checkpoint = self.learner.online_received
        return counters

    def checkpoint_due(self, online_steps: int) -> bool:
        """True every ``train.checkpoint_every`` online steps (the actor's count in one process, the
        transitions ingested in the learner node)."""
        return online_steps - self.last_checkpoint >= self.settings.checkpoint_every

    def save(self, counters: Counters) -> None:
        self.last_checkpoint = self.learner.online_received
        save_checkpoint(self.checkpoint_dir, self.learner, counters, self.definition)


def auxiliary_learners(
    cfg: Config,
    safety: SafetySettings,
    fast: FastCriticSettings,
    shapes: dict[str, tuple[int, ...]],
    action_dim: int,
    seed: int,
) -> dict[str, AuxiliaryLearner]:
    """What the learner trains beside the agent: the safety critic (``safety.enabled``, pretrained on
    ``safety.pretrain_store`` if given) and the fast-loop critic learned online (``safety.fast_critic.learn``,
    ``fast_critic.*``, started from ``safety.fast_critic.pretrain_store`` if given)."""
    auxiliaries: dict[str, AuxiliaryLearner] = {}
    critic = make_safety_learner(safety, shapes, action_dim, seed)
    if critic is not None:
        auxiliaries["safety_critic"] = SafetyCriticLearning(critic)
    if fast.learn:
        auxiliaries["fast_critic"] = FastCriticLearning(online_fast_critic(cfg, fast, seed), fast)
    return auxiliaries


def online_fast_critic(cfg: Config, fast: FastCriticSettings, seed: int) -> FastCriticLearner:
    """The fast-loop critic's online learner (``fast_critic.*``), started from ``safety.fast_critic.pretrain_store``'s
    ticks when one is given."""
    learner = FastCriticLearner(fast_critic_fit_settings(cfg["fast_critic"]), seed=seed)
    if fast.pretrain_store is not None:
        torch.set_num_threads(settings_from(cfg["train"]).torch_threads)  # as the learner's own updates will run
        start_from_store(learner, fast.pretrain_store)
    return learner


def start_from_store(learner: FastCriticLearner, store: str) -> None:
    """Give the fast critic's online learner the ticks of ``store`` (labelled with its ``horizon``) and fit them
    ``updates`` steps, as ``robot-rl fast-critic`` would: its online fits then go on from that network with those
    rows among the ones they sample (until the ring wraps). A store without ticks raises ConfigError."""
    features, labels = store_ticks("safety.fast_critic.pretrain_store", store, learner.config)
    learner.add_rows(features, labels)
    learner.train(learner.config.updates)


def save_checkpoint(
    folder: Path, learner: Learner, counters: Counters, definition: dict[str, Any] | None = None
) -> None:
    """Agent, both buffers, counters and the run's task definition (:func:`~robot_rl.core.checkpoint.task_definition`,
    checked on resume), replaced atomically as one folder."""
    with replacing(folder) as tmp:
        if definition is not None:
            write_task_definition(tmp, definition)
        with learner.lock:
            state = {"counters": asdict(counters), **learner.save(tmp)}
        (tmp / "counters.json").write_text(json.dumps(state))


def run_definition(cfg: Config, agent) -> dict[str, Any]:
    """The task definition (:func:`~robot_rl.core.checkpoint.task_definition`) of a run's config and agent."""
    return task_definition(plain(cfg["task"]), plain(cfg["agent"]), agent)


def restore(folder: Path, learner: Learner, cfg: Config) -> Counters:
    """Load a checkpoint into ``learner``; a checkpoint of another task definition is refused before anything
    is loaded."""
    folder = latest(folder)
    check_task_definition(folder, run_definition(cfg, learner.agent))
    state = json.loads((folder / "counters.json").read_text())
    learner.load(folder, state)
    return Counters(**state["counters"])


def load_checkpoint_agent(agent, cfg: Config) -> Path:
    """Load ``<eval.checkpoint>/agent.pt`` (the newest complete checkpoint) into ``agent``; returns the folder. An
    agent configured otherwise than the checkpoint's (``agent.hidden``, ``agent=``, ...) is refused naming the key
    and the checkpoint's value, before anything is loaded."""
    folder = latest(cfg["eval"]["checkpoint"])
    if not (folder / "agent.pt").is_file():
        raise ConfigError("eval.checkpoint", str(folder), "a checkpoint folder with agent.pt")
    check_task_definition(folder, run_definition(cfg, agent), key="eval.checkpoint", prefixes=("agent.",))
    load_agent("eval.checkpoint", agent, folder / "agent.pt")
    return folder
