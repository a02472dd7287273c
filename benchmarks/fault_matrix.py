"""Fault matrix: what a new user, a hostile network and crashing nodes do to the stack, and what it does back.

One row per scenario (issue 18, items 1-8, plus SIGKILL of each node of the training graph in turn), each
with what is expected and what was observed, and totals: bad inputs tried, crashes (a traceback, or a node
or command dying when it should not), hangs (no exit within the shutdown grace), files lost (a user's file
changed or gone) and transitions lost (sent by the actor, never ingested by the learner).

    python -m benchmarks.fault_matrix            # everything (~10 min on 2 cores)
    python -m benchmarks.fault_matrix --quick    # the command-line scenarios only (no ROS 2 graph)

Writes ``benchmarks/results/fault_matrix.json``. ``tests/test_fault_matrix.py`` runs the command-line
scenarios; the ROS 2 scenarios have their own tests (``tests/ros/test_fuzz.py``, ``test_safety_node.py``,
``test_node_restarts.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import write_result

GRACE = 10.0  # s a node has to exit after SIGINT / SIGTERM (robot-rl launch's grace)
REACH = ["task=reach", "task.episode_steps=15"]


@dataclass
class Row:
    scenario: str
    item: str  # issue 18 deliverable
    expected: str
    observed: str
    ok: bool
    bad_inputs: int = 0
    crashes: int = 0
    hangs: int = 0
    files_lost: int = 0
    transitions_lost: int = 0


# ----------------------------------------------------------------------------- helpers
@dataclass
class Result:
    code: int | None  # None: it hung
    stdout: str
    stderr: str

    @property
    def traceback(self) -> bool:
        return "Traceback" in self.stdout + self.stderr

    def one_line_error(self, code: int = 2) -> bool:
        """Exit ``code``, one ``robot-rl: error:`` line on stderr, no traceback."""
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("robot-rl: error:")]
        return self.code == code and len(errors) == 1 and lines[-1] == errors[0] and not self.traceback

    def summary(self) -> str:
        last = (self.stderr.strip().splitlines() or ["(no stderr)"])[-1][:160]
        return f"exit {self.code}: {last}"


def robot_rl(*args: str, cwd: Path | None = None, timeout: float = 300) -> Result:
    """``robot-rl <args>`` in a fresh process."""
    command = [sys.executable, "-m", "robot_rl.cli.main", *args]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
            check=False,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
    except subprocess.TimeoutExpired as expired:
        return Result(None, str(expired.stdout or ""), str(expired.stderr or ""))
    return Result(done.returncode, done.stdout, done.stderr)


def digest(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (relative path -> hex)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def lost(before: dict[str, str], after: dict[str, str]) -> int:
    """Files of ``before`` that are gone or changed in ``after``."""
    return sum(1 for path, sha in before.items() if after.get(path) != sha)


def user_folder(path: Path) -> Path:
    """A folder of a user's precious files (not ours)."""
    (path / "nested").mkdir(parents=True)
    (path / "calibration.yaml").write_text("camera: {fx: 600.0}\n")
    (path / "nested" / "notes.txt").write_text("three days of teleop\n")
    (path / "weights.bin").write_bytes(os.urandom(4096))
    return path


def error_row(
    scenario: str,
    item: str,
    result: Result,
    expected: str,
    files_lost: int = 0,
    code: int = 2,
    extra_ok: bool = True,
    observed: str = "",
) -> Row:
    ok = result.one_line_error(code) and files_lost == 0 and extra_ok
    return Row(
        scenario,
        item,
        expected,
        observed or result.summary(),
        ok,
        bad_inputs=1,
        crashes=int(result.traceback),
        hangs=int(result.code is None),
        files_lost=files_lost,
    )


