"""The on-robot session rehearsed on the emulated cell: minutes of cell time to 90% pick_cube success with the reward
classifier as the only reward, beside the same session on the sim's ground-truth reward (issue 48).

Each run, in a ROS 2 domain of its own, on the wall clock at the task's 10 Hz:

1. ``robot-rl launch cell robot=fr3 task=pick_cube`` (the emulated Franka cell: driver topics, a RealSense's, an
   object tracker's and the scripted operator's SpaceMouse);
2. classifier run only: ``collect_demos`` with the SpaceMouse (the operator holds the success button while the cube
   is up, labelling every success frame), then ``robot-rl classifier`` on them (calibrated on held-out episodes);
   with ``--classifier-near-misses S`` the operator plays that share of them as near misses (the cube lifted short
   of the task's height: failed episodes that look like successes) on a cell of its own, stopped before the session's;
3. ``robot-rl launch real_train`` on that cell: a policy from state (arm + tracker), the reward classifier on the
   front camera as the only reward (ground-truth run: the cell publishes the sim's reward and success, and the
   graph has no reward node, ``graph.reward=false``), the operator's demonstrations and takeovers, evaluations on the cell
   every ``--eval-every`` training episodes.

Cell time is what the session would take on a cell that holds its rate: the env steps of every episode (demos,
training, evaluations) at the control rate plus each reset's measured time (homing and the scene reset, from
home_reset's log); the wall time is reported beside it (on 2 loaded cores the graph may not hold 10 Hz).
``--cameras front wrist`` rehearses the session from those cameras alone: the cell streams them, the classifier and
the policy read them through the frozen pretrained encoder, the policy sees no object pose and the graph has no
tracker node (issue 74). ``--zero-shot-steps N`` also trains N steps in process (``robot-rl train``), with and without
``randomization=<--randomization>``, and evaluates each policy on the emulated cell with its non-idealities, nothing
learned there.

    python -m benchmarks.cell_rehearsal --steps 8000 --rewards classifier ground_truth [--seeds 0 1 2] [agent=cqn_as ...]

The record: per session the median over seeds of ``minutes_to_90``, ``intervention_steps`` and ``cell_minutes``, the
classifier's false successes per failed episode pooled over the seeds, and under ``per_seed`` each seed's sessions
(their success against cell minutes, the classifier's calibration and the cell's count, and ``learner_pace``: the
learner's update calls and updates per online step over the session).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from benchmarks.common import LOG_STAMP, RESULTS, actor_records, result_command, stop_launch, write_result
from benchmarks.main_job import median_or_none
from robot_rl.cli.graph import reserved_ros_domain
from robot_rl.core.transport import updates_due

CONTROL_RATE = 10.0  # Hz: pick_cube's
CELL = [
    "robot=fr3",
    "task=pick_cube",
    "cell.state_rate_hz=500",
    "cell.camera_rate_hz=10",  # a RealSense streams 30 fps; the classifier reads one frame a step
    "cell.image_size=64",
]
SESSION = [
    "robot=fr3",
    "task=pick_cube",
    "teleop_device.kind=spacemouse",
    "reset.scene_wait=true",
    "reset.speed=0.25",
    "ros.startup_timeout=120",
    "robot.safety=[--rate-hz,500]",  # a tick per state of the cell
    "robot.limits.state_timeout=0.05",
]
SCENE_TRUTH = re.compile(r"\[(\d+\.\d+)\] \[robot_rl_cell\]: cell: scene \d+ truly (succeeded|failed)")
RESET_DONE = re.compile(r"\[(\d+\.\d+)\] \[robot_rl_home_reset\]: reset: ready in ([\d.]+) s")
CAMERAS_SECTION = "cameras"  # the record's section of a session from the cameras alone (issue 74)
LEARNER_PROGRESS = re.compile(r" (\d+)/\d+ \[.*updates=(\d+), updates_per_step=([\d.]+)")  # the learner's progress line


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=8000, help="online env steps of each real_train session")
    parser.add_argument("--demos", type=int, default=20, help="operator demonstrations at the session's start")
    parser.add_argument("--classifier-demos", type=int, default=20, help="SpaceMouse episodes for the classifier")
    parser.add_argument(
        "--classifier-near-misses",
        type=float,
        default=0.0,
        help="share of the classifier's episodes the operator plays as near misses (cell.operator_near_misses); above "
        "0 they are recorded on a cell of their own (collection_cell.log), so the session's demonstrations are whole",
    )
    parser.add_argument("--rewards", nargs="+", default=["classifier", "ground_truth"])
    parser.add_argument("--eval-every", type=int, default=10, help="training episodes between evaluations")
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=[0], help="one rehearsal per seed, one after the other (--work/seed<N>)"
    )
    parser.add_argument(
        "--cameras",
        nargs="+",
        default=None,
        help="the session from these cameras alone (no object pose, no tracker node), the policy and the classifier "
        "on the frozen pretrained encoder; default: the policy from state and the tracker, the classifier on front",
    )
    parser.add_argument("--zero-shot-steps", type=int, default=0, help="0: no zero-shot runs")
    parser.add_argument("--randomization", default="state_policy")
    parser.add_argument("--zero-shot-episodes", type=int, default=20)
    parser.add_argument("--name", default="cell_rehearsal")
    parser.add_argument("--work", type=Path, default=None, help="folder for the runs (default: a temporary one)")
    parser.add_argument("--rescore", action="store_true", help="score results/<--name>.json's logs again, run nothing")
    parser.add_argument(
        "--assemble",
        action="store_true",
        help="write the record of a stopped run from --work's logs (a trained "
        "zero-shot policy not yet evaluated is evaluated on the cell)",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        help="of every training and evaluation, e.g. agent=cqn_as; classifier.* ones also of the classifier's training",
    )
    return parser.parse_args(argv)


class Domain:
    """Commands in one reserved ROS 2 domain (localhost discovery)."""

    def __init__(self, domain: int):
        self.env = {
            **os.environ,
            "ROS_DOMAIN_ID": str(domain),
            "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
            "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
        }

    def start(self, args: list[str], log: Path) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "robot_rl.cli.main", *args],
            stdout=open(log, "w"),
            stderr=subprocess.STDOUT,
            env=self.env,
            start_new_session=True,
        )

    def run(self, args: list[str], log: Path, timeout: float) -> str:
        process = self.start(args, log)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_launch(process)
            raise RuntimeError(f"robot-rl {args[0]} {args[1]} timed out after {timeout:.0f} s") from None
        output = log.read_text()
        if process.returncode != 0:
            raise RuntimeError(f"robot-rl {' '.join(args[:2])} exited {process.returncode}: {output[-800:]}")
        return output


def scene_truths(cell_log: str) -> list[tuple[float, bool]]:
    """(log stamp s, truly succeeded) of each scene the cell's helper cleared away, in order: the line
    ``cell: scene N truly succeeded|failed`` comes when the scene is reset, right after the episode played on it."""
    return [(float(m.group(1)), m.group(2) == "succeeded") for m in SCENE_TRUTH.finditer(cell_log)]


def episodes_truth(truths: list[tuple[float, bool]], stamp: float, episodes: int) -> list[bool]:
    """The truth of the ``episodes`` episodes that ended by an actor record at ``stamp``: the scene reset first after
    it is its last episode's, the ones before it the earlier episodes'. By time, so an evaluation that a stall
    restarted (its abandoned episodes' scenes are reset too) is matched to the episodes it counted; [] when the cell
    has not reported them."""
    after = next((index for index, (at, _) in enumerate(truths) if at > stamp), None)
    if after is None or after + 1 < episodes:
        return []
    return [ok for _, ok in truths[after + 1 - episodes : after + 1]]


def cell_time(output: str, truths: list[tuple[float, bool]] | None = None) -> dict[str, Any]:
    """Success against minutes of cell time (module docstring) and the session's totals, from a launch's output.
    ``truths``: the cell's scenes (:func:`scene_truths`); an evaluation's success is then the truth of its episodes
    (:func:`episodes_truth`); without, the actor's own success, the reward's word (the classifier's, in the
    classifier run), which is reported beside it either way."""
    records = actor_records(output)
    resets = [(float(m.group(1)), float(m.group(2))) for m in RESET_DONE.finditer(output)]
    steps_seconds = 0.0
    curve = []
    for stamp, record in records:
        if record["kind"] in ("train", "demo", "eval"):
            episodes = record.get("episodes", 1) if record["kind"] == "eval" else 1
            length = record.get("mean_length", 0.0) * episodes if record["kind"] == "eval" else record["length"]
            steps_seconds += length / CONTROL_RATE
        reset_seconds = sum(duration for at, duration in resets if at <= stamp)
        if record["kind"] == "eval":
            minutes = (steps_seconds + reset_seconds) / 60
            if record.get("episode_ends"):  # each counted episode's end: the scene reset first after it is its own
                played = [ok for end in record["episode_ends"] for ok in episodes_truth(truths or [], end, 1)]
            else:  # an actor that does not say: the episodes that ended just before the record
                played = episodes_truth(truths or [], stamp, episodes)
            success = float(np.mean(played)) if len(played) == episodes else record["success_rate"]
            curve.append(
                {"cell_minutes": round(minutes, 2), "success_rate": success, "reward_said": record["success_rate"]}
            )
    first = records[0][0] if records else 0.0
    wall = (records[-1][0] - first) if records else 0.0
    reached = next((point["cell_minutes"] for point in curve if point["success_rate"] >= 0.9), None)
    return {
        "success_at_minutes": {str(p["cell_minutes"]): p["success_rate"] for p in curve},
        "reward_said_success_at_minutes": {str(p["cell_minutes"]): p["reward_said"] for p in curve},
        "minutes_to_90": reached,
        "intervention_steps": sum(r["interventions"] for _, r in records if r["kind"] in ("train", "demo")),
        "online_steps": sum(r["length"] for _, r in records if r["kind"] == "train"),
        "cell_minutes": round((steps_seconds + sum(d for _, d in resets)) / 60, 2),
        "reset_seconds_median": float(np.median([d for _, d in resets])) if resets else None,
        "wall_minutes": round(wall / 60, 2),
        "tracebacks": output.count("Traceback (most recent call last)"),
    }


def learner_pace(output: str, start_training: int, update_every: int) -> list[list[float | None]]:
    """The learner's pace over the session from its progress lines (``ros.progress_every`` s apart): [wall minutes
    since its first line, online steps received, update calls, update calls per online step, share of the update
    calls the settings ask for by then] per line (each call ``agent.utd`` critic steps; the settings ask for one per
    ``update_every`` online steps after the first ``start_training``; None before the first is due)."""
    rows = []
    for line in output.splitlines():
        match = LEARNER_PROGRESS.search(line) if line.startswith("[learner]") else None
        if match:
            rows.append((float(LOG_STAMP.search(line).group(1)), *match.groups()))
    first = rows[0][0] if rows else 0.0
    paced = []
    for at, online, updates, ratio in rows:
        due = updates_due(int(online), 0, start_training, update_every)
        share = round(int(updates) / due, 3) if due > 0 else None
        paced.append([round((at - first) / 60, 2), int(online), int(updates), float(ratio), share])
    return paced


def lowest_share(pace: list[list[float | None]]) -> float | None:
    """The lowest share of the asked-for update calls the learner held over a session (:func:`learner_pace`)."""
    shares = [row[4] for row in pace if len(row) > 4 and row[4] is not None]
    return min(shares) if shares else None


def cell_report(log: Path) -> dict[str, Any]:
    text = log.read_text()
    if "cell report: " not in text:
        return {}
    return json.loads(text.split("cell report: ")[-1].splitlines()[0])


def camera_settings(cameras: list[str] | None) -> dict[str, list[str]]:
    """What a session from ``cameras`` sets, per command (``cell``, ``collect``, ``classifier``, ``session``): the
    cameras alone with the frozen pretrained encoder, no object pose; None: the policy from state and the tracker,
    the classifier on the front camera."""
    if cameras is None:
        return {
            "cell": [],
            "collect": ["task.cameras=[front]"],
            "classifier": ["classifier.cameras=[front]"],
            "session": ["task.cameras=[]", "classifier.cameras=[front]"],
        }
    listed = f"[{','.join(cameras)}]"
    classifier = [f"classifier.cameras={listed}", "classifier.camera_encoder=pretrained"]
    return {
        "cell": [f"cell.cameras={listed}"],
        "collect": [f"task.cameras={listed}"],
        "classifier": classifier,
        "session": [
            f"task.cameras={listed}",
            "task.object_state=false",
            "agent.camera_encoder=pretrained",
            *classifier,
        ],
    }


def start_cell(
    domain: Domain, folder: Path, ground_truth: bool, seed: int, extra: list[str], name: str = "cell"
) -> tuple[subprocess.Popen, Path]:
    """``robot-rl launch cell`` logging to ``folder/<name>.log``, its SpaceMouse FIFO ``folder/<name>_spacemouse``."""
    fifo, log = folder / f"{name}_spacemouse", folder / f"{name}.log"
    cell = domain.start(
        [
            "launch",
            "cell",
            *CELL,
            *extra,
            f"cell.spacemouse={fifo}",
            f"cell.publish_reward={str(ground_truth).lower()}",
            f"seed={seed}",
        ],
        log,
    )
    deadline = time.monotonic() + 120
    while not fifo.exists():
        if cell.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the cell did not start: {log.read_text()[-800:]}")
        time.sleep(0.2)
    return cell, fifo


def train_classifier(
    domain: Domain, folder: Path, fifo: Path, args: argparse.Namespace, views: dict[str, list[str]]
) -> tuple[Path, dict]:
    """SpaceMouse episodes labelled by the operator's success button, then the calibrated classifier (``views``:
    :func:`camera_settings`)."""
    store, out = folder / "classifier_frames.zarr", folder / "reward_classifier.pt"
    output = domain.run(
        [
            "launch",
            "collect_demos",
            *SESSION,
            f"teleop_device.spacemouse_device={fifo}",
            *views["collect"],
            "task.image_size=64",
            "task.terminate_on_success=false",
            "task.episode_steps=90",
            f"train.demo_episodes={args.classifier_demos}",
            f"ros.recorder.store={store}",
            f"train.run_dir={folder / 'collect'}",
            f"seed={args.seed}",
        ],
        folder / "collect.log",
        timeout=3600,
    )
    report = json.loads(
        domain.run(
            [
                "classifier",
                f"classifier.store={store}",
                *views["classifier"],
                f"classifier.out={out}",
                *[override for override in args.overrides if override.startswith("classifier.")],
            ],
            folder / "classifier.log",
            timeout=3600,
        )
    )
    return out, {"collect": cell_time(output), "classifier": report}


def session(args: argparse.Namespace, work: Path, reward: str) -> dict[str, Any]:
    """One rehearsed session (module docstring) on a cell of its own."""
    folder = work / reward
    folder.mkdir(parents=True)
    with reserved_ros_domain() as domain_id:
        domain = Domain(domain_id)
        views = camera_settings(args.cameras)
        extra: dict[str, Any] = {}
        separate = reward == "classifier" and args.classifier_near_misses  # near misses: the classifier's own cell
        cell = None
        try:
            if separate:
                near_misses = [*views["cell"], f"cell.operator_near_misses={args.classifier_near_misses}"]
                collection, fifo = start_cell(domain, folder, False, args.seed, near_misses, "collection_cell")
                try:
                    classifier, extra = train_classifier(domain, folder, fifo, args, views)
                finally:
                    stop_launch(collection)
            cell, fifo = start_cell(domain, folder, reward == "ground_truth", args.seed, views["cell"])
            if reward == "classifier" and not separate:
                classifier, extra = train_classifier(domain, folder, fifo, args, views)
            if reward == "classifier":
                rewarded_by = [f"classifier.out={classifier}"]
            else:
                rewarded_by = ["graph.reward=false"]  # no reward node: the cell's truth is the reward
            started = time.monotonic()
            domain.run(
                [
                    "launch",
                    "real_train",
                    *SESSION,
                    f"teleop_device.spacemouse_device={fifo}",
                    *views["session"],
                    *rewarded_by,
                    f"train.run_dir={folder / 'run'}",
                    f"train.demo_episodes={args.demos}",
                    f"train.env_steps={args.steps}",
                    f"ros.eval_every_episodes={args.eval_every}",
                    f"ros.eval_episodes={args.eval_episodes}",
                    f"seed={args.seed}",
                    *args.overrides,
                ],
                folder / "real_train.log",
                timeout=6 * 3600,
            )
            wall = round((time.monotonic() - started) / 60, 2)
        finally:
            if cell is not None:
                stop_launch(cell)
    figures = {**session_figures(folder), "wall_minutes_session": wall}
    return {**figures, **extra, "cell": cell_report(folder / "cell.log")}


def session_figures(folder: Path) -> dict[str, Any]:
    """A session's figures from its logs (``real_train.log``, and ``cell.log`` for the truth)."""
    output = (folder / "real_train.log").read_text()
    train = yaml.safe_load((folder / "run" / "config.yaml").read_text())["train"]
    pace = learner_pace(output, int(train["start_training"]), int(train["update_every"]))
    return {
        **cell_time(output, scene_truths((folder / "cell.log").read_text())),
        "learner_pace": pace,
        "learner_lowest_share_of_updates": lowest_share(pace),
    }


