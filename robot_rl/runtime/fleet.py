"""``robot-rl train fleet=ray fleet.actors=N``: sim actors on Ray, one learner in the driver process.

Each Ray actor (:class:`SimActor`) builds its own env (seed ``seed + 1000 * (index + 1)``: its own episodes and
randomization draws), scripted human and :class:`~robot_rl.runtime.session.ActorSession`, and plays whole episodes on the
newest weights it was handed (``fleet.episodes_per_call`` per call). Transitions travel as the node graph's codec
payloads (npz arrays, no pickle; checked against this run's schema on arrival) through Ray's object store; weights
go out once per publication with ``ray.put``. The driver ingests each hand-in (every actor is a stream of its own:
the replay stores each actor's episodes whole), records every episode, evaluates, checkpoints and resumes as
``robot-rl train`` does. Who sets the pace (``fleet.pace``):

- ``learner`` (default): the driver makes the updates a hand-in made due (one update call per
  ``train.update_every`` env steps, as ``robot-rl train``) before it hands that actor its next play: sample
  efficiency first, and on few cores the learner's speed is the fleet's.
- ``actors``: every actor has its next play queued behind the one it is playing (Ray runs an actor's calls in
  order), so it plays on without waiting for the driver, on weights one play older; the driver makes the updates due
  one at a time between hand-ins, as many as it has time for (never more than ``train.update_every`` makes due):
  env steps per second grow with the actors, updates per env step fall once the learner cannot keep up (the summary's
  ``fleet.updates_owed``). For pretraining in sim with many actors, as distributed RL systems (Ape-X) run.

The summary's ``fleet`` entry holds the speed figures (:class:`FleetSpeed`): online env steps per second, the same
once every actor is playing, and the share of their time the actors spent playing rather than waiting for a play.

An actor that crashes is restarted by Ray (``fleet.max_restarts`` times, then the run goes on without it) and the
learner goes on with the others meanwhile; a restarted actor starts a fresh episode (the transitions of the one it
was playing are lost with it, as on a robot that drops out). ``fleet.address`` joins an existing Ray cluster; by
default a local Ray instance is started and stopped with the run. The first ``train.demo_episodes`` demonstrations
are shared out among the actors.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from robot_rl.core.blas import children_compute_as_this_process
from robot_rl.core.config import Config, ConfigError, plain
from robot_rl.core.interrupts import StopRequest, deferred_interrupt
from robot_rl.core.transport import LocalTransport
from robot_rl.data import StreamRecorders
from robot_rl.data.delivery_ledger import Numbered
from robot_rl.data.wire import (
    TransitionSchema,
    decode_transitions,
    decode_weights,
    encode_transitions,
    encode_weights,
    weight_shapes,
)
from robot_rl.runtime.envs import observation_shapes
from robot_rl.runtime.fleet_settings import FleetSettings, fleet_settings, member_seed, share
from robot_rl.runtime.run_loop import EpisodeEnd, Run, policy_evaluation
from robot_rl.runtime.run_setup import episode_store, run_settings, scripted_human, sim_env
from robot_rl.runtime.session import ActorSession, LearnerSession, make_agent, require_one_env

NO_BUDGET = 10**15  # an actor's own step budget: the driver ends the run
PLAYS_QUEUED = {"learner": 1, "actors": 2}  # plays pending per actor at each fleet.pace (Crew)


def actor_config(cfg: dict[str, Any], index: int, actors: int, demos: int) -> dict[str, Any]:
    """Actor ``index``'s config: its seed, its share of the ``demos`` demonstrations still due, no step budget of its
    own."""
    train = {**cfg["train"], "env_steps": NO_BUDGET, "demo_episodes": share(demos, index, actors)}
    return {**cfg, "seed": member_seed(cfg["seed"], index), "train": train}


class SimActor:
    """One sim actor of the fleet (a Ray actor): env, scripted human and acting session of its own."""

    def __init__(self, cfg: dict[str, Any], name: str, random_state: dict[str, Any] | None = None):
        """``random_state``: where a resumed run's actor of this name was (:meth:`random_state`); None: the seed."""
        torch.set_num_threads(1)
        self.cfg, self.name = cfg, name
        task = plain(self.cfg["task"])
        seed = int(self.cfg["seed"])
        self.env = sim_env(self.cfg, task, seed, randomize=True)
        shapes, action_dim = observation_shapes(self.env), int(self.env.action_space.shape[0])
        self.session = ActorSession(self.cfg, shapes, action_dim, scripted_human(self.cfg, task, self.env))
        self.transport = LocalTransport()
        self.expected = weight_shapes(self.session.agent.policy_state())
        safety = self.cfg.get("safety") or {}
        self.risk_input = (shapes["state"][0], action_dim) if safety.get("enabled") and "state" in shapes else None
        self.rng = np.random.default_rng(seed)  # its episodes' reset seeds
        if random_state is not None:
            self.session.load_random_state(random_state, [self.env])
            self.rng.bit_generator.state = random_state["seeds"]
        self.handed_in: float | None = None  # monotonic s at which its last play returned

    def random_state(self) -> dict[str, Any]:
        """Where its draws are (JSON-able): exploration, gripper exploration, the env's domain randomization
        (:meth:`ActorSession.random_state`) and the reset seeds (``seeds``)."""
        return {**self.session.random_state([self.env]), "seeds": self.rng.bit_generator.state}

    def play(self, version: int, weights: bytes, episodes: int, env_steps: int = 0) -> tuple[bytes | None, str]:
        """Play ``episodes`` whole episodes on the weights of ``version`` (a codec payload), the run at ``env_steps``
        online env steps when the play was handed out (the env's curricula go on from there, counting this actor's
        steps); their transitions (a codec payload, None when there were none) and a JSON report: each episode's
        stats (``episodes``), the wall seconds this play took (``playing_s``), those the actor sat idle between
        its previous play and this one (``waiting_s``: the driver had not handed it a play yet; 0 for its first) and
        where its draws are after it (``random_state``: a checkpoint keeps it for a resumed run)."""
        began = time.monotonic()
        waiting = began - self.handed_in if self.handed_in is not None else 0.0
        self.session.counters.env_steps = env_steps  # the run's count: the one its envs' curricula follow
        if version != self.session.weights_key:
            decoded, _ = decode_weights(weights, self.expected, self.risk_input)
            self.transport.publish_weights(version, decoded)
            self.session.take_weights(self.transport)
        stats = []
        for _ in range(episodes):
            episode = self.session.play(self.env, self.transport, None, int(self.rng.integers(2**31)))
            stats.append({**episode, "actor": self.name})
        # steps of this actor's stream, unnumbered (the driver takes each hand-in whole, in order)
        delivered = [Numbered(t.by(self.name)) for t in self.transport.arrivals.take_all()]
        payload = encode_transitions(delivered) if delivered else None
        self.handed_in = time.monotonic()
        report = {
            "episodes": stats,
            "playing_s": self.handed_in - began,
            "waiting_s": waiting,
            "random_state": self.random_state(),
        }
        return payload, json.dumps(report, default=float)


