"""Node graphs: which robot_rl nodes a job runs, read by ``robot-rl launch`` and by the ROS 2
launch files in ``launch/`` alike (Hydra group ``graph``, ``configs/graph/<name>.yaml``).

Each node entry: ``name``, ``module`` (run as ``python -m <module>``), ``hydra`` (default true:
the node gets the launch's Hydra overrides, after its own ``args``), ``args``, ``required`` (the
graph stops when it ends: exit 0, its work done, or 2, bad input, or a crash it is not restarted from), ``restart``
(default true: a crash, any other exit, starts it again, ``RESTARTS`` times after a back-off; false: the sim robot and
the emulated cell, whose death is the session's), ``respawn`` (restarted whenever it exits), ``only_with_sim`` (true: only
when ``graph.with_sim``; false: only without), ``only_if`` (a graph key, e.g. ``console``: only when
it is true). With a robot config (``robot=fr3|panda|ur5e``) every node gets the robot's topic remaps
(``--ros-args -r``), the safety node the robot's arguments (its rate; its limits are ``robot.limits``)
and the robot's arm bridge is added (MoveIt Servo for UR), except
in a ``bringup`` graph (the emulated cell, ``configs/graph/cell.yaml``), which stands for the lab's drivers.

``robot-rl launch <graph> key=value ...`` starts every node as a child process, prefixes their
output with the node name, restarts those that crash, and on Ctrl-C, SIGTERM or the end of a required node stops them
all (SIGINT, then SIGKILL after ``grace`` seconds).

Several robots (``fleet.robots=[left,right]``): every node but the ``shared`` ones (the learner) runs once per
robot, named ``<robot>/<node>``, in the ROS 2 namespace ``/<robot>`` (its topics ``/<robot>/rl/action``, ...; a
robot config's remaps are relative, so they follow), with the robot's seed, its share of ``train.env_steps`` and
``train.demo_episodes``, and episode stores of its own (``<run_dir>/<robot>/...``). In sim time each sim robot owns
its robot's clock (``/<robot>/clock``) and the shared nodes run on the wall clock. A required node's exit ends its
robot only; the others go on, and the graph ends when every robot has ended.

Every node of a launch (``robot-rl launch`` and ``launch_description`` alike) runs in the cell's DDS
domain, ``ros.domain_id``, with discovery limited to this machine unless ``ros.discovery=subnet``
(:func:`ros_environment`), so a graph never talks to another cell's or a test's nodes by accident.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from robot_rl.core.config import ConfigError, choice, integer
from robot_rl.core.interrupts import interrupt_on_sigterm
from robot_rl.ros.plumbing.node_main import RESTART_ENV
from robot_rl.runtime.fleet_settings import fleet_settings, member_seed, robot_path, share
from robot_rl.safety.robot_limits import workspace_of

#: ROS 2 domain ids usable on Linux (the others collide with the ephemeral port range)
DOMAIN_IDS = (*range(102), *range(215, 233))
SIM_TIME_KEY = "ros.sim_time"
#: (group, the key whose value names the group's option): a resumed run's options, given to its nodes as options
GROUP_KEYS = (
    ("task", "task.name"),
    ("agent", "agent.name"),
    ("exploration", "agent.exploration"),
    ("randomization", "randomization.name"),
    ("robot", "robot.name"),
    ("fleet", "fleet.kind"),
)
LEARNER_MODULE = "robot_rl.ros.nodes.learner_node"  # a graph with this node trains: it has a run folder (train.run_dir)
REWARD_MODULE = (
    "robot_rl.ros.nodes.reward_node"  # a graph with this node is rewarded by the classifier at classifier.out
)
TELEOP_MODULE = "robot_rl.ros.nodes.teleop_node"  # a graph with this node reads the operator's device (teleop_device.*)
CONSOLE_MODULE = "robot_rl.ros.console.console_node"  # a graph with this node serves the page on console.port
#: nodes that read the task spec (ros.task_spec): the launch builds the task's env once and hands them its spec
SPEC_READERS = {
    "robot_rl.ros.nodes.actor_node",
    LEARNER_MODULE,
    "robot_rl.ros.nodes.recorder_node",
    "robot_rl.ros.nodes.tracker_node",
}
DISCOVERY_RANGES = {"localhost": "LOCALHOST", "subnet": "SUBNET"}  # ros.discovery -> ROS_AUTOMATIC_DISCOVERY_RANGE


@dataclass
class NodeSpec:
    name: str
    module: str
    hydra: bool = True
    args: list[str] = field(default_factory=list)
    required: bool = False
    restart: bool = True  # a crash starts it again (Launcher: RESTARTS times, after a back-off)
    respawn: bool = False
    only_with_sim: bool | None = None
    only_if: str | None = None  # a graph key (console): the node runs only when that key is true
    clock: bool = False
    shared: bool = False  # with fleet.robots: one node for all robots (the learner), not one per robot
    ros_args: list[str] = field(default_factory=list)  # after --ros-args: remaps of a robot config
    sim_time: bool = False  # resolved by graph_nodes from ros.sim_time
    robot: str | None = None  # with fleet.robots: the robot this copy of the node serves
    robot_overrides: list[str] = field(default_factory=list)  # its seed, budget and stores (after the launch's)

    def command(self, overrides: list[str]) -> list[str]:
        ros = ["--ros-args", *self.ros_args] if self.ros_args else []
        if not self.hydra:
            return [sys.executable, "-m", self.module, *self.args, *ros]
        overrides = [o for o in overrides if not o.startswith(f"{SIM_TIME_KEY}=")]  # the resolved value instead
        return [
            sys.executable,
            "-m",
            self.module,
            *self.args,
            *overrides,
            *self.robot_overrides,
            f"{SIM_TIME_KEY}={'true' if self.sim_time else 'false'}",
            *ros,
        ]


def graph_nodes(cfg: DictConfig) -> list[NodeSpec]:
    """The nodes of ``cfg.graph`` that apply (``with_sim``), checked, on the clock of ``ros.sim_time``."""
    graph = OmegaConf.to_container(cfg.graph, resolve=True)
    known = set(NodeSpec.__dataclass_fields__) - {"ros_args", "sim_time", "robot", "robot_overrides"}
    nodes = []
    for index, entry in enumerate(graph.get("nodes") or []):
        unknown = set(entry) - known
        if unknown or "name" not in entry or "module" not in entry:
            raise ConfigError(
                f"graph.nodes[{index}]", entry, f"name, module and optionally {sorted(known - {'name', 'module'})}"
            )
        entry["args"] = [str(a) for a in entry.get("args", [])]
        node = NodeSpec(**entry)
        wanted = graph.get(node.only_if, False) if node.only_if else True
        if not isinstance(wanted, bool):
            raise ConfigError(f"graph.{node.only_if}", wanted, "true or false")
        if wanted and (node.only_with_sim is None or node.only_with_sim == bool(graph.get("with_sim", False))):
            nodes.append(node)
    if not nodes:
        raise ConfigError("graph.nodes", graph.get("nodes"), "at least one node")
    sim_time = cfg.ros.get("sim_time")
    if sim_time is None:
        sim_time = graph.get("sim_time", False)
    if not isinstance(sim_time, bool):
        raise ConfigError(SIM_TIME_KEY, sim_time, "true, false or null (the graph's default)")
    if sim_time and not any(node.clock for node in nodes):
        raise ConfigError(
            SIM_TIME_KEY,
            True,
            f"a graph with a sim robot node to own /clock; graph "
            f"{graph.get('name')} has none (on a real cell set ros.sim_time=false)",
        )
    for node in nodes:
        node.sim_time = sim_time
    robot = OmegaConf.to_container(cfg.robot, resolve=True)
    workspace_of(robot.get("limits"))  # checked before any node starts (the safety node checks them again)
    if robot.get("name"):  # a real arm's config (robot=fr3|panda|ur5e); without one, only the limits are set
        if robot.get("bridge") and not graph.get("bringup", False):  # the bringup (cell) graph is the lab's side
            nodes.insert(
                0,
                NodeSpec(
                    name="bridge",
                    module=robot["bridge"]["module"],
                    hydra=False,
                    args=[str(a) for a in robot["bridge"].get("args", [])],
                    respawn=True,
                ),
            )
        remaps = [arg for source, target in robot.get("topics", {}).items() for arg in ("-r", f"{source}:={target}")]
        for node in nodes:
            node.ros_args = remaps
            if node.name == "safety" and robot.get("safety"):
                node.args = [str(a) for a in robot["safety"]]
    robots = fleet_settings(cfg).robots
    return robot_nodes(cfg, nodes, robots) if robots else nodes


def console_ports(cfg: DictConfig, robots: int) -> list[int]:
    """The TCP port of each robot's console: ``console.port``, the next ones for the fleet's other robots (8080,
    8081, ...; all 0 with 0: any free port each). One robot, or none (no fleet): ``[console.port]``."""
    port = integer("console.port", cfg.console.port)
    return [port + index if port else 0 for index in range(max(robots, 1))]


def robot_nodes(cfg: DictConfig, nodes: list[NodeSpec], robots: list[str]) -> list[NodeSpec]:
    """The graph of a fleet of robots: each node that is not ``shared`` once per robot, in the robot's namespace,
    with the robot's seed, share of the step budget and demonstrations, and its own episode stores; shared nodes
    once, on the wall clock in sim time (every robot's sim node owns a clock of its own)."""
    steps, demos = (
        integer("train.env_steps", cfg.train.env_steps),
        integer("train.demo_episodes", cfg.train.demo_episodes),
    )
    ros, ports = cfg.ros, console_ports(cfg, len(robots))
    expanded = []
    for index, robot in enumerate(robots):
        overrides = [
            f"seed={member_seed(integer('seed', cfg.seed), index)}",
            f"train.env_steps={share(steps, index, len(robots))}",
            f"train.demo_episodes={share(demos, index, len(robots))}",
            f"ros.recorder.store={robot_path(ros.recorder.store, robot)}",
            f"ros.delivery.actor_store={robot_path(ros.delivery.actor_store, robot)}",
        ]
        if ros.recorder.mcap:
            overrides.append(f"ros.recorder.mcap={robot_path(ros.recorder.mcap, robot)}")
        if ports[index]:  # each robot's console its own page (0: any free port each)
            overrides.append(f"console.port={ports[index]}")
        clock = ["-r", f"/clock:=/{robot}/clock"] if nodes[0].sim_time else []
        for node in nodes:
            if not node.shared:
                ros_args = ["-r", f"__ns:=/{robot}", *clock, *node.ros_args]
                expanded.append(
                    replace(
                        node, name=f"{robot}/{node.name}", robot=robot, ros_args=ros_args, robot_overrides=overrides
                    )
                )
    return [*(replace(node, sim_time=False) for node in nodes if node.shared), *expanded]


@contextlib.contextmanager
def reserved_ros_domain() -> Iterator[int]:
    """A ROS 2 domain id no other test or benchmark on this machine holds, for the duration of the block: one of
    ``DOMAIN_IDS`` but 0 (the default of every ROS install, left to live cells), locked with fcntl on
    ``/tmp/robot_rl_ros_domain_<id>.lock`` so it is unique across processes."""
    ids = [domain for domain in DOMAIN_IDS if domain != 0]
    start = random.randrange(len(ids))  # spread the ids, so a domain freed a moment ago rests a while
    for offset in range(len(ids)):
        domain = ids[(start + offset) % len(ids)]
        handle = open(f"/tmp/robot_rl_ros_domain_{domain}.lock", "a")  # noqa: SIM115 - held for the block
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            continue
        try:
            yield domain
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()
        return
    raise RuntimeError(f"all {len(ids)} ROS 2 domain ids are held by other tests or benchmarks on this machine")


def ros_environment(ros: DictConfig) -> dict[str, str]:
    """The environment variables that put a launch's nodes in the cell's domain (``ros.domain_id``; null: the
    launching shell's ``ROS_DOMAIN_ID``, else 0) with discovery ``ros.discovery`` (localhost | subnet)."""
    domain, key = ros.get("domain_id"), "ros.domain_id"
    if domain is None:  # the shell's, as a ROS 2 node started there would take it
        domain, key = os.environ.get("ROS_DOMAIN_ID") or "0", "ROS_DOMAIN_ID"
    if isinstance(domain, str) and domain.strip().isdigit():
        domain = int(domain)
    if isinstance(domain, bool) or not isinstance(domain, int) or domain not in DOMAIN_IDS:
        raise ConfigError(
            key,
            domain,
            "an integer in 0..101 or 215..232 (the ROS 2 domain ids usable on Linux; "
            "ros.domain_id overrides the shell's ROS_DOMAIN_ID)",
        )
    discovery = choice("ros.discovery", ros.get("discovery"), DISCOVERY_RANGES)
    return {"ROS_DOMAIN_ID": str(domain), "ROS_AUTOMATIC_DISCOVERY_RANGE": DISCOVERY_RANGES[discovery]}


#: a node that dies (a crash, a signal: any exit but 0, done, and 2, bad input) is started again at most this many
#: times per launch, after RESTART_BACKOFF s, doubled at each restart; a ``respawn`` node (the safety node) always
RESTARTS = 3
RESTART_BACKOFF = 1.0
BAD_INPUT = 2  # the exit code of a node that refused its input (node_main.exit_with_error): the launch stops


class Launcher:
    """Child processes of one graph, their output, their restarts and their shutdown. ``env``: variables set for every
    node on top of this process's environment (:func:`ros_environment`).

    A node that died (a crash, kill -9: any exit but 0, a node done with its work, and 2) is started again with the
    same command, up to ``RESTARTS`` times after a back-off, each said in the log, with ``RESTART_ENV`` set to how
    many times it was started again (a learner goes on from its checkpoint, a recorder from its store, an actor from
    its actor state), unless its entry says ``restart: false``. A required node that ends (exit 0 or 2, or a crash it
    is not restarted from) ends the graph (with several robots, its robot's nodes). Any other node that refused its
    input (exit 2) stops the graph: nothing it was for would happen."""

    def __init__(
        self,
        nodes: list[NodeSpec],
        overrides: list[str],
        grace: float = 10.0,
        out=None,
        env: dict[str, str] | None = None,
    ):
        self.nodes, self.overrides, self.grace, self.env = nodes, overrides, grace, env or {}
        self.out = out or sys.stdout
        self.processes: dict[str, subprocess.Popen] = {}
        self.reported: set[str] = set()  # exited nodes already announced
        self.restarts: dict[str, int] = {}  # node -> restarts so far
        self.due: dict[str, float] = {}  # node -> monotonic time of its pending restart
        self._print = threading.Lock()

    def start(self, node: NodeSpec) -> None:
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1", RESTART_ENV: str(self.restarts.get(node.name, 0))}
        process = subprocess.Popen(
            node.command(self.overrides),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
            bufsize=1,
        )
        self.processes[node.name] = process
        threading.Thread(target=self._relay, args=(node.name, process), daemon=True).start()
        self.say(f"started {node.name} (pid {process.pid}): {' '.join(node.command(self.overrides)[1:])}")

    def _relay(self, name: str, process: subprocess.Popen) -> None:
        for line in process.stdout:
            with self._print:
                self.out.write(f"[{name}] {line}")
                self.out.flush()

    def say(self, text: str) -> None:
        with self._print:
            self.out.write(f"[launch] {text}\n")
            self.out.flush()

    def run(self) -> int:
        """Start all nodes and supervise them; returns the exit code of the required node (0 if none). With several
        robots a required node's exit ends its robot's nodes only, and the graph ends when every robot has ended,
        with the worst exit code of their required nodes."""
        if self.env:
            self.say(" ".join(f"{name}={value}" for name, value in sorted(self.env.items())))
        for node in self.nodes:
            self.start(node)
        robots = {node.robot for node in self.nodes if node.robot}
        ended: dict[str, int] = {}  # robot -> the exit code of the required node that ended it
        try:
            while True:
                for node in self.nodes:
                    if node.name in self.due:
                        if time.monotonic() >= self.due[node.name]:
                            del self.due[node.name]
                            self.start(node)
                        continue
                    returncode = self.processes[node.name].poll()
                    if returncode is None or node.robot in ended:
                        continue
                    crashed = returncode not in (0, BAD_INPUT)
                    if node.respawn:
                        self.say(f"{node.name} exited with code {returncode}; respawning")
                        if crashed:  # it died: the new one may take its lingering entry for what it is
                            self.restarts[node.name] = self.restarts.get(node.name, 0) + 1
                        self.start(node)
                    elif crashed and node.restart and self.restarts.get(node.name, 0) < RESTARTS:
                        self.restart_later(node, returncode)
                    elif node.required and node.robot:
                        self.say(f"{node.name} {self.ended(node, returncode)}; stopping robot {node.robot}")
                        ended[node.robot] = returncode
                        self.stop([n.name for n in self.nodes if n.robot == node.robot])
                        if set(ended) == robots:
                            self.say("every robot has ended; stopping the graph")
                            return max(ended.values(), key=abs)
                    elif node.required:
                        self.say(f"{node.name} {self.ended(node, returncode)}; stopping the graph")
                        return returncode
                    elif returncode == BAD_INPUT:
                        self.say(f"{node.name} refused its input (exit code {returncode}); stopping the graph")
                        return returncode
                    elif node.name not in self.reported:
                        self.reported.add(node.name)
                        given_up = "; not starting it again" if crashed else ""
                        self.say(f"{node.name} {self.ended(node, returncode)}{given_up}")
                if not self.due and all(p.poll() is not None for p in self.processes.values()):
                    return max(ended.values(), key=abs, default=0)
                time.sleep(0.1)
        except KeyboardInterrupt:
            self.say("interrupted; stopping the graph")
            return 130
        finally:
            self.stop()

    def ended(self, node: NodeSpec, returncode: int) -> str:
        """How ``node`` ended, for the log: its exit code, and the restarts spent before a crash that stays."""
        spent = returncode not in (0, BAD_INPUT) and node.restart
        return f"exited with code {returncode}" + (f" after {RESTARTS} restarts" if spent else "")

    def restart_later(self, node: NodeSpec, returncode: int) -> None:
        """Start ``node`` again after the back-off of its next restart."""
        count = self.restarts[node.name] = self.restarts.get(node.name, 0) + 1
        delay = RESTART_BACKOFF * 2 ** (count - 1)
        self.due[node.name] = time.monotonic() + delay
        self.say(
            f"{node.name} exited with code {returncode}; restarting it in {delay:g} s (restart {count} of {RESTARTS})"
        )

    def stop(self, names: list[str] | None = None) -> None:
        """SIGINT to the named nodes (default: all, the last started first), SIGKILL to those still running after
        ``grace`` s."""
        processes = {name: p for name, p in self.processes.items() if names is None or name in names}
        for process in reversed(list(processes.values())):
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + self.grace
        for name, process in processes.items():
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                self.say(f"{name} did not stop within {self.grace:g} s; killing it")
                process.kill()
                process.wait()


def launch(graph: str, overrides: list[str]) -> int:
    """``robot-rl launch <graph> key=value ...``"""
    from robot_rl.core.composed_config import group_options, load_config

    if graph not in group_options("graph"):
        raise ConfigError("graph", graph, "one of " + ", ".join(group_options("graph")))
    cfg = load_config([f"graph={graph}", *overrides])
    nodes, env = graph_nodes(cfg), ros_environment(cfg.ros)
    node_overrides = [f"graph={graph}", *overrides]
    if any(node.module == LEARNER_MODULE for node in nodes):  # a graph that trains: its run folder's rule
        node_overrides += resume_overrides(cfg, overrides)
    check_before_start(load_config(node_overrides), {node.module for node in nodes})
    previous = signal.signal(signal.SIGTERM, interrupt_on_sigterm)
    # started in the background by a shell script, this process inherits SIGINT ignored: Ctrl-C (or a SIGINT from
    # whoever started it) must still stop the graph and its nodes
    previous_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with handed_task_spec(load_config(node_overrides), nodes) as spec_overrides:
            return Launcher(nodes, [*node_overrides, *spec_overrides], env=env).run()
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_sigint)