def zero_shot(args: argparse.Namespace, work: Path, randomized: bool) -> dict[str, Any]:
    """Train in process (sim), then evaluate on the emulated cell, nothing learned there."""
    folder = work / f"zero_shot_{'with' if randomized else 'without'}"
    folder.mkdir(parents=True)
    with reserved_ros_domain() as domain_id:
        Domain(domain_id).run(
            [
                "train",
                "task=pick_cube",
                f"train.env_steps={args.zero_shot_steps}",
                f"train.run_dir={folder / 'run'}",
                f"seed={args.seed}",
                *([f"randomization={args.randomization}"] if randomized else []),
                *args.overrides,
            ],
            folder / "train.log",
            timeout=6 * 3600,
        )
    zero_shot_on_cell(args, folder)
    return zero_shot_figures(folder)


def zero_shot_on_cell(args: argparse.Namespace, folder: Path) -> None:
    """Evaluate ``folder``'s trained checkpoint on a cell of its own with its non-idealities (``eval.log``)."""
    with reserved_ros_domain() as domain_id:
        domain = Domain(domain_id)
        cell, fifo = start_cell(domain, folder, True, args.seed + 1, [])  # a policy from state
        try:
            domain.run(
                [
                    "launch",
                    "real_train",
                    *SESSION,
                    f"teleop_device.spacemouse_device={fifo}",
                    "task.cameras=[]",
                    "graph.reward=false",
                    f"train.run_dir={folder / 'eval'}",
                    "ros.eval_only=true",
                    f"eval.checkpoint={folder / 'run' / 'checkpoint'}",
                    f"ros.eval_episodes={args.zero_shot_episodes}",
                    *args.overrides,
                ],
                folder / "eval.log",
                timeout=3600,
            )
        finally:
            stop_launch(cell)


