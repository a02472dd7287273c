"""The operator console in a real browser: Debian's Chromium, headless, driven by Selenium through chromium-driver,
against live nodes over DDS (a sim robot on reach with one camera, the safety node, the console node).

``ROBOT_RL_SCREENSHOT=docs/console.png pytest -k console`` also saves the page as the browser drew it."""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from robot_rl.safety import Violation
from tests.conftest import missing_capability, require
from tests.ros.graph_helpers import Graph

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"  # Debian's chromium, chromium-driver
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,720",
)
TOKEN = "console-test-token-0123456789"
WAIT = 60.0  # s: the longest any event of these tests is waited for (a loaded 2-core CI machine)
GRAPH = [
    "task=reach",
    "task.cameras=[front]",
    "task.image_size=64",
    "human.enabled=false",
    "train.demo_episodes=0",
    "ros.sim_time=false",  # the sim robot renders its camera on the wall clock, with no actor to step it
    "graph.console=true",
    "console.port=0",  # any free port: read from the console's log
    f"console.token={TOKEN}",
]


def chromium(folder: Path):
    """A headless Chromium with a fresh profile in ``folder``, driven through chromium-driver."""
    webdriver = require("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            missing_capability(f"{path} (apt-get install chromium chromium-driver; scripts/setup.sh as root)", None)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={folder}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


class Probe:
    """The test's own ROS node: what arrives on the console's and the safety node's topics, with arrival times."""

    def __init__(self, rclpy):
        from std_msgs.msg import Bool, String, UInt32

        from robot_rl.ros import qos

        self.rclpy, self.node = rclpy, rclpy.create_node("robot_rl_test_console_probe")
        self.seen: dict[str, list] = {"/rl/success": [], "/rl/operator_label": [], "/rl/estop": [], "flags": []}
        for topic in ("/rl/success", "/rl/operator_label", "/rl/estop"):
            self.node.create_subscription(Bool, topic, lambda m, t=topic: self.seen[t].append(m.data), 50)
        self.node.create_subscription(UInt32, "/rl/safety_flags", lambda m: self.seen["flags"].append(m.data), 50)
        self.records = self.node.create_publisher(String, "/rl/episode_stats", qos.EPISODE_LOG)

    def until(self, condition, what: str, timeout: float = WAIT):
        """Spin until ``condition()`` is truthy; returns it, else fails naming ``what``."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.02)
            value = condition()
            if value:
                return value
        raise AssertionError(f"{what}: not within {timeout:g} s")

    def spin(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.rclpy.spin_once(self.node, timeout_sec=0.02)

    def publish_record(self, **record) -> None:
        from std_msgs.msg import String

        self.records.publish(String(data=json.dumps({"weights": 1, "learner_session": "s", **record})))


def console_address(graph: Graph, probe: Probe) -> str:
    """The console's http://host:port, once its log says where it listens."""
    found = probe.until(lambda: re.search(r"the console is at (http://[^/\s]+)/", graph.log("console")), "the page")
    return found.group(1)


def post(url: str, token: str | None) -> int:
    """The HTTP status of a POST to ``url`` carrying ``token`` (none: no token header)."""
    headers = {} if token is None else {"X-Console-Token": token}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=b"", headers=headers, method="POST"), timeout=10):
            return 200
    except urllib.error.HTTPError as error:
        return error.code


def page(browser) -> dict:
    return browser.execute_script("return window.robotRlConsole")


