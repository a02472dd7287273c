"""One import name: the folders ``sim/``, ``policies/``, ``hardware/`` and ``configs/`` install as ``robot_rl.sim``,
``robot_rl.policies``, ``robot_rl.hardware`` and ``robot_rl.configs`` (pyproject.toml's package-dir), so a package of
another project named ``sim`` or ``configs`` neither breaks robot_rl nor is broken by it. Checked from a directory
outside the checkout, for the editable install the tests run on and for a wheel built from the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BARE_NAMES = ("sim", "policies", "hardware", "configs")
PROBE = """
import importlib.resources, importlib.util, json, sys
import robot_rl.ros.emulation.sim_robot_node, robot_rl.sim.tasks.pick_cube, robot_rl.policies.sac, robot_rl.ros.nodes.home_reset_node
from robot_rl.core.composed_config import load_config
cfg = load_config(["task=pick_cube", "agent=cqn"])
configs = importlib.resources.files("robot_rl.configs")
print(json.dumps({
    "bare": {name: importlib.util.find_spec(name) is not None for name in sys.argv[1:]},
    "sim_file": robot_rl.sim.__file__,
    "agent": cfg.agent.entry_point,
    "expert": cfg.task.expert,
    "sros2_policy": (configs / "sros2" / "robot_rl.policy.xml").is_file(),
}))
"""


def probe(cwd: Path, extra_path: Path | None = None) -> dict:
    """Run :data:`PROBE` in a fresh interpreter in ``cwd`` (not the checkout), optionally with ``extra_path`` first
    on ``sys.path``."""
    import json

    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *BARE_NAMES],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def assert_one_import_name(found: dict) -> None:
    assert found["bare"] == dict.fromkeys(BARE_NAMES, False), f"bare names importable: {found['bare']}"
    assert (
        found["agent"] == "robot_rl.policies.cqn:CQNAgent" and found["expert"] == "robot_rl.sim.experts:PickCubeExpert"
    )
    assert found["sros2_policy"], "the SROS2 policy is not installed with robot_rl.configs"


def test_the_installed_checkout_has_one_import_name(tmp_path):
    found = probe(tmp_path)
    assert_one_import_name(found)
    assert Path(found["sim_file"]).resolve() == ROOT / "sim" / "__init__.py"  # the editable install maps the folder


@pytest.mark.slow
def test_a_wheel_of_the_checkout_has_one_import_name(tmp_path):
    """Build a wheel of a copy of the checkout (the build writes beside its sources; no download: setuptools comes
    with the dev extra) and install it alone."""
    source, wheels, site = tmp_path / "source", tmp_path / "wheels", tmp_path / "site"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("robot_rl", "sim", "policies", "hardware", "configs"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))

    def pip(*args) -> None:
        result = subprocess.run(
            [sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=600, check=False
        )
        assert result.returncode == 0, result.stderr[-3000:]

    pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", wheels, source)
    pip("install", "-q", "--no-deps", "--target", site, *wheels.glob("*.whl"))
    names = sorted(path.name for path in site.iterdir() if not path.name.endswith(".dist-info"))
    assert names == ["robot_rl"] or names == ["bin", "robot_rl"], f"the wheel installs {names}"
    found = probe(tmp_path, extra_path=site)
    assert_one_import_name(found)
    assert Path(found["sim_file"]).resolve() == site / "robot_rl" / "sim" / "__init__.py"
    configs = sorted(str(path.relative_to(ROOT / "configs")) for path in (ROOT / "configs").rglob("*.yaml"))
    installed = sorted(
        str(p.relative_to(site / "robot_rl" / "configs")) for p in (site / "robot_rl" / "configs").rglob("*.yaml")
    )
    assert installed == configs  # every config group is in the wheel (Hydra composes from it)