def zero_shot_figures(folder: Path) -> dict[str, Any]:
    """A zero-shot run's success on the cell and its final success in the sim, from its logs."""
    evals = [record for _, record in actor_records((folder / "eval.log").read_text()) if record["kind"] == "eval"]
    summary = json.loads((folder / "run" / "summary.json").read_text())
    return {"success": evals[-1]["success_rate"], "sim_final_success": summary.get("final_eval_success")}


def plot(per_seed: dict[str, dict[str, Any]], path: Path) -> None:
    """Success against cell minutes, a line per seed and session."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for seed, figures in per_seed.items():
        for reward, session_record in figures["sessions"].items():
            curve = session_record.get("success_at_minutes") or {}
            label = f"{reward.replace('_', ' ')}, seed {seed}"
            ax.plot([float(m) for m in curve], list(curve.values()), marker="o", markersize=3, label=label)
    ax.axhline(0.9, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("minutes of cell time (env steps at 10 Hz + resets)")
    ax.set_ylabel("evaluation success")
    ax.set_title("pick_cube on the emulated Franka cell")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def rescore(name: str, cameras: bool) -> Path:
    """Score ``results/<name>.json``'s sessions again (its ``cameras`` section with ``cameras``) from the logs its run
    left in its work folder (the scoring changed, the run stands); the record keeps its settings and provenance."""
    record = json.loads((RESULTS / f"{name}.json").read_text())
    measured = record["figures"][CAMERAS_SECTION] if cameras else record["figures"]
    settings = measured["settings"] if cameras else record["settings"]
    work, per_seed = Path(settings["work"]), measured["per_seed"]
    for seed, figures in per_seed.items():
        for reward, session_record in figures["sessions"].items():
            if (work / f"seed{seed}" / reward / "real_train.log").exists():
                session_record.update(session_figures(work / f"seed{seed}" / reward))
        figures.update(keyed(figures["sessions"]))
    provenance = record["figures"].get("provenance", {}).get(CAMERAS_SECTION if cameras else "state", {})
    run = {"run_by": provenance.get("command", record["command"]), "run_on": provenance.get("date", record["date"])}
    return write_record(name, across_seeds(per_seed), {**settings, **run})


def keyed(sessions: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The issue's figures, each keyed by session (``classifier``, ``ground_truth``)."""
    return {
        key: {reward: figures.get(key) for reward, figures in sessions.items()}
        for key in (
            "success_at_minutes",
            "minutes_to_90",
            "intervention_steps",
            "cell_minutes",
            "wall_minutes",
            "learner_lowest_share_of_updates",
        )
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.rescore:
        print(f"wrote {rescore(args.name, bool(args.cameras))}")
        return 0
    if args.assemble:
        print(f"wrote {assemble(args)}")
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="cell_rehearsal_"))
    per_seed = {}
    for seed in args.seeds:
        per_seed[str(seed)] = rehearse(argparse.Namespace(**vars(args), seed=seed), work / f"seed{seed}")
    print(f"wrote {write_record(args.name, across_seeds(per_seed), vars(args) | {'work': str(work)})}")
    return 0


