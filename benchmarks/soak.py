"""A long soak of the node graph (issue 52): does any node grow, or the graph slow down, over hours?

``robot-rl launch sim_train`` (sim time: the sim robot steps as fast as the graph goes) with the recorder writing every
episode and the fast-loop critic on and learning online (``safety.fast_critic.enabled=true``,
``safety.fast_critic.learn=true``: the safety node publishes every tick, the actor ships them with the transitions,
the recorder stores them, the learner refits the critic), for ``--minutes`` (120 by default). The online replay is
small (``--buffer-capacity``, 20,000 transitions) so that it is full early and the rest of the run shows growth that
a full buffer does not explain.

Every ``--sample-every`` s (60) each node process of the launch is sampled from ``/proc``: resident memory (MB), open
file descriptors and threads; the graph's env steps come from the actor's episode records (their log stamps are wall
clock). ``benchmarks/results/<name>.json`` (``soak``):

- ``rss_growth_mb_per_hour`` per node: the least-squares slope of its RSS over the samples taken after the replay
  was full (``replay_full_at_minutes``; the second half of the run when it never filled);
- ``open_files_growth`` and ``threads_growth`` per node: last sample minus the first after the replay was full;
- ``steps_per_s_first_10min`` and ``steps_per_s_last_10min``: env steps per wall-clock second in the first and the
  last ten minutes (the first minute, start-up and demos, left out), and their ratio ``last_over_first``;
- ``targets``: no node above 50 MB/hour, the ratio at least 0.9; ``samples``: every sample, for the PNG.

    python -m benchmarks.soak [--minutes 120] [--sample-every 60] [--name soak] [overrides ...]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import RESULTS, actor_records, save_figure, stop_launch, write_result
from robot_rl.cli.graph import reserved_ros_domain

RSS_GROWTH_TARGET = 50.0  # MB per hour per node after the replay is full
SPEED_TARGET = 0.9  # the last ten minutes' env steps/s over the first ten's
WINDOW_S = 600.0  # s: "ten minutes"
START_UP_S = 60.0  # s left out of the first window: nodes starting, demonstrations


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=120.0)
    parser.add_argument("--sample-every", type=float, default=60.0, help="s between samples of the nodes")
    parser.add_argument("--buffer-capacity", type=int, default=20_000, help="online replay (transitions)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="soak")
    parser.add_argument("--work", type=Path, default=None, help="folder for the run (default: a temporary one)")
    parser.add_argument("overrides", nargs="*", help="more overrides of the launch")
    return parser.parse_args(argv)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children first found through ``/proc/<pid>/task/*/children``)."""
    found, stack = [], [pid]
    while stack:
        parent = stack.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:  # the process ended meanwhile
                continue
            found += children
            stack += children
    return found


