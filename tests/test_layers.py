"""The layered house: every import of the code (function-local ones too) runs down or sideways, never up, and no
modules import each other round in a circle. A module's floor is its folder, nothing else:

0. ground: ``robot_rl/core`` (configuration, geometry, the checkpoint format, the transport contract),
   ``robot_rl/data`` (episode store, replay, the wire format), ``robot_rl/safety`` (the hard layer, the filter, the
   risk models) and the packaged ``configs/``;
1. middle: ``robot_rl.sim``, ``robot_rl.policies``, ``robot_rl.hardware`` (simulation, learning algorithms, device
   drivers; the folders ``sim/``, ``policies/``, ``hardware/`` of the checkout);
2. runtime: ``robot_rl/runtime`` (the training loops, the actor, the learner, collection; no ROS);
3. drivers: ``robot_rl/ros`` (every node, in rooms: ROS_ROOMS below) and ``robot_rl/cli`` (the command line, the graph launcher).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {  # folder of the checkout -> the package it installs as (pyproject.toml's package-dir)
    "robot_rl": "robot_rl",
    "sim": "robot_rl.sim",
    "policies": "robot_rl.policies",
    "hardware": "robot_rl.hardware",
    "configs": "robot_rl.configs",
}
FLOORS = (  # the packages of each floor, bottom up: a module belongs to the floor of its package
    ("robot_rl.core", "robot_rl.data", "robot_rl.safety", "robot_rl.configs"),
    ("robot_rl.sim", "robot_rl.policies", "robot_rl.hardware"),
    ("robot_rl.runtime",),
    ("robot_rl.ros", "robot_rl.cli"),
)
LAYER_NAMES = ("ground", "middle", "runtime", "drivers")


def modules() -> dict[str, Path]:
    """Dotted module name (as installed) -> file, for every module of the code."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            found[".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])] = path
    return found


def layer(module: str) -> int:
    """The floor of a module: 0 ground .. 3 drivers. The package ``robot_rl`` itself is ground; a module outside every
    floor's folder has no floor, and the test that every module has one fails on it."""
    if module == "robot_rl":
        return 0
    for floor, packages in enumerate(FLOORS):
        if any(module == p or module.startswith(p + ".") for p in packages):
            return floor
    raise ValueError(f"{module} lies in no floor's folder ({FLOORS})")


