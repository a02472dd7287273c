"""Many actors, one learner: replay integrity under interleaved streams, and the Ray fleet's throughput.

- ``replay_integrity``: K actor streams of pick_cube-shaped transitions (random episode lengths, human takeovers)
  fed to one learner in a random interleaving, against the same streams fed one after another: the stored
  (obs, action, reward, next obs, end flags) tuples of both buffers must be the same; ``mismatched_transitions``
  counts those that are not (0 is right).
- ``ray``: ``robot-rl train fleet=ray`` on pick_cube (state) with each of ``--ray-actors`` Ray actors at
  ``fleet.pace=<--ray-pace>`` (default ``actors``: actors play on, the learner makes what updates it has time for),
  ``--ray-steps-per-actor`` online steps per actor, side by side in one run: online env steps per second once
  every actor is playing (``env_steps_per_s``; from the first online hand-in: ``first_online_env_steps_per_s``, as
  actors start seconds apart; over the whole run: ``wall_env_steps_per_s``), the share of their time the actors
  played rather than waited for a play (``actor_busy_fraction``), transitions received, updates made and owed.
  With ``fleet.pace=learner`` the learner keeps ``robot-rl train``'s update-to-data ratio and sets the pace.

- ``recording``: what one recorder process of the Ray fleet (``StreamRecorders``, ``robot_rl/data/recorder.py``)
  takes: ``--recorder-streams`` actor streams of 40-step pick_cube episodes (the env's own observations) handed to
  one recorder process as fast as it commits them; env steps per second it records (``steps_per_s``) and its CPU
  time per step (``cpu_ms_per_step``: user + system of the process, above 1 ms per ms of wall when zarr's threads and
  the disk's flushes run beside its main thread). The fleet starts one recorder per actor.

- ``driver_take_in``: what the Ray fleet's driver spends per online step taking a hand-in in, on pick_cube episodes
  a Ray actor's code plays in this process: decoding the payload, ingesting its transitions (8 actor streams
  interleaved) and counting and logging its episodes, in microseconds per step, and the online steps per second a
  driver doing nothing else could take in (``ceiling_steps_per_s``); the recording is in processes of its own.

- ``env_steps_per_s.num_envs_N``: ``robot-rl train train.num_envs=N`` on pick_cube (state, the main job's settings
  otherwise) for ``--steps`` online steps: online env steps per wall second of the run (demonstrations and
  evaluations included). The learner keeps the update-to-data ratio (one update call per env step), so where it
  sets the pace (2 cores) more envs cannot make more steps. ``vector_updates_env_steps_per_s.num_envs_N``: the same
  with ``train.update_every=N``, one update call per vector step (SB3's and CleanRL's convention: N times fewer
  updates per env step). ``acting_env_steps_per_s.num_envs_N`` is the acting side alone (N envs, one batched policy
  call per step, the scripted human, no learner): what the envs and the policy call cost; and
  ``acting_async_env_steps_per_s.num_envs_N`` the same with ``train.vectorization=async`` (each env and its human in
  a worker process, stepping in parallel), its ratio to one env in this process.

- full mode only: ``to_90.num_envs_N``, the main job (``robot-rl train``, pick_cube, its default budget and
  evaluations) with ``train.num_envs`` 1 and the N of the highest ``vector_updates_env_steps_per_s`` (with
  ``train.update_every=N``): env steps and wall seconds of the first evaluation at >= 90% success; and ``ros_robots``: ``robot-rl launch sim_train`` (sim time) with one
  robot and with ``fleet.robots=[r0,r1]``, ``--robot-steps`` online steps in all: env steps per wall second, each
  robot's online steps and episodes (the learner's ``robots.json``), and the learner's updates against those due.

Ray runs: 1, 2, 4, 8 and 12 actors, as many as this machine has cores for (at least 1 and 2), unless
``--ray-actors`` names them. ``--parts`` picks what to measure (integrity, recording, driver, acting, train, ray;
default all).

    python -m benchmarks.fleet [--quick] [--steps 3000] [--num-envs 1 2 4 8] [--parts ray] [--ray-actors 1 8]

``--quick``: 1,500 online steps per run, no ``to_90`` and no ``ros_robots``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import to_threshold, write_result
from robot_rl.cli.graph import reserved_ros_domain
from robot_rl.core.composed_config import load_config
from robot_rl.core.transport import LocalTransport, updates_due
from robot_rl.data.delivery_ledger import Numbered
from robot_rl.data.streams import stored_tuples
from robot_rl.data.transition import Provenance, Transition
from robot_rl.runtime.fleet_settings import PACES
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.train_settings import TrainSettings

RAY_ACTORS = (1, 2, 4, 8, 12)  # Ray runs: those this machine has the cores for (always 1 and 2)


class _Agent:
    class config:
        discount = 0.97


def streams(count: int, rng: np.random.Generator) -> list[list[Transition]]:
    """``count`` actors' streams: episodes of 20-100 steps with a 28-dim state, human takeovers now and then."""
    out = []
    for actor in range(count):
        transitions, step_count = [], 0
        for number in range(int(rng.integers(3, 6))):
            length = int(rng.integers(20, 101))
            states = rng.normal(size=(length + 1, 28)).astype(np.float32)
            for t in range(length):
                transitions.append(
                    Transition(
                        obs={"state": states[t]},
                        action=rng.uniform(-1, 1, 7).astype(np.float32),
                        reward=float(rng.normal()),
                        next_obs={"state": states[t + 1]},
                        terminated=t == length - 1 and rng.random() < 0.5,
                        truncated=t == length - 1,
                        intervened=bool(rng.random() < 0.1),
                        first=t == 0,
                        origin=Provenance(f"a{actor}e{number}", t, f"actor{actor}"),
                    )
                )
                step_count += 1
        out.append(transitions)
    return out


