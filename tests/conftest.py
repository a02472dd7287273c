"""Shared test helpers.

Tests that need an optional heavy dependency (rclpy, robosuite, an OpenGL context for MuJoCo
rendering) call :func:`require`: it skips on a developer machine without the dependency but
fails under CI (``CI=true``), where everything must be installed and exercised for real.

Every test gets its own ROS 2 domain id (:func:`ros_domain`, autouse).
"""

from __future__ import annotations

import importlib
import os
import signal
from collections.abc import Iterator

import pytest

from robot_rl.cli.graph import reserved_ros_domain

os.environ.setdefault("MUJOCO_GL", "egl")

IN_CI = os.environ.get("CI", "").lower() == "true"


def require(module: str):
    try:
        return importlib.import_module(module)
    except Exception as error:  # noqa: BLE001 - ImportError, or a wheel whose native libraries are missing
        if IN_CI:
            pytest.fail(f"{module} must be installed in CI: {error!r}")
        pytest.skip(f"{module} not available: {error!r}")


def missing_capability(what: str, error: Exception):
    """Skip locally, fail in CI, when a system capability (e.g. rendering) is missing."""
    if IN_CI:
        pytest.fail(f"{what} must work in CI: {error!r}")
    pytest.skip(f"{what} not available: {error!r}")


def slow_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The test files with a ``slow`` test first, the others after, each part in collection order.

    ``scripts/test.sh`` hands whole files to its workers in this order (``--dist loadfile --no-loadscope-reorder``).
    xdist's own order, the files with the most tests first, left the files of one long test (the node restarts,
    ~80 s; the fault matrix, ~60 s) to the end, where one worker ran them alone while the other had nothing left to
    do. The ~300 s of files without a slow test now fill the other worker's time at the end instead."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    return sorted(items, key=lambda item: item.path not in slow_files)  # sorted is stable: collection order within


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = slow_files_first(items)


@pytest.fixture(autouse=True)
def scheduling_stays_ordinary() -> Iterator[None]:
    """No test may leave the test process real-time: run as root, the SVT-AV1 encoder (the LeRobot test folders'
    AV1 video) switched the calling thread to SCHED_FIFO 99, every node process started later inherited it, and on
    2 cores those busy real-time processes starved the whole suite into a hang."""
    before = os.sched_getscheduler(0)
    yield
    assert os.sched_getscheduler(0) == before, "a test left the test process on a real-time scheduling policy"


@pytest.fixture(autouse=True)
def signal_handlers_restored() -> Iterator[None]:
    """No test may leave the test process with other SIGINT or SIGTERM handlers than it found: a node's clean-up run
    in this process ignores both (``ros.plumbing.node_main``: a second Ctrl-C must not cut it short), and a later test of the
    worker then found Ctrl-C ignored."""
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in before.items():
        if handler is not None and signal.getsignal(number) is not handler:
            signal.signal(number, handler)


@pytest.fixture(autouse=True)
def ros_domain(monkeypatch) -> Iterator[int]:
    """Every test runs in its own ROS 2 domain with localhost-only discovery (the child processes it starts
    inherit both), so parallel test runs, and a live cell on the LAN, never see each other's nodes."""
    with reserved_ros_domain() as domain:  # robot_rl.cli.graph: shared with the benchmarks
        monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        yield domain


# reach made coarser (4 cm steps, 4 cm success radius, 50-step episodes) learns in ~1,500 steps: the budget of the
# tests that assert learning on reach in one process and on a Ray fleet. Networks of 64 units: the default 256 took
# 40% longer and did no better (seeds 0, 1: 0.95 and 0.85 with 256; 1.00 on seeds 0-2 with 64, 2026-11-29)
LEARNING_REACH = [
    "task=reach",
    "task.success_radius=0.04",
    "task.pos_step=0.04",
    "task.episode_steps=50",
    "train.env_steps=2000",
    "train.eval_every=2000",
    "train.final_eval_episodes=20",
    "train.demo_episodes=10",
    "train.batch_size=256",
    "train.start_training=200",
    "agent.utd=2",
    "agent.hidden=[64,64]",
]
