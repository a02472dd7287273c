"""robot_rl side by side with the stacks a lab would pick instead (issue 75): LeRobot 0.4.4's HIL-SERL and
Stable-Baselines3's SAC, on the same tasks, demonstrations, online step budget, evaluation and seeds, one system at
a time, in one invocation.

    bash benchmarks/peers_setup.sh                   # once: the peers' own environments under .peers/
    python -m benchmarks.peers                       # 3 systems x 2 tasks x seeds 0 1 2, 8,000 online steps each

The systems (each run in a process of its own, one after another):

* ``robot_rl``: ``robot-rl train`` with the main job's defaults (SAC-RLPD with the behaviour-cloning pull, 20 scripted
  demonstrations, the scripted human's takeovers), in the project's environment;
* ``lerobot``: LeRobot's HIL-SERL, its learner and actor over gRPC, its keyboard replaced by robot_rl's scripted
  human (``benchmarks/peers_lerobot.py`` says exactly what runs and what was changed), in ``.peers/lerobot-venv``;
* ``sb3``: Stable-Baselines3 SAC with the demonstrations in its replay buffer before it learns, no takeovers
  (``benchmarks/peers_sb3.py``), in ``.peers/sb3-venv``.

The tasks (``benchmarks/peers_tasks.py``): ``gym_hil``, gym-hil's ``PandaPickCubeBase-v0`` from state (LeRobot's own
task, the cube's start drawn per episode) with a scripted expert written for it, and ``pick_cube``, robot_rl's
``robot_rl/PickCube-v0`` from state with its own expert. Every system gets the same ``train.demo_episodes`` (20)
expert episodes on the same seeds, the same scripted human's rule where it takes help (robot_rl, LeRobot), the same
online step budget (demos not counted) and the same evaluation: robot_rl's ``evaluate``, deterministic,
``--eval-episodes`` (20) episodes on robot_rl's evaluation seeds every ``--eval-every`` (500) online steps and at the
end. Wall seconds run from each run's start (demos included); LeRobot's actor keeps gym-hil's 10 Hz in real time, as
LeRobot runs it, while robot_rl and SB3 step as fast as they compute.

Each run's figures are kept in ``<runs>/<system>_<task>_seed<seed>.json`` when it ends; the same command run again
(after an interrupted session: the whole comparison takes hours) runs only what is missing. Writes
``benchmarks/results/<name>.json`` (``per_run``: system -> task -> seed -> steps and seconds to the first
evaluation at >= 90% (null: never), final success, takeover steps, peak memory of the run's processes (MB, sampled
every 0.5 s), the history; ``medians`` per system and task; ``robot_rl_ahead`` per task: whether robot_rl's median
steps to 90% is below every peer's and its median seconds no worse than the best peer's) and ``<name>.png``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Self

from benchmarks.common import RESULTS, run_training, save_figure, style_success_axis, write_result
from benchmarks.main_job import THRESHOLD, median_or_none

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / ".peers"
SYSTEMS = ("robot_rl", "lerobot", "sb3")
TASKS = ("gym_hil", "pick_cube")
VENVS = {"lerobot": PEERS / "lerobot-venv", "sb3": PEERS / "sb3-venv"}
WORKERS = {"lerobot": "benchmarks.peers_lerobot", "sb3": "benchmarks.peers_sb3"}
GYM_HIL_PATH = PEERS / "gym-hil"  # gym-hil alone, on the project's robot-rl train's path for the gym-hil task
#: robot-rl train's overrides of each task (the rest: the main job's defaults)
TASK_OVERRIDES = {
    "gym_hil": [
        "task=gym",
        "task.id=benchmarks.peers_tasks:peers/GymHilPickCube-v0",
        "task.expert=benchmarks.peers_tasks:GymHilPickExpert",
    ],
    "pick_cube": ["task=pick_cube"],
}
SETUP_HINT = "bash benchmarks/peers_setup.sh"


def missing_environments(systems: list[str]) -> list[str]:
    """The peers' environments that ``systems`` need and that ``benchmarks/peers_setup.sh`` has not finished."""
    needed = [VENVS[system] for system in systems if system in VENVS] + [GYM_HIL_PATH]
    return [str(path.relative_to(ROOT)) for path in needed if not (path / ".peers_ready").is_file()]


