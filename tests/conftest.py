"""Shared test helpers.

Tests that need an optional heavy dependency (rclpy, robosuite, an OpenGL context for MuJoCo
rendering) call :func:`require`: it skips on a developer machine without the dependency but
fails under CI (``CI=true``), where everything must be installed and exercised for real.

Every test gets its own ROS 2 domain id (:func:`ros_domain`, autouse).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import os
import random
from collections.abc import Iterator

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")

IN_CI = os.environ.get("CI", "").lower() == "true"


def require(module: str):
    try:
        return importlib.import_module(module)
    except Exception as error:  # ImportError, or a wheel whose native libraries are missing
        if IN_CI:
            pytest.fail(f"{module} must be installed in CI: {error!r}")
        pytest.skip(f"{module} not available: {error!r}")


def missing_capability(what: str, error: Exception):
    """Skip locally, fail in CI, when a system capability (e.g. rendering) is missing."""
    if IN_CI:
        pytest.fail(f"{what} must work in CI: {error!r}")
    pytest.skip(f"{what} not available: {error!r}")


# ROS 2 domain ids a test may take (Linux): 1..101 and 215..232. 0, the default of every ROS install, is left to
# live cells; the fcntl lock on /tmp/robot_rl_ros_domain_<id>.lock makes an id unique across pytest processes too.
ROS_DOMAIN_IDS = (*range(1, 102), *range(215, 233))


@contextlib.contextmanager
def reserved_ros_domain() -> Iterator[int]:
    """A ROS 2 domain id no other test on this machine holds, for the duration of the block."""
    start = random.randrange(len(ROS_DOMAIN_IDS))  # spread the ids, so a domain freed a moment ago rests a while
    for offset in range(len(ROS_DOMAIN_IDS)):
        domain = ROS_DOMAIN_IDS[(start + offset) % len(ROS_DOMAIN_IDS)]
        handle = open(f"/tmp/robot_rl_ros_domain_{domain}.lock", "a")
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
    raise RuntimeError(f"all {len(ROS_DOMAIN_IDS)} ROS 2 domain ids are held by other tests on this machine")


@pytest.fixture(autouse=True)
def ros_domain(monkeypatch) -> Iterator[int]:
    """Every test runs in its own ROS 2 domain with localhost-only discovery (the child processes it starts
    inherit both), so parallel test runs, and a live cell on the LAN, never see each other's nodes."""
    with reserved_ros_domain() as domain:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
        yield domain
