"""Learner speed before and after the device-resident replay (issue 22), side by side in one run.

- ``sample_ms``: one ``MixedSampler.sample`` of B transitions (half online, half demo, 1-step returns), batch
  ready on the learner's device;
- ``update_ms``: one SAC ``agent.update`` at UTD u (u critic steps, each on a fresh batch from that sampler,
  and the actor and temperature every second critic step), as the learner makes it.
- ``act_ms``: one ``act`` (one observation) by an actor's SAC agent (weights of its own), idle and while a
  learner's agent updates (UTD 4, batch 256) in another thread of the same process, as ``robot-rl train`` runs
  them; on a CUDA device the new code acts on a stream of the agent's own, so its forward pass does not queue
  behind the learner's updates (pixel kinds only: a state actor's call is microseconds either way).

Observations: ``state`` (pick_cube's 23 floats), ``pixel`` (two 64x64x3 uint8 cameras and the state), ``pixel128``
(two 128x128x3 cameras and the state); batch 128 / 256 / 512, UTD 1 / 4 / 10. The buffers hold 100-step
episodes of random data (far more than the CPU caches), the action has 4 dimensions (pick_cube's).

The old path is the code at ``--baseline`` (default e02af6b, the last commit before the change) exported with
``git archive`` into a temporary folder; the new path is this checkout. Each runs the same measuring code in a
worker process of its own (fresh ones for each kind of observation), and the two take turns, round after round
(old first in even rounds, new first in odd ones), so load from other processes falls on both alike. Figures are medians over every round: wall-clock
milliseconds (``*_ms``) and, as a check on a shared machine, process CPU milliseconds (``*_cpu_ms``), and the
minor page faults per draw (``sample_page_faults``: the old sampler's fresh arrays cost one per 4 KiB).

    python -m benchmarks.learner_speed [--device cpu|cuda] [--quick] [--threads 1] [--rounds 3] [--variants ...]
                                       [--parts sample update act]

The new path runs the agent's defaults: ``agent.autocast=auto``, so bfloat16 on a CPU with bf16 units (this
machine's AMD EPYC) and float32 elsewhere. ``--variants`` also times the new state and pixel updates at batch 256,
UTD 4 with ``agent.autocast=null`` (``float32``, timed unless ``--variants`` names others), ``agent.autocast=bf16``
(``bf16``), ``agent.compile=true`` (``compiled``: after its compilation; off by default because on a CPU it
gains little for the minute it takes to compile) and ``agent.cuda_graph=false`` (``eager``: on a CUDA device the
defaults replay each learning step from a CUDA graph; the new path's warm-up there runs the steps that record
them, so the timed updates are replays).

``--quick`` times every sampling case but only some updates (state at batch 256 and UTD 1/4/10, ``pixel`` at
batch 256 UTD 4, ``pixel128`` at batch 256 UTD 1); the full grid of pixel updates takes hours on a 2-core CPU.
Writes ``benchmarks/results/learner_speed_<device>.json``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np

BASELINE = "e02af6b"  # the last commit before the device-resident replay
STATE_DIM, ACTION_DIM = 23, 4
CAMERAS = {"state": 0, "pixel": 64, "pixel128": 128}  # image side per observation kind (0: no cameras)
CAPACITY = {"state": 100_000, "pixel": 20_000, "pixel128": 8_000}  # online buffer; the demo buffer holds a quarter
BATCHES = (128, 256, 512)
UTDS = (1, 4, 10)
QUICK_UPDATES = [("state", 256, 1), ("state", 256, 4), ("state", 256, 10), ("pixel", 256, 4), ("pixel128", 256, 1)]
ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------- worker (runs against either code)
def observation_space(kind: str) -> dict[str, tuple[tuple[int, ...], Any]]:
    side = CAMERAS[kind]
    cameras = {name: ((side, side, 3), np.uint8) for name in ("front", "wrist")} if side else {}
    return {"state": ((STATE_DIM,), np.float32), **cameras}


def filled_sampler(kind: str, device: str):
    """A 50/50 sampler over an online buffer of ``CAPACITY[kind]`` slots and a demo buffer of a quarter of that,
    both filled with 100-step episodes (the same data in every worker)."""
    from robot_rl.data import MixedSampler, ReplayBuffer

    space = observation_space(kind)
    placed = {"device": device} if "device" in inspect.signature(ReplayBuffer).parameters else {}
    rng = np.random.default_rng(0)
    frames = {key: rng.integers(0, 256, (16, *shape), dtype=np.uint8) for key, (shape, _) in space.items() if shape[1:]}
    buffers = []
    for capacity in (CAPACITY[kind], CAPACITY[kind] // 4):
        buffer = ReplayBuffer(capacity, space, ACTION_DIM, **placed)
        for step in range(capacity - capacity // 101 - 1):
            obs = {key: frames[key][(step + i) % 16] for i, key in enumerate(frames)}
            obs["state"] = rng.normal(size=STATE_DIM).astype(np.float32)
            buffer.add(obs, rng.uniform(-1, 1, ACTION_DIM), -1.0, obs, False, step % 100 == 99)
        buffers.append(buffer)
    return MixedSampler(*buffers, demo_fraction=0.5, seed=0)


VARIANTS = {
    "": {},
    "compiled": {"compile": True},
    "bf16": {"autocast": "bf16"},
    "float32": {"autocast": None},
    "eager": {"cuda_graph": False},
}


def sac_agent(kind: str, utd: int, device: str, strides: list[int], variant: str):
    from robot_rl.policies.sac import SACAgent, SACConfig

    shapes = {key: shape for key, (shape, _) in observation_space(kind).items()}
    flags = VARIANTS[variant]
    return SACAgent(shapes, ACTION_DIM, SACConfig(utd=utd, camera_strides=strides, device=device, **flags), seed=0)


def timed(call, calls: int, repeats: int, synchronize) -> dict[str, list[float]]:
    """Wall and process-CPU milliseconds and minor page faults per call of ``call``, each figure the mean of a block
    of ``calls``."""
    times: dict[str, list[float]] = {"wall": [], "cpu": [], "faults": []}
    for _ in range(repeats):
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(calls):
            call()
        synchronize()
        times["wall"].append((time.perf_counter() - start) * 1e3 / calls)
        times["cpu"].append((time.process_time() - start_cpu) * 1e3 / calls)
        times["faults"].append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / calls)
    return times


class Bench:
    """What a worker process holds: one kind's sampler and a SAC agent per UTD (and compile flag)."""

    def __init__(self, device: str, strides: list[int]):
        import torch

        self.device, self.strides = device, strides
        self.synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
        self.kind, self.sampler, self.agents = "", None, {}

    def load(self, kind: str) -> dict[str, Any]:
        self.kind, self.sampler = kind, filled_sampler(kind, self.device)
        return {"ok": True}

    def sample(self, batch: int, repeats: int) -> dict[str, list[float]]:
        def call() -> None:
            self.sampler.sample(batch, n_step=1, gamma=0.97)

        timed(call, 1, 3, self.synchronize)  # warm-up
        return timed(call, 1, repeats, self.synchronize)

    def update(self, batch: int, utd: int, repeats: int, variant: str = "") -> dict[str, list[float]]:
        if (utd, variant) not in self.agents:
            self.agents[utd, variant] = sac_agent(self.kind, utd, self.device, self.strides, variant)
        agent = self.agents[utd, variant]

        def call() -> None:
            agent.update(lambda: self.sampler.sample(batch, n_step=1, gamma=0.97))

        calls = 1 if utd % 2 == 0 else 2  # whole actor periods: the actor steps every second critic step
        # warm-up (allocations, first-call paths; on CUDA the 3 eager steps of each kind and their recording)
        timed(call, calls, 4 if self.device == "cuda" else 1, self.synchronize)
        return timed(call, calls, repeats, self.synchronize)

    def act(self, repeats: int, learning: bool) -> dict[str, list[float]]:
        """One ``act`` (a batch of one observation) by an actor's agent (weights of its own, as an actor holds them),
        while a learner's agent updates in a thread of the same process (UTD 4, batch 256) when ``learning``."""
        import threading

        actor = sac_agent(self.kind, 1, self.device, self.strides, "")
        batch = self.sampler.sample(1)
        # one observation as an env gives it (host arrays; the old sampler's batch is numpy, the new one's tensors),
        # acted on with ``act``, which both codes have
        obs = {key: np.asarray(value.cpu() if hasattr(value, "cpu") else value)[0] for key, value in batch.obs.items()}
        stop = threading.Event()

        def learn() -> None:
            if (4, "") not in self.agents:
                self.agents[4, ""] = sac_agent(self.kind, 4, self.device, self.strides, "")
            learner = self.agents[4, ""]
            while not stop.is_set():
                learner.update(lambda: self.sampler.sample(256, n_step=1, gamma=0.97))

        thread = threading.Thread(target=learn, daemon=True) if learning else None
        if thread is not None:
            thread.start()
            time.sleep(2.0)  # the learner past its warm-up (on CUDA: its recordings)
        try:
            timed(lambda: actor.act(obs), 1, 5, self.synchronize)  # warm-up
            return timed(lambda: actor.act(obs), 1, repeats, lambda: None)
        finally:
            stop.set()
            if thread is not None:
                thread.join()
            self.synchronize()