def imports(known: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of the code it imports anywhere in its file (a package's own
    ``__init__`` counts only when the import names the package itself)."""
    edges: dict[str, set[str]] = {}
    for module, path in known.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = module.split(".")[: len(module.split(".")) - node.level + is_package] if node.level else []
                prefix = ".".join([*base, *([node.module] if node.module else [])])
                names = [
                    f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix for alias in node.names
                ]
            else:
                continue
            for name in names:
                while name and name not in known:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    targets.add(name)
        edges[module] = targets
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in edges.get(module, ()):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return found


def test_no_import_runs_up_a_layer():
    edges = imports(modules())
    upward = sorted(
        f"{module} ({LAYER_NAMES[layer(module)]}) imports {target} ({LAYER_NAMES[layer(target)]})"
        for module, targets in edges.items()
        for target in targets
        if layer(target) > layer(module)
    )
    assert not upward, "\n".join(upward)


def test_every_module_lies_in_a_floors_folder():
    """No flat module beside the floors: robot_rl/ holds only its __init__ and the floors' folders."""
    homeless = []
    for module in modules():
        try:
            layer(module)
        except ValueError:
            homeless.append(module)
    assert homeless == []


def test_no_import_cycle():
    assert cycles(imports(modules())) == []


def core_imports_outside_core(edges: dict[str, set[str]]) -> list[str]:
    """The imports by a module of ``robot_rl.core`` of a module outside it (the package ``robot_rl`` aside)."""

    def in_core(name: str) -> bool:
        return name == "robot_rl.core" or name.startswith("robot_rl.core.")

    return sorted(
        f"{module} imports {target}"
        for module, targets in edges.items()
        if in_core(module)
        for target in targets
        if target != "robot_rl" and not in_core(target)
    )


def test_core_is_the_bottom_of_the_ground_floor():
    """On the ground floor ``core`` (the config, the transport contract, the checkpoint format) lies under ``data``
    and ``safety``, which build on it: it imports nothing of theirs (the transport carries transitions without
    naming their type; the ledger that reads them lives in data)."""
    assert core_imports_outside_core(imports(modules())) == []


def test_the_checks_see_what_they_guard():
    """The parser finds function-local and relative imports, and the checks fail on an upward import and a cycle."""
    known = modules()
    edges = imports(known)
    assert "robot_rl.core.composed_config" in edges["robot_rl.cli.graph"]  # a function-local import
    assert "robot_rl.ros.plumbing.qos" in edges["robot_rl.ros.links.topic_env"]  # `from . import qos`
    assert "robot_rl.sim.controller" in edges["robot_rl.sim.panda_env"]  # inside a mapped folder
    assert layer("robot_rl.data.episode_store") == 0 and layer("robot_rl.policies.sac") == 1
    assert layer("robot_rl.runtime.learner") == 2 and layer("robot_rl.ros.emulation.sim_robot_node") == 3
    assert layer("robot_rl.cli.main") == 3 and layer("robot_rl.core.config") == 0
    with pytest.raises(ValueError, match="no floor"):
        layer("robot_rl.somewhere_flat")
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert core_imports_outside_core(
        {"robot_rl.core.transport": {"robot_rl.data.transition", "robot_rl.core.config"}}
    ) == ["robot_rl.core.transport imports robot_rl.data.transition"]


#: processes that never run a network: a refused command line, the launcher and the nodes that only move or record
#: messages start without torch (importing it took ~2.5 s of CPU and ~200 MB per process)
WITHOUT_TORCH = (
    "robot_rl.cli.main",
    "robot_rl.cli.graph",
    "robot_rl.ros.safety.safety_node",
    "robot_rl.ros.emulation.sim_robot_node",
    "robot_rl.ros.nodes.recorder_node",
    "robot_rl.ros.nodes.teleop_node",
    "robot_rl.ros.nodes.realsense_node",
    "robot_rl.ros.console.console_node",
)


def test_a_refused_command_line_the_launcher_and_the_message_nodes_never_import_torch(tmp_path):
    import subprocess
    import sys

    (tmp_path / "user_file.txt").write_text("a user's file")
    refused = [  # an unknown task; a bad train value, a folder of the user's, a resume of no run: before torch too
        ["train", "task=nope"],
        ["train", "train.batch_size=0"],
        ["train", f"train.run_dir={tmp_path}"],
        ["train", "train.resume=true", f"train.run_dir={tmp_path / 'nothing_here'}"],
    ]
    script = (
        "import sys\n"
        + "".join(f"import {module}\n" for module in WITHOUT_TORCH)
        + "from robot_rl.cli.main import main\n"
        + "".join(f"assert main({args!r}) == 2\n" for args in refused)
        + "print(sorted(name for name in sys.modules if name.split('.')[0] == 'torch')[:3])\n"
    )
    result = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", (result.stdout, result.stderr[-2000:])


CONFIG_LIBRARY = ("omegaconf", "hydra")
CONFIG_LIBRARY_READERS = {  # the modules below the drivers that may import the config library, and why
    "robot_rl.core.composed_config": "composes the config, reads and writes a run folder's config.yaml",
}


def library_imports(path: Path) -> set[str]:
    """The top-level packages of everything ``path`` imports (function-local imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_below_the_drivers_a_config_is_a_mapping():
    """Issue 53: the config turned into typed settings at the edge. Below the command line and the nodes (and the
    hardware drivers' nodes' helpers) only the loader knows the config library; everything else reads a config as a
    mapping, so a Ray actor or an env worker runs on plain dicts and no floor below the drivers depends on OmegaConf's
    types."""
    known = modules()
    below = {m: p for m, p in known.items() if layer(m) < 3 and not m.startswith("robot_rl.hardware")}
    readers = {m for m, p in below.items() if library_imports(p) & set(CONFIG_LIBRARY)}
    assert readers <= set(CONFIG_LIBRARY_READERS), sorted(readers - set(CONFIG_LIBRARY_READERS))
    assert "robot_rl.core.composed_config" in readers  # the check sees an import it guards
    named = [m for m, p in below.items() if "DictConfig" in p.read_text()]
    assert named == [], named


MAX_MODULE_LINES = 600  # issue 77: a module a reader takes in whole


def test_no_module_is_longer_than_a_reader_takes_in_whole():
    long = sorted(
        f"{path.relative_to(ROOT)}: {lines} lines"
        for path in modules().values()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    )
    assert not long, long


#: the rooms of ``robot_rl/ros``, bottom up: a room's modules import only from its own room and the rooms below it
ROS_ROOMS = ("plumbing", "safety", "links", "nodes", "emulation", "console")
MAX_ROOM_LINES = 3000  # issue 77: lines in the files directly inside one folder of ros/


def ros_room(module: str) -> int:
    """The room of a module of ``robot_rl.ros`` (its index in ROS_ROOMS); ``robot_rl.ros`` itself is below them all."""
    parts = module.split(".")
    if parts[:2] != ["robot_rl", "ros"]:
        raise ValueError(f"{module} is not in robot_rl.ros")
    if len(parts) == 2:
        return -1
    if parts[2] not in ROS_ROOMS:
        raise ValueError(f"{module} lies in no room of robot_rl/ros ({ROS_ROOMS})")
    return ROS_ROOMS.index(parts[2])


def upward_room_imports(edges: dict[str, set[str]]) -> list[str]:
    """``module imports target`` for every import of a ROS module from a room above its own."""
    return sorted(
        f"{module} ({ROS_ROOMS[ros_room(module)]}) imports {target} ({ROS_ROOMS[ros_room(target)]})"
        for module, targets in edges.items()
        if module.startswith("robot_rl.ros.")
        for target in targets
        if target.startswith("robot_rl.ros.") and ros_room(target) > ros_room(module)
    )


def test_ros_lives_in_rooms_that_import_only_downwards():
    """Every module of ``robot_rl/ros`` lies in a room (none flat beside them), no room imports from a room above it,
    and no room's own files hold more than MAX_ROOM_LINES lines."""
    known = modules()
    ros = [module for module in known if module.startswith("robot_rl.ros.")]
    homeless = [module for module in ros if module.split(".")[2] not in ROS_ROOMS]
    assert homeless == [], homeless
    assert upward_room_imports(imports(known)) == []
    sizes = {
        room: sum(len(path.read_text().splitlines()) for path in (ROOT / "robot_rl" / "ros" / room).glob("*.py"))
        for room in ROS_ROOMS
    }
    assert max(sizes.values()) <= MAX_ROOM_LINES, sizes


def test_the_room_check_sees_an_upward_import():
    edges = {"robot_rl.ros.plumbing.qos": {"robot_rl.ros.nodes.actor_node"}, "robot_rl.ros.nodes.actor_node": set()}
    assert upward_room_imports(edges) == [
        "robot_rl.ros.plumbing.qos (plumbing) imports robot_rl.ros.nodes.actor_node (nodes)"
    ]
    assert ros_room("robot_rl.ros") == -1
    with pytest.raises(ValueError, match="no room"):
        ros_room("robot_rl.ros.flat_module")