class Crafted:
    """Unpickling runs ``open(marker, "w")``: the file exists afterwards only if the payload ran."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


# ----------------------------------------------------------------------------- the command-line scenarios
def prepare(work: Path) -> dict[str, Path]:
    """A recorded store and a tiny trained run the scenarios start from."""
    store, run = work / "demos.zarr", work / "run"
    for result in (
        robot_rl("collect", *REACH, "collect.episodes=3", f"collect.out={store}"),
        robot_rl(
            "train",
            *REACH,
            f"train.run_dir={run}",
            "train.env_steps=60",
            "train.demo_episodes=1",
            "train.start_training=30",
            "train.batch_size=32",
            "train.eval_every=60",
            "train.final_eval_episodes=1",
            "train.checkpoint_every=60",
        ),
    ):
        if result.code != 0:
            raise RuntimeError(f"preparing the fault matrix failed: {result.summary()}\n{result.stderr[-2000:]}")
    return {"store": store, "run": run}


def never_delete(work: Path, ready: dict[str, Path]) -> list[Row]:
    """Item 1: writers refuse a folder that is not theirs and leave every file in it."""
    rows = []
    cases = {
        "collect collect.out=<user folder>": lambda folder: (
            "collect",
            *REACH,
            "collect.episodes=1",
            f"collect.out={folder}",
        ),
        "data merge out=<user folder>": lambda folder: ("data", "merge", f"inputs=[{ready['store']}]", f"out={folder}"),
        "data export out=<user folder>": lambda folder: ("data", "export", f"store={ready['store']}", f"out={folder}"),
        "train train.run_dir=<user folder>": lambda folder: (
            "train",
            *REACH,
            f"train.run_dir={folder}",
            "train.env_steps=20",
        ),
        "train.resume=true on <user folder>": lambda folder: (
            "train",
            *REACH,
            f"train.run_dir={folder}",
            "train.resume=true",
        ),
    }
    for index, (name, args) in enumerate(cases.items()):
        folder = user_folder(work / f"user{index}")
        before = digest(folder)
        result = robot_rl(*args(folder))
        rows.append(
            error_row(
                name,
                "1 never delete",
                result,
                "refused with one line, exit 2, every file kept",
                lost(before, digest(folder)),
            )
        )
    # the empty path: must not mean "the current folder"
    cwd = user_folder(work / "cwd")
    before = digest(cwd)
    result = robot_rl("collect", *REACH, "collect.episodes=1", "collect.out=", cwd=cwd)
    rows.append(
        error_row(
            "collect collect.out= (empty, run in a user folder)",
            "1 never delete",
            result,
            "refused with one line, exit 2, the current folder untouched",
            lost(before, digest(cwd)),
        )
    )
    # the ROS recorder's store (the check runs before any ROS 2 traffic)
    folder = user_folder(work / "user_recorder")
    before = digest(folder)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "robot_rl.ros.nodes.recorder_node", *REACH, f"ros.recorder.store={folder}"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        result = Result(done.returncode, done.stdout, done.stderr)
    except subprocess.TimeoutExpired as expired:
        result = Result(None, str(expired.stdout or ""), str(expired.stderr or ""))
    files = lost(before, digest(folder))
    ok = result.code == 2 and not result.traceback and files == 0 and "recorder_node: error:" in result.stderr
    rows.append(
        Row(
            "recorder ros.recorder.store=<user folder>",
            "1 never delete",
            "the node refuses with one line, exit 2, every file kept",
            result.summary(),
            ok,
            1,
            int(result.traceback),
            int(result.code is None),
            files,
        )
    )
    return rows


def no_code_from_files(work: Path, ready: dict[str, Path]) -> list[Row]:
    """Item 2: a crafted agent.pt is refused and its payload never runs."""
    rows = []
    for name, command in (
        ("eval eval.checkpoint=<crafted>", "eval"),
        ("train.resume=true with a crafted agent.pt", "resume"),
    ):
        run = work / f"crafted_{command}"
        shutil.copytree(ready["run"], run)
        marker = work / f"payload_ran_{command}"
        with open(run / "checkpoint" / "agent.pt", "wb") as handle:
            pickle.dump({"modules": Crafted(marker)}, handle)
        before = digest(run)
        if command == "eval":
            result = robot_rl("eval", *REACH, f"eval.checkpoint={run / 'checkpoint'}", "eval.episodes=1")
        else:
            result = robot_rl(
                "train",
                *REACH,
                f"train.run_dir={run}",
                "train.resume=true",
                "train.env_steps=120",
                "train.demo_episodes=1",
                "train.start_training=30",
                "train.batch_size=32",
            )
        ran = marker.exists()
        rows.append(
            error_row(
                name,
                "2 no code from files",
                result,
                "refused with one line, exit 2, payload not run",
                lost(before, digest(run)),
                extra_ok=not ran,
                observed=f"{result.summary()}; payload ran: {ran}",
            )
        )
    return rows


def safe_resume(work: Path, ready: dict[str, Path]) -> list[Row]:
    """Item 5: a checkpoint of another task definition is refused, nothing modified."""
    rows = []
    for change in ("task.reward=sparse", "task.control_rate_hz=20", "task.episode_steps=30"):
        before = digest(ready["run"])
        result = robot_rl(
            "train",
            *REACH,
            f"train.run_dir={ready['run']}",
            "train.resume=true",
            change,
            "train.env_steps=120",
            "train.demo_episodes=1",
            "train.start_training=30",
            "train.batch_size=32",
        )
        key = change.partition("=")[0]
        rows.append(
            error_row(
                f"train.resume=true {change}",
                "5 safe resume",
                result,
                f"refused naming {key}, exit 2, run folder unchanged",
                lost(before, digest(ready["run"])),
                extra_ok=key in result.stderr,
            )
        )
    return rows


def bad_values(work: Path, ready: dict[str, Path]) -> list[Row]:
    """Item 6: every bad value is one line naming its key, exit 2, on every verb."""
    a_file = work / "a_file"
    a_file.write_text("not a folder\n")
    cases = [  # (verb and its positional words, the bad override)
        ("train", "agent.lr=inf"),
        ("train", "agent.lr=-1"),
        ("train", "seed=abc"),
        ("train", "train.batch_size=0"),
        ("train", "train.env_steps=nan"),
        ("train", f"train.run_dir={a_file}"),
        ("train", f"train.run_dir={a_file}/run"),
        ("train", "train.run_dir=/proc/robot_rl_run"),
        ("train", "task.control_rate_hz=0"),
        ("eval", "eval.episodes=0"),
        ("collect", "collect.episodes=-1"),
        ("collect", f"collect.out={a_file}"),
        ("classifier", "classifier.updates=0"),
        ("launch sim_train", "ros.domain_id=500"),
        ("launch sim_train", "fleet.robots=[left,left]"),
        ("data info", f"store={work / 'missing.zarr'}"),
    ]
    rows = []
    for words, override in cases:
        key = override.partition("=")[0]
        before = digest(ready["run"])
        result = robot_rl(
            *words.split(), *REACH, "train.env_steps=20", f"classifier.store={ready['store']}", override, cwd=work
        )
        rows.append(
            error_row(
                f"{words} {override}",
                "6 one line",
                result,
                "one line naming the key, exit 2",
                lost(before, digest(ready["run"])),
                extra_ok=key.split(".")[-1] in result.stderr,
            )
        )
    return rows


def data_integrity(work: Path, ready: dict[str, Path]) -> list[Row]:
    """Item 7: corrupt stores are named, merges never duplicate or copy corruption."""
    from robot_rl.data import EpisodeStore

    rows = []
    corrupt = work / "corrupt.zarr"
    shutil.copytree(ready["store"], corrupt)
    chunk = next(p for p in sorted((corrupt / "episodes" / "episode_000001").rglob("c/*")) if p.is_file())
    chunk.write_bytes(chunk.read_bytes()[:-3] + b"xyz")
    result = robot_rl("data", "info", f"store={corrupt}")
    rows.append(
        Row(
            "data info <store with a corrupt chunk>",
            "7 integrity",
            "non-zero exit naming episode_000001",
            result.summary(),
            result.code not in (0, None) and "episode_000001" in result.stderr and not result.traceback,
            1,
            int(result.traceback),
            int(result.code is None),
        )
    )
    out = work / "merged_from_corrupt.zarr"
    result = robot_rl("data", "merge", f"inputs=[{corrupt}]", f"out={out}")
    rows.append(
        Row(
            "data merge inputs=[<corrupt store>]",
            "7 integrity",
            "refused, no output written",
            result.summary(),
            result.code not in (0, None) and not out.exists() and not result.traceback,
            1,
            int(result.traceback),
            int(result.code is None),
        )
    )
    merged = work / "merged.zarr"
    first = robot_rl("data", "merge", f"inputs=[{ready['store']}]", f"out={merged}")
    second = robot_rl("data", "merge", f"inputs=[{ready['store']}]", f"out={merged}")
    count = len(EpisodeStore.open(merged)) if (merged / "zarr.json").exists() else -1
    source = len(EpisodeStore.open(ready["store"]))
    rows.append(
        Row(
            "data merge run twice",
            "7 integrity",
            f"{source} episodes after both runs (uids skipped)",
            f"exit {first.code}, {second.code}; {count} episodes",
            first.code == 0 and second.code == 0 and count == source,
            0,
            int(first.traceback or second.traceback),
        )
    )
    out = work / "export_of_corrupt"
    result = robot_rl("data", "export", f"store={corrupt}", f"out={out}")
    rows.append(
        Row(
            "data export <corrupt store>",
            "7 integrity",
            "fails with one line, no partial folder",
            result.summary(),
            result.code not in (0, None) and not out.exists() and not result.traceback,
            1,
            int(result.traceback),
            int(result.code is None),
        )
    )
    return rows


COMMAND_LINE_SCENARIOS: list[Callable[[Path, dict[str, Path]], list[Row]]] = [
    never_delete,
    no_code_from_files,
    safe_resume,
    bad_values,
    data_integrity,
]


def command_line_rows(work: Path) -> list[Row]:
    ready = prepare(work)
    return [row for scenario in COMMAND_LINE_SCENARIOS for row in scenario(work, ready)]


# ----------------------------------------------------------------------------- the ROS 2 graph scenarios
class Cell:
    """The nodes of a ``sim_train`` graph as processes in their own DDS domain, watched over ROS 2."""

    def __init__(self, folder: Path, overrides: list[str], domain: int):
        from robot_rl.cli.graph import graph_nodes, ros_environment
        from robot_rl.core.composed_config import load_config

        # the wall clock: the scenarios time holds, stalls and restarts as a real cell would see them
        self.folder, self.overrides = folder, ["graph=sim_train", "ros.sim_time=false", *overrides]
        cfg = load_config(self.overrides)
        self.specs = {node.name: node for node in graph_nodes(cfg)}
        os.environ.update({**ros_environment(cfg.ros), "ROS_DOMAIN_ID": str(domain)})
        self.processes: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    def start(self, name: str, *extra: str) -> subprocess.Popen:
        self.logs[name] = self.folder / f"{name}.log"
        with open(self.logs[name], "a") as log:
            self.processes[name] = subprocess.Popen(
                [*self.specs[name].command(self.overrides), *extra],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        return self.processes[name]

    def log(self, name: str) -> str:
        return self.logs[name].read_text() if name in self.logs else ""

    def kill(self, name: str) -> None:
        self.processes[name].kill()
        self.processes[name].wait()

    def stop(self, name: str, sig: int = signal.SIGINT) -> tuple[int | None, float]:
        """(exit code or None if it overran the grace, seconds) after ``sig``."""
        process = self.processes[name]
        started = time.monotonic()
        process.send_signal(sig)
        try:
            code = process.wait(timeout=GRACE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            return None, GRACE
        return code, time.monotonic() - started

    def alive(self) -> list[str]:
        return [name for name, process in self.processes.items() if process.poll() is None]

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()


class Watch:
    """``/rl/episode_stats`` and ``/rl/safety_flags`` from the benchmark's own node."""

    def __init__(self, rclpy, name: str = "robot_rl_fault_watch"):
        from std_msgs.msg import String, UInt32

        from robot_rl.ros.plumbing import qos

        self.rclpy, self.node = rclpy, rclpy.create_node(name)
        self.records: list[dict] = []
        self.flags: list[tuple[float, int]] = []
        self.node.create_subscription(
            String, "/rl/episode_stats", lambda m: self.records.append(json.loads(m.data)), qos.EPISODE_LOG
        )
        self.node.create_subscription(
            UInt32, "/rl/safety_flags", lambda m: self.flags.append((time.monotonic(), m.data)), 10
        )

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.01)

    def until(self, condition: Callable[[], object], timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.01)
            if condition():
                return True
        return False

    def train_episodes(self) -> int:
        return sum(1 for r in self.records if r["kind"] == "train")

    def more_training(self, episodes: int, timeout: float = 120) -> bool:
        target = self.train_episodes() + episodes
        return self.until(lambda: self.train_episodes() >= target, timeout)