class PeakMemory:
    """The peak of the summed resident memory (MB) of this process's descendants, sampled every ``period`` s while
    in the ``with`` block (one system runs at a time, so it is that run's: learner, actor and workers together)."""

    def __init__(self, period: float = 0.5):
        self.period, self.peak_mb = period, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(self.period):
            self.peak_mb = max(self.peak_mb, sum(rss_mb(pid) for pid in descendants(os.getpid())))


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (from /proc/<pid>/task/*/children)."""
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            frontier += children
    return found


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` (MB; 0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def task_config(task: str, seed: int) -> dict[str, Any]:
    """robot_rl's composed config of a task (the main job's defaults), as plain values for a peer's worker."""
    from robot_rl.core.composed_config import load_config
    from robot_rl.core.config import plain

    return plain(load_config([*TASK_OVERRIDES[task], f"seed={seed}"]))


def run_robot_rl(task: str, seed: int, args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    """``robot-rl train`` (the main job) on the task; its history, takeover steps and wall seconds."""
    summary = run_training(
        run_dir,
        [
            *TASK_OVERRIDES[task],
            f"seed={seed}",
            f"train.env_steps={args.steps}",
            f"train.eval_every={args.eval_every}",
            f"train.eval_episodes={args.eval_episodes}",
            f"train.final_eval_episodes={args.eval_episodes}",
        ],
    )
    history = [
        {key: entry[key] for key in ("env_steps", "success_rate", "wall_seconds")} for entry in summary["eval_history"]
    ]
    return {
        "history": history,
        "takeover_steps": summary["intervention_steps"],
        "wall_seconds": summary["wall_seconds"],
    }


def run_peer(system: str, task: str, seed: int, args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    """A peer's worker in the peer's environment (a fresh ``run_dir``, its output in ``<run_dir>.log``); its
    outcome."""
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    spec = {
        "task": task,
        "config": task_config(task, seed),
        "seed": seed,
        "steps": args.steps,
        "eval_every": args.eval_every,
        "eval_episodes": args.eval_episodes,
        "run_dir": str(run_dir),
    }
    spec_path, out_path = run_dir / "spec.json", run_dir / "outcome.json"
    spec_path.write_text(json.dumps(spec, indent=2))
    log = run_dir.with_name(f"{run_dir.name}.log")
    command = [str(VENVS[system] / "bin" / "python"), "-m", WORKERS[system], str(spec_path), str(out_path)]
    with log.open("w") as output:
        code = subprocess.run(command, stdout=output, stderr=subprocess.STDOUT, cwd=ROOT, check=False).returncode
    if code != 0:
        raise RuntimeError(f"{' '.join(command)} exited with {code}; its log {log} ends:\n{log.read_text()[-3000:]}")
    return json.loads(out_path.read_text())


def run_record(system: str, task: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """One run of one system on one task and seed: its figures (see the module), kept in ``<runs>/<run>.json`` as
    soon as it is done. A run whose figures are there from an earlier invocation with the same budget and evaluation
    is not run again: the comparison takes hours, and the same command, run again, goes on where it stopped."""
    run_dir = Path(args.runs) / f"{system}_{task}_seed{seed}"
    kept = run_dir.with_name(f"{run_dir.name}.json")
    budget = {"steps": args.steps, "eval_every": args.eval_every, "eval_episodes": args.eval_episodes}
    if kept.is_file() and json.loads(kept.read_text()).get("budget") == budget:
        return json.loads(kept.read_text())["record"]
    with PeakMemory() as memory:
        if system == "robot_rl":
            outcome = run_robot_rl(task, seed, args, run_dir)
        else:
            outcome = run_peer(system, task, seed, args, run_dir)
    history = outcome["history"]
    first = next((entry for entry in history if entry["success_rate"] >= THRESHOLD), None)
    record = {
        "steps_to_90": None if first is None else first["env_steps"],
        "seconds_to_90": None if first is None else round(first["wall_seconds"], 1),
        "final_success": history[-1]["success_rate"],
        "takeover_steps": outcome["takeover_steps"],
        "peak_memory_mb": round(memory.peak_mb, 1),
        "wall_seconds": round(outcome["wall_seconds"], 1),
        "history": [[h["env_steps"], h["success_rate"], round(h["wall_seconds"], 1)] for h in history],
    }
    kept.write_text(json.dumps({"budget": budget, "record": record}, indent=2) + "\n")
    return record


def medians(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Medians over seeds (a seed that never reached 90% counts as infinitely late: None when half or more never
    did)."""
    records = list(runs.values())
    middle = median_or_none
    return {
        "steps_to_90": middle([r["steps_to_90"] for r in records]),
        "seconds_to_90": middle([r["seconds_to_90"] for r in records]),
        "seeds_reaching_90": f"{sum(r['steps_to_90'] is not None for r in records)}/{len(records)}",
        "final_success": middle([r["final_success"] for r in records]),
        "takeover_steps": middle([r["takeover_steps"] for r in records]),
        "peak_memory_mb": middle([r["peak_memory_mb"] for r in records]),
    }


def ahead(per_task: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The issue's bar on one task from the systems' medians: robot_rl's steps to 90% below every peer's (a peer
    that never got there is beaten by any figure) and its seconds no worse than the best peer's."""
    late = float("inf")
    ours = per_task.get("robot_rl")
    peers = {system: figures for system, figures in per_task.items() if system != "robot_rl"}
    if ours is None or not peers:
        return {"steps": None, "seconds": None, "note": "robot_rl and at least one peer are needed"}
    steps = ours["steps_to_90"] if ours["steps_to_90"] is not None else late
    seconds = ours["seconds_to_90"] if ours["seconds_to_90"] is not None else late
    peer_steps = [f["steps_to_90"] if f["steps_to_90"] is not None else late for f in peers.values()]
    peer_seconds = [f["seconds_to_90"] if f["seconds_to_90"] is not None else late for f in peers.values()]
    steps_ahead = steps < late and all(steps < other for other in peer_steps)
    seconds_ahead = seconds < late and seconds <= min(peer_seconds)
    note = "holds" if steps_ahead and seconds_ahead else "does not hold yet: the issue stays open"
    return {"steps": steps_ahead, "seconds": seconds_ahead, "note": note}


def plot(per_run: dict[str, dict[str, dict[str, Any]]], tasks: list[str], path: Path) -> None:
    """Evaluation success against online steps, one panel per task, one line per system and seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 3.8), dpi=120, squeeze=False)
    colors = dict(zip(SYSTEMS, ("tab:blue", "tab:orange", "tab:green")))
    for axis, task in zip(axes[0], tasks):
        for system, by_task in per_run.items():
            for index, (seed, record) in enumerate(by_task.get(task, {}).items()):
                points = record["history"]
                axis.plot(
                    [p[0] for p in points],
                    [p[1] for p in points],
                    "o-",
                    markersize=2.5,
                    linewidth=1.1,
                    color=colors[system],
                    alpha=0.85,
                    label=system if index == 0 else None,
                )
        axis.axhline(THRESHOLD, color="grey", linestyle="--", linewidth=0.8)
        style_success_axis(axis, "online env steps")
        axis.set_title(f"{task}: same demos, budget and evaluation", fontsize=9)
    save_figure(figure, path)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=8_000, help="online env steps per run (the main job's budget)")
    parser.add_argument("--eval-every", type=int, default=500, help="online env steps between evaluations")
    parser.add_argument("--eval-episodes", type=int, default=20, help="deterministic episodes per evaluation")
    parser.add_argument("--runs", default="runs/peers", help="folder of the runs' folders and logs")
    parser.add_argument("--name", default="peers", help="the result's file stem (<name>.json, <name>.png)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the result files")
    args = parser.parse_args(argv)
    for key in ("steps", "eval_every", "eval_episodes"):
        if getattr(args, key) <= 0:
            parser.exit(2, f"robot-rl: error: {key}={getattr(args, key)}; expected a positive integer\n")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    missing = missing_environments(args.systems)
    if missing:
        print(f"robot-rl: error: peers={','.join(missing)}; expected them set up: {SETUP_HINT}", file=sys.stderr)
        sys.exit(2)
    # gym-hil for robot-rl train's gym-hil task and this process's config of it; the checkout for the workers
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(GYM_HIL_PATH), os.environ.get("PYTHONPATH", "")])
    sys.path[:0] = [str(ROOT), str(GYM_HIL_PATH)]
    load = os.getloadavg()[0]  # the wall-clock figures depend on what else the machine runs
    per_run: dict[str, dict[str, dict[str, Any]]] = {system: {} for system in args.systems}
    for task in args.tasks:
        for seed in args.seeds:
            for system in args.systems:
                record = run_record(system, task, seed, args)
                per_run[system].setdefault(task, {})[str(seed)] = record
                print(system, task, f"seed {seed}", {k: v for k, v in record.items() if k != "history"}, flush=True)
    figures = {
        "per_run": per_run,
        "medians": {
            system: {task: medians(runs) for task, runs in by_task.items()} for system, by_task in per_run.items()
        },
    }
    figures["robot_rl_ahead"] = {
        task: ahead({system: figures["medians"][system][task] for system in args.systems}) for task in args.tasks
    }
    path = write_result(
        args.name,
        figures,
        folder=args.results,
        settings={
            "systems": args.systems,
            "tasks": args.tasks,
            "seeds": args.seeds,
            "online_steps": args.steps,
            "evaluation": f"deterministic, {args.eval_episodes} episodes every {args.eval_every} steps and at the end",
            "load_average_1min": {"start": round(load, 2), "end": round(os.getloadavg()[0], 2)},
        },
    )
    plot(per_run, args.tasks, args.results / f"{args.name}.png")
    print("wrote", path, "and its PNG")
    return figures


if __name__ == "__main__":
    main()
