"""Shared pieces of the robot_rl benchmarks: machine description and result files."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
LOG_STAMP = re.compile(r"\[(\d+\.\d+)\]")  # a ROS log line's stamp: wall-clock s


def machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = "none"
    if shutil.which("nvidia-smi"):
        query = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, check=False
        )
        gpu = query.stdout.strip() or "none"
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "gpu": gpu,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def write_result(name: str, figures: dict[str, Any], *, folder: Path | None = None, **extra: Any) -> Path:
    """Write ``<folder>/<name>.json`` (:data:`RESULTS` as it is at the call unless told) with machine, command, date
    and figures."""
    folder = RESULTS if folder is None else folder
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    record = {
        "benchmark": name,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": result_command(),
        "machine": machine(),
        **extra,
        "figures": figures,
    }
    partial = path.with_name(f".{path.name}.partial")  # a sibling, renamed over the result: never half a file
    partial.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(partial, path)
    return path


def result_command() -> str:
    """This run's command line, as a result file records it."""
    return " ".join(["python", "-m", f"benchmarks.{Path(sys.argv[0]).stem}", *sys.argv[1:]])


def kept_rows(
    name: str, rows: dict[str, Any], rows_of: Callable[[dict], dict[str, Any]], settings: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A rerun of only some rows of benchmark ``name`` (its variants, ways): (``rows``, this run's by row, completed
    with the other rows of its last result, which ``rows_of`` picks by row from that result's figures; where each
    row came from: the command and date that measured it, for the result's ``provenance``). The last result must
    have been measured with ``settings`` (the task, seeds, steps): otherwise the rows would not compare, and the rerun
    is refused with one line (exit 2)."""
    rerun = list(rows)
    path = RESULTS / f"{name}.json"
    if not path.is_file():
        print(f"robot-rl: error: only={','.join(rerun)}; expected a result to complete at {path}", file=sys.stderr)
        sys.exit(2)
    last = json.loads(path.read_text())
    measured = last.get("settings", {})
    differing = {key: (measured.get(key), value) for key, value in settings.items() if measured.get(key) != value}
    if differing:
        key, (was, now) = next(iter(differing.items()))
        print(
            f"robot-rl: error: {key}={now!r}; expected {was!r} as {path.name} was measured with (rows compared must be)",
            file=sys.stderr,
        )
        sys.exit(2)
    earlier, kept = last.get("provenance", {}), rows_of(last["figures"])
    provenance = {row: earlier.get(row, {"command": last["command"], "date": last["date"]}) for row in kept}
    now = {"command": result_command(), "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    provenance.update({row: now for row in rows})
    return {**kept, **rows}, provenance


def to_threshold(history: list[dict], threshold: float = 0.8) -> dict:
    """Env steps and wall-clock of the first evaluation at or above ``threshold`` success."""
    for entry in history:
        if entry["success_rate"] >= threshold:
            return {"reached": True, "env_steps": entry["env_steps"], "wall_seconds": entry["wall_seconds"]}
    return {"reached": False, "final_success": history[-1]["success_rate"] if history else None}


def device_synchronize(device: str) -> Callable[[], None]:
    """What waits for the work queued on ``device`` (CUDA kernels run asynchronously; a CPU's work is done)."""
    import torch

    return torch.cuda.synchronize if device == "cuda" else (lambda: None)


INTERRUPTED_EXIT = 130  # robot-rl train's exit code after a Ctrl-C (its summary says interrupted)


def run_training(run_dir: Path, overrides: list[str], max_seconds: float | None = None) -> dict[str, Any]:
    """``robot-rl train`` in a subprocess (a fresh ``run_dir``, its output in ``<run_dir>.log`` beside it); returns
    its summary.json. ``max_seconds``: after that many wall seconds the run gets Ctrl-C (SIGINT), as a person would
    stop it: it ends its episode, writes its final checkpoint and summary (``interrupted``) and exits. A failed run
    raises with the end of its log."""
    shutil.rmtree(run_dir, ignore_errors=True)
    log = run_dir.with_name(f"{run_dir.name}.log")
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "robot_rl.cli.main", "train", f"train.run_dir={run_dir}", *overrides]
    with log.open("w") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
        stopped = False
        try:
            code = process.wait(timeout=max_seconds)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGINT)
            code, stopped = process.wait(), True
    if code != 0 and not (stopped and code == INTERRUPTED_EXIT):
        raise RuntimeError(f"{' '.join(command)} exited with {code}; its log {log} ends:\n{log.read_text()[-3000:]}")
    return json.loads((run_dir / "summary.json").read_text())


def side_by_side(run, names, *args: Any, workers: int = 2) -> dict[str, Any]:
    """``{name: run(name, *args)}``, ``workers`` runs at a time (each a subprocess on its own core)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(run, name, *args) for name in names}
        return {name: future.result() for name, future in futures.items()}


def curve(history: list[dict]) -> list[tuple[int, float, float]]:
    """(env steps, success rate, wall seconds) per evaluation."""
    return [(h["env_steps"], h["success_rate"], round(h["wall_seconds"], 1)) for h in history]


def style_success_axis(axis, xlabel: str, ylabel: str = "eval success") -> None:
    """Success-rate axes: [0, 1] range, the 80% bar dotted, a small legend."""
    axis.axhline(0.8, color="grey", linestyle=":", linewidth=1)
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    axis.set_ylim(-0.02, 1.02)
    axis.legend(fontsize=7)


def save_figure(figure, path: Path) -> None:
    """Lay out, write and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)


def actor_records(output: str) -> list[tuple[float, dict[str, Any]]]:
    """(log stamp: wall-clock s, record) of the actor's per-episode JSON records in a launch's output (lines
    ``[actor] [INFO] [<stamp>] [...]: {"kind": ...}``)."""
    records = []
    for line in output.splitlines():
        if line.startswith("[actor]") and ']: {"kind"' in line:
            stamp = LOG_STAMP.search(line)
            records.append((float(stamp.group(1)), json.loads(line.split("]: ", 1)[1])))
    return records


def launched_pids(log: str, node: str) -> list[int]:
    """The process ids ``robot-rl launch`` started ``node`` with, in order (its ``started <node> (pid N)`` lines)."""
    return [int(pid) for pid in re.findall(rf"\[launch\] started {node} \(pid (\d+)\)", log)]


def stop_launch(process: subprocess.Popen, grace: float = 60.0) -> None:
    """Stop a ``robot-rl launch`` started in a session of its own (``start_new_session=True``): SIGINT to its process
    group, as Ctrl-C would, then SIGKILL after ``grace`` s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