def check_before_start(cfg: DictConfig, modules: set[str]) -> None:
    """What the graph's nodes would each refuse at their start, refused before any starts or a folder is made (one
    line, naming the key): the reward classifier's file (missing, or a classifier that cannot be a reward), the
    operator's device (the teleop node carries the e-stop) and the console's port (taken by another session's)."""
    if REWARD_MODULE in modules:
        from robot_rl.runtime.classifier import load_classifier

        try:
            load_classifier(cfg)
        except FileNotFoundError:
            raise ConfigError(
                "classifier.out", str(cfg.classifier.out), "a reward classifier file (robot-rl classifier writes one)"
            ) from None
    if TELEOP_MODULE in modules:
        from robot_rl.ros.nodes.teleop_node import check_device

        check_device(cfg.teleop_device)
    if CONSOLE_MODULE in modules:
        from robot_rl.ros.console.console_node import check_port, console_settings

        settings = console_settings(cfg.console)
        for port in console_ports(cfg, len(fleet_settings(cfg).robots or [])):
            check_port(replace(settings, port=port))


@contextlib.contextmanager
def handed_task_spec(cfg: DictConfig, nodes: list[NodeSpec]) -> Iterator[list[str]]:
    """The overrides that hand the graph's nodes one task spec (``ros.task_spec``): a given one, checked here
    once, or the spec of the task's env, built here and written to a folder of the launch's own for its lifetime,
    so no node builds an env to learn shapes. ``cfg``: the nodes' config (a resumed run's, with its task)."""
    from robot_rl.data.task_spec import SPEC_FILE
    from robot_rl.ros.plumbing.node_main import node_task_spec

    if not any(node.module in SPEC_READERS for node in nodes):
        yield []
        return
    spec = node_task_spec(cfg)  # a bad ros.task_spec: one line before any node starts
    if OmegaConf.select(cfg, "ros.task_spec") is not None:
        yield []
        return
    with tempfile.TemporaryDirectory(prefix="robot_rl_launch_") as folder:
        yield [f"ros.task_spec={spec.write(Path(folder) / SPEC_FILE)}"]


