"""Learned resets against a person's reset before every episode (issue 76), pick_cube in process, same online budget.

Two ways per seed, each a ``robot-rl train`` run of pick_cube (state, scripted demos and takeovers):

  person   today's run: an env reset (the person) before every episode   (scene_reset.mode=person)
  learned  after each forward episode the backward policy puts the cube back; the person resets only after
           scene_reset.give_up_after backward failures in a row or a scene out of the backward task's bounds
           (scene_reset.mode=learned)

Reported per run: the forward evaluations over online forward steps (20 deterministic episodes from env resets, as
always), forward steps to 90%, person resets per forward episode, the backward policy's success rate, takeover steps
of each policy, backward steps; and the medians over seeds with the issue's targets (person resets per forward
episode <= 0.2, forward steps to 90% at most 1.5x the person-reset run's). Both ways spend the whole budget (no
``train.stop_at_success``), so the person's resets are counted over the same forward steps.

Resumable: each finished run is written into the result at once; a rerun with the same settings skips the runs the
result holds (``--fresh`` starts over).

    nice -n 5 python -m benchmarks.learned_resets [--seeds 0 1 2] [--steps 3000] [--eval-every 250] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import common
from benchmarks.common import curve, run_training, to_threshold, write_result

NAME = "learned_resets"
MODES = {"person": ["scene_reset.mode=person"], "learned": ["scene_reset.mode=learned"]}
TARGET = 0.9  # forward success the runs are timed to
TARGETS = {"person_resets_per_forward_episode": 0.2, "steps_to_90_ratio": 1.5}  # issue 76's acceptance, in process


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "task": "pick_cube (state)",
        "env_steps": args.steps,
        "eval_every": args.eval_every,
        "eval_episodes": 20,
        "give_up_after": 3,
        "demo_episodes": {"forward": 20, "backward": 20},
    }


def one_run(mode: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One ``robot-rl train`` run of ``mode`` on ``seed``: its figures."""
    summary = run_training(
        args.runs / f"{mode}_seed{seed}",
        [
            "task=pick_cube",
            f"seed={seed}",
            f"train.env_steps={args.steps}",
            f"train.eval_every={args.eval_every}",
            "train.eval_episodes=20",
            "train.final_eval_episodes=20",
            *MODES[mode],
        ],
    )
    history = summary["eval_history"]
    resets = summary.get("learned_resets")
    forward_episodes = summary["episodes"] - summary["demo_episodes"]
    return {
        "history": curve(history),  # (online forward steps, eval success, wall s)
        "to_90": to_threshold(history, TARGET),
        "final_success": history[-1]["success_rate"] if history else None,
        "env_steps": summary["env_steps"],
        "wall_seconds": summary["wall_seconds"],
        "forward_episodes": forward_episodes,
        # person mode: the person resets before every episode
        "person_resets_per_forward_episode": 1.0 if resets is None else resets["person_resets_per_forward_episode"],
        "person_resets": forward_episodes if resets is None else resets["person_resets"],
        "backward_success_rate": None if resets is None else resets["backward_success_rate"],
        "backward_episodes": 0 if resets is None else resets["backward_episodes"],
        "backward_env_steps": 0 if resets is None else resets["backward_env_steps"],
        "give_ups": None if resets is None else resets["give_ups"],
        "out_of_bounds": None if resets is None else resets["out_of_bounds"],
        "takeover_steps": {
            "forward": summary["intervention_steps"],
            "backward": 0 if resets is None else resets["takeover_steps"]["backward"],
        },
    }


def medians(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per mode, the medians over its seeds (steps to 90%: None when a seed did not reach it), and the issue's targets
    checked where both modes have runs."""

    def median(values: list) -> float | None:
        return None if not values or any(v is None for v in values) else float(np.median(values))

    table: dict[str, Any] = {}
    for mode in MODES:
        rows = [row for key, row in runs.items() if key.startswith(f"{mode}/")]
        if not rows:
            continue
        table[mode] = {
            "seeds": len(rows),
            "steps_to_90": median([r["to_90"].get("env_steps") for r in rows]),
            "reached_90": sum(r["to_90"]["reached"] for r in rows),
            "person_resets_per_forward_episode": median([r["person_resets_per_forward_episode"] for r in rows]),
            "backward_success_rate": median([r["backward_success_rate"] for r in rows]) if mode == "learned" else None,
            "takeover_steps": {
                policy: median([r["takeover_steps"][policy] for r in rows]) for policy in ("forward", "backward")
            },
            "backward_env_steps": median([r["backward_env_steps"] for r in rows]),
        }
    if "person" in table and "learned" in table:
        learned, person = table["learned"], table["person"]
        ratio = None
        if learned["steps_to_90"] is not None and person["steps_to_90"]:
            ratio = learned["steps_to_90"] / person["steps_to_90"]
        table["steps_to_90_ratio"] = ratio
        table["targets"] = {
            **TARGETS,
            "person_resets_met": learned["person_resets_per_forward_episode"] is not None
            and learned["person_resets_per_forward_episode"] <= TARGETS["person_resets_per_forward_episode"],
            "steps_to_90_met": ratio is not None and ratio <= TARGETS["steps_to_90_ratio"],
        }
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=3000, help="online forward env steps per run")
    parser.add_argument("--eval-every", type=int, default=250)
    parser.add_argument("--workers", type=int, default=2, help="runs at a time (each a process)")
    parser.add_argument("--runs", type=Path, default=Path("runs/bench_learned_resets"))
    parser.add_argument("--fresh", action="store_true", help="forget the runs the last result holds")
    args = parser.parse_args()
    settings = settings_of(args)
    path = common.RESULTS / f"{NAME}.json"
    runs: dict[str, Any] = {}
    if path.is_file() and not args.fresh:
        last = json.loads(path.read_text())
        if last.get("settings") == settings:  # the same measurement: go on from it
            runs = last["figures"]["runs"]
    todo = [(mode, seed) for seed in args.seeds for mode in MODES if f"{mode}/seed{seed}" not in runs]
    lock = threading.Lock()

    def measure(mode: str, seed: int) -> None:
        row = one_run(mode, seed, args)
        with lock:  # written at once: a stopped benchmark keeps every run it finished
            runs[f"{mode}/seed{seed}"] = row
            write_result(NAME, {"runs": dict(sorted(runs.items())), "medians": medians(runs)}, settings=settings)
            print(
                f"{mode} seed {seed}: {json.dumps({k: row[k] for k in ('to_90', 'person_resets_per_forward_episode', 'backward_success_rate', 'takeover_steps')})}",
                flush=True,
            )

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        for future in [pool.submit(measure, mode, seed) for mode, seed in todo]:
            future.result()
    print(json.dumps(medians(runs), indent=2))


if __name__ == "__main__":
    main()
