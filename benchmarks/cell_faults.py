"""Cell faults: ``real_train`` against the emulated cell, each node of the session killed (SIGKILL) mid-episode in turn,
then the cell emulator itself (issue 71 item 2).

One ``robot-rl launch cell`` (the lab's side: the arm, the SpaceMouse's FIFO, the tracker's poses, the sim's reward:
``cell.publish_reward=true``) and one ``robot-rl launch real_train`` beside it (no reward node, ``graph.reward=false``;
the console on, read over its websocket as a page reads it; short episodes; learning on). The benchmark's own node
watches the actor's records, the safety node's ticks and status, the actor's commands (``/rl/action``) and the arm's
TCP. Per node killed, inside an episode (after a scene reset and three of the next episode's commands):

* ``seconds_to_move_again``: from the kill (the safety node and the teleop, whose deaths hold the arm until the
  operator releases it: from the release, which the benchmark gives through the console as soon as the node is back)
  to the first safety tick that passes a command (flags 0) after the first ``/rl/action`` sent after that moment;
* ``episodes_lost`` / ``episodes_duplicated``: the actor's records (each names its episode's uid) of the episodes that
  ended between this kill and the next, and the episodes cut short by a death, against the recorder's store and the
  actor's own (``actor_episodes.zarr``), by uid (:func:`ledger`);
* ``arm_moved_without_safety``: the TCP moved more than 2 mm within a gap of the safety node's ticks (> 0.5 s);
  ``arm_moved_beyond_last_target_m``: how far it went off the way to the last target the safety node sent before
  the gap (the compliant arm, left alone, goes on to that target);
* ``console_showed``: the killed node's row on the console's node list and who drives, each change once;
  ``actor_paused``: the reasons of the actor's pause records; ``restart_line``: the launch's line.

The cell's own death comes last: what the safety node, the actor, the console and the launch did (the session
ends there: the cell is the lab's bringup, not restarted).

    nice -n 5 python -m benchmarks.cell_faults    # ~20 min on 2 loaded cores
    python -m benchmarks.cell_faults --nodes safety --name cell_faults_max_lead robot.limits.max_lead=0.01

Writes ``benchmarks/results/cell_faults.json`` (``--name``: another file; the overrides go to the session). ``tests/test_cell_faults.py`` checks the pure parts.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cell_rehearsal import Domain
from benchmarks.common import actor_records, launched_pids, stop_launch, write_result

NODES = ("tracker", "reset", "teleop", "recorder", "learner", "actor", "safety", "console")  # in the order killed
RELEASED_BY_OPERATOR = ("safety", "teleop")  # their deaths hold the arm until the operator's release
MOVED = 0.002  # m: the TCP moved
SAFETY_GAP = 0.5  # s between two safety ticks: the safety node was down
LIMIT = 30.0  # s: the acceptance's bound on seconds_to_move_again
TOKEN = "benchmark-cell-faults-token-0123"
CELL = [
    "robot=fr3",
    "task=pick_cube",
    "cell.state_rate_hz=100",  # tests/ros/test_cell_rehearsal.py's: 2 loaded cores
    "cell.camera_rate_hz=10",
    "cell.image_size=48",
    "cell.scene_reset_time=0.5",
    "cell.publish_reward=true",  # the sim's truth: no reward node
]
SESSION = [
    "robot=fr3",
    "task=pick_cube",
    "task.episode_steps=40",
    "task.cameras=[]",
    "teleop_device.kind=spacemouse",
    "reset.scene_wait=true",
    "reset.speed=0.3",
    "ros.startup_timeout=60",
    "robot.safety=[--rate-hz,100]",  # a tick per state of the cell
    "robot.limits.state_timeout=0.1",
    "graph.reward=false",
    "ros.eval_every_episodes=0",
    "train.demo_episodes=0",
    "train.env_steps=100000",
    "train.start_training=120",
    "train.batch_size=32",
    "train.checkpoint_every=120",
    f"console.token={TOKEN}",
    "console.port=0",
]
CONSOLE_AT = re.compile(r"the console is at (http://[^/\s]+)/#token=")


# ----------------------------------------------------------------------------- the pure parts
def moved_again(actions: list[float], ticks: list[tuple[float, int]], since: float) -> float | None:
    """s from ``since`` to the first safety tick (time, flags) with flags 0 after the first command (arrival times,
    s) sent after ``since``; None: none yet."""
    first = next((at for at in actions if at > since), None)
    if first is None:
        return None
    return next((at - since for at, flags in ticks if at >= first and flags == 0), None)


def safety_gaps(ticks: list[tuple[float, int]], start: float, end: float, gap: float = SAFETY_GAP):
    """The (from, to) intervals within ``start``..``end`` (s) with no safety tick for more than ``gap`` s: the
    safety node was down (or starved)."""
    times = [start, *(at for at, _ in ticks if start < at < end), end]
    return [(a, b) for a, b in itertools.pairwise(times) if b - a > gap]


def largest_move(poses: list[tuple[float, np.ndarray]], intervals) -> float:
    """The TCP's largest distance (m) from where it was at the start of each interval (its last pose before it),
    over the poses (time s, xyz m) inside the intervals; 0 when none."""
    largest = 0.0
    for start, end in intervals:
        before = [xyz for at, xyz in poses if at <= start]
        inside = [xyz for at, xyz in poses if start < at <= end]
        if before and inside:
            largest = max(largest, max(float(np.linalg.norm(xyz - before[-1])) for xyz in inside))
    return largest


def largest_move_beyond_target(
    poses: list[tuple[float, np.ndarray]], targets: list[tuple[float, np.ndarray]], intervals
) -> float:
    """The TCP's largest distance (m) from the straight way between where it was at the start of each interval and
    the last target the safety node had sent the arm before it (``targets``: time s, xyz m), over the poses inside:
    how far the arm went where the safety node had not sent it (a compliant arm left alone goes on to its last
    target); 0 when none."""
    largest = 0.0
    for start, end in intervals:
        before = [xyz for at, xyz in poses if at <= start]
        sent = [xyz for at, xyz in targets if at <= start]
        inside = [xyz for at, xyz in poses if start < at <= end]
        if not (before and sent and inside):
            continue
        origin, way = before[-1], sent[-1] - before[-1]
        length = float(np.dot(way, way))
        for xyz in inside:
            along = 0.0 if length == 0.0 else min(max(float(np.dot(xyz - origin, way)) / length, 0.0), 1.0)
            largest = max(largest, float(np.linalg.norm(xyz - (origin + along * way))))
    return largest


def changes(values: list[Any]) -> list[Any]:
    """``values`` with each run of equal neighbours kept once."""
    return [value for index, value in enumerate(values) if index == 0 or value != values[index - 1]]


def ledger(records: list[tuple[float, dict]], stored: list[dict], kills: list[float]) -> list[dict[str, int]]:
    """Per window between two kills (``kills``: their times, s; window i is kills[i]..kills[i+1], the last to the
    end) the episodes lost and duplicated. ``records``: (time s, the actor's record); ``stored``: the online episodes
    of the recorder's store then the actor's store, each a dict of ``uid`` and ``store`` (recorder | actor), the
    recorder's in commit order. An ended episode (a ``train`` record) is lost when no store holds its uid and
    duplicated by each copy beyond one. An episode a death cut short (``episode_cut`` in a ``started`` or ``paused``
    record) has no record of its own: it is counted in the window of the recorder's next episode that has one, and
    lost when the window holds fewer such unrecorded stored episodes than cuts announced. The episode the session's
    stop cut, after the last recorded one, belongs to no window."""
    ended = {record["uid"]: at for at, record in records if record["kind"] == "train" and record.get("uid")}
    copies: dict[str, int] = {}
    for episode in stored:
        copies[episode["uid"]] = copies.get(episode["uid"], 0) + 1

    def window(at: float) -> int | None:
        inside = [index for index, kill in enumerate(kills) if at >= kill]
        return inside[-1] if inside else None

    rows = [{"ended": 0, "lost": 0, "duplicated": 0, "cuts_announced": 0, "cuts_stored": 0} for _ in kills]
    for uid, at in ended.items():
        index = window(at)
        if index is not None:
            rows[index]["ended"] += 1
            rows[index]["lost"] += copies.get(uid, 0) == 0
            rows[index]["duplicated"] += max(0, copies.get(uid, 0) - 1)
    for at, record in records:
        index = window(at)
        if record.get("episode_cut") and index is not None:
            rows[index]["cuts_announced"] += 1
    recorder = [episode["uid"] for episode in stored if episode["store"] == "recorder"]
    for position, uid in enumerate(recorder):
        if uid in ended:
            continue
        after = next((ended[later] for later in recorder[position + 1 :] if later in ended), None)
        index = None if after is None else window(after)
        if index is not None:
            rows[index]["cuts_stored"] += 1
            rows[index]["duplicated"] += max(0, copies[uid] - 1)
    for row in rows:
        row["lost"] += max(0, row["cuts_announced"] - row["cuts_stored"])
    return rows


def restart_line(log: str, node: str) -> str | None:
    """The launch's newest line on ``node``'s death (``[launch] <node> exited with code ...``)."""
    lines = re.findall(rf"\[launch\] {re.escape(node)} exited with code [^\n]*", log)
    return lines[-1] if lines else None


def console_row(rows: list[dict], node: str) -> dict | None:
    """The console's row of ``node`` (the launch's name: ``reset`` is the console's ``home_reset``)."""
    names = {"reset": "home_reset"}
    return next((row for row in rows if row["name"] == names.get(node, node)), None)


# ----------------------------------------------------------------------------- what the benchmark watches
def until(condition, timeout: float):
    """``condition()``'s first true value within ``timeout`` s, else None."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    return None


class Watch:
    """The benchmark's node, spun in a thread: the actor's records, the safety node's ticks and status, the actor's
    commands and the arm's TCP, each with its arrival time (wall clock, s)."""

    def __init__(self, rclpy):
        from geometry_msgs.msg import PoseStamped
        from std_msgs.msg import String, UInt32

        from robot_rl.ros.plumbing import qos

        self.rclpy, self.node = rclpy, rclpy.create_node("robot_rl_benchmark_cell_faults")
        self.records: list[tuple[float, dict]] = []
        self.ticks: list[tuple[float, int]] = []
        self.status: list[tuple[float, dict]] = []
        self.actions: list[float] = []
        self.poses: list[tuple[float, np.ndarray]] = []
        self.targets: list[tuple[float, np.ndarray]] = []  # the safety node's commands to the arm
        subscribe = self.node.create_subscription
        subscribe(
            String,
            "/rl/episode_stats",
            lambda m: self.records.append((time.time(), json.loads(m.data))),
            qos.EPISODE_LOG,
        )
        subscribe(UInt32, "/rl/safety_flags", lambda m: self.ticks.append((time.time(), m.data)), 100)
        subscribe(String, "/rl/safety_status", lambda m: self.status.append((time.time(), json.loads(m.data))), 50)
        subscribe(PoseStamped, "/rl/action", lambda m: self.actions.append(time.time()), 10)

        def pose(msg) -> None:
            p = msg.pose.position
            self.poses.append((time.time(), np.array([p.x, p.y, p.z])))

        subscribe(PoseStamped, "/franka_robot_state_broadcaster/current_pose", pose, qos.STREAM_SUBSCRIBER)

        def target(msg) -> None:
            p = msg.pose.position
            self.targets.append((time.time(), np.array([p.x, p.y, p.z])))

        subscribe(PoseStamped, "/rl/equilibrium_pose", target, qos.COMMAND)
        self.executor = rclpy.executors.SingleThreadedExecutor()
        self.executor.add_node(self.node)
        threading.Thread(target=self.executor.spin, daemon=True).start()

    def close(self) -> None:
        self.executor.shutdown()
        self.node.destroy_node()


class ConsoleView(threading.Thread):
    """The console's telemetry as a page gets it (its websocket, reconnected when the console comes back): each
    message's time (wall clock, s), node rows and driver; ``address()`` gives the console's newest address."""

    def __init__(self, address):
        super().__init__(daemon=True)
        self.address, self.seen, self.stopped = address, [], False
        self.connects: list[float] = []

    def run(self) -> None:
        asyncio.run(self.follow())

    async def follow(self) -> None:
        import aiohttp

        async with aiohttp.ClientSession() as session:
            while not self.stopped:
                address = self.address()
                try:
                    if address is None:
                        raise OSError("no console yet")
                    async with session.ws_connect(f"{address}/ws?token={TOKEN}", heartbeat=5.0) as ws:
                        self.connects.append(time.time())
                        async for msg in ws:
                            if self.stopped:
                                return
                            if msg.type == aiohttp.WSMsgType.TEXT:
                                data = json.loads(msg.data)
                                if data.get("type") == "telemetry":
                                    self.seen.append((time.time(), data.get("nodes", []), data.get("driver")))
                except (OSError, aiohttp.ClientError, asyncio.TimeoutError):
                    pass
                await asyncio.sleep(0.5)

    def showed(self, node: str, start: float, end: float) -> tuple[list[str], list[str]]:
        """What the page said of ``node`` between ``start`` and ``end`` (s), each change once, and who it said drove
        (the distinct drivers, sorted)."""
        said, drivers = [], set()
        for at, rows, driver in self.seen:
            if start <= at <= end:
                row = console_row(rows, node)
                state = "not listed" if row is None else ("up" if row["up"] else "gone")
                said.append(state if row is None else f"{state}, restarts {row['restarts']}")
                drivers.add(str(driver))
        return changes(said), sorted(drivers)


# ----------------------------------------------------------------------------- the session
class Session:
    """The cell and the session in one reserved domain, the benchmark's watch and the console's view."""

    def __init__(self, work: Path, domain: int, overrides: list[str]):
        self.work, self.domain = work, Domain(domain)
        fifo = work / "spacemouse"
        self.cell = self.domain.start(["launch", "cell", *CELL, f"cell.spacemouse={fifo}"], work / "cell.log")
        if not until(lambda: fifo.exists() or self.cell.poll() is not None, 120) or not fifo.exists():
            raise RuntimeError(f"the cell did not start: {(work / 'cell.log').read_text()[-2000:]}")
        self.graph = self.domain.start(
            [
                *("launch", "real_train", *SESSION),
                f"teleop_device.spacemouse_device={fifo}",
                f"train.run_dir={work / 'run'}",
                *overrides,
            ],
            work / "graph.log",
        )
        os.environ.update({k: self.domain.env[k] for k in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE")})
        import rclpy
        import rclpy.executors
        from rclpy.signals import SignalHandlerOptions

        rclpy.init(signal_handler_options=SignalHandlerOptions.NO)  # Ctrl-C stops the benchmark, which stops both
        self.watch = Watch(rclpy)
        self.console = ConsoleView(self.console_address)
        self.console.start()

    def log(self) -> str:
        return (self.work / "graph.log").read_text()

    def console_address(self) -> str | None:
        found = CONSOLE_AT.findall(self.log())
        return found[-1] if found else None

    def release(self) -> bool:
        """The operator's release through the console's page (POST /api/release); False when it did not answer."""
        address = self.console_address()
        request = urllib.request.Request(f"{address}/api/release", method="POST", headers={"X-Console-Token": TOKEN})
        try:
            with urllib.request.urlopen(request, timeout=5):
                return True
        except OSError:
            return False

    def held(self, since: float) -> str | None:
        """The safety node's e-stop reason in its newest status after ``since`` (None: none heard, or not held)."""
        newest = [status for at, status in self.watch.status if at > since]
        return newest[-1].get("estop") if newest else None

    def mid_episode(self, timeout: float = 240) -> bool:
        """Wait for the next scene reset and three of the next episode's commands."""
        resets = self.log().count("reset: ready in")
        if not until(lambda: self.log().count("reset: ready in") > resets, timeout):
            return False
        done = time.time()
        return bool(until(lambda: sum(at > done for at in self.watch.actions) >= 3, 60))

    def close(self) -> None:
        self.console.stopped = True
        for process in (self.graph, self.cell):
            stop_launch(process)
        self.watch.close()
        self.watch.rclpy.shutdown()


def released(session: Session, after: float) -> float | None:
    """The operator's release through the console, again until a status after it says the arm is not held; the
    time (s) of the release that did it, None: none did within 60 s."""

    def once() -> float | None:
        at = time.time()
        done = session.release() and until(
            lambda: any(t > at and status.get("estop") is None for t, status in session.watch.status), 2.0
        )
        return at if done else None

    return until(once, 60)


def kill_node(session: Session, node: str) -> dict[str, Any]:
    """SIGKILL ``node`` of the session inside an episode; what followed (the module docstring's figures)."""
    watch = session.watch
    in_episode = session.mid_episode()
    before = len(session.log())
    killed = time.time()
    os.kill(launched_pids(session.log(), node)[-1], signal.SIGKILL)
    since, release, held_for = killed, None, None
    if node in RELEASED_BY_OPERATOR:  # back, holding: the operator releases it through the console

        def back() -> str | None:
            if node == "teleop" and "the teleop's e-stop is back" not in session.log()[before:]:
                return None
            return session.held(killed + 0.5)

        held_for = until(back, 120)
        release = released(session, killed) if held_for else None
        since = release or since
    # the actor pauses on a stream gone silent (a node's death shows after its timeout): moving again counts after
    # the pause, else from the kill or the release
    pause = until(lambda: next((at for at, r in watch.records if at > since and r["kind"] == "paused"), None), 5.0)
    after = max(since, pause or since)
    moved = until(lambda: moved_again(watch.actions, watch.ticks, after), 120)
    move = None if moved is None else moved + after - since
    episode = until(lambda: next((at for at, r in watch.records if at > since and r["kind"] == "train"), None), 300)
    end = time.time()
    gaps = safety_gaps(watch.ticks, killed, end)
    showed, drivers = session.console.showed(node, killed, end)
    return {
        "killed_inside_an_episode": in_episode,
        "killed_at": round(killed, 3),
        "seconds_to_move_again": None if move is None else round(move, 2),
        "counted_from": "the operator's release" if release else "the kill",
        "seconds_to_release": None if release is None else round(release - killed, 2),
        "held_for": held_for,
        "seconds_to_next_episode_end": None if episode is None else round(episode - killed, 2),
        "arm_moved_without_safety_m": round(largest_move(watch.poses, gaps), 4),
        "arm_moved_beyond_last_target_m": round(largest_move_beyond_target(watch.poses, watch.targets, gaps), 4),
        "safety_down_s": round(sum(b - a for a, b in gaps), 2),
        "restart_line": restart_line(session.log(), node),
        "console_showed": showed,
        "console_drivers": drivers,
        "actor_paused": changes(
            [r["reason"] for at, r in watch.records if killed <= at <= end and r["kind"] == "paused"]
        ),
    }


def kill_cell(session: Session, watch_for: float = 30.0) -> dict[str, Any]:
    """SIGKILL the cell emulator (the lab's bringup) inside an episode; what the session did in ``watch_for`` s."""
    from robot_rl.ros.console.console_live import violation_names

    watch = session.watch
    in_episode = session.mid_episode()
    before = len(session.log())
    cell_log = session.work / "cell.log"
    killed = time.time()
    os.kill(launched_pids(cell_log.read_text(), "cell")[-1], signal.SIGKILL)
    time.sleep(watch_for)
    end = time.time()
    lines = session.log()[before:].splitlines()
    flags = sorted({flags for at, flags in watch.ticks if at > killed + 0.5})
    return {
        "killed_inside_an_episode": in_episode,
        "killed_at": round(killed, 3),
        "safety_flags_after": [" | ".join(violation_names(f)) or "none" for f in flags],
        "safety_ticks_after": sum(at > killed for at, _ in watch.ticks),
        "arm_commands_passed_after": sum(at > killed + 0.5 and f == 0 for at, f in watch.ticks),
        "estop": session.held(killed + 0.5),
        "safety_said": changes([line for line in lines if line.startswith("[safety]")])[:6],
        "actor_paused": changes([r["reason"] for at, r in watch.records if at > killed and r["kind"] == "paused"]),
        "console_drivers": sorted({str(driver) for at, _, driver in session.console.seen if killed <= at <= end}),
        "cell_launch": restart_line(cell_log.read_text(), "cell")
        or (cell_log.read_text().strip().splitlines() or [""])[-1],
        "cell_launch_exit": session.cell.poll(),
        "session_still_running": session.graph.poll() is None,
    }


def stored_episodes(run: Path) -> list[dict]:
    """The online episodes of the run's stores, the recorder's (in commit order) then the actor's: uid and store."""
    from robot_rl.data import EpisodeStore

    stored = []
    for name, path in (("recorder", run / "episodes.zarr"), ("actor", run / "actor_episodes.zarr")):
        if (path / "zarr.json").exists():
            store = EpisodeStore.open(path)
            for episode in store.episode_names():
                attrs = store.episode_attrs(episode)
                if attrs["source"] == "online":
                    stored.append({"uid": attrs["uid"], "store": name})
    return stored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", nargs="+", default=list(NODES), help="the session's nodes to kill, in order")
    parser.add_argument("--work", type=Path, default=None, help="folder for the run (default: a temporary one)")
    parser.add_argument("--name", default="cell_faults", help="the results file's name (benchmarks/results/NAME.json)")
    parser.add_argument("overrides", nargs="*", help="more overrides of the session (robot.limits.max_lead=0.01)")
    args = parser.parse_args(argv)
    from robot_rl.cli.graph import reserved_ros_domain

    started = time.monotonic()
    work = args.work or Path(tempfile.mkdtemp(prefix="robot_rl_cell_faults_"))
    work.mkdir(parents=True, exist_ok=True)
    per_node: dict[str, dict[str, Any]] = {}
    with reserved_ros_domain() as domain:
        session = Session(work, domain, args.overrides)
        try:
            if not until(lambda: any(r["kind"] == "train" for _, r in session.watch.records), 600):
                raise RuntimeError(f"no first episode: {session.log()[-3000:]}")
            for node in args.nodes:
                per_node[node] = kill_node(session, node)
                print(node, json.dumps(per_node[node]), flush=True)
            cell = kill_cell(session)
            print("cell", json.dumps(cell), flush=True)
        finally:
            session.close()
    log = session.log()
    records = actor_records(log)
    kills = [per_node[node]["killed_at"] for node in per_node] + [cell["killed_at"]]  # the cell's: a window of its own
    for node, row in zip(per_node, ledger(records, stored_episodes(work / "run"), kills)):
        figures = per_node[node]
        figures.update(
            episodes_lost=row["lost"],
            episodes_duplicated=row["duplicated"],
            episodes_ended=row["ended"],
            episodes_cut=row["cuts_announced"],
            arm_moved_without_safety=figures["arm_moved_without_safety_m"] > MOVED,
        )
        move = figures["seconds_to_move_again"]
        figures["ok"] = (
            move is not None
            and move <= LIMIT
            and row["lost"] == 0
            and row["duplicated"] == 0
            and not figures["arm_moved_without_safety"]
        )
    summary = {
        "nodes_ok": sum(f["ok"] for f in per_node.values()),
        "nodes": len(per_node),
        "tracebacks": log.count("Traceback"),
        "episodes_stored": len(stored_episodes(work / "run")),
    }
    print(json.dumps(summary))
    write_result(
        args.name,
        {**summary, "per_node": per_node, "cell": cell, "work": str(work)},
        wall_seconds=round(time.monotonic() - started, 1),
        overrides=args.overrides,
    )
    return 0 if summary["nodes_ok"] == summary["nodes"] else 1


if __name__ == "__main__":
    sys.exit(main())
