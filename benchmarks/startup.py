"""Start-up cost of the processes a cell runs: importing each node module, and a command line that is refused.

Each process is started fresh ``--rounds`` times; the figures are medians of its CPU time (user + system, s: what
it takes from the other processes on a loaded cell PC) and its peak resident memory (MB), and whether torch was
imported. ``--tree`` measures another checkout side by side (e.g. ``git worktree add /tmp/old <commit>``): its
figures go under ``compared``.

    python -m benchmarks.startup [--rounds 5] [--tree /tmp/old]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import write_result

ROOT = Path(__file__).resolve().parent.parent
#: what each process does, as ``python -c`` text
PROCESSES = {
    "safety_node": "import robot_rl.ros.safety.safety_node",
    "sim_robot_node": "import robot_rl.ros.emulation.sim_robot_node",
    "recorder_node": "import robot_rl.ros.nodes.recorder_node",
    "teleop_node": "import robot_rl.ros.nodes.teleop_node",
    "console_node": "import robot_rl.ros.console.console_node",
    "actor_node": "import robot_rl.ros.nodes.actor_node",
    "learner_node": "import robot_rl.ros.nodes.learner_node",
    "launcher": "import robot_rl.cli.graph",
    "refused_command_line": "from robot_rl.cli.main import main; main(['train', 'task=nope'])",
}


def measure(tree: Path, code: str) -> dict[str, float | bool]:
    """CPU seconds, peak MB and torch's presence of one fresh ``python -c code`` importing from ``tree``, as the
    process itself reports them when done."""
    probe = (
        f"{code}\nimport resource, sys\nuse = resource.getrusage(resource.RUSAGE_SELF)\n"
        "print(use.ru_utime + use.ru_stime, use.ru_maxrss / 1024, 'torch' in sys.modules)"
    )
    with tempfile.TemporaryDirectory() as cwd:  # no checkout on sys.path but ``tree``
        done = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=cwd,
            env={**os.environ, "PYTHONPATH": str(tree)},
            capture_output=True,
            text=True,
            check=True,
        )
    cpu, peak, torch = done.stdout.split()[-3:]
    return {"cpu_s": float(cpu), "peak_mb": float(peak), "torch": torch == "True"}


def figures_of(tree: Path, rounds: int) -> dict[str, dict]:
    figures = {}
    for name, code in PROCESSES.items():
        runs = [measure(tree, code) for _ in range(rounds)]
        figures[name] = {
            "cpu_s_median": round(statistics.median(r["cpu_s"] for r in runs), 3),
            "peak_mb_median": round(statistics.median(r["peak_mb"] for r in runs), 1),
            "imports_torch": runs[-1]["torch"],
        }
        print(name, figures[name], flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tree", type=Path, default=None, help="another checkout, measured side by side")
    args = parser.parse_args()
    figures = figures_of(ROOT, args.rounds)
    extra = {}
    if args.tree is not None:
        extra["compared"] = {"tree": str(args.tree), "figures": figures_of(args.tree.resolve(), args.rounds)}
    print(write_result("startup", figures, rounds=args.rounds, **extra))


if __name__ == "__main__":
    main()