def write_record(name: str, figures: dict[str, Any], settings: dict[str, Any]) -> Path:
    """``results/<name>.json`` with a run's figures: a session from state as the record's figures, one from
    ``--cameras`` as its ``cameras`` section (issue 74) with that run's settings, the other kept from the file as it
    was; ``provenance`` names the command and date that measured each (a rescore's under ``scored_by``); the plot
    beside it (``<name>.png``, ``<name>_cameras.png``)."""
    path = RESULTS / f"{name}.json"
    record = json.loads(path.read_text()) if path.exists() else {"figures": {}, "settings": {}}
    section = CAMERAS_SECTION if settings.get("cameras") else "state"
    provenance = record["figures"].get("provenance") or {
        "state": {"command": record.get("command"), "date": record.get("date")}
    }
    now = {"command": result_command(), "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    rescored = "run_by" in settings  # a rescore: the run's own command and date, the rescore's beside them
    provenance[section] = (
        {"command": settings["run_by"], "date": settings["run_on"], "scored_by": now} if rescored else now
    )
    if section == CAMERAS_SECTION:
        kept = {key: value for key, value in record["figures"].items() if key != CAMERAS_SECTION}
        figures = {**kept, CAMERAS_SECTION: {**figures, "settings": settings}}
        settings = record["settings"]
    elif CAMERAS_SECTION in record["figures"]:
        figures = {**figures, CAMERAS_SECTION: record["figures"][CAMERAS_SECTION]}
    written = write_result(name, {**figures, "provenance": provenance}, settings=settings)
    shown = figures[CAMERAS_SECTION] if section == CAMERAS_SECTION else figures
    plot(shown["per_seed"], RESULTS / (f"{name}_cameras.png" if section == CAMERAS_SECTION else f"{name}.png"))
    return written


def rehearse(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """One seed's sessions (``--rewards``) and zero-shot runs in ``work``: :func:`figures_of`."""
    sessions: dict[str, dict[str, Any]] = {}
    for reward in args.rewards:
        try:
            sessions[reward] = session(args, work, reward)
        except RuntimeError as error:  # a failed session is its result; the others still run
            sessions[reward] = {"error": str(error)[-1500:]}
        print(json.dumps({"seed": args.seed, reward: sessions[reward]}, default=str)[:2000], flush=True)
    zero_shots = {}
    if args.zero_shot_steps:
        zero_shots = {"with_randomization": zero_shot(args, work, True), "without": zero_shot(args, work, False)}
    return figures_of(sessions, zero_shots)


def figures_of(sessions: dict[str, dict[str, Any]], zero_shots: dict[str, Any]) -> dict[str, Any]:
    """One seed's figures: the issue's keys by session, the classifier's rates on the cell, every session's
    figures, and the zero-shot successes when there are."""
    figures: dict[str, Any] = keyed(sessions)
    classifier = sessions.get("classifier", {})
    rates = classifier.get("cell", {}).get("classifier", {})
    figures["classifier_false_positive_rate"] = rates.get("false_positive_rate")
    figures["classifier_false_negative_rate"] = rates.get("false_negative_rate")
    figures["classifier_false_success_per_failed_episode"] = rates.get("false_success_per_failed_episode")
    figures["classifier_calibration"] = classifier.get("classifier")
    figures["classifier_data_collection"] = classifier.get("collect")
    figures["sessions"] = sessions
    if zero_shots:
        figures["zero_shot_success"] = zero_shots
    return figures


def across_seeds(per_seed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The record's figures: per session the median over seeds of ``minutes_to_90`` (a seed that never reached 90%
    counts as never; None when half or more never did), ``intervention_steps`` and ``cell_minutes``; the lowest share of
    the asked-for update calls any seed's learner held (``learner_lowest_share_of_updates``); the classifier's
    false successes per failed episode pooled over the seeds' failed scenes (the emulator's count), and each seed's
    figures under ``per_seed``."""
    rewards = sorted({reward for figures in per_seed.values() for reward in figures["sessions"]})
    figures: dict[str, Any] = {"seeds": [int(seed) for seed in per_seed]}
    for key in ("minutes_to_90", "intervention_steps", "cell_minutes"):
        figures[key] = {
            reward: median_or_none([seed_figures[key].get(reward) for seed_figures in per_seed.values()])
            for reward in rewards
        }
    shares = {
        reward: [
            seed_figures["sessions"].get(reward, {}).get("learner_lowest_share_of_updates")
            for seed_figures in per_seed.values()
        ]
        for reward in rewards
    }
    figures["learner_lowest_share_of_updates"] = {
        reward: min(held) if (held := [share for share in listed if share is not None]) else None
        for reward, listed in shares.items()
    }
    counts = [
        seed_figures["sessions"].get("classifier", {}).get("cell", {}).get("classifier", {})
        for seed_figures in per_seed.values()
    ]
    failed = sum(count.get("failed_scenes", 0) for count in counts)
    declared = sum(count.get("failed_scenes_declared_success", 0) for count in counts)
    figures["classifier_failed_episodes"] = failed
    figures["classifier_false_success_per_failed_episode"] = declared / failed if failed else None
    figures["per_seed"] = per_seed
    return figures


def assemble(args: argparse.Namespace) -> Path:
    """The record of a run that stopped before writing it, from the logs in ``--work`` (a folder per seed): its
    sessions, and its zero-shot runs (a trained one not yet evaluated on the cell is evaluated now)."""
    per_seed = {}
    for seed in args.seeds:
        work, one = args.work / f"seed{seed}", argparse.Namespace(**vars(args), seed=seed)
        sessions: dict[str, dict[str, Any]] = {}
        for reward in args.rewards:
            folder = work / reward
            if not (folder / "real_train.log").exists():
                continue
            sessions[reward] = {**session_figures(folder), "cell": cell_report(folder / "cell.log")}
            if (folder / "classifier.log").exists():
                sessions[reward]["classifier"] = json.loads((folder / "classifier.log").read_text())
                sessions[reward]["collect"] = cell_time((folder / "collect.log").read_text())
        zero_shots = {}
        for key, name in (("with_randomization", "zero_shot_with"), ("without", "zero_shot_without")):
            folder = work / name
            if (folder / "run" / "summary.json").exists():
                if not (folder / "eval.log").exists():
                    zero_shot_on_cell(one, folder)
                zero_shots[key] = zero_shot_figures(folder)
        per_seed[str(seed)] = figures_of(sessions, zero_shots)
    return write_record(args.name, across_seeds(per_seed), vars(args) | {"work": str(args.work)})


if __name__ == "__main__":
    sys.exit(main())
