"""Does the ROS 2 graph learn as well as the in-process loop? pick_cube from state, three paths side by side.

    python benchmarks/graph_learning.py            # 3 seeds x 12,000 online steps per path (hours on 2 cores)
    python benchmarks/graph_learning.py --quick    # one short seed per path, a few minutes

Paths (the JSON's keys): ``in_process`` (``robot-rl train``), ``graph_sim_time`` and ``graph_real_time``
(``robot-rl launch sim_train`` with ``ros.sim_time=true`` / ``false``: sim robot, safety node, learner,
recorder and actor as processes over DDS). Every run has the defaults otherwise (scripted human, demos,
interventions). Per path and seed: ``success`` (the final checkpoint's deterministic success over 50
episodes, ``robot-rl eval``, the same evaluator for every path), ``success_at`` (the run's own evaluations by
online steps), ``intervention_steps`` (human takeover steps while training online), ``env_steps_per_s``
(online steps per second of the run), ``control_period_ms`` (p50/p90/p99 of the recorded step stamps: the
wall clock in-process and in real time, the sim clock in sim time) and ``wall_step_ms``. Writes
``benchmarks/results/graph_learning.json`` (``graph_learning_quick.json``) and a PNG of the curves.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python benchmarks/graph_learning.py` works too

from benchmarks.common import RESULTS, write_result

PATHS = ("in_process", "graph_sim_time", "graph_real_time")
TASK = ["task=pick_cube"]
EVAL_EPISODES = 50
DOMAINS = range(60, 100)  # ROS_DOMAIN_IDs for the graph runs (one per run, localhost discovery)


def cli(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "robot_rl.cli", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def percentiles_ms(stamps_per_episode: list[np.ndarray]) -> dict[str, float] | None:
    periods = np.concatenate([np.diff(s) for s in stamps_per_episode if len(s) > 1] or [np.zeros(0)]) * 1e3
    if periods.size == 0:
        return None
    return {f"p{q}": round(float(np.percentile(periods, q)), 2) for q in (50, 90, 99)}


def recorded_stamps(store_path: Path) -> list[np.ndarray]:
    """Per online episode of an episode store, its steps' ``timestamp`` (s)."""
    from robot_rl.data import EpisodeStore

    store = EpisodeStore.open(store_path)
    return [np.asarray(store.read_episode(name)["timestamp"]) for name in store.episode_names()
            if store.episode_attrs(name).get("source") == "online"]


def final_success(checkpoint: Path, seed: int, timeout: float) -> float:
    result = cli("eval", *TASK, f"seed={seed}", f"eval.checkpoint={checkpoint}", f"eval.episodes={EVAL_EPISODES}",
                 timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"robot-rl eval failed: {result.stderr.strip()[-500:]}")
    return float(json.loads(result.stdout)["success_rate"])


def in_process(run_dir: Path, seed: int, steps: int, timeout: float) -> dict[str, Any]:
    result = cli("train", *TASK, f"seed={seed}", f"train.env_steps={steps}", f"train.run_dir={run_dir}",
                 f"train.eval_every={max(steps // 6, 500)}", timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"robot-rl train failed: {result.stderr.strip()[-500:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"success_at": {str(h["env_steps"]): h["success_rate"] for h in summary["eval_history"]},
            "intervention_steps": summary["intervention_steps"], "online_steps": summary["env_steps"],
            "wall_seconds": summary["wall_seconds"], "stamps": recorded_stamps(run_dir / "episodes.zarr")}


ACTOR_DONE = re.compile(r"actor done: (\d+) env steps, \d+ episodes in (\d+) s")


def graph(run_dir: Path, seed: int, steps: int, sim_time: bool, timeout: float) -> dict[str, Any]:
    domain = random.choice(DOMAINS)
    started = time.monotonic()
    result = cli("launch", "sim_train", *TASK, f"seed={seed}", f"train.env_steps={steps}", f"train.run_dir={run_dir}",
                 f"ros.sim_time={str(sim_time).lower()}", f"ros.domain_id={domain}", timeout=timeout)
    wall = time.monotonic() - started
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise RuntimeError(f"robot-rl launch sim_train exited {result.returncode}: {output.strip()[-800:]}")
    records = [json.loads(line.split("]: ", 1)[1]) for line in output.splitlines()
               if line.startswith("[actor]") and ']: {"kind"' in line]
    done = ACTOR_DONE.search(output)
    online, seconds = (int(done.group(1)), int(done.group(2))) if done else (steps, wall)
    return {"success_at": {str(r["env_steps"]): r["success_rate"] for r in records if r["kind"] == "eval"},
            "intervention_steps": sum(r["interventions"] for r in records if r["kind"] == "train"),
            "online_steps": online, "wall_seconds": float(seconds),
            "stamps": recorded_stamps(run_dir / "episodes.zarr"),
            "tracebacks": output.count("Traceback")}


