"""Does the ROS 2 graph learn as well as the in-process loop? pick_cube from state, three paths side by side.

    python -m benchmarks.graph_learning            # 3 seeds x 12,000 online steps per path (hours on 2 cores)
    python -m benchmarks.graph_learning --quick    # one seed x 1,200 steps per path, about 10 minutes
    python -m benchmarks.graph_learning --seeds 1 --merge  # one more seed into the existing result file

Paths (the JSON's keys): ``in_process`` (``robot-rl train``), ``graph_sim_time`` and ``graph_real_time``
(``robot-rl launch sim_train`` with ``ros.sim_time=true`` / ``false``: sim robot, safety node, learner,
recorder and actor as processes over DDS). Every run has the defaults otherwise (scripted human, 20 demos,
takeovers); the in-process loop evaluates every ``min(2000, max(N // 6, 500))`` steps (2,000, its default, at
12,000 steps), the graph's actor 5 episodes every 10 training episodes (its defaults). Per path and seed:

- ``success``: the final checkpoint's deterministic success over 50 episodes (``robot-rl eval``, the same
  evaluator for every path);
- ``success_at``: the run's own evaluations, keyed by online env steps;
- ``intervention_steps``: human takeover steps while training online;
- ``env_steps_per_s``: online env steps per wall second of the run (from the start of the first demo to the last
  step, evaluations included: the in-process loop's 50-episode final one, the actor's 5-episode ones);
- ``control_period_ms``: p50/p90/p99 of the time between consecutive recorded step ``timestamp`` s within an
  online episode (the wall clock in-process and in real time; the sim clock in sim time, so nominally 100 ms);
- ``wall_step_ms``: wall milliseconds per online env step (1000 / ``env_steps_per_s``), the wall-clock figure
  beside the recorded period.

Every child process runs in a ROS 2 domain of its own (the lock files of ``tests/conftest.py``, so tests running at
the same time never share it) with localhost discovery; the paths run one after another (2 cores). A failed run
(non-zero exit, timeout, a traceback in the graph's output) keeps its error in the JSON and the script exits 1.
Writes ``benchmarks/results/graph_learning.json`` (``graph_learning_quick.json``) and a PNG of the curves.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import RESULTS, actor_records, save_figure, style_success_axis, write_result
from robot_rl.cli.graph import reserved_ros_domain
from robot_rl.data.episode_store import EpisodeStore

PATHS = ("in_process", "graph_sim_time", "graph_real_time")
KEYS = ("success", "success_at", "intervention_steps", "env_steps_per_s", "control_period_ms", "wall_step_ms")
TASK = "task=pick_cube"
EVAL_EPISODES = 50
FULL_STEPS, QUICK_STEPS = 12_000, 1_200
STOP_GRACE = 30.0  # s the launcher has after SIGINT (its nodes get 10 s each) before its process group is killed
# a child's failure (RuntimeError from cli), a missing or unreadable result file or store, a malformed record
RUN_ERRORS = (RuntimeError, OSError, ValueError, KeyError)  # EpisodeStoreError is a ValueError
ACTOR_DONE = re.compile(r"actor done: (\d+) env steps, \d+ episodes in (\d+) s")

Runs = dict[str, dict[str, dict[str, Any]]]  # path -> seed -> record


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, with ``env_steps``, ``seeds`` and ``name`` (the result file's stem) filled in."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"seed 0, {QUICK_STEPS:,} steps per path")
    parser.add_argument(
        "--env-steps",
        type=int,
        default=None,
        help=f"online env steps per run (default {FULL_STEPS:,}; --quick {QUICK_STEPS:,})",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (default 0 1 2; --quick 0)")
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    parser.add_argument(
        "--merge",
        action="store_true",
        help="add these runs to those of the existing result file (same --env-steps; a path and seed "
        "run again replaces its record): hours of seeds can run in separate sittings",
    )
    args = parser.parse_args(argv)
    if args.env_steps is not None and args.env_steps <= 0:
        parser.error(f"--env-steps={args.env_steps}: expected a positive number of steps")
    args.env_steps = args.env_steps or (QUICK_STEPS if args.quick else FULL_STEPS)
    args.seeds = args.seeds if args.seeds is not None else ([0] if args.quick else [0, 1, 2])
    args.name = "graph_learning_quick" if args.quick else "graph_learning"
    return args


def cli(args: list[str], timeout: float) -> tuple[str, str]:
    """``robot-rl ARGS`` in a ROS 2 domain of its own (localhost discovery; a launch gets it as ``ros.domain_id``):
    its stdout and stderr. Raises RuntimeError on a non-zero exit or after ``timeout`` s (SIGINT, then SIGKILL to
    its process group: a launcher's nodes too)."""
    with reserved_ros_domain() as domain:
        command = [
            sys.executable,
            "-m",
            "robot_rl.cli.main",
            *args,
            *([f"ros.domain_id={domain}"] * (args[0] == "launch")),
        ]
        env = {
            **os.environ,
            "ROS_DOMAIN_ID": str(domain),
            "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
            "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
        }
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            try:
                stdout, stderr = process.communicate(timeout=STOP_GRACE)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                stdout, stderr = process.communicate()
            raise RuntimeError(
                f"robot-rl {args[0]} timed out after {timeout:.0f} s: {(stdout + stderr).strip()[-600:]}"
            )
    if process.returncode != 0:
        raise RuntimeError(f"robot-rl {args[0]} exited {process.returncode}: {(stdout + stderr).strip()[-600:]}")
    return stdout, stderr


def percentiles_ms(stamps_per_episode: list[np.ndarray]) -> dict[str, float] | None:
    """p50/p90/p99 (ms) of the intervals between consecutive stamps (s) within each episode; None without any."""
    periods = np.concatenate([np.diff(s) for s in stamps_per_episode if len(s) > 1] or [np.zeros(0)]) * 1e3
    if periods.size == 0:
        return None
    return {f"p{q}": round(float(np.percentile(periods, q)), 2) for q in (50, 90, 99)}


def recorded_stamps(store_path: Path) -> list[np.ndarray]:
    """Per online episode of an episode store, its steps' ``timestamp`` (s)."""
    store = EpisodeStore.open(store_path)
    return [
        np.asarray(store.read_episode(name)["timestamp"])
        for name in store.episode_names()
        if store.episode_attrs(name).get("source") == "online"
    ]


def final_success(checkpoint: Path, seed: int) -> float:
    """Deterministic success of ``checkpoint`` over ``EVAL_EPISODES`` episodes (``robot-rl eval``)."""
    stdout, _ = cli(
        ["eval", TASK, f"seed={seed}", f"eval.checkpoint={checkpoint}", f"eval.episodes={EVAL_EPISODES}"], timeout=1800
    )
    return float(json.loads(stdout)["success_rate"])


def in_process(run_dir: Path, seed: int, steps: int, timeout: float) -> dict[str, Any]:
    """``robot-rl train``: its summary.json and episodes.zarr."""
    cli(
        [
            "train",
            TASK,
            f"seed={seed}",
            f"train.env_steps={steps}",
            f"train.run_dir={run_dir}",
            f"train.eval_every={min(2000, max(steps // 6, 500))}",
        ],
        timeout,
    )
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "success_at": {str(h["env_steps"]): h["success_rate"] for h in summary["eval_history"]},
        "intervention_steps": summary["intervention_steps"],
        "online_steps": summary["env_steps"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "stamps": recorded_stamps(run_dir / "episodes.zarr"),
    }


def graph_figures(output: str) -> dict[str, Any]:
    """Success by steps, takeover steps, online steps and seconds of a ``sim_train`` launch, from its output."""
    records = [record for _, record in actor_records(output)]
    done = ACTOR_DONE.search(output)
    if done is None:
        raise RuntimeError(f"no 'actor done' line in the launch's output: {output.strip()[-600:]}")
    figures = {
        "success_at": {str(r["env_steps"]): r["success_rate"] for r in records if r["kind"] == "eval"},
        "intervention_steps": sum(r["interventions"] for r in records if r["kind"] == "train"),
        "online_steps": int(done.group(1)),
        "wall_seconds": float(done.group(2)),
        "tracebacks": output.count("Traceback (most recent call last)"),
    }
    if figures["tracebacks"]:
        start = output.index("Traceback (most recent call last)")
        figures["error"] = f"{figures['tracebacks']} traceback(s) in the graph's output: {output[start : start + 600]}"
    return figures


def graph(run_dir: Path, seed: int, steps: int, sim_time: bool, timeout: float) -> dict[str, Any]:
    """``robot-rl launch sim_train``: the actor's records and the recorder's store."""
    stdout, stderr = cli(
        [
            "launch",
            "sim_train",
            TASK,
            f"seed={seed}",
            f"train.env_steps={steps}",
            f"train.run_dir={run_dir}",
            f"ros.sim_time={str(sim_time).lower()}",
        ],
        timeout,
    )
    return {**graph_figures(stdout + stderr), "stamps": recorded_stamps(run_dir / "episodes.zarr")}


def run_path(path: str, work: Path, seed: int, steps: int, timeout: float) -> dict[str, Any]:
    """Train through ``path`` in a new folder under ``work`` and evaluate the final checkpoint: one record."""
    run_dir = work / f"{path}_seed{seed}"
    try:
        if path == "in_process":
            record = in_process(run_dir, seed, steps, timeout)
        else:
            record = graph(run_dir, seed, steps, path == "graph_sim_time", timeout)
    except RUN_ERRORS as error:  # a failed run is that run's result, the others still run
        return {"error": f"{type(error).__name__}: {str(error)[-800:]}"}
    record["env_steps_per_s"] = round(record["online_steps"] / max(record["wall_seconds"], 1e-9), 2)
    record["wall_step_ms"] = round(1e3 * record["wall_seconds"] / max(record["online_steps"], 1), 1)
    record["control_period_ms"] = percentiles_ms(record.pop("stamps"))
    try:
        record["success"] = final_success(run_dir / "checkpoint", seed)
    except RUN_ERRORS as error:  # the training figures stand without the final evaluation
        record["error"] = "; ".join(filter(None, (record.get("error"), f"eval: {str(error)[-600:]}")))
    return record


def summarize(runs: Runs) -> dict[str, Any]:
    """Means (and the median success) per path over its seeds that have the figure; each graph path beside the
    in-process loop: success difference, takeover-steps ratio, steps/s ratio."""

    def stat(path: str, key: str, reduce=np.mean) -> float | None:
        found = [r[key] for r in runs.get(path, {}).values() if isinstance(r.get(key), (int, float))]
        return round(float(reduce(found)), 3) if found else None

    summary: dict[str, Any] = {
        path: {
            "success": stat(path, "success"),
            "success_median": stat(path, "success", np.median),
            "intervention_steps": stat(path, "intervention_steps"),
            "env_steps_per_s": stat(path, "env_steps_per_s"),
        }
        for path in PATHS
    }
    local = summary["in_process"]
    for path in PATHS[1:]:
        other = summary[path]
        if all(v is not None for v in (*local.values(), *other.values())):
            summary[f"{path}_vs_in_process"] = {
                "success_difference": round(other["success"] - local["success"], 3),
                "intervention_steps_ratio": round(other["intervention_steps"] / max(local["intervention_steps"], 1), 3),
                "env_steps_per_s_ratio": round(other["env_steps_per_s"] / local["env_steps_per_s"], 3),
            }
    return summary


def assemble(runs: Runs, env_steps: int, seeds: list[int]) -> dict[str, Any]:
    """The result file's top-level figures: each of ``KEYS`` as {path: {seed: value}}, and the summary."""
    return {
        "env_steps": env_steps,
        "seeds": seeds,
        **{
            key: {path: {seed: record.get(key) for seed, record in by_seed.items()} for path, by_seed in runs.items()}
            for key in KEYS
        },
        "summary": summarize(runs),
    }


def plot(runs: Runs, path: Path, title: str) -> None:
    """Eval success vs online env steps, one line per path and seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4), dpi=120)
    colours = dict(zip(PATHS, ("tab:blue", "tab:orange", "tab:green")))
    for name, by_seed in runs.items():
        for seed, record in by_seed.items():
            points = sorted((int(k), v) for k, v in (record.get("success_at") or {}).items())
            if points:
                axis.plot(
                    *zip(*points), "o-", color=colours[name], alpha=0.8, markersize=3, label=f"{name} seed {seed}"
                )
    style_success_axis(axis, "online env steps")
    axis.set_title(title, fontsize=9)
    save_figure(figure, path)


def earlier_runs(path: Path, env_steps: int) -> tuple[Runs, list[str]]:
    """The runs and commands of a result file, for ``--merge``; a missing file has none. Raises ValueError for
    a file of another step budget (its figures are not comparable) or one without runs."""
    if not path.exists():
        return {}, []
    result = json.loads(path.read_text())
    if result.get("env_steps") != env_steps or not isinstance(result.get("figures", {}).get("runs"), dict):
        raise ValueError(f"--merge: {path} holds runs of env_steps={result.get('env_steps')}, expected {env_steps}")
    return result["figures"]["runs"], [*result.get("earlier_commands", []), result["command"]]


def merge_runs(earlier: Runs, new: Runs) -> Runs:
    """``earlier`` with ``new`` on top: a path and seed in both keeps the new record."""
    merged = {path: dict(by_seed) for path, by_seed in earlier.items()}
    for path, by_seed in new.items():
        merged.setdefault(path, {}).update(by_seed)
    return {path: merged[path] for path in PATHS if path in merged}


def save(args: argparse.Namespace, runs: Runs, earlier_commands: list[str]) -> dict[str, Any]:
    """Write the result file and its plot from ``runs`` (after every finished run, so an interrupted benchmark
    keeps its finished seeds); returns the file's figures."""
    seeds = sorted({int(seed) for by_seed in runs.values() for seed in by_seed})
    figures = assemble(runs, args.env_steps, seeds)
    plot(
        runs,
        RESULTS / f"{args.name}.png",
        f"pick_cube from state, {args.env_steps:,} online steps: in-process loop vs the sim_train graph",
    )
    extra = {"earlier_commands": earlier_commands} if earlier_commands else {}
    write_result(args.name, {"runs": runs}, **extra, **figures)
    return figures


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    timeout = 300 + 1.0 * args.env_steps  # s per run: real time steps at 10 Hz, demos and evaluations besides
    earlier, earlier_commands = {}, []
    if args.merge:
        try:
            earlier, earlier_commands = earlier_runs(RESULTS / f"{args.name}.json", args.env_steps)
        except ValueError as error:
            print(f"graph_learning: error: {error}", file=sys.stderr)
            return 2
    runs: Runs = {path: {} for path in args.paths}
    with tempfile.TemporaryDirectory(prefix="graph_learning_") as folder:
        for seed in args.seeds:
            for path in args.paths:
                started = time.monotonic()
                record = runs[path][str(seed)] = run_path(path, Path(folder), seed, args.env_steps, timeout)
                print(
                    f"{path} seed {seed} ({time.monotonic() - started:.0f} s): "
                    + ", ".join(f"{k}={record[k]}" for k in (*KEYS, "error") if k in record),
                    flush=True,
                )
                figures = save(args, merge_runs(earlier, runs), earlier_commands)  # every finished run kept
    print(json.dumps(figures["summary"], indent=2))
    print(f"wrote {RESULTS / f'{args.name}.json'}")
    failed = [f"{path} seed {seed}" for path, by_seed in runs.items() for seed, r in by_seed.items() if "error" in r]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
