"""The pixel main job on the CPU: pick_cube from two 64x64 cameras (front, wrist), no object pose at all, the
scripted demonstrations and human of the README's main job, the frozen pretrained encoder
(``agent.camera_encoder=pretrained``) against today's DrQ CNN on the same budget, several seeds (issue 74).

    python -m benchmarks.pixel_learning_cpu [--seeds 0 1 2] [--steps 2000] [--encoders pretrained drq] [--merge]
        [--max-seconds S] [overrides ...]

Each run is ``robot-rl train`` with the main job's defaults and ``PIXEL_TASK``, one after the other (the actor and
the learner thread one torch thread each, ``train.torch_threads``). Per encoder and seed
(``per_encoder.<encoder>.per_seed``): what ``benchmarks.main_job`` records (steps and seconds to the first
evaluation at >= 90%, final success, takeover rate) plus ``updates_per_second`` (the learner's update calls, each of
``agent.utd`` critic steps, over the run's wall seconds, demonstrations included). Per encoder:
``median_steps_to_90`` and ``median_seconds_to_90`` (a seed that never got there counts as infinitely late: null
when half or more never did), ``seeds_at_90``, ``min_final_eval_success``, ``median_updates_per_second``; and
``pretrained_vs_drq_seconds_to_90`` (DrQ's median seconds to 90% over the pretrained encoder's; a run that never
reached 90% counts its whole wall time, so with ``--max-seconds`` a lower bound). The plot beside it
(``pixel_learning_cpu.png``): evaluation success against wall seconds and against online steps.

Writes ``benchmarks/results/pixel_learning_cpu.json``; with ``--merge`` the encoders of the file already there that
this invocation did not run stay in it (one encoder at a time, on the same seeds and ``--steps``; ``provenance``
says which command and date measured each; ``--merge --encoders`` with none runs nothing and recomputes the file's
aggregates). ``--max-seconds``: each run gets Ctrl-C after that many wall seconds, as a person would stop it (DrQ's
CNN updates take hours for the budget on 2 cores): its record has ``stopped_at_seconds`` and the online steps it
reached. Each encoder's entry keeps its own ``max_seconds`` and ``overrides``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import kept_rows, run_training, save_figure, style_success_axis, write_result
from benchmarks.main_job import THRESHOLD, median_or_none, seed_record

PIXEL_TASK = ["task.cameras=[front,wrist]", "task.object_state=false", "task.image_size=64"]
ENCODERS = {"pretrained": ["agent.camera_encoder=pretrained"], "drq": ["agent.camera_encoder=cnn"]}  # DrQ-v2's CNN


def updates_made(run_dir: Path) -> int:
    """The learner's updates in the run's final checkpoint."""
    return int(json.loads((run_dir / "checkpoint" / "counters.json").read_text())["update_calls"])


def encoder_figures(per_seed: dict[str, dict]) -> dict:
    records = list(per_seed.values())
    return {
        "per_seed": per_seed,
        # a seed that never reached 90% counts as infinitely late (None: half or more never did)
        "median_steps_to_90": median_or_none([r["steps_to_90"] for r in records]),
        "median_seconds_to_90": median_or_none([r["seconds_to_90"] for r in records]),
        "seeds_at_90": sum(r["steps_to_90"] is not None for r in records),
        "min_final_eval_success": min(r["final_eval_success"] for r in records),
        "median_updates_per_second": statistics.median(r["updates_per_second"] for r in records),
    }


def seconds_to_90_or_all(record: dict) -> float:
    return record["seconds_to_90"] if record["seconds_to_90"] is not None else record["wall_seconds_total"]


def plot(per_encoder: dict[str, dict], path: Path) -> None:
    """Evaluation success against wall seconds (left) and online steps (right), a line per encoder and seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8), dpi=120, sharey=True)
    colours = {"pretrained": "tab:blue", "drq": "tab:orange"}
    for encoder, figures in per_encoder.items():
        for seed, record in figures["per_seed"].items():
            history = record["eval_history"]  # [env steps, success, intervention rate, wall s, ...]
            label = encoder if seed == min(figures["per_seed"]) else None
            for axis, column in zip(axes, (3, 0)):
                axis.plot(
                    [h[column] for h in history],
                    [h[1] for h in history],
                    "o-",
                    color=colours.get(encoder),
                    markersize=2.5,
                    linewidth=1.1,
                    alpha=0.85,
                    label=label,
                )
    for axis in axes:
        axis.axhline(THRESHOLD, color="grey", linestyle="--", linewidth=0.8)
    style_success_axis(axes[0], "wall seconds (demonstrations included)")
    style_success_axis(axes[1], "online env steps")
    figure.suptitle("pixel pick_cube on 2 CPU cores (two 64x64 cameras, no object pose): a line per seed", fontsize=9)
    save_figure(figure, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=2000, help="online env steps per run (train.env_steps)")
    parser.add_argument("--encoders", nargs="*", choices=sorted(ENCODERS), default=["pretrained", "drq"])
    parser.add_argument("--runs", default="runs/pixel_learning_cpu")
    parser.add_argument("--merge", action="store_true", help="keep the other encoders of the results file")
    parser.add_argument("--max-seconds", type=float, default=None, help="Ctrl-C each run after this many seconds")
    parser.add_argument("overrides", nargs="*", help="more robot-rl overrides, for every run")
    args = parser.parse_args()
    runs = Path(args.runs)
    taken = [str(runs / encoder) for encoder in args.encoders if (runs / encoder).exists()]
    if taken:
        print(
            f"robot-rl: error: runs={runs}; expected no encoder folders yet, found {' '.join(taken)}", file=sys.stderr
        )
        sys.exit(2)
    per_encoder = {}
    for encoder in args.encoders:
        per_seed = {}
        for seed in args.seeds:
            run_dir = runs / encoder / f"seed{seed}"
            overrides = [f"seed={seed}", f"train.env_steps={args.steps}", *PIXEL_TASK, *ENCODERS[encoder]]
            start = time.monotonic()
            summary = run_training(run_dir, [*overrides, *args.overrides], max_seconds=args.max_seconds)
            record = seed_record(summary, time.monotonic() - start)
            record["stopped_at_seconds"] = round(summary["wall_seconds"], 1) if summary["interrupted"] else None
            record["updates_per_second"] = round(updates_made(run_dir) / summary["wall_seconds"], 2)
            per_seed[str(seed)] = record
            print(
                f"{encoder} seed {seed}: 90% at {record['steps_to_90']} steps / {record['seconds_to_90']} s, final "
                f"{record['final_eval_success']:.2f}, {record['updates_per_second']} updates/s",
                flush=True,
            )
        per_encoder[encoder] = {
            **encoder_figures(per_seed),
            "max_seconds": args.max_seconds,
            "overrides": [*ENCODERS[encoder], *args.overrides],
        }
    settings = {"seeds": args.seeds, "task": PIXEL_TASK, "steps": args.steps}  # each encoder's overrides in its entry
    provenance = None
    if args.merge:  # the other encoders' rows of the last result, their aggregates as this code makes them
        per_encoder, provenance = kept_rows("pixel_learning_cpu", per_encoder, lambda f: f["per_encoder"], settings)
        per_encoder = {encoder: {**f, **encoder_figures(f["per_seed"])} for encoder, f in per_encoder.items()}
    figures = {"per_encoder": per_encoder}
    if {"pretrained", "drq"} <= set(per_encoder):
        slow, fast = (
            statistics.median(seconds_to_90_or_all(r) for r in per_encoder[name]["per_seed"].values())
            for name in ("drq", "pretrained")
        )
        figures["pretrained_vs_drq_seconds_to_90"] = round(slow / fast, 2)
    print(json.dumps({e: {k: v for k, v in f.items() if k != "per_seed"} for e, f in per_encoder.items()}))
    path = write_result(
        "pixel_learning_cpu", figures, settings=settings, **({"provenance": provenance} if provenance else {})
    )
    plot(per_encoder, path.with_suffix(".png"))
    print("wrote", path, "and its plot")


if __name__ == "__main__":
    main()