def hostile_messages(work: Path, domain: int, rounds: int = 200) -> list[Row]:
    """Item 3: a flood of junk on every topic the graph subscribes to while it trains."""
    import numpy as np
    import rclpy
    from geometry_msgs.msg import PoseStamped, Twist, WrenchStamped
    from sensor_msgs.msg import Image, JointState, Joy
    from std_msgs.msg import Float32MultiArray, Float64, String, UInt8MultiArray

    from robot_rl.ros.plumbing import qos
    from tests.ros import test_fuzz as junk

    cell = Cell(
        work,
        [
            *REACH,
            f"train.run_dir={work / 'run'}",
            "train.demo_episodes=1",
            "train.start_training=20",
            "train.env_steps=100000",
            "train.batch_size=32",
            "ros.eval_every_episodes=0",
        ],
        domain,
    )
    rclpy.init()
    watch = Watch(rclpy)
    targets = [
        (junk.CAMERA, Image, junk.junk_image),
        ("/joint_states", JointState, junk.junk_joint_state),
        (junk.POSE, PoseStamped, junk.junk_pose),
        (junk.WRENCH, WrenchStamped, junk.junk_wrench),
        ("/rl/reward", Float64, junk.junk_float),
        ("/rl/task_state", Float32MultiArray, junk.junk_task_state),
        ("/spacenav/twist", Twist, lambda rng: junk.junk_twist(rng, stamped=False)),
        ("/spacenav/joy", Joy, junk.junk_joy),
        ("/rl/transitions", UInt8MultiArray, junk.junk_bytes),
        ("/rl/policy_weights", UInt8MultiArray, junk.junk_bytes),
        ("/rl/transitions_ack", String, lambda rng: String(data=str(rng.integers(1 << 30)) + "{")),
        ("/rl/success", String, junk.wrong_type),
    ]
    try:
        for name in ("sim_robot", "safety", "learner", "recorder", "actor"):
            cell.start(name)
        started = watch.until(lambda: watch.train_episodes() > 0, 300)
        publishers = [
            (watch.node.create_publisher(kind, topic, qos.STREAM_PUBLISHER), make) for topic, kind, make in targets
        ]
        rng = np.random.default_rng(0)
        sent = 0
        for _ in range(rounds):
            for publisher, make in publishers:
                publisher.publish(make(rng))
                sent += 1
            watch.spin(0.05)
        dead = [name for name in cell.processes if name not in cell.alive()]
        going_on = started and watch.more_training(3)
        logs = "".join(cell.log(name) for name in cell.processes)
        drops = sum(int(n) for n in re.findall(r"dropped (\d+) bad message", logs))
        tracebacks = logs.count("Traceback")
    finally:
        cell.close()
        watch.node.destroy_node()
        rclpy.shutdown()
    ok = not dead and going_on and tracebacks == 0
    return [
        Row(
            f"{sent} junk messages on {len(targets)} topics while training",
            "3 hostile messages",
            "every node up, training goes on, drops counted in the logs",
            f"dead: {dead or 'none'}; training after the flood: {going_on}; drops logged: >= {drops}; "
            f"tracebacks: {tracebacks}",
            ok,
            bad_inputs=sent,
            crashes=len(dead) + tracebacks,
        )
    ]