def train_fleet(cfg: Config) -> dict[str, Any]:
    """``robot-rl train`` with ``fleet=ray``; its summary (also ``summary.json``)."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "fleet", "ray", "Ray installed (pip install 'robot-rl[fleet]', or bash scripts/setup.sh)"
        ) from None

    fleet = fleet_settings(cfg)
    settings, seed, task, run_dir = run_settings(cfg)
    require_one_env(settings, "with fleet=ray (more envs: more fleet.actors)")
    eval_env = sim_env(cfg, task, seed, randomize=False)
    shapes, action_dim = observation_shapes(eval_env), int(eval_env.action_space.shape[0])
    schema = TransitionSchema(shapes, action_dim)
    transport = LocalTransport()
    learning = LearnerSession(cfg, shapes, action_dim, transport)
    counters = learning.open(settings.resume)
    learner = learning.learner
    learner.update_in_this_thread()  # the driver's loop makes the updates
    evaluated = make_agent(cfg, shapes, action_dim, seed, acting=True)  # the learner's policy, at each evaluation
    store = episode_store(cfg, run_dir, task, eval_env)
    # in processes of their own, one per actor: the driver neither waits on the disk nor shares its interpreter with
    # the recording; one records more steps per second than one actor plays (benchmarks/results/fleet_recording.json,
    # fleet.json): with fewer, the recording would set the fleet's pace
    recorders = StreamRecorders(store, partial(decode_hand_in, schema), fleet.actors) if store is not None else None

    run = Run(
        learning,
        counters,
        task.get("name"),
        evaluate=policy_evaluation(
            evaluated, eval_env, prepare=lambda: evaluated.load_policy_state(learner.agent.policy_state())
        ),
        before_checkpoint=None if recorders is None else recorders.flush,  # the store holds every episode counted
        title="fleet",
    )
    started_ray = not ray.is_initialized()
    if started_ray:
        start_ray(fleet)
    demos = max(settings.demo_episodes - counters.demo_episodes_done, 0)  # a resumed run's are done
    crew = Crew(plain(cfg), fleet, demos, learner, counters)
    speed = FleetSpeed(crew.actors)

    def online() -> bool:  # online steps to play: the budget, unless an evaluation reached train.stop_at_success
        return counters.env_steps < settings.env_steps and not run.target_reached

    def running() -> bool:  # online steps to play, or a demonstration due to be handed in (they are not in it)
        return online() or counters.demo_episodes_done < settings.demo_episodes

    def turn(stop: StopRequest) -> Iterator[list[EpisodeEnd]]:
        """The hand-ins that came, every one even after a stop (each taken in, recorded and counted, its episodes to
        the run, the learner's updates made where the learner sets the pace), then, where the actors set it, one
        update if one is due."""
        behind = fleet.pace == "actors" and learner.due_updates() > 0
        for name, (payload, report) in crew.hand_ins(timeout=0.0 if behind else 1.0):
            if fleet.pace == "actors" and online():
                crew.top_up(name)  # it plays its queued play on while this one's transitions are taken in
            delivered = decode_hand_in(schema, payload) if payload is not None else []
            learner.ingest_locked(delivered)
            if recorders is not None and payload is not None:
                recorders.add(name, payload)
            play, online_before = json.loads(report), counters.env_steps
            counters.fleet_random_states[name] = play["random_state"]
            for episode in play["episodes"]:
                counters.count_episode(episode["demo"], episode["length"])
            counters.intervention_steps += sum(n.transition.intervened for n in delivered if not n.transition.demo)
            if fleet.pace == "learner":
                learner.update_while_due()  # the update-to-data ratio of robot-rl train
            crew.publish_when_new()
            run.show_steps()
            speed.count(name, play, counters.env_steps, counters.env_steps - online_before, settings.env_steps)
            yield [EpisodeEnd(episode, actor=episode["actor"]) for episode in play["episodes"]]
            if fleet.pace == "learner" and online():
                crew.top_up(name)
        if behind and learner.update_if_due():  # fleet.pace=actors: one update after the hand-ins in
            crew.publish_when_new()

    with run.interruptible():
        try:
            run.drive(turn, finished=lambda: not running(), can_go_on=lambda: bool(crew.pending))
            if not crew.pending and online():
                raise RuntimeError("every fleet actor is gone (fleet.max_restarts spent)")
        finally:
            run.close_progress()
            crew.stop()
            if started_ray:
                ray.shutdown()
            if recorders is not None:
                with deferred_interrupt():
                    recorders.close()  # every hand-in recorded; an episode an actor was playing is dropped
            eval_env.close()
    fleet_figures = {
        "actors": fleet.actors,
        "pace": fleet.pace,
        "crashes": crew.failures,
        "transitions_received": learner.taken,
        **speed.figures(),
        "updates_made": learner.update_calls,
        "updates_owed": learner.due_updates(),  # fleet.pace=actors: those the learner had no time for
    }
    return run.finish(fleet=fleet_figures)


class Crew:
    """The fleet's Ray actors as the driver sees them: who is playing on which weights, who crashed, who is gone.

    Every actor has calls pending: ``play`` calls (whole episodes on the newest weights when the call was made), or
    after a crash one ``ready`` (answers once Ray has restarted it). Ray runs an actor's calls one after another, so
    at ``fleet.pace=actors`` each actor has two plays queued: when one ends the next starts at once, on weights one
    play older, and the actor never waits for the driver to take its hand-in in or to finish an update. At
    ``fleet.pace=learner`` it has one, handed out once the updates its steps made due are made. :meth:`hand_ins`
    yields the finished plays and deals with the rest."""

    def __init__(self, cfg: dict[str, Any], fleet: FleetSettings, demos: int, learner, counters):
        import ray

        self.fleet, self.learner = fleet, learner
        self.counters = counters  # the run's: each play is handed the online env steps so far (curricula)
        self.depth = PLAYS_QUEUED[fleet.pace]
        options = {"num_cpus": fleet.cpus_per_actor, "max_restarts": fleet.max_restarts, "max_task_retries": 0}
        remote = ray.remote(**options)(SimActor)
        names = [f"ray{index}" for index in range(fleet.actors)]
        saved = counters.fleet_random_states  # a resumed run's actors draw on where they were
        self.actors = {
            name: remote.remote(actor_config(cfg, i, fleet.actors, demos), name, saved.get(name))
            for i, name in enumerate(names)
        }
        # crashes seen per actor; a call records the count it was made at: those made before a crash fail with it,
        # and are not counted again
        self.failures = dict.fromkeys(names, 0)
        self.pending: dict[Any, tuple[str, str, int]] = {}  # Ray reference -> (actor, call, crashes before it)
        self.version, self.weights = publish(learner)
        for name in names:
            self.top_up(name)

    def top_up(self, name: str) -> None:
        """Queue plays of ``name`` (``fleet.episodes_per_call`` episodes each, on the newest weights) until it has
        as many pending as its pace keeps; none while Ray restarts it."""
        calls = [
            call for actor, call, crashes in self.pending.values() if actor == name and crashes == self.failures[name]
        ]
        if "ready" in calls:
            return
        for _ in range(self.depth - len(calls)):
            episodes, env_steps = self.fleet.episodes_per_call, self.counters.env_steps
            call = self.actors[name].play.remote(self.version, self.weights, episodes, env_steps)
            self.pending[call] = (name, "play", self.failures[name])

    def publish_when_new(self) -> None:
        """Put the learner's newest weights in the object store when it published new ones."""
        if self.learner.transport.weights_version() != self.version:
            self.version, self.weights = publish(self.learner)

    def hand_ins(self, timeout: float):
        """(actor, (transitions payload, report JSON)) of the first play that finishes within ``timeout`` s; with
        ``timeout=0``, of every play finished by now."""
        import ray

        pending = list(self.pending)
        done, _ = ray.wait(pending, num_returns=len(pending) if timeout == 0 else 1, timeout=timeout)
        for ref in done:
            name, call, crashes = self.pending.pop(ref)
            try:
                result = ray.get(ref)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as error:
                if crashes == self.failures[name]:  # a play queued behind the one that crashed fails with it
                    self._lost(name, call, error)
                continue
            if call == "ready":
                self.top_up(name)
            else:
                yield name, result

    def _lost(self, name: str, call: str, error: Exception) -> None:
        """A call of ``name`` failed: wait for Ray to restart it, or go on without it once it is gone."""
        import ray

        if call == "play":  # the actor died with its episode: Ray restarts it
            self.failures[name] += 1
            tqdm.write(
                f"robot-rl fleet: actor {name} crashed; Ray restarts it ({self.failures[name]})", file=sys.stderr
            )
        elif isinstance(error, ray.exceptions.ActorDiedError) or self.failures[name] > self.fleet.max_restarts:
            tqdm.write(f"robot-rl fleet: actor {name} is gone; going on without it", file=sys.stderr)
            return
        else:
            time.sleep(0.5)  # still restarting
        self.pending[self.actors[name].__ray_ready__.remote()] = (name, "ready", self.failures[name])

    def stop(self) -> None:
        import ray

        for actor in self.actors.values():
            ray.kill(actor)


def decode_hand_in(schema: TransitionSchema, payload: bytes) -> list[Numbered]:
    """The transitions of an actor's hand-in, checked against the run's schema (the recorder process decodes them
    too)."""
    return decode_transitions(payload, schema)[0]


class FleetSpeed:
    """The fleet's speed figures, counted at each hand-in:

    - ``online_env_steps_per_s``: online env steps per wall second from the first hand-in with online steps to the
      one that spent the budget: what the actors played, without Ray's start, the demonstrations and the final
      evaluation;
    - ``all_actors_env_steps_per_s``: the same from the hand-in by which every actor had handed in online steps (the
      fleet at full strength: actors start one after another, seconds apart on a loaded machine); None when an actor
      never did;
    - ``actor_busy_fraction``: of the actors' wall time after their first play, the share they spent playing rather
      than waiting for the driver to hand them their next play."""

    def __init__(self, actors):
        self.yet_online = set(actors)  # actors that have not handed in online steps yet
        self.first: tuple[float, int] | None = None  # (monotonic s, env steps) at the first online hand-in
        self.full: tuple[float, int] | None = None  # the same when the last actor handed in its first online steps
        self.last: tuple[float, int] | None = None
        self.playing_s = self.waiting_s = 0.0

    def count(self, actor: str, play: dict[str, Any], env_steps: int, online_steps: int, budget: int) -> None:
        """``actor`` handed in ``play`` (its report: ``playing_s``, ``waiting_s``) with ``online_steps`` of them;
        ``env_steps`` online steps in all, of a ``budget``."""
        self.playing_s += play["playing_s"]
        self.waiting_s += play["waiting_s"]
        if online_steps == 0 or (self.last is not None and self.last[1] >= budget):
            return  # demonstrations, or the budget spent
        now = (time.monotonic(), env_steps)
        self.first = self.first or now
        self.yet_online.discard(actor)
        if not self.yet_online and self.full is None:
            self.full = now
        self.last = now

    def figures(self) -> dict[str, float | None]:
        busy = self.playing_s + self.waiting_s
        return {
            "online_env_steps_per_s": self._rate(self.first),
            "all_actors_env_steps_per_s": self._rate(self.full),
            "actor_busy_fraction": round(self.playing_s / busy, 3) if busy > 0 else None,
        }

    def _rate(self, since: tuple[float, int] | None) -> float | None:
        """Online env steps per second from ``since`` to the last hand-in counted; None without two of them."""
        if since is None or self.last is None or self.last[0] <= since[0]:
            return None
        return round((self.last[1] - since[1]) / (self.last[0] - since[0]), 2)


RAY_START_TRIES = 3  # Ray gives its raylet 30 s to register, fixed; a loaded machine (2 busy cores) may need longer


def start_ray(fleet: FleetSettings) -> None:
    """``ray.init`` (:func:`ray_init_arguments`); a start whose raylet did not register in time is shut down and
    tried again, up to :data:`RAY_START_TRIES` times in all, saying so on stderr. A local instance's processes (and
    so its actors) start with this process's BLAS kernels: an actor's env computes what this process's would."""
    import ray

    for attempt in range(1, RAY_START_TRIES + 1):
        try:
            with children_compute_as_this_process():
                ray.init(**ray_init_arguments(fleet))
            return
        except Exception as error:  # Ray raises a bare Exception for this one
            if "timed out during startup" not in str(error) or attempt == RAY_START_TRIES:
                raise
            ray.shutdown()
            print(f"robot-rl fleet: Ray did not start in time ({error}); starting it again", file=sys.stderr)


def ray_init_arguments(fleet: FleetSettings) -> dict[str, Any]:
    """``ray.init`` keywords: join ``fleet.address``, or start a local instance sized for the fleet."""
    if fleet.address is not None:
        return {"address": fleet.address, "log_to_driver": False}
    return {
        "num_cpus": max(int(np.ceil(fleet.actors * fleet.cpus_per_actor)), 1),
        "object_store_memory": fleet.object_store_mb * 2**20,
        "include_dashboard": False,
        "log_to_driver": False,
        # Ray renices its workers to 15 by default: the actors, who play every step, then got ~3% of a core beside
        # the learner or any other busy process (an actor's start, ~5 s of CPU, took 4 minutes on 2 loaded cores)
        "_system_config": {"worker_niceness": 0},
    }


def publish(learner) -> tuple[int, Any]:
    """The learner's newest weights as one codec payload in Ray's object store: (version, reference)."""
    import ray

    version = learner.update_calls
    return version, ray.put(encode_weights(learner.published_weights(), {"version": version}))
