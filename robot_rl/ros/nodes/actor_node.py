"""The actor node: acts on the robot cell through topics with the newest policy weights.

It runs :func:`robot_rl.runtime.actor.run_episode` on a :class:`~robot_rl.ros.links.topic_env.TopicEnv` with
the intervention mux (:class:`~robot_rl.ros.links.teleop_source.TopicTeleop`) and the learned safety
filter when the learner publishes one, sends every transition to the learner
(:class:`~robot_rl.ros.links.transport.RosActorLink`) and loads new weights between episodes. Its first online episode
waits (at most ``ros.startup_timeout`` s) for the learner's first weights; without a learner it acts on the weights
it has. A stream that goes silent pauses the actor
(logged with the topic) until it returns; so does the operator's pause (``/rl/pause`` true, the console's: a
``paused`` record with reason ``operator``) until ``/rl/pause`` false, and the safety node's e-stop hold (its
``/rl/safety_status`` says why: the operator's e-stop, a teleop gone silent) until an operator's e-stop reset, so no
episode is played on a held arm. The episode in progress ends there: an online
one is recorded as it is (it counts as an episode, its steps in the budget), a demonstration is dropped and played
again. The operator's stop (``/rl/stop``, std_msgs/Empty) ends the run as a spent step budget does: the episode in
progress ends at its next step, recorded as it is, its record says ``"stopped": true``, no evaluation follows, and the
actor exits 0 (a graph's required node: the launch then stops the others, the learner checkpoints). Every
``ros.eval_every_episodes`` training episodes it runs ``ros.eval_episodes`` deterministic episodes; one that reaches
``train.stop_at_success`` ends the run as a spent budget does. With ``ros.demos_only`` it stops after the
``train.demo_episodes`` demonstrations (demo collection); with ``ros.eval_only`` it runs ``ros.eval_episodes``
deterministic episodes of ``eval.checkpoint`` on the cell and stops. Each episode's stats go out as JSON on
``/rl/episode_stats`` (std_msgs/String) and to the log.

The actor state (``<ros.delivery.actor_store>.actor_state.json``, JSON written to a temporary sibling and renamed):
the counts (online env steps, episodes, demonstrations, the operator's steps) and the acting random state (exploration
noise, gripper exploration) after the last finished episode, and whether an episode is being played. It is written at
the start, after each episode and at each episode's first step. An actor that ``robot-rl launch`` started again after
it died (kill -9, a crash: ``RESTART_ENV`` not 0) goes on from it: its counts and draws where the last finished
episode left them, the learner's newest weights (latched), and the episode its death cut short counted as the
recorder keeps it (an online one: recorded as it is, ``episode_cut`` in the ``started`` record, which the learner
counts; a demonstration: dropped, played again). Each start publishes a ``started`` record: ``restart`` (0: the first
start), ``draws`` (a digest of the random state it acts from), ``episode_cut``.

    python -m robot_rl.ros.nodes.actor_node task=reach train.env_steps=2000 [--ros-args ...]
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import OmegaConf
from std_msgs.msg import Empty, String

from robot_rl.core.config import ConfigError, non_negative, positive
from robot_rl.core.folders import write_text_atomically
from robot_rl.runtime.evaluate import evaluation_episode, evaluation_summary
from robot_rl.runtime.run_folder import recorded_counts
from robot_rl.runtime.run_loop import EvalSchedule
from robot_rl.runtime.safety_learning import safety_settings
from robot_rl.runtime.session import ActorSession, load_checkpoint_agent, require_one_env

from ...data import EpisodeRecorder, EpisodeStore
from ...data.delivery_ledger import Numbered
from ...data.transition import stored_transitions
from ...data.wire import weight_shapes
from ...safety.fast_critic import fast_critic_config
from ..links.teleop_source import TopicTeleop
from ..links.topic_env import EPISODE_STATS, STOP, OperatorPause, StreamStalled, TopicEnv, TopicEnvSettings
from ..links.transport import RosActorLink
from ..plumbing import qos
from ..plumbing.delivery import Outbox, numbered
from ..plumbing.node_main import (
    TopicError,
    exit_with_error,
    node_config,
    node_task_spec,
    require_topics,
    restart_count,
    ros_node,
    spinning_in_background,
)
from ..plumbing.sim_clock import ClockError, lockstep_teleop, sim_time_of, wait_for_clock

LEARNER = "robot_rl_learner"  # the learner node's name (in ``ros.transition_subscribers``)
LEARNER_SILENCE = 5.0  # s (wall clock) without news from the learner before the actor stops waiting for it
LEARNER_WAIT_LOG = 10.0  # s (wall clock) of waiting for the learner to catch up before each line saying so
ACTOR_STATE_SUFFIX = ".actor_state.json"  # beside ros.delivery.actor_store: counts and draws (module docstring)
COUNTS = ("env_steps", "episodes", "demo_episodes_done", "intervention_steps")  # the Counters an actor state keeps
STOPPED_WAIT = 3.0  # s (wall clock) each exit step may take when the actor is stopped: all within the launch's grace


@dataclass(frozen=True)
class ExitWaits:
    """How long (s, wall clock) the actor waits at its exit: for its subscribers to acknowledge what it sent
    (``flush``, also the episode stats), for a learner that still answers but lacks transitions (``catch_up``), for
    the recorder to confirm the finished episodes (``record``) before it records them in its own store, and, with
    ``ros.eval_only``, for discovery to match a monitor on rl/episode_stats that has not yet seen the result
    (``monitor``)."""

    flush: float
    catch_up: float
    record: float
    monitor: float

    @classmethod
    def at_exit(cls, exit_timeout: float, record_timeout: float, stopped: bool) -> ExitWaits:
        """Its budget spent, the actor waits as long as ``ros.delivery`` allows (nothing hurries it: the launch
        stops the other nodes after it exits; on a loaded machine the recorder's last commit takes seconds).
        Stopped (Ctrl-C, SIGTERM), it keeps every step within ``STOPPED_WAIT`` and waits for no monitor."""
        if stopped:
            return cls(STOPPED_WAIT, 0.0, min(STOPPED_WAIT, record_timeout), 0.0)
        return cls(STOPPED_WAIT, exit_timeout, record_timeout, exit_timeout)


class ActorLoop:
    def __init__(self, node, cfg):
        task = OmegaConf.to_container(cfg.task, resolve=True)
        spec = node_task_spec(cfg)  # the task's shapes and state layout; the cell itself is behind topics
        shapes, action_dim, layout = spec.observation_shapes, spec.action_dim, spec.state_layout or {}
        self.store_metadata = {**spec.metadata(), "source": "robot_rl.ros.nodes.actor_node"}
        self.node, self.cfg = node, cfg
        self.log = node.get_logger()
        ticks = fast_critic_config(cfg).records_ticks  # the safety node's ticks go with the transitions
        self.env = TopicEnv(node, TopicEnvSettings.from_config(task, cfg.ros, ticks), layout)
        human = TopicTeleop(self.env, cfg.ros.teleop.deadzone, cfg.ros.teleop.hold, lockstep_teleop(cfg))
        self.session = ActorSession(cfg, shapes, action_dim, human)
        require_one_env(self.session.settings, "in the ROS graph (one env per actor node)")
        self.settings, self.agent, self.counters = self.session.settings, self.session.agent, self.session.counters
        self.state_file = Path(str(cfg.ros.delivery.actor_store) + ACTOR_STATE_SUFFIX)
        self.restart, self.cut_by_death = restart_count(), False
        if not cfg.ros.eval_only:
            if self.restart and self.state_file.is_file():
                self.go_on()
            elif cfg.train.resume is True:
                self.count_the_run()
                self.draw_on()
            self.counters.actor_random_state = self.session.random_state([])  # as loaded: from the seed, or on
        safety = safety_settings(cfg.get("safety"))
        names = cfg.ros.transition_subscribers
        if not (OmegaConf.is_list(names) and all(isinstance(name, str) and name for name in names)):
            raise ConfigError("ros.transition_subscribers", names, "a list of node names (e.g. [robot_rl_learner])")
        self.transition_subscribers = list(names)
        delivery = cfg.ros.delivery
        self.local_store_path = delivery.actor_store
        if not self.local_store_path:
            raise ConfigError(
                "ros.delivery.actor_store", self.local_store_path, "the path of the actor's own episode store"
            )
        self.local_store: EpisodeStore | None = None  # created at the first episode it must keep
        self.waited_for_weights = False  # the wait for a learner's first weights is done (once per actor run)
        self.exit_timeout = non_negative("ros.delivery.exit_timeout", delivery.exit_timeout)
        self.record_timeout = non_negative("ros.delivery.record_timeout", delivery.record_timeout)
        outbox = Outbox(
            f"actor-{uuid.uuid4().hex[:8]}",
            int(positive("ros.delivery.memory_mb", delivery.memory_mb) * 2**20),
            self.record_timeout,
            self.record_locally,
            for_learner=LEARNER in self.transition_subscribers,
            for_recorder="robot_rl_recorder" in self.transition_subscribers,
        )
        risk_input = (shapes["state"][0], action_dim) if safety.enabled and "state" in shapes else None
        self.transport = RosActorLink(
            node,
            expected_weights=weight_shapes(self.agent.policy_state()),
            risk_input=risk_input,
            outbox=outbox,
            guard=self.env.guard,
        )
        self.stats_pub = node.create_publisher(String, EPISODE_STATS, qos.EPISODE_LOG)
        self.sim_time = sim_time_of(cfg)
        self.first_step: dict | None = None  # the episode starting: kept as being played after its first step
        self.env.guard.subscribe(Empty, STOP, self._on_stop, qos.EVENT)

    def _on_stop(self, msg) -> None:
        """The operator's stop: the run ends as if its step budget were spent (module docstring)."""
        if not self.session.ended:
            self.log.info(f"stopped by the operator on {self.node.resolve_topic_name(STOP)}: ending the run")
        self.session.ended = True

    def count_the_run(self) -> None:
        """A resumed run (``train.resume=true``): the counts go on from the run's finished episodes in the episode
        stores on this machine (the recorder's ``ros.recorder.store`` and the actor's own ``ros.delivery.actor_store``),
        so no demonstration is played again and the online step budget continues."""
        stores = [self.cfg.ros.recorder.store, self.cfg.ros.delivery.actor_store]
        for key, value in recorded_counts(stores).items():
            setattr(self.counters, key, value)
        self.log.info(
            f"resumed: {self.counters.demo_episodes_done} demonstrations, {self.counters.env_steps} online env steps "
            f"in {self.counters.episodes} episodes recorded in {', '.join(map(str, stores))}"
        )

    def read_state(self) -> dict:
        """The actor state :meth:`keep_state` wrote (a file that is not one: ConfigError naming it)."""
        state, problem = None, ""
        try:
            state = json.loads(self.state_file.read_text())
        except (ValueError, OSError) as error:
            problem = f": {error}"
        counts = state.get("counters") if isinstance(state, dict) else None
        if not (
            isinstance(counts, dict)
            and all(isinstance(counts.get(key), int) for key in COUNTS)
            and isinstance(state.get("random_state"), dict)
        ):
            what = f"an actor state beside it (JSON: counters {', '.join(COUNTS)} and random_state{problem})"
            raise ConfigError("ros.delivery.actor_store", str(self.state_file), what)
        return state

    def draw_on(self) -> None:
        """A resumed run: the acting random state (exploration noise, gripper exploration) its actor wrote after its
        last episode, so the resumed actor does not replay the first draws of the run."""
        if not self.state_file.is_file():
            return  # a run whose actor never started (or one made before the file was kept)
        self.load_draws(self.read_state()["random_state"])
        self.log.info(f"acting random state restored from {self.state_file}: the draws go on where they were")

    def load_draws(self, random_state: dict) -> None:
        try:
            self.session.load_random_state(random_state, [])
        except (ValueError, TypeError, KeyError, RuntimeError) as error:
            raise ConfigError(
                "ros.delivery.actor_store", str(self.state_file), f"a readable actor state ({error})"
            ) from None

    def go_on(self) -> None:
        """Started again by the launch after this node died: the counts and draws of its actor state, and the episode
        its death cut short counted as the recorder keeps it (an online one recorded as it is; a demonstration
        dropped, played again)."""
        state = self.read_state()
        for key in COUNTS:
            setattr(self.counters, key, state["counters"][key])
        self.load_draws(state["random_state"])
        playing = state.get("playing")
        self.cut_by_death = isinstance(playing, dict) and playing.get("demo") is False
        if self.cut_by_death:
            self.counters.count_episode(demo=False)  # its steps: the learner's, not in this actor's budget
        self.log.info(
            f"restarted (restart {self.restart}): going on from {self.state_file}: episode {self.counters.episodes}, "
            f"{self.counters.env_steps} online env steps, {self.counters.demo_episodes_done} demonstrations"
            + ("; the online episode in progress was recorded as it is" if self.cut_by_death else "")
        )

    def keep_state(self, playing: dict | None = None) -> None:
        """Where the counts and the acting draws are (:meth:`go_on`, :meth:`draw_on` read it back), with the episode
        being played (``playing``: whether it is a demonstration), written whole beside the actor's own store."""
        counts = {key: getattr(self.counters, key) for key in COUNTS}
        state = {"counters": counts, "random_state": self.counters.actor_random_state, "playing": playing}
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(self.state_file, json.dumps(state))

    def draws(self) -> str:
        """A digest of the acting random state the actor draws from next (its ``started`` record)."""
        acting = {key: value for key, value in self.counters.actor_random_state.items() if key != "envs"}
        return hashlib.sha256(json.dumps(acting, sort_keys=True).encode()).hexdigest()[:16]

    def wait_for_transition_subscribers(self) -> None:
        """Hold the first episode until the nodes of ``ros.transition_subscribers`` (the learner, the
        recorder) are matched on /rl/transitions, at most ``ros.startup_timeout`` s: a transition sent
        before a subscriber is matched never reaches it."""
        timeout = float(self.cfg.ros.startup_timeout)
        missing = self.transport.wait_for_subscribers(self.transition_subscribers, timeout)
        if missing:
            self.log.warning(
                f"{', '.join(missing)} not subscribed to /rl/transitions within {timeout:.0f} s; starting "
                "without: they miss the episodes before they join (the initial weights act until a "
                "learner publishes)"
            )

    def load_new_weights(self) -> None:
        if self.session.take_weights(self.transport):
            self.log.info(
                f"loaded policy weights: learner {self.transport.weights_meta.get('session')} "
                f"update {self.transport.weights_meta.get('version')}"
            )

    def wait_for_learner_weights(self) -> None:
        """Before an online episode while the actor holds no learner's weights (its run's first, or the first after
        the actor restarted): with the learner in ``ros.transition_subscribers``, wait up to ``ros.startup_timeout`` s
        for the weights it publishes once it has opened its session. Acting on the actor's own initialisation spends
        cell time on a policy no learner made (a resumed learner's are trained), and the episode names no weights
        version. Demonstrations do not wait: the human acts. Not in time: it acts on the weights it has, warned; it
        waits once per actor run, so a learner that never comes costs one wait."""
        if self.waited_for_weights or self.session.weights_version is not None:
            return
        self.waited_for_weights = True
        if LEARNER not in self.transition_subscribers:
            return
        timeout = float(self.cfg.ros.startup_timeout)
        deadline = time.monotonic() + timeout
        while self.session.weights_version is None and not self.session.ended and time.monotonic() < deadline:
            time.sleep(0.05)
            self.load_new_weights()
        if self.session.weights_version is None and not self.session.ended:
            self.log.warning(
                f"no weights from {LEARNER} within {timeout:.0f} s (ros.startup_timeout): acting on the actor's own "
                "initial weights until it publishes"
            )

    def publish(self, kind: str, stats: dict) -> None:
        record = {
            "kind": kind,
            "episode": self.counters.episodes,
            "env_steps": self.counters.env_steps,
            # an episode's stats name the weights it was played with: the version and the learner run that sent them
            "weights": self.session.weights_version,
            "learner_session": self.session.weights_session,
            **stats,
        }
        self.stats_pub.publish(String(data=json.dumps(record, default=float)))
        self.log.info(json.dumps(record, default=float))

    def flush_records(self, timeout: float, monitor_timeout: float = 0.0) -> bool:
        """Wait up to ``timeout`` s until every monitor matched on rl/episode_stats acknowledged the records, so the
        last one (``ros.eval_only``'s result) reaches them although the actor exits right after publishing it.
        First wait up to ``monitor_timeout`` s until discovery has matched one: an evaluation can end before a
        monitor is matched (one already running on a loaded machine, or one started after the result), and the
        result, kept TRANSIENT_LOCAL, reaches it only while the actor lives. The actor's own subscription (the
        recorder's disk records, :class:`TopicEnv`) is no monitor: it is matched at once."""
        from rclpy.duration import Duration

        topic = self.stats_pub.topic_name
        own = sum(1 for subscription in self.node.subscriptions if subscription.topic_name == topic)
        deadline = time.monotonic() + monitor_timeout
        while self.stats_pub.get_subscription_count() <= own and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.stats_pub.wait_for_all_acked(Duration(seconds=timeout))

    def between_steps(self) -> None:
        """After each step: the actor state says an episode is being played (after its first step: its first
        transition is out), resend what a restarted learner lacks, and in sim time with ``train.sync`` keep pace
        with the learner."""
        if self.first_step is not None:
            self.keep_state(playing=self.first_step)
            self.first_step = None
        self.transport.service(self.read_local)
        if self.sim_time and self.settings.sync:
            self.wait_for_learner()

    def wait_for_learner(self) -> None:
        """Sim time with ``train.sync``: keep within ``train.max_lag`` steps of the learner (this actor's transitions
        it has not yet ingested plus its updates due, from ``/rl/learner_progress``), as ``robot-rl train`` does, so
        the update-to-data ratio holds however fast the sim runs, also with other actors feeding the same learner. A
        learner silent for ``LEARNER_SILENCE`` s is not waited for (none started, or it is down: the actor acts on
        its weights). While it waits, the actor resends what the learner lacks (a lost message leaves a gap the
        learner takes nothing beyond), as it does between steps."""
        settings, transport = self.settings, self.transport
        started = said_at = time.monotonic()

        def caught_up() -> bool:
            return transport.backlog(settings.start_training, settings.update_every) <= settings.max_lag

        while True:
            progress, now = transport.learner_progress(), time.monotonic()
            if caught_up() or now - progress.heard_at > LEARNER_SILENCE:
                return
            if now - said_at >= LEARNER_WAIT_LOG:  # a wait this long is news: say what the learner lacks
                said_at, outbox = now, transport.outbox
                self.log.warning(
                    f"waiting {now - started:.0f} s for the learner: it ingested {progress.received.get(outbox.actor_id, 0)}"
                    f" of this actor's {outbox.seq} transitions and made {progress.update_calls} updates"
                    f" of {progress.online_received} online steps (train.max_lag={settings.max_lag}); last heard"
                    f" {now - progress.heard_at:.1f} s ago"
                )
            transport.wait_for_learner(caught_up, 0.1)  # wakes at the learner's next progress (or to see its silence)
            transport.service(self.read_local)  # meanwhile resend what it lacks: it may be waiting for just that

    # ----------------------------------------------------------------- the actor's own episode store
    def record_locally(self, delivered: list[Numbered]) -> None:
        """Keep an episode the recorder did not acknowledge (or that left memory) in the actor's store."""
        if self.local_store is None:
            self.local_store = EpisodeStore.create(self.local_store_path, self.store_metadata)
            self.local_recorder = EpisodeRecorder(self.local_store)
        transitions = [n.transition for n in delivered]
        if not transitions[0].first:
            uid = transitions[0].origin.episode
            self.log.warning(f"episode {uid}: its start is no longer in memory; not recorded")
            return
        name = self.local_recorder.record(transitions)
        if name is not None:
            self.log.info(
                f"recorded {name} in the actor's store {self.local_store.path} (the recorder did not confirm it)"
            )

    def read_local(self, spilled: list[tuple[str, int]]) -> list[list[Numbered]]:
        """Spilled episodes, read back from the actor's store as the transitions first sent."""
        if not spilled or self.local_store is None:
            return []
        wanted = dict(spilled)
        names = {self.local_store.episode_attrs(name).get("uid"): name for name in self.local_store.episode_names()}
        actor = self.transport.outbox.actor_id
        return [
            numbered(stored_transitions(self.local_store.read_episode(names[uid]), uid), actor, first)
            for uid, first in wanted.items()
            if uid in names
        ]

    def evaluate_on_cell(self) -> dict:
        """``ros.eval_episodes`` deterministic episodes (the cell picks its resets). A stream that stalls pauses the
        evaluation until it returns; the interrupted episode is played again (same seed), the finished ones stand,
        so a camera's hiccup costs one episode of cell time, not the whole evaluation. ``episode_ends``: the wall
        clock (s) at which each counted episode ended, for matching them with what the cell saw."""
        played: list[dict] = []
        ends: list[float] = []
        safety = self.session.another_safety_actor()  # the learned filter as in training, then the safety node
        while len(played) < int(self.cfg.ros.eval_episodes):
            try:
                played.append(evaluation_episode(self.agent, self.env, seed=len(played), safety=safety))
                ends.append(round(time.time(), 3))
            except StreamStalled as stall:
                self.log.warning(
                    f"evaluation paused: {stall}; episode {len(played) + 1} starts again when {stall.topic} returns"
                )
                self.publish("paused", {"reason": str(stall), "topic": stall.topic})
                self.wait_for_streams(stall.topic)
        return {**evaluation_summary(played), "episode_ends": ends}

    def evaluate_checkpoint(self) -> None:
        """``ros.eval_only``: ``ros.eval_episodes`` deterministic episodes with ``eval.checkpoint`` on the cell."""
        folder = load_checkpoint_agent(self.agent, self.cfg)
        self.log.info(f"evaluating {folder} on the cell")
        self.publish("eval", {"checkpoint": str(folder), **self.evaluate_on_cell()})

    def announce_start(self) -> None:
        """The ``started`` record (module docstring): which start this is, the draws it acts from, and whether its
        predecessor's death cut an online episode (the learner counts it)."""
        reason = f"restarted by the launch (restart {self.restart})" if self.restart else "first start"
        record = {"restart": self.restart, "reason": reason, "draws": self.draws(), "episode_cut": self.cut_by_death}
        self.publish("started", record)

    def run(self) -> None:
        ros = self.cfg.ros
        if ros.eval_only:
            self.evaluate_checkpoint()
            return
        # a restart reads this start's state, never a file an earlier session left; written once the cell answered
        # (clock, topics), so a start refused before then leaves no run folder behind
        self.keep_state()
        self.announce_start()
        every, episodes = int(ros.eval_every_episodes), self.counters.episodes
        evaluations = EvalSchedule(every, episodes - episodes % every if every else 0)  # a restart goes on from there
        while not self.session.budget_spent:
            self.load_new_weights()
            if ros.demos_only and not self.session.demo_due:
                return
            if not self.session.demo_due:
                self.wait_for_learner_weights()
            self.first_step = {"demo": self.session.demo_due}
            try:
                stats = self.session.play(self.env, self.transport, None, None, self.between_steps)
            except StreamStalled as stall:
                # now, not at the next episode's first step: the recorder hears of the cut before that step drops
                # the episode it still has open (an online one is recorded cut short, a demonstration played again)
                left = self.transport.leave_episode()
                if left is not None and not left.abandoned:
                    self.counters.count_episode(demo=False)  # recorded cut short: as a resumed actor counts it
                awaited = (
                    f"the word to go on ({stall.topic})"
                    if isinstance(stall, OperatorPause)
                    else f"{stall.topic} to return"
                )
                fate = ""
                if left is not None:
                    fate = (
                        f"; demonstration {left.uid} abandoned (no store records it), played again"
                        if left.abandoned
                        else f"; episode {left.uid} recorded as it is"
                    )
                self.log.warning(f"episode {self.counters.episodes} paused: {stall}; waiting for {awaited}{fate}")
                cut = left is not None and not left.abandoned  # counted here: the learner counts it too
                self.publish("paused", {"reason": str(stall), "topic": stall.topic, "episode_cut": cut})
                self.first_step = None
                self.keep_state()
                self.wait_for_streams(stall.topic)
                continue
            self.keep_state()
            demo = stats.pop("demo")
            self.publish("demo" if demo else "train", {**stats, **({"stopped": True} if self.session.ended else {})})
            if self.session.ended:
                return
            if not demo and evaluations.due(self.counters.episodes):
                self.load_new_weights()
                evaluation = self.evaluate_on_cell()
                self.publish("eval", evaluation)
                if self.settings.target_reached(evaluation["success_rate"]):
                    self.log.info(
                        f"evaluation success {evaluation['success_rate']:.2f} reached train.stop_at_success="
                        f"{self.settings.stop_at_success:g}: ending the run"
                    )
                    return  # as a spent budget ends it

    def wait_for_streams(self, paused_on: str | None = None) -> None:
        """Until every stream the actor reads is live again. A stream that is now the one missing, other than
        ``paused_on`` (the topic the pause named), is published as a pause of its own: the run's log names what the
        actor waits for (a reset that went unanswered, then a camera that stays silent, is a camera). The operator's
        pause is one of these waits (the env waits while paused); the operator's stop ends it."""
        reported = paused_on
        while not self.session.ended:  # the operator's stop ends the wait (and the run)
            try:
                self.env.wait_for_streams(timeout=5.0)
                self.log.info("streams are back; resuming")
                return
            except StreamStalled as stall:
                if stall.topic != reported:
                    reported = stall.topic
                    self.publish("paused", {"reason": f"still waiting: {stall}", "topic": stall.topic})
                self.log.warning(f"still waiting: {stall}", throttle_duration_sec=10.0)


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, ros_args = node_config(sys.argv[1:] if argv is None else argv)
        torch.set_num_threads(int(cfg.train.torch_threads))
        with ros_node("robot_rl_actor", ros_args, sim_time_of(cfg)) as node:
            actor = ActorLoop(node, cfg)
            with spinning_in_background(node):
                if actor.sim_time:
                    wait_for_clock(node, float(cfg.ros.startup_timeout), spinning=True)
                require_topics(node, actor.env.topics(), float(cfg.ros.startup_timeout))
                if not cfg.ros.eval_only:
                    actor.wait_for_transition_subscribers()
                started = time.monotonic()
                stopped = False
                try:
                    actor.run()
                except KeyboardInterrupt:  # later signals are ignored (ros_node): the clean-up below runs whole
                    stopped = True  # exit within the grace: the learner's checkpoint says what it has
                waits = ExitWaits.at_exit(actor.exit_timeout, actor.record_timeout, stopped)
                actor.transport.flush(timeout=waits.flush)  # the recorder and learner get the last episode
                lacking = actor.transport.deliver_rest(actor.read_local, LEARNER_SILENCE, waits.catch_up)
                if lacking:
                    node.get_logger().warning(f"the learner lacks {lacking} transitions at the actor's exit")
                actor.transport.finish(record_wait=waits.record)
                actor.flush_records(waits.flush, monitor_timeout=waits.monitor if cfg.ros.eval_only else 0.0)
                outbox = actor.transport.outbox
                node.get_logger().info(
                    f"actor done: {actor.counters.env_steps} env steps, {actor.counters.episodes} episodes in "
                    f"{time.monotonic() - started:.0f} s; {outbox.seq} transitions sent, "
                    f"{outbox.recorded_locally} episodes recorded in the actor's store"
                )
    except (ConfigError, TopicError, ClockError) as error:
        return exit_with_error("robot_rl.ros.nodes.actor_node", error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
