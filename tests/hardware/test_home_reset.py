"""The real cell's reset service, against the sim robot node with its own reset service switched off."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import require
from tests.ros.graph_helpers import tear_down


@pytest.mark.slow
def test_reset_service_brings_the_tcp_home_through_the_safety_node():
    rclpy = require("rclpy")
    from geometry_msgs.msg import PoseStamped
    from std_srvs.srv import SetBool

    from robot_rl.ros.plumbing.messages import pose_to_numpy

    common = ["task=reach", "human.enabled=false", "ros.sim_reset_service=false"]
    processes = [
        subprocess.Popen([sys.executable, "-m", "robot_rl.ros.emulation.sim_robot_node", *common]),
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "robot_rl.ros.safety.safety_node",
                "--rate-hz",
                "200",
                "robot.limits.state_timeout=0.05",
            ]
        ),
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "robot_rl.ros.nodes.home_reset_node",
                *common,
                "reset.position=[0.55,0.1,0.15]",
                "reset.speed=0.2",
            ]
        ),
    ]
    rclpy.init()
    node = rclpy.create_node("robot_rl_test_reset_caller")
    poses = []
    node.create_subscription(
        PoseStamped, "/franka_robot_state_broadcaster/current_pose", lambda m: poses.append(pose_to_numpy(m.pose)), 10
    )
    client = node.create_client(SetBool, "/rl/reset")
    try:
        assert client.wait_for_service(timeout_sec=60)
        end = time.monotonic() + 30
        while len(poses) < 10 and time.monotonic() < end:  # the sim robot's 100 Hz pose reaches the reset node too
            rclpy.spin_once(node, timeout_sec=0.05)
        # between resets the node only keeps the newest pose: rclpy's multi-threaded executor, which served it
        # before, used 0.25-1.0 cores doing so here (it spun between two poses); one thread takes ~0.05
        idle = cpu_seconds(processes[2].pid)
        time.sleep(5.0)
        assert (cpu_seconds(processes[2].pid) - idle) / 5.0 < 0.15
        started = time.monotonic()
        future = client.call_async(SetBool.Request(data=True))
        second = client.call_async(SetBool.Request(data=False))  # while the first runs: refused at once
        rclpy.spin_until_future_complete(node, second, timeout_sec=60)
        assert not future.done() and not second.result().success
        assert second.result().message == "a reset is already running"
        rclpy.spin_until_future_complete(node, future, timeout_sec=60)
        assert future.result().success, future.result().message
        assert time.monotonic() - started > 0.5  # it moved there (>= 0.16 m at 0.2 m/s), no teleport
        poses.clear()
        end = time.monotonic() + 10
        while len(poses) < 20 and time.monotonic() < end:  # the measured pose after the reset answered
            rclpy.spin_once(node, timeout_sec=0.02)
        position, rotation = poses[-1]
        assert np.linalg.norm(position - [0.55, 0.1, 0.15]) < 0.01
        np.testing.assert_allclose(rotation[:, 2], [0, 0, -1], atol=0.05)  # tool pointing down
    finally:
        tear_down(rclpy, node, processes)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far, in seconds (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_bad_reset_settings_are_named():
    result = subprocess.run(
        [sys.executable, "-m", "robot_rl.ros.nodes.home_reset_node", "reset.speed=0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "reset.speed" in result.stderr and "positive speed" in result.stderr