def who_moves_the_arm(work: Path, domain: int) -> list[Row]:
    """Item 4: foreign publishers latch the safety node's hold; only the operator resets it."""
    import numpy as np
    import rclpy
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import Empty

    from robot_rl.core.geometry import matrix_from_quat
    from robot_rl.ros.plumbing import qos
    from robot_rl.safety import Violation

    cell = Cell(work, [*REACH, f"train.run_dir={work / 'arm'}"], domain)
    rclpy.init()
    watch = Watch(rclpy)
    rows = []
    foreign = Violation.FOREIGN_PUBLISHER
    tilts: list[tuple[float, float]] = []  # (monotonic s, degrees between the tool axis and straight down)

    def on_pose(msg) -> None:
        q = msg.pose.orientation
        axis = matrix_from_quat(np.array([q.w, q.x, q.y, q.z]))[:, 2]
        tilts.append((time.monotonic(), float(np.degrees(np.arccos(np.clip(-axis[2], -1.0, 1.0))))))

    watch.node.create_subscription(
        PoseStamped, "/franka_robot_state_broadcaster/current_pose", on_pose, qos.STREAM_SUBSCRIBER
    )

    def latched_since(t: float) -> bool:
        return any(at > t and flags & Violation.ESTOP for at, flags in watch.flags)

    try:
        cell.start("sim_robot")
        cell.start("safety")
        watch.until(lambda: len(watch.flags) > 10, 120)
        for topic in ("/rl/equilibrium_pose", "/rl/action"):
            intruder = rclpy.create_node("robot_rl_intruder")
            publisher = intruder.create_publisher(PoseStamped, topic, qos.COMMAND)
            tilted = PoseStamped()
            tilted.pose.position.x, tilted.pose.position.z = 0.5, 0.3
            tilted.pose.orientation.x, tilted.pose.orientation.w = 0.99, 0.13  # ~165 deg tilt
            since = time.monotonic()
            for _ in range(20):
                publisher.publish(tilted)
                watch.spin(0.05)
            seen = watch.until(lambda since=since: any(at > since and flags & foreign for at, flags in watch.flags), 10)
            named = "robot_rl_intruder" in cell.log("safety")
            intruder.destroy_node()
            worst = max((tilt for at, tilt in tilts if at > since), default=float("nan"))
            rows.append(
                Row(
                    f"a foreign node publishes a 165 deg tilt on {topic}",
                    "4 who moves the arm",
                    "safety node latches the hold, flags FOREIGN_PUBLISHER, names the node; the arm stays "
                    "inside its 45.8 deg cone",
                    f"flag seen: {seen}; latched: {latched_since(since)}; node "
                    f"named in the log: {named}; largest tilt {worst:.1f} deg",
                    seen and latched_since(since) and named and worst < 45.8,
                    bad_inputs=20,
                )
            )
        # an e-stop reset from a node that is not the operator is ignored; the operator's clears the latch
        watch.spin(1.0)
        stranger = rclpy.create_node("robot_rl_stranger")
        reset = stranger.create_publisher(Empty, "/rl/estop_reset", 10)
        watch.spin(1.0)
        since = time.monotonic()
        for _ in range(5):
            reset.publish(Empty())
            watch.spin(0.1)
        watch.spin(0.5)
        still = latched_since(time.monotonic() - 0.3)
        stranger.destroy_node()
        operator = rclpy.create_node("robot_rl_teleop")
        reset = operator.create_publisher(Empty, "/rl/estop_reset", 10)
        watch.spin(1.5)
        for _ in range(5):
            reset.publish(Empty())
            watch.spin(0.1)
        cleared = watch.until(lambda: watch.flags and not watch.flags[-1][1] & Violation.ESTOP, 5)
        operator.destroy_node()
        rows.append(
            Row(
                "e-stop reset from a stranger, then from the operator",
                "4 who moves the arm",
                "the stranger's reset is ignored, the operator's clears the latch",
                f"latched after the stranger's reset: {still}; cleared by the operator: {cleared}",
                still and cleared,
                bad_inputs=5,
            )
        )
        for name in ("safety", "sim_robot"):
            code, seconds = cell.stop(name, signal.SIGTERM)
            clean = code == 0 and "Traceback" not in cell.log(name)
            rows.append(
                Row(
                    f"SIGTERM to {name}",
                    "8 shutdown",
                    f"exit 0 within {GRACE:g} s, no traceback",
                    f"exit {code} after {seconds:.1f} s; traceback: {'Traceback' in cell.log(name)}",
                    clean,
                    crashes=int("Traceback" in cell.log(name)),
                    hangs=int(code is None),
                )
            )
    finally:
        cell.close()
        watch.node.destroy_node()
        rclpy.shutdown()
    return rows