def serve(device: str, threads: int, strides: list[int]) -> None:
    """The worker: answer one JSON request per stdin line (``op`` one of load, sample, update, the rest its
    arguments) with one JSON line."""
    import torch

    torch.set_num_threads(threads)
    bench = Bench(device, strides)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = getattr(bench, request.pop("op"))(**request)
        except Exception:  # noqa: BLE001 - reported to the coordinator, which stops the run
            answer = {"error": traceback.format_exc()}
        print(json.dumps(answer), flush=True)


# --------------------------------------------------------------------- coordinator
def export_baseline(revision: str, folder: Path) -> Path:
    """The baseline's ``robot_rl`` package (``policies/`` inside it, as installed) under ``folder``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", revision, "robot_rl", "policies"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(folder / "src", filter="data")
    (folder / "pkg").mkdir()
    shutil.move(folder / "src" / "robot_rl", folder / "pkg" / "robot_rl")
    shutil.move(folder / "src" / "policies", folder / "pkg" / "robot_rl" / "policies")
    return folder / "pkg"


class Worker:
    """A worker process for one version of the code."""

    def __init__(self, name: str, pythonpath: Path | None, args: argparse.Namespace):
        env = dict(os.environ)
        if pythonpath is not None:  # the baseline's robot_rl comes first on the path
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
        command = [sys.executable, __file__, "--worker", "--device", args.device, "--threads", str(args.threads)]
        command += ["--strides", *map(str, args.strides)]
        self.name = name
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def ask(self, **request: Any) -> dict[str, Any]:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline() or '{"error": "the worker died"}')
        if "error" in answer:
            raise RuntimeError(f"{self.name} worker, {request}:\n{answer['error']}")
        return answer

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def compare(turns: list[tuple[str, Worker, dict]], rounds: int, **request: Any) -> dict[str, dict[str, float]]:
    """Medians (wall and CPU ms) of each ``(name, worker, extra request)`` turn over ``rounds`` rounds, the order
    reversed every other round, and the speed-ups over the turn named ``old``."""
    times = {name: {"wall": [], "cpu": [], "faults": []} for name, _, _ in turns}
    for index in range(rounds):
        for name, process, extra in turns if index % 2 == 0 else turns[::-1]:
            answer = process.ask(**request, **extra)
            for key in times[name]:
                times[name][key] += answer[key]
    result = {}
    for key in ("wall", "cpu", "faults"):
        medians = {name: statistics.median(times[name][key]) for name in times}
        result[key] = {name: round(value, 3) for name, value in medians.items()}
        if key != "faults":
            for name in medians.keys() - {"old"}:
                result[key]["speedup" + name[3:]] = round(medians["old"] / medians[name], 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda when present")
    parser.add_argument("--quick", action="store_true", help="every sampling case, some updates (see above)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the learner's train.torch_threads)")
    parser.add_argument("--rounds", type=int, default=3, help="turns of each worker per case")
    parser.add_argument(
        "--baseline",
        default=BASELINE,
        help="git revision of the old path, or a folder holding its robot_rl package as export_baseline lays it out"
        " (for a machine without the history)",
    )
    parser.add_argument(
        "--strides", type=int, nargs="+", default=[2, 2, 2, 1], help="camera CNN strides (the pixel main job's)"
    )
    parser.add_argument(
        "--variants",
        nargs="*",
        choices=("compiled", "bf16", "float32", "eager"),
        default=["float32"],
        help="also time the new state and pixel updates at batch 256, UTD 4 with agent.compile=true / "
        "agent.autocast=bf16 / agent.autocast=null / agent.cuda_graph=false",
    )
    parser.add_argument(
        "--parts",
        nargs="+",
        choices=("sample", "update", "act"),
        default=["sample", "update", "act"],
        help="what to time (act: pixel kinds only)",
    )
    parser.add_argument("--kinds", nargs="+", choices=tuple(CAMERAS), default=list(CAMERAS), help="observations")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.device is None:
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.worker:
        serve(args.device, args.threads, args.strides)
        return

    from benchmarks.common import write_result

    updates = QUICK_UPDATES if args.quick else [(kind, b, u) for kind in CAMERAS for b in BATCHES for u in UTDS]
    figures: dict[str, dict[str, Any]] = {
        "sample_ms": {},
        "update_ms": {},
        "sample_cpu_ms": {},
        "update_cpu_ms": {},
        "sample_page_faults": {},  # minor page faults per draw: fresh memory the system maps in
        "act_ms": {},  # an actor's one-observation act, idle and beside a learner updating in the same process
    }
    with tempfile.TemporaryDirectory(prefix="robot_rl_baseline_") as folder:
        exported = Path(args.baseline)
        baseline = exported if exported.is_dir() else export_baseline(args.baseline, Path(folder))
        for kind in args.kinds:
            # fresh workers for each kind, as a learner process never frees its buffers: freeing the last kind's
            # would move glibc's malloc thresholds and change what every later batch costs in page faults
            workers = [Worker("old", baseline, args), Worker("new", None, args)]
            both = [("old", workers[0], {}), ("new", workers[1], {})]
            try:
                for process in workers:
                    process.ask(op="load", kind=kind)
                for batch in BATCHES if "sample" in args.parts else ():
                    result = compare(both, args.rounds, op="sample", batch=batch, repeats=30)
                    figures["sample_ms"][f"{kind}_b{batch}"] = result["wall"]
                    figures["sample_cpu_ms"][f"{kind}_b{batch}"] = result["cpu"]
                    figures["sample_page_faults"][f"{kind}_b{batch}"] = result["faults"]
                    print(f"sample {kind} b{batch}: {result['wall']}", flush=True)
                for learning in (False, True) if "act" in args.parts and kind != "state" else ():
                    result = compare(both, args.rounds, op="act", repeats=50, learning=learning)
                    figures["act_ms"][f"{kind}_{'while_learning' if learning else 'idle'}"] = result["wall"]
                    print(f"act {kind} {'while learning' if learning else 'idle'}: {result['wall']}", flush=True)
                for _, batch, utd in (case for case in updates if case[0] == kind and "update" in args.parts):
                    turns = both
                    if kind in ("state", "pixel") and (batch, utd) == (256, 4):
                        turns = [*both, *(("new_" + name, workers[1], {"variant": name}) for name in args.variants)]
                    repeats = 5 if kind == "state" else 3  # a pixel update takes seconds on a CPU
                    result = compare(turns, args.rounds, op="update", batch=batch, utd=utd, repeats=repeats)
                    figures["update_ms"][f"{kind}_b{batch}_utd{utd}"] = result["wall"]
                    figures["update_cpu_ms"][f"{kind}_b{batch}_utd{utd}"] = result["cpu"]
                    print(f"update {kind} b{batch} utd{utd}: {result['wall']}", flush=True)
            finally:
                for process in workers:
                    process.close()
    path = write_result(
        f"learner_speed_{args.device}",
        figures,
        settings={
            "baseline": args.baseline,
            "device": args.device,
            "torch_threads": args.threads,
            "rounds": args.rounds,
            "quick": args.quick,
            "variants": args.variants,
            "parts": args.parts,
            "kinds": args.kinds,
            "camera_strides": args.strides,
            "buffer_capacity": CAPACITY,
            "agent": "SAC defaults (2 critics, hidden [256, 256], critic_actor_ratio 2), action_dim 4",
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
