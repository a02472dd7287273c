"""The layered house: every import of the code (function-local ones too) runs down or sideways, never up, and no
modules import each other round in a circle.

* ground: the folders ``robot_rl/data`` and ``robot_rl/safety`` (the hard layer, the filter, the risk models), and
  geometry, configuration, transport contracts (modules of ``robot_rl``);
* middle: ``robot_rl.sim``, ``robot_rl.policies``, ``robot_rl.hardware`` (simulation, learning algorithms, device
  drivers; the folders ``sim/``, ``policies/``, ``hardware/`` of the checkout);
* top, the drivers: the rest of ``robot_rl`` (training, the ROS nodes in ``robot_rl.ros``, every one of them, the CLI,
  the graph launcher).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {  # folder of the checkout -> the package it installs as (pyproject.toml's package-dir)
    "robot_rl": "robot_rl",
    "sim": "robot_rl.sim",
    "policies": "robot_rl.policies",
    "hardware": "robot_rl.hardware",
    "configs": "robot_rl.configs",
}
GROUND = (
    "robot_rl",
    "robot_rl.blas",
    "robot_rl.checkpoint",
    "robot_rl.composed_config",
    "robot_rl.config",
    "robot_rl.configs",
    "robot_rl.data",
    "robot_rl.folders",
    "robot_rl.geometry",
    "robot_rl.interrupts",
    "robot_rl.observation_keys",
    "robot_rl.transport",
)
MIDDLE = ("robot_rl.sim", "robot_rl.policies", "robot_rl.hardware")
LAYER_NAMES = ("ground", "middle", "top")


def modules() -> dict[str, Path]:
    """Dotted module name (as installed) -> file, for every module of the code."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            found[".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])] = path
    return found


def layer(module: str) -> int:
    """0 ground, 1 middle, 2 top."""

    def within(prefixes, exact=False):
        return any(module == p or (not exact and module.startswith(p + ".")) for p in prefixes)

    if within(GROUND, exact=True) or within(("robot_rl.data", "robot_rl.safety")):
        return 0
    return 1 if within(MIDDLE) else 2


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


def test_no_import_cycle():
    assert cycles(imports(modules())) == []


def test_the_checks_see_what_they_guard():
    """The parser finds function-local and relative imports, and the checks fail on an upward import and a cycle."""
    known = modules()
    edges = imports(known)
    assert "robot_rl.composed_config" in edges["robot_rl.graph"]  # a function-local import
    assert "robot_rl.ros.qos" in edges["robot_rl.ros.topic_env"]  # `from . import qos`
    assert "robot_rl.sim.controller" in edges["robot_rl.sim.panda_env"]  # inside a mapped folder
    assert layer("robot_rl.data.episode_store") == 0 and layer("robot_rl.policies.sac") == 1
    assert layer("robot_rl.ros.sim_robot_node") == 2
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