def run_path(path: str, work: Path, seed: int, steps: int, timeout: float) -> dict[str, Any]:
    run_dir = work / f"{path}_seed{seed}"
    if path == "in_process":
        record = in_process(run_dir, seed, steps, timeout)
    else:
        record = graph(run_dir, seed, steps, path == "graph_sim_time", timeout)
    record["success"] = final_success(run_dir / "checkpoint", seed, timeout=1800)
    record["env_steps_per_s"] = round(record["online_steps"] / max(record["wall_seconds"], 1e-9), 2)
    record["wall_step_ms"] = round(1e3 * record["wall_seconds"] / max(record["online_steps"], 1), 1)
    record["control_period_ms"] = percentiles_ms(record.pop("stamps"))
    return record


def summarize(runs: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Means per path over its seeds, and the graph in sim time beside the in-process loop."""
    def mean(path: str, key: str) -> float | None:
        values = [r[key] for r in runs.get(path, {}).values() if isinstance(r.get(key), (int, float))]
        return round(float(np.mean(values)), 3) if values else None

    summary = {path: {key: mean(path, key) for key in ("success", "intervention_steps", "env_steps_per_s")}
               for path in PATHS}
    local, graph_sim = summary["in_process"], summary["graph_sim_time"]
    if all(v is not None for v in (*local.values(), *graph_sim.values())):
        summary["graph_sim_time_vs_in_process"] = {
            "success_difference": round(graph_sim["success"] - local["success"], 3),
            "intervention_steps_ratio": round(graph_sim["intervention_steps"] / max(local["intervention_steps"], 1), 3),
            "env_steps_per_s_ratio": round(graph_sim["env_steps_per_s"] / local["env_steps_per_s"], 3)}
    return summary


def plot(runs: dict[str, dict[str, dict[str, Any]]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    colours = dict(zip(PATHS, ("tab:blue", "tab:orange", "tab:green")))
    for name, seeds in runs.items():
        for seed, record in seeds.items():
            points = sorted((int(k), v) for k, v in record.get("success_at", {}).items())
            if points:
                axis.plot(*zip(*points), color=colours[name], alpha=0.8, label=f"{name} seed {seed}")
    axis.set(xlabel="online env steps", ylabel="eval success", title=title, ylim=(-0.05, 1.05))
    axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one seed, a short budget: a few minutes")
    parser.add_argument("--env-steps", type=int, default=None, help="online steps per run (12,000; quick: 600)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds (0 1 2; quick: 0)")
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    args = parser.parse_args(argv)
    steps = args.env_steps or (600 if args.quick else 12_000)
    seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
    name = "graph_learning_quick" if args.quick else "graph_learning"
    timeout = 60 + steps * 1.0  # s per run: real time runs at <= 10 steps/s
    runs: dict[str, dict[str, dict[str, Any]]] = {path: {} for path in args.paths}
    failed = []
    with tempfile.TemporaryDirectory(prefix="graph_learning_") as folder:
        for seed in seeds:
            for path in args.paths:
                started = time.monotonic()
                try:
                    runs[path][str(seed)] = run_path(path, Path(folder), seed, steps, timeout)
                except (RuntimeError, subprocess.TimeoutExpired) as error:
                    runs[path][str(seed)] = {"error": str(error)[-800:]}
                    failed.append(f"{path} seed {seed}")
                record = runs[path][str(seed)]
                print(f"{path} seed {seed}: " + ", ".join(f"{k}={record.get(k)}" for k in (
                    "success", "intervention_steps", "env_steps_per_s", "control_period_ms", "error") if k in record)
                    + f" ({time.monotonic() - started:.0f} s)", flush=True)
    keyed = {key: {path: {seed: record.get(key) for seed, record in seeds_.items()} for path, seeds_ in runs.items()}
             for key in ("success", "intervention_steps", "env_steps_per_s", "control_period_ms", "success_at",
                         "wall_step_ms")}
    summary = summarize(runs)
    print(json.dumps(summary, indent=2))
    plot(runs, RESULTS / f"{name}.png", f"pick_cube from state, {steps:,} online steps: in-process vs the graph")
    write_result(name, {"summary": summary, "runs": runs}, env_steps=steps, seeds=seeds, **keyed)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