def replay_integrity(count: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    all_streams = streams(count, rng)

    def learner() -> Learner:
        return Learner(_Agent(), TrainSettings(buffer_capacity=50_000), {"state": (28,)}, 7, LocalTransport(), seed=0)

    sequential, interleaved = learner(), learner()
    for transitions in all_streams:
        sequential.ingest(transitions)
    cursors = [0] * count
    while any(cursor < len(s) for cursor, s in zip(cursors, all_streams)):
        actor = int(rng.choice([k for k in range(count) if cursors[k] < len(all_streams[k])]))
        interleaved.ingest([all_streams[actor][cursors[actor]]])
        cursors[actor] += 1
    interleaved.router.flush()
    expected, got = stored_tuples(sequential.online), stored_tuples(interleaved.online)
    mismatched = len(set(expected) ^ set(got)) + abs(len(expected) - len(got))
    return {
        "streams": count,
        "transitions": sum(map(len, all_streams)),
        "mismatched_transitions": mismatched,
        "demo_segments_match": stored_tuples(sequential.demo) == stored_tuples(interleaved.demo),
    }


def train_run(run_dir: Path, steps: int, *overrides: str) -> dict:
    """The summary of ``robot-rl train task=pick_cube`` for ``steps`` online steps (no evaluation before the end)."""
    command = [
        *(sys.executable, "-m", "robot_rl.cli.main", "train", "task=pick_cube", *overrides),
        f"train.run_dir={run_dir}",
        f"train.env_steps={steps}",
        "train.eval_every=1000000",
        "train.final_eval_episodes=5",
    ]
    result = subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stderr[-3000:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {**summary, "env_steps_per_s": round(summary["env_steps"] / summary["wall_seconds"], 2)}


def ray_run(actors: int, steps: int, pace: str, folder: Path) -> dict:
    """``robot-rl train fleet=ray`` with ``actors`` actors at ``fleet.pace=<pace>`` for ``steps`` online steps:
    ``env_steps_per_s`` once every actor is playing (the summary's ``fleet.all_actors_env_steps_per_s``: the fleet
    at full strength, from the hand-in by which every actor had handed in online steps to the one that spent the
    budget), ``first_online_env_steps_per_s`` from the first online hand-in (actors that started later count from
    when they did), ``wall_env_steps_per_s`` over the whole run (Ray's start, the demonstrations and the final
    evaluation included); ``actor_busy_fraction``: the share of their time the actors played rather than waited for
    a play."""
    summary = train_run(folder / f"ray_{actors}", steps, "fleet=ray", f"fleet.actors={actors}", f"fleet.pace={pace}")
    fleet = summary["fleet"]
    return {
        "actors": actors,
        "pace": pace,
        "env_steps": summary["env_steps"],
        "transitions_received": fleet["transitions_received"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "env_steps_per_s": fleet["all_actors_env_steps_per_s"],
        "first_online_env_steps_per_s": fleet["online_env_steps_per_s"],
        "wall_env_steps_per_s": summary["env_steps_per_s"],
        "actor_busy_fraction": fleet["actor_busy_fraction"],
        "updates_made": fleet["updates_made"],
        "updates_owed": fleet["updates_owed"],
        "crashes": fleet["crashes"],
    }


def vector_run(num_envs: int, update_every: int, steps: int, folder: Path) -> float:
    """Online env steps per wall second of ``robot-rl train train.num_envs=<num_envs>`` on pick_cube, one update call
    per ``update_every`` env steps."""
    overrides = (f"train.num_envs={num_envs}", f"train.update_every={update_every}")
    return train_run(folder / f"envs_{num_envs}_every_{update_every}", steps, *overrides)["env_steps_per_s"]


def acting_speed(num_envs: int, steps: int, vectorization: str = "sync") -> float:
    """Env steps per second of the acting side alone: ``num_envs`` pick_cube envs (``train.vectorization``: in this
    process, or each in a worker process) with one batched policy call per step and the scripted human, transitions
    sent to a transport nobody learns from (drained as they come)."""
    from omegaconf import OmegaConf

    from robot_rl.runtime.envs import observation_shapes
    from robot_rl.runtime.run_setup import acting_envs
    from robot_rl.runtime.session import ActorSession
    from robot_rl.runtime.train_settings import settings_from

    overrides = [f"train.env_steps={steps}", f"train.num_envs={num_envs}", f"train.vectorization={vectorization}"]
    cfg = load_config(["task=pick_cube", *overrides])
    task = OmegaConf.to_container(cfg.task, resolve=True)
    envs, humans = acting_envs(cfg, settings_from(cfg.train), task, 0)
    shapes, action_dim = observation_shapes(envs[0]), int(envs[0].action_space.shape[0])
    acting, transport = ActorSession(cfg, shapes, action_dim, humans[0]), LocalTransport()
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    for _ in acting.play_envs(
        envs,
        humans,
        transport,
        [None] * num_envs,
        lambda: int(rng.integers(2**31)),
        transport.arrivals.take_all,
    ):
        pass
    seconds = time.perf_counter() - started
    for env in envs:
        env.close()
    return round(acting.counters.env_steps / seconds, 1)


def driver_take_in(episodes: int, streams: int = 8) -> dict:
    """What the Ray fleet's driver spends per online step taking hand-ins in (the calls of ``robot_rl/runtime/fleet.py``'s
    loop, on this thread): decoding a play's payload (``decode_hand_in``), ingesting its transitions into the replay's
    stream writers (``Learner.ingest_locked``, ``streams`` actors interleaved) and counting and logging its episodes
    (``Counters.count_episode`` and ``Run.episode_ended``, TensorBoard included); microseconds per step each, and the online steps per second a driver
    doing nothing else could take in (``ceiling_steps_per_s``). The payloads: ``episodes`` pick_cube episodes that a
    :class:`~robot_rl.runtime.fleet.SimActor` plays in this process on its first weights, as one of the benchmark's Ray
    actors plays them."""
    from omegaconf import OmegaConf

    from robot_rl.data.wire import TransitionSchema, encode_weights
    from robot_rl.runtime.envs import observation_shapes
    from robot_rl.runtime.fleet import SimActor, actor_config, decode_hand_in
    from robot_rl.runtime.run_loop import Run
    from robot_rl.runtime.session import LearnerSession

    with tempfile.TemporaryDirectory() as folder:
        cfg = load_config(["task=pick_cube", "fleet=ray", f"train.run_dir={folder}/run"])
        actor = SimActor(actor_config(OmegaConf.to_container(cfg, resolve=True), 0, 1, demos=0), "ray0")
        weights = encode_weights(actor.session.agent.policy_state(), {"version": 1})
        plays = [actor.play(1, weights, 1) for _ in range(episodes)]
        shapes, action_dim = observation_shapes(actor.env), int(actor.env.action_space.shape[0])
        learning = LearnerSession(cfg, shapes, action_dim, LocalTransport())
        counters, learner = learning.open(resume=False), learning.learner
        schema, run = TransitionSchema(shapes, action_dim), Run(learning, counters, "pick_cube", title="fleet")
        seconds = {"decode": 0.0, "ingest": 0.0, "count": 0.0}
        for index, (payload, report) in enumerate(plays):
            began = time.perf_counter()
            delivered = decode_hand_in(schema, payload)
            decoded = time.perf_counter()
            # the plays of ``streams`` actors
            delivered = [Numbered(n.transition.by(f"ray{index % streams}")) for n in delivered]
            ingesting = time.perf_counter()
            learner.ingest_locked(delivered)
            ingested = time.perf_counter()
            for episode in json.loads(report)["episodes"]:
                counters.count_episode(episode["demo"], episode["length"])
                run.episode_ended(episode, actor=episode["actor"])
            seconds["decode"] += decoded - began
            seconds["ingest"] += ingested - ingesting
            seconds["count"] += time.perf_counter() - ingested
        run.progress.close()
        run.tb.close()
        actor.env.close()
    steps = counters.env_steps
    per_step = {f"{part}_us_per_step": round(spent / steps * 1e6, 1) for part, spent in seconds.items()}
    return {
        "episodes": episodes,
        "steps": steps,
        "streams": streams,
        **per_step,
        "ceiling_steps_per_s": round(steps / sum(seconds.values())),
    }


def recording_speed(streams: int, episodes_per_stream: int, steps: int = 40) -> dict:
    """One recorder process taking ``streams`` actor streams of ``episodes_per_stream`` episodes of ``steps`` steps
    (pick_cube's observations, handed in as the fleet's actors do): env steps recorded per second, and the
    process's CPU time per step (read once it has ended)."""
    import resource
    import uuid
    from functools import partial

    from omegaconf import OmegaConf

    from robot_rl.data import StreamRecorders
    from robot_rl.data.wire import TransitionSchema, encode_transitions
    from robot_rl.runtime.envs import observation_shapes
    from robot_rl.runtime.fleet import decode_hand_in
    from robot_rl.runtime.run_setup import episode_store, sim_env

    cfg = load_config(["task=pick_cube"])
    task = OmegaConf.to_container(cfg.task, resolve=True)
    env = sim_env(cfg, task, 0, randomize=False)
    schema = TransitionSchema(observation_shapes(env), int(env.action_space.shape[0]))
    rng = np.random.default_rng(0)

    def episode(actor: str) -> bytes:
        obs, _ = env.reset(seed=int(rng.integers(2**31)))
        uid, transitions = uuid.uuid4().hex, []
        for step in range(steps):
            action = env.action_space.sample()
            next_obs, reward, _, _, info = env.step(action)  # the episode ends after ``steps``, as a budget cuts it
            transitions.append(
                Transition(
                    obs=obs,
                    action=action,
                    reward=float(reward),
                    next_obs=next_obs,
                    terminated=False,
                    truncated=step == steps - 1,
                    first=step == 0,
                    policy_action=action,
                    success=bool(info["success"]),
                    origin=Provenance(uid, step, actor),
                )
            )
            obs = next_obs
        return encode_transitions([Numbered(t) for t in transitions])

    hand_ins = [(f"ray{k}", episode(f"ray{k}")) for _ in range(episodes_per_stream) for k in range(streams)]
    with tempfile.TemporaryDirectory() as folder:
        store = episode_store(cfg, Path(folder), task, env)
        env.close()
        recorders = StreamRecorders(store, partial(decode_hand_in, schema), processes=1)
        recorders.flush()  # started and ready
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        for name, payload in hand_ins:
            recorders.add(name, payload)
        recorders.flush()
        seconds = time.perf_counter() - started
        recorders.close()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the recorder's, now that it has ended
        recorded = len(store)
    total = len(hand_ins) * steps
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "processes": 1,
        "streams": streams,
        "episodes": recorded,
        "steps_per_s": round(total / seconds, 1),
        "cpu_ms_per_step": round(1e3 * cpu / total, 3),
    }


def time_to_90(num_envs: int, folder: Path) -> dict:
    """The main job with ``train.num_envs=<num_envs>`` and one update call per vector step
    (``train.update_every=<num_envs>``): the first evaluation at >= 90% success."""
    run_dir = folder / f"to90_envs_{num_envs}"
    command = [
        *(sys.executable, "-m", "robot_rl.cli.main", "train", f"train.num_envs={num_envs}"),
        *(f"train.update_every={num_envs}", f"train.run_dir={run_dir}"),
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    summary = json.loads((run_dir / "summary.json").read_text())
    return {**to_threshold(summary["eval_history"], 0.9), "final_eval_success": summary["final_eval_success"]}


def ros_robots_run(robots: int, steps: int, folder: Path) -> dict:
    """``robot-rl launch sim_train`` on pick_cube (state, sim time) with ``robots`` robots (1: no ``fleet.robots``)
    for ``steps`` online steps in all."""
    run_dir = folder / f"ros_robots_{robots}"
    names = [f"r{index}" for index in range(robots)]
    fleet = [f"fleet.robots=[{','.join(names)}]"] if robots > 1 else []
    command = [
        *(sys.executable, "-m", "robot_rl.cli.main", "launch", "sim_train", "task=pick_cube", *fleet),
        *(f"train.env_steps={steps}", f"train.run_dir={run_dir}", "ros.eval_every_episodes=0"),
    ]
    with reserved_ros_domain() as domain:
        started = time.monotonic()
        environment = {**os.environ, "ROS_DOMAIN_ID": str(domain)}
        result = subprocess.run(command, check=False, env=environment, capture_output=True, text=True)
        wall = time.monotonic() - started
    if result.returncode != 0 or "Traceback" in result.stdout:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout[-3000:]}")
    counters = json.loads((run_dir / "checkpoint" / "counters.json").read_text())
    per_robot = json.loads((run_dir / "robots.json").read_text()) if robots > 1 else {}
    return {
        "robots": robots,
        "online_steps": counters["online_received"],
        "wall_seconds": round(wall, 1),
        "env_steps_per_s": round(counters["online_received"] / wall, 2),
        "updates": counters["update_calls"],
        "updates_due": updates_due(counters["online_received"], 0, int(load_config([]).train.start_training)),
        "per_robot": {
            name: {k: c[k] for k in ("steps", "episodes", "successes", "takeover_steps")}
            for name, c in per_robot.items()
        },
    }


PARTS = ("integrity", "recording", "driver", "acting", "train", "ray")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,500 online steps per run, no to_90 or ros_robots")
    parser.add_argument("--robot-steps", type=int, default=1_200, help="online steps of each ros_robots run")
    parser.add_argument("--steps", type=int, default=3_000, help="online steps of each train.num_envs run")
    parser.add_argument("--streams", type=int, default=6)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 2, 4, 8], help="train.num_envs values")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS), help="what to measure")
    parser.add_argument(
        "--ray-actors", type=int, nargs="+", help="Ray actor counts (default: 1, 2, 4, 8, 12 as cores allow)"
    )
    parser.add_argument("--ray-pace", choices=PACES, default="actors", help="fleet.pace of the Ray runs")
    parser.add_argument("--ray-steps-per-actor", type=int, default=1_500, help="a Ray run's online steps per actor")
    parser.add_argument("--recorder-streams", type=int, default=3, help="actor streams of the recording part")
    parser.add_argument("--name", help="the result's name (default: fleet, fleet_quick with --quick)")
    args = parser.parse_args()
    if args.quick:
        args.steps = args.ray_steps_per_actor = 1_500
    cores = os.cpu_count() or 1
    ray_actors = args.ray_actors or [count for count in RAY_ACTORS if count <= max(cores, 2)]
    first = f"num_envs_{args.num_envs[0]}"
    figures: dict = {}
    if "integrity" in args.parts:
        figures["replay_integrity"] = replay_integrity(args.streams)
        print("replay integrity", figures["replay_integrity"], flush=True)
    if "recording" in args.parts:
        figures["recording"] = recording_speed(args.recorder_streams, 10 if args.quick else 30)
        print("recording", figures["recording"], flush=True)
    if "driver" in args.parts:
        figures["driver_take_in"] = driver_take_in(20 if args.quick else 100)
        print("driver take-in", figures["driver_take_in"], flush=True)
    if "acting" in args.parts:
        acting = {f"num_envs_{n}": acting_speed(n, args.steps) for n in args.num_envs}
        figures["acting_env_steps_per_s"] = acting
        figures["acting_ratio"] = {key: round(value / acting[first], 2) for key, value in acting.items()}
        print("acting env steps/s", acting, flush=True)
        workers = {f"num_envs_{n}": acting_speed(n, args.steps, "async") for n in args.num_envs if n > 1}
        figures["acting_async_env_steps_per_s"] = workers
        figures["acting_async_ratio"] = {key: round(value / acting[first], 2) for key, value in workers.items()}
        print("acting env steps/s, each env in a worker process", workers, flush=True)
    with tempfile.TemporaryDirectory() as folder:
        if "train" in args.parts:
            measured: dict[tuple[int, int], float] = {}  # (num_envs, update_every) -> env steps/s: 1 env runs once
            for name, every in (("env_steps_per_s", lambda n: 1), ("vector_updates_env_steps_per_s", lambda n: n)):
                for n in args.num_envs:
                    if (n, every(n)) not in measured:
                        measured[n, every(n)] = vector_run(n, every(n), args.steps, Path(folder))
                training = {f"num_envs_{n}": measured[n, every(n)] for n in args.num_envs}
                figures[name] = training
                figures[f"{name}_ratio"] = {key: round(value / training[first], 2) for key, value in training.items()}
                print(f"train {name}", training, flush=True)
        if "ray" in args.parts:
            runs = []
            for count in ray_actors:
                runs.append(ray_run(count, count * args.ray_steps_per_actor, args.ray_pace, Path(folder)))
                print("ray", runs[-1], flush=True)
            figures["ray"] = {**runs[-1], "per_actor_count": runs}
            figures["ray_speedup"] = round(runs[-1]["env_steps_per_s"] / runs[0]["env_steps_per_s"], 2)
        if not args.quick and "train" in args.parts:
            fastest = figures["vector_updates_env_steps_per_s"]
            best = max((n for n in args.num_envs if n > 1), key=lambda n: fastest[f"num_envs_{n}"])
            figures["to_90"] = {f"num_envs_{n}": time_to_90(n, Path(folder)) for n in (1, best)}
            print("to 90%", figures["to_90"], flush=True)
            figures["ros_robots"] = {f"robots_{n}": ros_robots_run(n, args.robot_steps, Path(folder)) for n in (1, 2)}
            print("ros robots", figures["ros_robots"], flush=True)
    settings = {
        "task": "pick_cube",
        "parts": args.parts,
        "steps": args.steps,
        "streams": args.streams,
        "num_envs": args.num_envs,
        "robot_steps": args.robot_steps,
        "ray_actors": ray_actors,
        "ray_pace": args.ray_pace,
        "ray_steps_per_actor": args.ray_steps_per_actor,
        "recorder_streams": args.recorder_streams,
    }
    path = write_result(args.name or ("fleet_quick" if args.quick else "fleet"), figures, settings=settings)
    print(json.dumps(figures, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
