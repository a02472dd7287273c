"""Many actors, one learner: replay integrity under interleaved streams, and the Ray fleet's throughput.

- ``replay_integrity``: K actor streams of pick_cube-shaped transitions (random episode lengths, human takeovers)
  fed to one learner in a random interleaving, against the same streams fed one after another: the stored
  (obs, action, reward, next obs, end flags) tuples of both buffers must be the same; ``mismatched_transitions``
  counts those that are not (0 is right).
- ``ray``: ``robot-rl train fleet=ray`` on pick_cube (state) with 1 and ``--actors`` Ray actors for ``--steps``
  online steps each, side by side in one run: env steps per second (the learner keeps the update-to-data ratio of
  ``robot-rl train``, so on few cores the learner, not the actors, sets the pace) and transitions received.

- ``env_steps_per_s.num_envs_N``: ``robot-rl train train.num_envs=N`` on pick_cube (state, the main job's settings
  otherwise) for ``--steps`` online steps: online env steps per wall second of the run (demonstrations and
  evaluations included). The learner keeps the update-to-data ratio, so where it sets the pace (2 cores) more envs
  cannot make more steps; ``acting_env_steps_per_s.num_envs_N`` is the acting side alone (N envs, one batched
  policy call per step, the scripted human, no learner): what the envs and the policy call cost.

- full mode only: ``to_90.num_envs_N``, the main job (``robot-rl train``, pick_cube, its default budget and
  evaluations) with ``train.num_envs`` 1 and the N of the highest ``env_steps_per_s``: env steps and wall seconds of
  the first evaluation at >= 90% success; and ``ros_robots``: ``robot-rl launch sim_train`` (sim time) with one
  robot and with ``fleet.robots=[r0,r1]``, ``--robot-steps`` online steps in all: env steps per wall second, each
  robot's online steps and episodes (the learner's ``robots.json``), and the learner's updates against those due.

Ray runs: 1, 2, 4, 8 and 12 actors, as many as this machine has cores for (at least 1 and 2).

    python -m benchmarks.fleet [--quick] [--steps 3000] [--num-envs 1 2 4 8]

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
from robot_rl.composed_config import load_config
from robot_rl.data.streams import stored_tuples
from robot_rl.data.transition import Transition
from robot_rl.graph import reserved_ros_domain
from robot_rl.learner import Learner, TrainSettings, updates_due
from robot_rl.transport import LocalTransport

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
                        episode=f"a{actor}e{number}",
                        step=t,
                        actor=f"actor{actor}",
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
    interleaved.flush_streams()
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
        *(sys.executable, "-m", "robot_rl.cli", "train", "task=pick_cube", *overrides),
        f"train.run_dir={run_dir}",
        f"train.env_steps={steps}",
        "train.eval_every=1000000",
        "train.final_eval_episodes=5",
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    summary = json.loads((run_dir / "summary.json").read_text())
    return {**summary, "env_steps_per_s": round(summary["env_steps"] / summary["wall_seconds"], 2)}


def ray_run(actors: int, steps: int, folder: Path) -> dict:
    summary = train_run(folder / f"ray_{actors}", steps, "fleet=ray", f"fleet.actors={actors}")
    return {
        "actors": actors,
        "env_steps": summary["env_steps"],
        "transitions_received": summary["fleet"]["transitions_received"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "env_steps_per_s": summary["env_steps_per_s"],
        "crashes": summary["fleet"]["crashes"],
    }


def vector_run(num_envs: int, steps: int, folder: Path) -> float:
    """Online env steps per wall second of ``robot-rl train train.num_envs=<num_envs>`` on pick_cube."""
    return train_run(folder / f"envs_{num_envs}", steps, f"train.num_envs={num_envs}")["env_steps_per_s"]


def acting_speed(num_envs: int, steps: int) -> float:
    """Env steps per second of the acting side alone: ``num_envs`` pick_cube envs with one batched policy call per
    step and the scripted human, transitions sent to a transport nobody learns from (drained as they come)."""
    from omegaconf import OmegaConf

    from robot_rl.composed_config import load_config
    from robot_rl.envs import observation_shapes
    from robot_rl.session import ActorSession
    from robot_rl.train import scripted_human, sim_env

    cfg = load_config(["task=pick_cube", f"train.env_steps={steps}"])
    task = OmegaConf.to_container(cfg.task, resolve=True)
    envs = [sim_env(cfg, task, 1000 * k, randomize=True) for k in range(num_envs)]
    shapes, action_dim = observation_shapes(envs[0]), int(envs[0].action_space.shape[0])
    humans = [scripted_human(cfg, task, env) for env in envs]
    acting, transport = ActorSession(cfg, shapes, action_dim, humans[0]), LocalTransport()
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    for _ in acting.play_envs(
        envs,
        humans,
        transport,
        [None] * num_envs,
        lambda: int(rng.integers(2**31)),
        lambda: transport.receive_transitions(0.0),
    ):
        pass
    seconds = time.perf_counter() - started
    for env in envs:
        env.close()
    return round(acting.counters.env_steps / seconds, 1)


def time_to_90(num_envs: int, folder: Path) -> dict:
    """The main job with ``train.num_envs=<num_envs>``: the first evaluation at >= 90% success."""
    run_dir = folder / f"to90_envs_{num_envs}"
    command = [sys.executable, "-m", "robot_rl.cli", "train", f"train.num_envs={num_envs}", f"train.run_dir={run_dir}"]
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
        *(sys.executable, "-m", "robot_rl.cli", "launch", "sim_train", "task=pick_cube", *fleet),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,500 online steps per Ray run")
    parser.add_argument("--robot-steps", type=int, default=1_200, help="online steps of each ros_robots run")
    parser.add_argument("--steps", type=int, default=3_000)
    parser.add_argument("--streams", type=int, default=6)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 2, 4, 8], help="train.num_envs values")
    args = parser.parse_args()
    if args.quick:
        args.steps = 1_500
    integrity = replay_integrity(args.streams)
    print("replay integrity", integrity, flush=True)
    acting = {f"num_envs_{n}": acting_speed(n, args.steps) for n in args.num_envs}
    print("acting env steps/s", acting, flush=True)
    with tempfile.TemporaryDirectory() as folder:
        training = {f"num_envs_{n}": vector_run(n, args.steps, Path(folder)) for n in args.num_envs}
        print("train env steps/s", training, flush=True)
        cores = os.cpu_count() or 1
        runs = [ray_run(count, args.steps, Path(folder)) for count in RAY_ACTORS if count <= max(cores, 2)]
        print("ray", runs, flush=True)
        first = f"num_envs_{args.num_envs[0]}"
        extra = {}
        if not args.quick:
            best = max((n for n in args.num_envs if n > 1), key=lambda n: training[f"num_envs_{n}"])
            extra["to_90"] = {f"num_envs_{n}": time_to_90(n, Path(folder)) for n in (1, best)}
            print("to 90%", extra["to_90"], flush=True)
            extra["ros_robots"] = {f"robots_{n}": ros_robots_run(n, args.robot_steps, Path(folder)) for n in (1, 2)}
            print("ros robots", extra["ros_robots"], flush=True)
    largest = runs[-1]
    figures = {
        "env_steps_per_s": training,
        "env_steps_per_s_ratio": {key: round(value / training[first], 2) for key, value in training.items()},
        "acting_env_steps_per_s": acting,
        "acting_ratio": {key: round(value / acting[first], 2) for key, value in acting.items()},
        "replay_integrity": integrity,
        "ray": {**largest, "per_actor_count": runs},
        "ray_speedup": round(largest["env_steps_per_s"] / runs[0]["env_steps_per_s"], 2),
        **extra,
    }
    name = "fleet_quick" if args.quick else "fleet"
    settings = {
        "task": "pick_cube",
        "steps": args.steps,
        "streams": args.streams,
        "num_envs": args.num_envs,
        "robot_steps": args.robot_steps,
    }
    path = write_result(name, figures, settings=settings)
    print(json.dumps(figures, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