def node_name(pid: int) -> str | None:
    """The node a process runs: ``robot_rl.ros.nodes.actor_node`` -> ``actor_node``; None for any other process."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if b"-m" not in argv:
        return None
    module = argv[argv.index(b"-m") + 1].decode()
    return module.rsplit(".", 1)[-1] if module.startswith("robot_rl.") and module != "robot_rl.cli.main" else None


def sample_process(pid: int) -> dict[str, float] | None:
    """RSS (MB), open file descriptors and threads of ``pid`` from /proc; None when it has ended."""
    try:
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
        )
        open_files = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    return {
        "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
        "open_files": open_files,
        "threads": int(status["Threads"]),
    }


def sample_nodes(launcher: int) -> dict[str, dict[str, float]]:
    """Each node process of the launch, by node (a respawned node: its newest process)."""
    nodes = {}
    for pid in sorted(descendants(launcher)):
        name, figures = node_name(pid), sample_process(pid)
        if name is not None and figures is not None:
            nodes[name] = figures
    return nodes


def slope_per_hour(minutes: list[float], values: list[float]) -> float | None:
    """Least-squares slope of ``values`` over time, per hour; None with fewer than two samples."""
    if len(minutes) < 2 or max(minutes) == min(minutes):
        return None
    return float(np.polyfit(np.asarray(minutes) / 60.0, values, 1)[0])


def steps_per_s(records: list[tuple[float, dict]], start: float, end: float) -> float | None:
    """Env steps per wall-clock s between two log stamps, from the records' cumulative ``env_steps``."""
    inside = [(stamp, r["env_steps"]) for stamp, r in records if start <= stamp <= end and "env_steps" in r]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def figures_of(samples: list[dict[str, Any]], records: list[tuple[float, dict]], capacity: int) -> dict[str, Any]:
    """The soak's figures (module docstring) from the samples and the actor's records."""
    full = next((stamp for stamp, r in records if r.get("env_steps", 0) >= capacity), None)
    start = samples[0]["wall"]
    cut = full if full is not None else start + (samples[-1]["wall"] - start) / 2
    after = [s for s in samples if s["wall"] >= cut] or samples[-2:]
    growth: dict[str, Any] = {"rss_growth_mb_per_hour": {}, "open_files_growth": {}, "threads_growth": {}}
    for node in sorted({name for s in after for name in s["nodes"]}):
        seen = [s for s in after if node in s["nodes"]]
        rss = slope_per_hour([s["minute"] for s in seen], [s["nodes"][node]["rss_mb"] for s in seen])
        growth["rss_growth_mb_per_hour"][node] = None if rss is None else round(rss, 2)
        for key in ("open_files", "threads"):
            growth[f"{key}_growth"][node] = seen[-1]["nodes"][node][key] - seen[0]["nodes"][node][key]
    last = records[-1][0] if records else start
    first_rate = steps_per_s(records, start + START_UP_S, start + START_UP_S + WINDOW_S)
    last_rate = steps_per_s(records, last - WINDOW_S, last)
    ratio = None if not first_rate or last_rate is None else round(last_rate / first_rate, 3)
    worst = max((v for v in growth["rss_growth_mb_per_hour"].values() if v is not None), default=None)
    return {
        **growth,
        "replay_full_at_minutes": None if full is None else round((full - start) / 60, 1),
        "steps_per_s_first_10min": first_rate,
        "steps_per_s_last_10min": last_rate,
        "last_over_first": ratio,
        "env_steps": records[-1][1].get("env_steps") if records else 0,
        "targets": {
            "rss_growth_mb_per_hour_max": worst,
            "rss_growth_met": worst is not None and worst <= RSS_GROWTH_TARGET,
            "speed_met": ratio is not None and ratio >= SPEED_TARGET,
        },
    }


def plot(samples: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    for node in sorted({name for s in samples for name in s["nodes"]}):
        seen = [s for s in samples if node in s["nodes"]]
        axis.plot([s["minute"] for s in seen], [s["nodes"][node]["rss_mb"] for s in seen], label=node)
    axis.set_xlabel("minutes of the soak")
    axis.set_ylabel("resident memory (MB)")
    axis.set_title("sim_train soak: each node's RSS")
    axis.legend(fontsize=7)
    save_figure(figure, path)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="soak_"))
    work.mkdir(parents=True, exist_ok=True)
    log_path = work / "launch.log"
    command = [
        sys.executable,
        "-m",
        "robot_rl.cli.main",
        "launch",
        "sim_train",
        f"seed={args.seed}",
        f"train.run_dir={work / 'run'}",
        "train.env_steps=100000000",  # the soak's minutes end it
        f"train.buffer_capacity={args.buffer_capacity}",
        "safety.fast_critic.enabled=true",
        "safety.fast_critic.learn=true",
        *args.overrides,
    ]
    samples: list[dict[str, Any]] = []
    with reserved_ros_domain() as domain, open(log_path, "w") as log:
        env = {**os.environ, "ROS_DOMAIN_ID": str(domain), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
        launch = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        started = time.time()
        try:
            while time.time() - started < args.minutes * 60 and launch.poll() is None:
                time.sleep(min(args.sample_every, max(args.minutes * 60 - (time.time() - started), 0.1)))
                now = time.time()
                samples.append({"minute": (now - started) / 60, "wall": now, "nodes": sample_nodes(launch.pid)})
                print(f"{samples[-1]['minute']:.0f} min: {samples[-1]['nodes']}", flush=True)
        finally:
            stop_launch(launch, grace=120)
    output = log_path.read_text()
    if launch.returncode not in (0, -signal.SIGINT, 130) or len(samples) < 2:
        raise RuntimeError(f"the launch ended early ({launch.returncode}); {log_path} ends:\n{output[-3000:]}")
    records = actor_records(output)
    figures = figures_of(samples, records, args.buffer_capacity)
    figures["tracebacks"] = output.count("Traceback (most recent call last)")
    figures["samples"] = [{"minute": round(s["minute"], 2), "nodes": s["nodes"]} for s in samples]
    path = write_result(args.name, figures, settings=vars(args) | {"work": str(work), "launch": command[3:]})
    plot(samples, RESULTS / f"{args.name}.png")
    summary = {k: v for k, v in figures.items() if k != "samples"}
    print(summary)
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