def nodes_down(work: Path, domain: int, learner_down: float = 30.0) -> list[Row]:
    """Item 8: each node killed (SIGKILL) in turn and restarted; the learner for ``learner_down`` s."""
    import rclpy

    from robot_rl.data import EpisodeStore
    from robot_rl.safety import Violation

    run = work / "run"
    cell = Cell(
        work,
        [
            *REACH,
            f"train.run_dir={run}",
            "train.demo_episodes=2",
            "train.start_training=30",
            "train.checkpoint_every=60",
            "train.batch_size=32",
            "train.env_steps=1500",
            "ros.eval_every_episodes=0",
            "ros.delivery.record_timeout=2.0",
        ],
        domain,
    )
    rclpy.init()
    watch = Watch(rclpy)
    rows = []
    try:
        for name in ("sim_robot", "safety", "learner", "recorder", "actor"):
            cell.start(name)
        watch.until(lambda: (run / "checkpoint" / "counters.json").exists(), 300)
        watch.more_training(3)

        # the learner, down for learner_down s: the actor goes on, the restarted learner gets everything
        cell.kill("learner")
        down = time.monotonic()
        acting = watch.more_training(2, timeout=learner_down)
        watch.spin(max(0.0, learner_down - (time.monotonic() - down)))
        cell.start("learner")
        back = watch.more_training(3)
        rows.append(
            Row(
                f"SIGKILL learner, restart after {learner_down:g} s",
                "8 nothing lost",
                "the actor keeps acting; the learner resumes and gets every transition (checked at the end)",
                f"actor acted meanwhile: {acting}; training after the restart: {back}",
                acting and back,
            )
        )

        # the recorder: the actor records what the recorder never confirmed
        cell.kill("recorder")
        without = watch.more_training(3)
        cell.start("recorder")
        rows.append(
            Row(
                "SIGKILL recorder, restart",
                "8 nothing lost",
                "the actor records the unconfirmed episodes",
                f"training without a recorder: {without} (episodes on disk checked at the end)",
                without,
            )
        )

        # the sim robot (the arm driver): the actor pauses on the silent streams and resumes
        cell.kill("sim_robot")
        paused = watch.until(lambda: any(r["kind"] == "paused" for r in watch.records[-5:]), 60)
        cell.start("sim_robot")
        resumed = watch.more_training(2, timeout=180)
        rows.append(
            Row(
                "SIGKILL sim robot (arm driver), restart",
                "8 nodes down",
                "the actor pauses the episode and resumes when the arm is back",
                f"paused: {paused}; resumed: {resumed}",
                paused and resumed,
            )
        )

        # the safety node: no command reaches the arm; the sim arm holds; training resumes with a new one
        cell.kill("safety")
        watch.spin(2.0)
        restarted = time.monotonic()
        cell.start("safety")
        resumed = watch.more_training(2, timeout=180)
        commanding = watch.until(lambda: watch.flags and watch.flags[-1][0] > restarted and watch.flags[-1][1] == 0, 30)
        rows.append(
            Row(
                "SIGKILL safety node, restart",
                "8 nodes down",
                "nothing else dies; the new safety node passes the actor's commands (no flag) again",
                f"alive: {sorted(cell.alive())}; resumed: {resumed}; commands pass: {commanding}; last flags "
                f"{watch.flags[-1][1] if watch.flags else None}",
                resumed and commanding and len(cell.alive()) == 5,
            )
        )

        # the actor: the safety node holds the arm 100 ms after the last command it received (a command sent just
        # before the SIGKILL may still arrive); any hold counts (stale command, stale state, e-stop); a new actor
        # carries on
        cell.kill("actor")
        killed = time.monotonic()
        watch.spin(1.0)
        holding = Violation.STALE_COMMAND | Violation.STALE_STATE | Violation.ESTOP
        after = [(at, flags) for at, flags in watch.flags if at > killed]
        passed = [at for at, flags in after if not flags & holding]
        held_from = passed[-1] - killed if passed else 0.0  # s after the kill when the last command went through
        seen = sorted({flags for _, flags in after})
        cell.start("actor")
        resumed = watch.more_training(2, timeout=180)
        rows.append(
            Row(
                "SIGKILL actor, restart",
                "8 nodes down",
                "the safety node holds (no command passes) from at most 250 ms after the kill; a new actor trains on",
                f"last command passed {held_from * 1000:.0f} ms after the kill, then held "
                f"({len(after)} ticks seen, flags {seen}); resumed: {resumed}",
                bool(after) and held_from < 0.25 and resumed,
            )
        )

        # the end: the actor spends its budget; every node stops within the grace, without a traceback
        done = cell.processes["actor"].wait(timeout=900) == 0
        for name in ("learner", "recorder", "safety", "sim_robot"):
            code, seconds = cell.stop(name)
            rows.append(
                Row(
                    f"SIGINT to {name}",
                    "8 shutdown",
                    f"exit 0 within {GRACE:g} s, no traceback",
                    f"exit {code} after {seconds:.1f} s",
                    code == 0 and "Traceback" not in cell.log(name),
                    crashes=int("Traceback" in cell.log(name)),
                    hangs=int(code is None),
                )
            )
    finally:
        cell.close()
        watch.node.destroy_node()
        rclpy.shutdown()
    # transitions: the learner's checkpoint against what the second actor sent (the first was killed: its
    # transitions are counted through the learner's ledger, which must have no hole)
    delivery = json.loads((run / "checkpoint" / "counters.json").read_text())["delivery"]
    sent = [int(n) for n in re.findall(r"(\d+) transitions sent", cell.log("actor"))]
    received = delivery["received"]
    last_actor_sent = sent[-1] if sent else 0
    missing = max(0, last_actor_sent - max(received.values(), default=0))
    ingested_ok = delivery["ingested"] == sum(received.values())
    transitions_lost = missing + (0 if ingested_ok else abs(sum(received.values()) - delivery["ingested"]))
    rows.append(
        Row(
            "transitions after a learner restart",
            "8 nothing lost",
            "every transition sent was ingested exactly once",
            f"actors {len(received)}; last actor sent {last_actor_sent}, learner has {received}; ingested "
            f"{delivery['ingested']}",
            done and transitions_lost == 0,
            transitions_lost=transitions_lost,
        )
    )
    played = sum(int(n) for n in re.findall(r"(\d+) episodes in", cell.log("actor")))
    uids = set()
    for path in (run / "episodes.zarr", run / "actor_episodes.zarr"):
        if (path / "zarr.json").exists():
            store = EpisodeStore.open(path)
            uids |= {store.episode_attrs(name)["uid"] for name in store.episode_names()}
    rows.append(
        Row(
            "episodes on disk",
            "8 nothing lost",
            "every episode of the actor that finished its run is in the recorder's or the actor's store",
            f"{len(uids)} episodes on disk, {played} played by the last actor",
            len(uids) >= played,
        )
    )
    return rows


