"""What the console's page shows live: the values the console node's ROS callbacks write and its web server reads
(:class:`Live`), the run's rates (:class:`Rate`), who drives the arm (:func:`driver`) and the session's nodes as the
console hears them (:class:`Nodes`). No ROS here: ``robot_rl.ros.console.console_node`` feeds it."""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any

from ...safety import Violation

HOLDING = Violation.ESTOP | Violation.FOREIGN_PUBLISHER | Violation.ARM_ERROR | Violation.INACTIVE
RECORDS_KEPT = 5000  # episode_stats records the page gets on connecting
RATE_WINDOW = 30.0  # s over which updates/s and env steps/s are measured
STATUS_TIMEOUT = 2.0  # s without rl/safety_status (10 Hz) after which the console says no safety node runs
NODE_PREFIX = "robot_rl_"  # every robot_rl node's name starts with it; the page leaves it out
NAME_GRACE = 10.0  # s a node's claim vouches for it before the graph names it (discovery on loaded cores)


def violation_names(flags: int) -> list[str]:
    """The names of the :class:`Violation` bits set in ``flags`` (bits no name has are left out)."""
    return [v.name for v in Violation if v and v & flags]


def driver(status_age: float | None, flags: int, intervention: bool, actor_running: bool) -> str:
    """Who drives the arm, as far as the console knows: ``no safety node`` (no ``rl/safety_status`` for
    ``STATUS_TIMEOUT`` s, ``status_age`` None: never; nothing commands the arm without it), ``hold`` (the flags say
    e-stop, foreign publisher, arm error or inactive: the safety node holds whatever comes), ``operator`` (a takeover),
    ``no actor`` (no command, and no actor node in the graph) or ``idle`` (no command from the running actor: the
    safety node holds the measured pose), else ``policy``."""
    if status_age is None or status_age > STATUS_TIMEOUT:
        return "no safety node"
    if flags & HOLDING:
        return "hold"
    if intervention:
        return "operator"
    if flags & Violation.STALE_COMMAND:
        return "idle" if actor_running else "no actor"
    return "policy"


def short_name(name: str) -> str:
    """A node's fully qualified name as the page shows it: ``/robot_rl_safety`` -> ``safety``, a robot's
    ``/left/robot_rl_actor`` -> ``left/actor``."""
    namespace, _, base = name.rpartition("/")
    base = base.removeprefix(NODE_PREFIX)
    return f"{namespace.strip('/')}/{base}" if namespace.strip("/") else base


class Nodes:
    """The robot_rl nodes of the session as the console hears them: each node's claims to its name
    (``/rl/node_claims``: one per start, so a node started again under the same name, by ``robot-rl launch``'s restart
    or by hand, sends a newer one) and whether the ROS graph shows it. A node is gone once a look at the graph misses
    it after showing it since its newest claim, or misses it ``NAME_GRACE`` s after that claim (discovery names a
    node later than its topics carry its claim). A node that exits leaves the graph at once; one killed outright only
    when its DDS lease runs out (25 s), unless it is started again first. Times are wall-clock s since the epoch."""

    def __init__(self):
        self.starts: dict[str, list[float]] = {}  # fully qualified name -> its claims' start times
        self.heard: dict[str, float] = {}  # name -> when its newest claim came
        self.seen: set[str] = set()  # names the graph showed since their newest claim
        self.present: set[str] = set()  # names in the ROS graph at the last look
        self.gone_since: dict[str, float] = {}  # name -> when a look first missed it

    def claimed(self, name: str, started: float, now: float) -> None:
        starts = self.starts.setdefault(name, [])
        if started in starts:
            return
        starts.append(started)
        starts.sort()
        self.heard[name] = now
        self.seen.discard(name)
        self.gone_since.pop(name, None)

    def look(self, present: set[str], now: float) -> None:
        """The fully qualified names the ROS graph shows at ``now``."""
        self.present = set(present)
        for name in self.starts:
            if name in present:
                self.seen.add(name)
                self.gone_since.pop(name, None)
            elif name in self.seen or now - self.heard[name] > NAME_GRACE:
                self.gone_since.setdefault(name, now)

    def running(self, name: str) -> bool:
        return name in self.present or (name in self.starts and name not in self.gone_since)

    def rows(self, now: float) -> list[dict[str, Any]]:
        """Per claimed node, by name: ``name`` (short), ``up``, ``started`` (its newest start), ``restarts`` (starts
        after its first that the console heard) and ``gone_for`` (s since a look first missed it; None while up)."""
        return [
            {
                "name": short_name(name),
                "up": name not in self.gone_since,
                "started": starts[-1],
                "restarts": len(starts) - 1,
                "gone_for": round(now - self.gone_since[name], 1) if name in self.gone_since else None,
            }
            for name, starts in sorted(self.starts.items(), key=lambda item: short_name(item[0]))
        ]