def resume_overrides(cfg: DictConfig, overrides: list[str]) -> list[str]:
    """The run folder rule of a graph with a learner, checked before any node starts (:mod:`robot_rl.runtime.run_folder`): a
    folder that holds anything only with ``train.resume=true``, and then the run's own ``config.yaml`` with the
    budget and evaluation keys the command line changes (a run-defining key it changes is refused). Returns the
    overrides that give every node the resumed run's configuration (none for a new run): the run's group options
    (``task=reach``), then each key where the run differs from what the command line composes."""
    from robot_rl.core.composed_config import group_options, load_config
    from robot_rl.runtime.run_folder import config_leaves, given_keys, parents, resumed_config, run_folder

    run_folder(cfg.train.run_dir, cfg.train.resume)
    if not cfg.train.resume:
        return []
    wanted, composed = config_leaves(resumed_config(cfg, given_keys(overrides))), config_leaves(cfg)
    choices = [
        f"{group}={wanted[key]}"
        for group, key in GROUP_KEYS
        if wanted.get(key) != composed.get(key) and wanted.get(key) in group_options(group)
    ]
    if choices:
        composed = config_leaves(load_config([f"graph={cfg.graph.name}", *overrides, *choices]))
    removed = [
        f"~{key}" for key in sorted(composed.keys() - wanted.keys()) if not any(p in wanted for p in parents(key))
    ]
    changed = [
        f"++{key}={override_value(value)}" for key, value in sorted(wanted.items()) if composed.get(key) != value
    ]
    return [*choices, *removed, *changed]


