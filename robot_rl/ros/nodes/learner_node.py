"""The learner node: transitions in, weights out, checkpoints.

It runs the same :class:`robot_rl.runtime.session.LearnerSession` as ``robot-rl train`` behind a
:class:`~robot_rl.ros.links.transport.RosLearnerLink`: demo transitions fill the demo buffer,
interventions both buffers, policy steps the online buffer; updates start after
``train.start_training`` online transitions, one update call (``agent.utd`` critic steps) per
``train.update_every`` online transitions;
weights go out every ``train.weights_every`` updates (latched, so a late or restarted actor
gets them), and with ``safety.fast_critic.learn=true`` each new fit of the fast-loop critic on
``/rl/fast_risk_weights`` for the safety nodes. The run folder is ``train.run_dir``: a checkpoint every
``train.checkpoint_every`` online transitions, at shutdown (SIGINT/SIGTERM) and at once on the operator's word
(``/rl/checkpoint_now``, std_msgs/Empty: the console's checkpoint control). Each checkpoint is announced on
``/rl/checkpoint_saved`` (std_msgs/String, JSON: ``reason`` (due, operator or final), ``updates``, ``online``
transitions, ``dir``) and in the log. Every ``ros.progress_every`` s it logs ``robot-rl train``'s progress bar as a line
(online steps received of ``train.env_steps``, episodes, updates, updates per online step, the last evaluation's
success, the recent take-over rate). Its progress goes out on ``/rl/learner_progress`` (std_msgs/String, JSON)
whenever it changes: ``online`` (online transitions ingested), ``updates`` (update calls made), ``received`` (per
actor the highest ``seq`` ingested), ``online_size`` and ``demo_size`` (transitions in the online and demo replay
buffers); the actors keep the update-to-data ratio by it, the console shows it. A learner started on a run folder with a
checkpoint resumes from it (agent, buffers, counters) and publishes its weights at once (a node restarted within a launch;
``robot-rl launch`` continues a run folder only with ``train.resume=true``, which runs the run's own ``config.yaml``:
:mod:`robot_rl.runtime.run_folder`).

    python -m robot_rl.ros.nodes.learner_node task=reach train.run_dir=runs/graph [--ros-args ...]
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path

import rclpy
import torch
from rclpy.clock import Clock, ClockType
from std_msgs.msg import Empty, String

from robot_rl.core.config import ConfigError, positive
from robot_rl.core.folders import write_text_atomically
from robot_rl.runtime.fleet_settings import fleet_settings, robot_path
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.run_folder import given_keys, resumed_config, run_folder
from robot_rl.runtime.run_loop import EpisodeEnd, Run
from robot_rl.runtime.safety_learning import SAFETY_COUNTS
from robot_rl.runtime.session import LearnerSession
from robot_rl.runtime.train_settings import settings_from

from ...data import EpisodeStore
from ...data.delivery_ledger import Numbered
from ...data.episode_store import EpisodeStoreError
from ...data.transition import stored_transitions
from ...data.wire import TransitionSchema
from ..links.topic_env import EPISODE_STATS
from ..links.transport import RosLearnerLink
from ..plumbing import qos
from ..plumbing.guard import InputGuard, MessageError
from ..plumbing.node_main import exit_with_error, node_config, node_task_spec, ros_node, serving
from ..plumbing.sim_clock import ClockError, sim_time_of, wait_for_clock
from ..safety.fast_critic import FastRiskOutlet


def backfill(learner: Learner, path: Path, log) -> int:
    """Ingest the finished episodes of an episode store (the recorder's, the actor's own) that the learner does not
    have (it crashed after they were acknowledged and before its checkpoint held them); returns how many."""
    if not (path / "zarr.json").exists():
        return 0
    try:
        store = EpisodeStore.open(path)
        taken = 0
        for name in store.episode_names():
            uid = store.episode_attrs(name).get("uid")
            if uid and uid not in learner.ledger.episodes:
                learner.ingest_locked([Numbered(t) for t in stored_transitions(store.read_episode(name), uid)])
                taken += 1
    except (EpisodeStoreError, OSError) as error:
        log.warning(f"backfill from {path} stopped: {error}")
        return 0
    return taken


def main(argv: list[str] | None = None) -> int:
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        cfg, ros_args = node_config(argv)
        if cfg.train.resume is True:  # the run's own config.yaml (robot-rl launch gives it to every node already)
            run_folder(cfg.train.run_dir, True)
            cfg = resumed_config(cfg, given_keys(argv[: argv.index("--ros-args") if "--ros-args" in argv else None]))
        settings = settings_from(cfg.train)
        spec = node_task_spec(cfg)
        shapes, action_dim = spec.observation_shapes, spec.action_dim
        sim_time = sim_time_of(cfg)
        robots = fleet_settings(cfg).robots
        progress_every = positive("ros.progress_every", cfg.ros.progress_every)
    except ConfigError as error:
        return exit_with_error("robot_rl.ros.nodes.learner_node", error)
    torch.manual_seed(int(cfg.seed))
    torch.set_num_threads(settings.torch_threads)
    with ros_node("robot_rl_learner", ros_args, sim_time) as node:
        log = node.get_logger()
        transport = RosLearnerLink(node, schema=TransitionSchema(shapes, action_dim), robots=robots)
        try:
            session = LearnerSession(cfg, shapes, action_dim, transport)
            if sim_time:
                wait_for_clock(node, float(cfg.ros.startup_timeout))
            resumed = session.has_checkpoint()  # a restarted node goes on from its checkpoint
            counters = session.open(resume=resumed)
        except (ConfigError, ClockError) as error:
            return exit_with_error("robot_rl.ros.nodes.learner_node", error)
        learner = session.learner
        transport.replay_sizes = lambda: {"online_size": len(learner.online), "demo_size": len(learner.demo)}
        if resumed:
            log.info(
                f"resumed from {session.checkpoint_dir}: {learner.update_calls} updates, "
                f"{learner.online_received} online transitions"
            )
        if session.demos_loaded:
            log.info(
                f"{session.demos_loaded} recorded demonstrations from train.demo_store={cfg.train.demo_store} in the "
                f"demo buffer ({len(learner.demo)} transitions)"
            )
        if session.warm_start is not None:
            start = session.warm_start
            log.info(
                f"warm start from {start['checkpoint']}: the first {start['warmup_steps']} online steps are the "
                f"pretrained policy's, {start['retained_episodes']} offline episodes retained, "
                f"{start['demo_episodes']} scripted demonstrations"
            )
        if cfg.ros.delivery.backfill:  # the recorder's store, then the actor's (what the recorder did not confirm)
            for robot in robots or [None]:
                for store in (
                    robot_path(cfg.ros.recorder.store, robot),
                    robot_path(cfg.ros.delivery.actor_store, robot),
                ):
                    taken = backfill(learner, store, log)
                    if taken:
                        log.info(f"backfilled {taken} episodes from {store}")
        durable = dict(learner.ledger.received)  # per actor: the last transition the checkpoint holds
        learner.weights_outlet = FastRiskOutlet(node)  # the fast-loop critic's fits to the safety nodes
        learner.publish_weights(learner.update_calls)
        learner.report_progress()  # then the learner's thread reports every change
        learner.start()
        saved = node.create_publisher(String, "rl/checkpoint_saved", qos.EPISODE_LOG)
        holds: dict[str, int] = {}  # per actor: the last transition the checkpoint being written holds

        def before_checkpoint() -> None:
            counters.env_steps = learner.online_received
            with learner.lock:
                holds.update(learner.ledger.received)

        def after_checkpoint(reason: str) -> None:
            """Acknowledge what the checkpoint holds, announce it on ``/rl/checkpoint_saved`` and in the log."""
            durable.update(holds)
            acknowledge()
            log.info(
                f"checkpoint ({reason}): {learner.update_calls} updates, {learner.online_received} online "
                f"transitions, {transport.transitions_received} received"
            )
            record = {"reason": reason, "updates": learner.update_calls, "online": learner.online_received}
            saved.publish(String(data=json.dumps({**record, "dir": str(session.checkpoint_dir)})))
            if robots:
                for line in transport.tally.lines():
                    log.info(line)
                write_text_atomically(session.run_dir / "robots.json", json.dumps(transport.tally.summary(), indent=2))

        # the run's loop without an env, over the topics: its counts are the transitions ingested and the actors'
        # episode records, its evaluations the actors' on the cell; TensorBoard, summary.json and the learning curve as
        # robot-rl train's
        run = Run(
            session,
            counters,
            cfg.task.get("name"),
            before_checkpoint=before_checkpoint,
            after_checkpoint=after_checkpoint,
            progress_bar=False,  # a launch's log: robot-rl train's bar as a line every ros.progress_every s
            progress_log=log.info,
            progress_every=progress_every,
        )

        ended: list[EpisodeEnd] = []  # online episodes the actors' records ended since the run's last turn

        def on_record(msg) -> None:
            """An actor's episode record (``/rl/episode_stats``): a demonstration or an online episode counted (one a
            pause cut short counted, as the actor and the recorder count it; a whole one for the run to log), an
            evaluation into the run's history."""
            kind, record = episode_record(msg.data)
            counters.env_steps = learner.online_received
            if kind == "demo":
                counters.count_episode(demo=True)
            elif kind == "train":
                counters.count_episode(demo=False)  # its steps are the transitions ingested
                counters.intervention_steps += int(record["interventions"])
                ended.append(EpisodeEnd({**record, "demo": False}, actor=record.get("actor")))
            elif kind == "eval":
                run.evaluation_made({key: record[key] for key in EVALUATION_KEYS})
            elif kind in ("paused", "started") and record.get("episode_cut") is True:
                counters.count_episode(demo=False)  # an online episode recorded cut short (a pause, the actor's death)

        InputGuard(node).subscribe(String, EPISODE_STATS, on_record, qos.EPISODE_LOG)

        def acknowledge() -> None:
            with learner.lock:
                received = dict(learner.ledger.received)
            transport.acknowledge(received, durable)

        wall = Clock(clock_type=ClockType.STEADY_TIME)  # the delivery protocol's timeouts are on the wall clock
        InputGuard(node).subscribe(Empty, "rl/checkpoint_now", lambda msg: run.checkpoint("operator"), qos.EVENT)
        node.create_timer(0.5, acknowledge, clock=wall)

        def turn(executor) -> Iterator[list[EpisodeEnd]]:
            """What the topics bring in the next 0.1 s at most (the node's callbacks: transitions, the actors' records,
            the operator's checkpoint request), then the online episodes that ended, for the run to log and to
            checkpoint after when one is due."""
            executor.spin_once(timeout_sec=0.1)
            counters.env_steps = learner.online_received
            run.show_steps()
            episodes = list(ended)
            ended.clear()
            yield episodes

        try:
            with serving(node) as (executor, stop):  # until Ctrl-C / SIGTERM (the launch's stop) or the learner fails
                run.drive(
                    lambda _: turn(executor),
                    finished=lambda: learner.error is not None,
                    can_go_on=lambda: rclpy.ok() and not stop.is_set(),
                )
        finally:
            learner.close()
            if learner.error is not None:
                log.error(f"the learner failed: {learner.error!r}")
            summary = run.finish()
            log.info(f"run summary: {json.dumps(summary, default=float)}")
    return 1 if learner.error is not None else 0


EVALUATION_KEYS = ("episodes", "success_rate", "mean_length", "mean_return", "continuity_cost")
EPISODE_KEYS = ("success", "return", "length", "interventions", "continuity_cost", *SAFETY_COUNTS)


def episode_record(text: str) -> tuple[str, dict]:
    """(kind, record) of an actor's ``/rl/episode_stats`` JSON, its figures checked (a record the run would count
    must carry them, finite); a record of another kind (a pause) comes back with its kind; MessageError otherwise."""
    record = json.loads(text)
    if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
        raise MessageError("expected a JSON object with a kind")
    needed = {"train": EPISODE_KEYS, "eval": EVALUATION_KEYS}.get(record["kind"], ())
    bad = [key for key in needed if not isinstance(record.get(key), (int, float)) or not math.isfinite(record[key])]
    if bad:
        raise MessageError(f"a {record['kind']} record without finite {', '.join(bad)}")
    return record["kind"], record


if __name__ == "__main__":
    sys.exit(main())