# ----------------------------------------------------------------------------- the matrix
def totals(rows: list[Row]) -> dict[str, int]:
    keys = ("bad_inputs", "crashes", "hangs", "files_lost", "transitions_lost")
    return {
        "scenarios": len(rows),
        "failed": sum(not row.ok for row in rows),
        **{key: sum(getattr(row, key) for row in rows) for key in keys},
    }


def print_table(rows: list[Row]) -> None:
    for row in rows:
        print(
            f"{'ok  ' if row.ok else 'FAIL'} [{row.item}] {row.scenario}\n       expected: {row.expected}\n"
            f"       observed: {row.observed}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the command-line scenarios only")
    parser.add_argument("--learner-down", type=float, default=30.0, help="s the learner stays down")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="robot_rl_faults_") as tmp:
        work = Path(tmp)
        rows = command_line_rows(work / "cli")
        if not args.quick:
            from robot_rl.cli.graph import reserved_ros_domain

            for scenario in (
                hostile_messages,
                who_moves_the_arm,
                lambda folder, domain: nodes_down(folder, domain, args.learner_down),
            ):
                folder = Path(tempfile.mkdtemp(dir=work))
                with reserved_ros_domain() as domain:
                    rows += scenario(folder, domain)
    print_table(rows)
    summary = totals(rows)
    print(json.dumps(summary))
    if not args.quick:
        write_result(
            "fault_matrix",
            {**summary, "rows": [asdict(row) for row in rows]},
            wall_seconds=round(time.monotonic() - started, 1),
        )
    return 0 if summary["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