@pytest.mark.slow  # a graph of three node processes and a browser
def test_console_in_a_browser_shows_the_camera_the_curves_labels_success_and_holds_the_arm(tmp_path):
    rclpy = require("rclpy")
    from selenium.webdriver.common.by import By

    graph = Graph(tmp_path, GRAPH)
    rclpy.init()
    probe, browser = Probe(rclpy), None
    try:
        for name in ("sim_robot", "safety", "console"):
            graph.start(name)
        address = console_address(graph, probe)
        browser = chromium(tmp_path / "chromium")
        browser.get(f"{address}/#token={TOKEN}")

        # the camera: frames are drawn, and the frame on the page changes (a newer stamp, a new image)
        probe.until(lambda: page(browser)["frames"].get("front", 0) >= 3, "camera frames drawn on the page")
        first = (page(browser)["stamps"]["front"], browser.find_element(By.ID, "cam-front").get_attribute("src"))
        probe.until(
            lambda: (
                (page(browser)["stamps"]["front"], browser.find_element(By.ID, "cam-front").get_attribute("src"))
                != first
            ),
            "a newer camera frame on the page",
        )
        probe.until(lambda: (page(browser)["telemetry"] or {}).get("pose"), "the TCP pose on the page")

        # the curves: episode records as the actor sends them, then an evaluation redraws the curve
        for episode in range(1, 31):
            probe.publish_record(
                kind="train", episode=episode, env_steps=40 * episode, success=episode % 3 != 0, length=40,
                interventions=max(0, 20 - episode), **{"return": 1.0},
            )  # fmt: skip
        probe.until(lambda: len(page(browser)["records"]) >= 30, "the episode records on the page")
        before = browser.execute_script("return document.getElementById('curves').toDataURL()")
        probe.publish_record(kind="eval", episode=30, env_steps=1200, success_rate=0.8)
        probe.until(lambda: any(r["kind"] == "eval" for r in page(browser)["records"]), "the evaluation on the page")
        assert browser.execute_script("return document.getElementById('curves').toDataURL()") != before

        # success: the button's label and the success mark reach their topics
        probe.until(lambda: probe.node.count_publishers("/rl/operator_label") >= 1, "the console's label publisher")
        probe.spin(1.0)  # matched both ways: a label sent now arrives
        assert True not in probe.seen["/rl/success"]  # reach from its start pose, no actor: no success yet
        browser.find_element(By.CSS_SELECTOR, "button[data-action=success]").click()
        probe.until(lambda: True in probe.seen["/rl/operator_label"], "the operator's label on /rl/operator_label")
        probe.until(lambda: True in probe.seen["/rl/success"], "the success mark on /rl/success")
        if os.environ.get("ROBOT_RL_SCREENSHOT"):
            browser.save_screenshot(os.environ["ROBOT_RL_SCREENSHOT"])

        # hold (key h): the safety node's flags say ESTOP, and the page says who drives: hold
        estop = int(Violation.ESTOP)
        probe.until(lambda: probe.seen["flags"], "the safety node's flags")
        assert not probe.seen["flags"][-1] & estop
        browser.find_element(By.TAG_NAME, "body").send_keys("h")
        probe.until(lambda: probe.seen["flags"] and probe.seen["flags"][-1] & estop, "ESTOP on /rl/safety_flags")
        probe.until(lambda: browser.find_element(By.ID, "driver").text == "hold", "hold on the page")
        assert "ESTOP" in browser.find_element(By.ID, "violations").text
        # release (key r): the safety node obeys the console, one of its default operators
        browser.find_element(By.TAG_NAME, "body").send_keys("r")
        probe.until(lambda: not probe.seen["flags"][-1] & estop, "the hold released")
        assert graph.processes["console"].poll() is None and graph.processes["safety"].poll() is None
    finally:
        if browser is not None:
            browser.quit()
        graph.stop()
        probe.node.destroy_node()
        rclpy.shutdown()


def test_console_refuses_a_wrong_or_missing_token_with_403_and_publishes_nothing(tmp_path):
    rclpy = require("rclpy")
    from selenium.webdriver.common.by import By

    graph = Graph(tmp_path, GRAPH)
    rclpy.init()
    probe, browser = Probe(rclpy), None
    try:
        graph.start("console")
        address = console_address(graph, probe)
        probe.until(lambda: probe.node.count_publishers("/rl/estop") >= 1, "the console's publisher on /rl/estop")
        probe.spin(1.0)  # matched both ways: a message sent now would arrive
        assert post(f"{address}/api/hold", None) == 403
        assert post(f"{address}/api/hold", "wrong-token-wrong-token") == 403
        assert post(f"{address}/api/success", TOKEN[:-1]) == 403

        browser = chromium(tmp_path / "chromium")  # the page opened with a wrong token: its controls are refused
        browser.get(f"{address}/#token=wrong-token-wrong-token")
        browser.find_element(By.TAG_NAME, "body").send_keys("h")
        probe.until(lambda: "403" in browser.find_element(By.ID, "message").text, "the page saying 403")
        assert page(browser)["frames"] == {} and page(browser)["telemetry"] is None  # no stream without the token
        probe.spin(2.0)
        assert probe.seen["/rl/estop"] == [] and probe.seen["/rl/operator_label"] == []

        assert post(f"{address}/api/hold", TOKEN) == 200  # the same probe hears the right token's hold
        probe.until(lambda: probe.seen["/rl/estop"] == [True], "the hold with the right token")
    finally:
        if browser is not None:
            browser.quit()
        graph.stop()
        probe.node.destroy_node()
        rclpy.shutdown()


def test_console_settings_and_graphs():
    from robot_rl.composed_config import load_config
    from robot_rl.config import ConfigError
    from robot_rl.graph import graph_nodes

    def names(*overrides: str) -> list[str]:
        return [node.name for node in graph_nodes(load_config(list(overrides)))]

    assert "console" in names("graph=real_train") and "console" in names("graph=collect_demos")
    assert "console" not in names("graph=sim_train") and "console" in names("graph=sim_train", "graph.console=true")
    assert "console" not in names("graph=real_train", "graph.console=false")
    with pytest.raises(ConfigError, match="graph.console"):
        names("graph=sim_train", "graph.console=yes")
    require("rclpy")
    from robot_rl.cli import main
    from robot_rl.ros.console_node import console_settings, violation_names

    assert violation_names(int(Violation.ESTOP | Violation.STALE_COMMAND)) == ["STALE_COMMAND", "ESTOP"]
    settings = console_settings(load_config([]).console)
    assert settings.host == "127.0.0.1" and len(settings.token) >= 16  # a random token when none is given
    for bad in ("console.host=localhost", "console.port=70000", "console.token=short", "console.jpeg_quality=0"):
        assert main(["console", bad]) == 2, bad