class Rate:
    """How fast a count grows, per s: its growth over the last ``window`` s of samples (time in s, count), which
    the owner takes at a steady period, so a count that stops growing reads 0 once its growth leaves the window. A
    count that goes down (a learner restarted from an older checkpoint) starts the measure again."""

    def __init__(self, window: float):
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, t: float, count: int) -> None:
        if self.samples and count < self.samples[-1][1]:
            self.samples.clear()
        self.samples.append((t, count))
        while len(self.samples) > 1 and self.samples[1][0] <= t - self.window:
            self.samples.popleft()

    def per_second(self) -> float | None:
        """The count's growth per s; None before two samples."""
        if len(self.samples) < 2:
            return None
        (t0, c0), (t1, c1) = self.samples[0], self.samples[-1]
        return (c1 - c0) / max(t1 - t0, 1e-9)


class Live:
    """What the page shows, written by ROS callbacks (executor thread), read by the web server (asyncio thread).
    ``actor``: the fully qualified name of the actor node whose presence tells ``idle`` from ``no actor``."""

    def __init__(self, actor: str = "/robot_rl_actor"):
        self.lock = threading.Lock()
        self.actor = actor
        self.values: dict[str, Any] = {"flags": 0, "intervention": False, "twist": 0.0}
        self.status_time: float | None = None  # monotonic s of the newest rl/safety_status
        self.records: deque[tuple[int, dict]] = deque(maxlen=RECORDS_KEPT)  # (sequence number, record)
        self.record_count = 0
        self.env_steps: int | None = None  # the newest record's env_steps
        self.weights: int | None = None  # the weights version the newest record was played with
        self.updates, self.env_steps_rate = Rate(RATE_WINDOW), Rate(RATE_WINDOW)
        self.frames: dict[str, tuple[int, float | None]] = {}  # camera -> (frames heard, monotonic s of the newest)
        self.nodes = Nodes()

    def set(self, **values: Any) -> None:
        with self.lock:
            self.values.update(values, updated=time.time())

    def status(self, flags: int, pose: list[float] | None, risk: float | None) -> None:
        """The safety node's status (its flags, the TCP position in m, the fast critic's risk), heard now."""
        with self.lock:
            self.values.update(flags=flags, pose=pose, risk=risk, updated=time.time())
            self.status_time = time.monotonic()

    def camera(self, camera: str, frame: bool) -> None:
        """The console listens to ``camera``; ``frame``: a frame of it came now."""
        with self.lock:
            count, newest = self.frames.get(camera, (0, None))
            self.frames[camera] = (count + 1, time.monotonic()) if frame else (count, newest)

    def claimed(self, name: str, started: float) -> None:
        with self.lock:
            self.nodes.claimed(name, started, time.time())

    def graph(self, present: set[str]) -> None:
        with self.lock:
            self.nodes.look(present, time.time())

    def add_record(self, record: dict) -> None:
        with self.lock:
            self.record_count += 1
            self.records.append((self.record_count, record))
            if "env_steps" in record:
                self.env_steps = record["env_steps"]
            if "weights" in record:
                self.weights = record["weights"]

    def records_after(self, sequence: int) -> tuple[int, list[dict]]:
        with self.lock:
            return self.record_count, [r for n, r in self.records if n > sequence]

    def snapshot(self) -> dict[str, Any]:
        """The telemetry: the values, the flags' names, who drives (:func:`driver`), the run's figures, the cameras
        (frames heard, s since the newest: None before one) and the session's nodes (:meth:`Nodes.rows`)."""
        now = time.monotonic()
        with self.lock:
            values = dict(self.values)
            values["run"] = self._run()
            status_age = None if self.status_time is None else now - self.status_time
            actor_running = self.nodes.running(self.actor)
            values["cameras"] = {
                camera: {"frames": count, "age": None if newest is None else round(now - newest, 1)}
                for camera, (count, newest) in self.frames.items()
            }
            values["nodes"] = self.nodes.rows(time.time())
        flags = int(values["flags"])
        values["violations"] = violation_names(flags)
        values["driver"] = driver(status_age, flags, bool(values["intervention"]), actor_running)
        return values

    def _run(self) -> dict[str, Any]:
        """Samples the learner's update count and the actor's env steps now (the caller holds the lock): updates/s,
        env steps/s, the replay buffers' sizes (transitions) and the weights version last played."""
        now, learner = time.monotonic(), self.values.get("learner") or {}
        if "updates" in learner:
            self.updates.add(now, learner["updates"])
        if self.env_steps is not None:
            self.env_steps_rate.add(now, self.env_steps)
        return {
            "updates_per_s": self.updates.per_second(),
            "env_steps_per_s": self.env_steps_rate.per_second(),
            "online_size": learner.get("online_size"),
            "demo_size": learner.get("demo_size"),
            "weights": self.weights,
        }
