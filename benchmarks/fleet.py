"""Many actors, one learner: replay integrity under interleaved streams, and the Ray fleet's throughput.

- ``replay_integrity``: K actor streams of pick_cube-shaped transitions (random episode lengths, human takeovers)
  fed to one learner in a random interleaving, against the same streams fed one after another: the stored
  (obs, action, reward, next obs, end flags) tuples of both buffers must be the same; ``mismatched_transitions``
  counts those that are not (0 is right).
- ``ray``: ``robot-rl train fleet=ray`` on pick_cube (state) with 1 and ``--actors`` Ray actors for ``--steps``
  online steps each, side by side in one run: env steps per second (the learner keeps the update-to-data ratio of
  ``robot-rl train``, so on few cores the learner, not the actors, sets the pace) and transitions received.

    python -m benchmarks.fleet [--quick] [--actors 2] [--steps 3000]

``--quick``: 1,500 online steps per Ray run. Vectorized envs in one process (``train.num_envs``) are not built yet:
no ``env_steps_per_s`` figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import write_result
from robot_rl.data.streams import stored_tuples
from robot_rl.data.transition import Transition
from robot_rl.learner import Learner, TrainSettings
from robot_rl.transport import LocalTransport


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


def ray_run(actors: int, steps: int, folder: Path) -> dict:
    run_dir = folder / f"ray_{actors}"
    robot_rl = [sys.executable, "-m", "robot_rl.cli"]
    command = [
        *robot_rl,
        "train",
        "task=pick_cube",
        "fleet=ray",
        f"fleet.actors={actors}",
        f"train.run_dir={run_dir}",
        f"train.env_steps={steps}",
        "train.eval_every=1000000",
        "train.final_eval_episodes=5",
    ]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "actors": actors,
        "env_steps": summary["env_steps"],
        "transitions_received": summary["fleet"]["transitions_received"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "env_steps_per_s": round(summary["env_steps"] / summary["wall_seconds"], 2),
        "crashes": summary["fleet"]["crashes"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1,500 online steps per Ray run")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3_000)
    parser.add_argument("--streams", type=int, default=6)
    args = parser.parse_args()
    if args.quick:
        args.steps = 1_500
    integrity = replay_integrity(args.streams)
    print("replay integrity", integrity, flush=True)
    with tempfile.TemporaryDirectory() as folder:
        runs = [ray_run(count, args.steps, Path(folder)) for count in sorted({1, args.actors})]
    print("ray", runs, flush=True)
    largest = runs[-1]
    figures = {
        "replay_integrity": integrity,
        "ray": {**largest, "per_actor_count": runs},
        "ray_speedup": round(largest["env_steps_per_s"] / runs[0]["env_steps_per_s"], 2),
    }
    name = "fleet_quick" if args.quick else "fleet"
    path = write_result(name, figures, settings={"task": "pick_cube", "steps": args.steps, "streams": args.streams})
    print(json.dumps(figures, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