def override_value(value: Any) -> str:
    """``value`` in Hydra's override grammar (strings quoted, lists and dicts as ``[...]`` and ``{...}``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ",".join(override_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{override_value(v)}" for k, v in value.items()) + "}"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def launch_description(graph: str) -> Any:
    """The ROS 2 ``LaunchDescription`` of a graph, for the files in ``launch/`` (needs a full ROS 2
    install: ``launch`` is not on PyPI). ``overrides:="key=value ..."`` passes Hydra overrides."""
    from launch.actions import DeclareLaunchArgument, EmitEvent, ExecuteProcess, OpaqueFunction, RegisterEventHandler
    from launch.event_handlers import OnProcessExit
    from launch.events import Shutdown
    from launch.events.process import ShutdownProcess
    from launch.substitutions import LaunchConfiguration

    from launch import LaunchDescription
    from robot_rl.core.composed_config import load_config

    def nodes(context):
        overrides = [f"graph={graph}", *LaunchConfiguration("overrides").perform(context).split()]
        cfg = load_config(overrides)
        env = ros_environment(cfg.ros)
        specs = graph_nodes(cfg)
        processes = {
            node.name: ExecuteProcess(
                cmd=node.command(overrides), name=node.name, output="screen", respawn=node.respawn, additional_env=env
            )
            for node in specs
        }
        robots, ended = {node.robot for node in specs if node.robot}, set()

        def end_robot(robot: str) -> list:
            """As the Launcher: a required node's exit ends its robot; the last robot's, the launch."""
            ended.add(robot)
            stop = [
                EmitEvent(
                    event=ShutdownProcess(process_matcher=lambda action, name=node.name: action is processes[name])
                )
                for node in specs
                if node.robot == robot
            ]
            return [*stop, EmitEvent(event=Shutdown())] if ended == robots else stop

        actions = list(processes.values())
        for node in specs:
            if node.required:
                on_exit = (
                    (lambda event, context, robot=node.robot: end_robot(robot))
                    if node.robot
                    else [EmitEvent(event=Shutdown())]
                )
                actions.append(RegisterEventHandler(OnProcessExit(target_action=processes[node.name], on_exit=on_exit)))
        return actions

    return LaunchDescription(
        [
            DeclareLaunchArgument("overrides", default_value="", description="Hydra overrides, e.g. 'task=reach'"),
            OpaqueFunction(function=nodes),
        ]
    )
