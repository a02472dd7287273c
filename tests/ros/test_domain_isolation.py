"""ROS 2 isolation: every test in its own domain (tests/conftest.py ``ros_domain``), every launch in its cell's
domain with localhost-only discovery unless the LAN is asked for (robot_rl.cli.graph.ros_environment)."""

import fcntl
import io
import os
import subprocess
import sys
import textwrap
import time

import pytest

from robot_rl.cli.graph import Launcher, NodeSpec, reserved_ros_domain, ros_environment
from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from tests.conftest import require
from tests.ros.graph_helpers import stop_processes

TALKER = textwrap.dedent(
    """
    import sys
    import rclpy
    from std_msgs.msg import Empty
    rclpy.init()
    node = rclpy.create_node(sys.argv[1])
    node.create_publisher(Empty, "/rl/action", 1)
    rclpy.spin(node)
    """
)


def test_each_test_holds_its_own_domain_with_localhost_discovery(ros_domain):
    assert os.environ["ROS_DOMAIN_ID"] == str(ros_domain)
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    # what a parallel pytest would try
    with open(f"/tmp/robot_rl_ros_domain_{ros_domain}.lock", "a") as other, pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    with reserved_ros_domain() as second:
        assert second != ros_domain


@pytest.mark.slow  # talker processes over DDS
def test_nodes_in_different_domains_do_not_see_each_other(ros_domain):
    rclpy = require("rclpy")
    with reserved_ros_domain() as other:
        processes = [
            subprocess.Popen([sys.executable, "-c", TALKER, "robot_rl_same_cell"]),
            subprocess.Popen(
                [sys.executable, "-c", TALKER, "robot_rl_other_cell"], env={**os.environ, "ROS_DOMAIN_ID": str(other)}
            ),
        ]
        rclpy.init()
        node = rclpy.create_node("robot_rl_test_observer")
        try:

            def publishers():
                return {info.node_name for info in node.get_publishers_info_by_topic("/rl/action")}

            end = time.monotonic() + 30
            while "robot_rl_same_cell" not in publishers() and time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
            assert "robot_rl_same_cell" in publishers()  # discovery works here ...
            end = time.monotonic() + 2
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
            assert "robot_rl_other_cell" not in publishers()  # ... and does not reach into the other domain
            assert "robot_rl_other_cell" not in node.get_node_names()
        finally:
            stop_processes(processes)
            node.destroy_node()
            rclpy.shutdown()


@pytest.mark.slow
def test_the_launcher_starts_every_node_in_the_cell_domain_and_stops_it_within_the_grace(ros_domain):
    rclpy = require("rclpy")
    from rclpy.context import Context

    with reserved_ros_domain() as cell:
        env = ros_environment(load_config([f"ros.domain_id={cell}"]).ros)
        assert env == {"ROS_DOMAIN_ID": str(cell), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
        out = io.StringIO()
        launcher = Launcher(
            [NodeSpec(name="safety", module="robot_rl.ros.safety.safety_node", hydra=False)],
            [],
            grace=5.0,
            out=out,
            env=env,
        )
        contexts = {"cell": Context(), "test": Context()}
        rclpy.init(context=contexts["cell"], domain_id=cell)
        rclpy.init(context=contexts["test"])  # the test's own domain, from the environment
        nodes = {
            name: rclpy.create_node("robot_rl_test_observer", context=context) for name, context in contexts.items()
        }
        try:
            launcher.start(launcher.nodes[0])
            end = time.monotonic() + 30
            while "robot_rl_safety" not in nodes["cell"].get_node_names() and time.monotonic() < end:
                time.sleep(0.1)
            assert "robot_rl_safety" in nodes["cell"].get_node_names()
            assert "robot_rl_safety" not in nodes["test"].get_node_names()
            stopping = time.monotonic()
            launcher.stop()
            assert time.monotonic() - stopping < 5.0 and launcher.processes["safety"].returncode == 0
            time.sleep(0.2)  # the relay thread prints the last lines
            assert "did not stop" not in out.getvalue() and "Traceback" not in out.getvalue()
        finally:
            stop_processes(list(launcher.processes.values()))
            for name, node in nodes.items():
                node.destroy_node()
                rclpy.shutdown(context=contexts[name])


def test_the_domain_comes_from_the_shell_unless_configured(monkeypatch):
    ros = load_config([]).ros
    monkeypatch.setenv("ROS_DOMAIN_ID", "42")
    assert ros_environment(ros) == {"ROS_DOMAIN_ID": "42", "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    monkeypatch.delenv("ROS_DOMAIN_ID")
    assert ros_environment(ros)["ROS_DOMAIN_ID"] == "0"
    lan = load_config(["ros.domain_id=230", "ros.discovery=subnet"]).ros
    assert ros_environment(lan) == {"ROS_DOMAIN_ID": "230", "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}
    monkeypatch.setenv("ROS_DOMAIN_ID", "150")
    with pytest.raises(ConfigError, match=r"^ROS_DOMAIN_ID=150 is not allowed"):
        ros_environment(ros)


@pytest.mark.parametrize(
    "override, expected",
    [
        ("ros.domain_id=150", "ros.domain_id=150 is not allowed: expected an integer in 0..101 or 215..232"),
        ("ros.domain_id=-1", "ros.domain_id=-1 is not allowed"),
        ("ros.domain_id=cell7", "ros.domain_id='cell7' is not allowed"),
        ("ros.discovery=lan", "ros.discovery='lan' is not allowed: expected one of localhost, subnet"),
    ],
)
def test_bad_ros_isolation_settings_are_named(capsys, override, expected):
    from robot_rl.cli.main import main

    code = main(["launch", "sim_train", override])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and "[launch] started" not in captured.out
    assert len(lines) == 1 and lines[0].startswith("robot-rl: error: ") and expected in lines[0]
