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

import numpy as np
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
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": CANVAS_TEXTS})
    return browser


# before the page's own script: every text drawn on a canvas, by canvas id (the curves' axis labels)
CANVAS_TEXTS = """
window.canvasTexts = {};
const fillText = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (text, ...rest) {
  (window.canvasTexts[this.canvas.id] = window.canvasTexts[this.canvas.id] || []).push(String(text));
  return fillText.call(this, text, ...rest);
};
"""
# every <img> the page displays either shows a decoded image or is none: no broken image
BROKEN_IMAGES = """
return Array.from(document.querySelectorAll("img"))
  .filter((img) => img.offsetParent !== null && !(img.complete && img.naturalWidth > 0))
  .map((img) => img.id || img.alt);
"""


# a node of the page's node list: [its classes, its text], null when the list has none of that name
NODE_ON_PAGE = """
const node = document.querySelector(`#nodes [data-node="${arguments[0]}"]`);
return node && [node.className, node.textContent];
"""


def listed_nodes(browser) -> list[str]:
    """The names of the page's node list."""
    return browser.execute_script(
        "return [...document.querySelectorAll('#nodes [data-node]')].map(n => n.dataset.node)"
    )


def canvas_texts(browser, canvas: str) -> list[str]:
    """The texts the page drew on ``canvas`` since it loaded (every redraw's)."""
    return browser.execute_script("return window.canvasTexts[arguments[0]] || []", canvas)


class Probe:
    """The test's own ROS node: what arrives on the console's and the safety node's topics, with arrival times."""

    def __init__(self, rclpy):
        from sensor_msgs.msg import Image
        from std_msgs.msg import Bool, Empty, String, UInt32

        from robot_rl.ros.plumbing import qos
        from robot_rl.ros.plumbing.messages import seconds

        self.rclpy, self.node = rclpy, rclpy.create_node("robot_rl_test_console_probe")
        self.seen: dict[str, list] = {
            "/rl/success": [], "/rl/operator_label": [], "/rl/estop": [], "flags": [], "/rl/pause": [],
            "/rl/checkpoint_now": [], "/rl/stop": [],
        }  # fmt: skip
        for topic in ("/rl/success", "/rl/operator_label", "/rl/estop"):
            self.node.create_subscription(Bool, topic, lambda m, t=topic: self.seen[t].append(m.data), 50)
        self.node.create_subscription(Bool, "/rl/pause", lambda m: self.seen["/rl/pause"].append(m.data), qos.LATCHED)
        for topic in ("/rl/checkpoint_now", "/rl/stop"):
            self.node.create_subscription(Empty, topic, lambda m, t=topic: self.seen[t].append(True), 50)
        self.node.create_subscription(UInt32, "/rl/safety_flags", lambda m: self.seen["flags"].append(m.data), 50)
        self.records = self.node.create_publisher(String, "/rl/episode_stats", qos.EPISODE_LOG)
        self.progress = self.node.create_publisher(String, "/rl/learner_progress", qos.EVENT)
        from geometry_msgs.msg import Twist

        self.twist = self.node.create_publisher(Twist, "/spacenav/twist", qos.STREAM_PUBLISHER)
        self.frames: dict[float, Image] = {}  # the camera's newest frames by stamp (s)

        def keep(msg):
            self.frames[seconds(msg.header.stamp)] = msg
            while len(self.frames) > 300:
                del self.frames[next(iter(self.frames))]

        self.node.create_subscription(Image, "/camera/front/color/image_raw", keep, qos.STREAM_SUBSCRIBER)

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


def request(url: str, token: str | None, method: str = "POST") -> tuple[int, bytes]:
    """The HTTP status and body of a request to ``url`` carrying ``token`` (none: no token header)."""
    headers = {} if token is None else {"X-Console-Token": token}
    data = b"" if method == "POST" else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers, method=method), timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def post(url: str, token: str | None) -> int:
    """The HTTP status of a POST to ``url`` carrying ``token`` (none: no token header)."""
    return request(url, token)[0]


def recorded_store(path: Path) -> str:
    """Two recorded episodes of a 16x16 front camera, the second labelled failure by the operator; returns a digest
    of every file of the store (the console reads it and must change nothing)."""

    import numpy as np

    from robot_rl.data import EpisodeStore

    meta = {"task": "reach", "observation_shapes": {"front": [16, 16, 3]}, "action_dim": 4, "control_rate_hz": 10}
    store = EpisodeStore.create(path, meta)
    for episode, label in enumerate((None, False)):
        writer = store.writer()
        writer.start({"front": np.zeros((16, 16, 3), np.uint8)})
        for t in range(5):
            frame = np.full((16, 16, 3), 40 * t + 20 * episode, np.uint8)
            writer.add({"front": frame}, np.full(4, 0.2 * t - 0.4), float(t == 4), t == 4, False, intervened=t == 2)
        writer.commit("online", **({} if label is None else {"operator_label": label}))
    return files_digest(path)


def files_digest(path: Path) -> str:
    import hashlib

    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode() + file.read_bytes())
    return digest.hexdigest()


def page(browser) -> dict:
    return browser.execute_script("return window.robotRlConsole")


POLICY_PIXELS = """
const done = arguments[arguments.length - 1];
const img = document.getElementById("pol-front"), stamp = window.robotRlConsole.policyStamps.front;
const copy = new Image();
copy.onload = () => {
  const canvas = document.createElement("canvas");
  canvas.width = copy.naturalWidth;
  canvas.height = copy.naturalHeight;
  const ctx = canvas.getContext("2d");
  ctx.drawImage(copy, 0, 0);
  done({stamp, width: canvas.width, height: canvas.height,
        rgba: Array.from(ctx.getImageData(0, 0, canvas.width, canvas.height).data)});
};
copy.onerror = () => done(null);  // the next frame revoked this one's address meanwhile: try again
copy.src = img.dataset.url;
"""


SIZES_FOR_TWO_SECONDS = """
const done = arguments[arguments.length - 1], id = arguments[0], sizes = [], end = performance.now() + 2000;
(function sample() {
  const img = document.getElementById(id);
  sizes.push([img.naturalWidth, img.naturalHeight]);
  if (performance.now() < end) setTimeout(sample, 1);
  else done(sizes);
})();
"""


def policy_view(browser, probe: Probe) -> tuple:
    """(the policy's view as the page drew it: HxWx3 RGB, the camera message it came from), once the probe has
    that message."""

    def drawn():
        shown = browser.execute_async_script(POLICY_PIXELS)
        if shown is None or shown["stamp"] not in probe.frames:
            return None
        rgba = np.asarray(shown["rgba"], np.uint8).reshape(shown["height"], shown["width"], 4)
        return rgba[..., :3], probe.frames[shown["stamp"]]

    return probe.until(drawn, "the policy's view of a frame the probe has")


@pytest.mark.slow  # a graph of three node processes and a browser
def test_console_in_a_browser_shows_the_camera_the_curves_labels_success_and_holds_the_arm(tmp_path):
    rclpy = require("rclpy")
    import signal

    from geometry_msgs.msg import Twist
    from selenium.webdriver.common.by import By
    from sensor_msgs.msg import Image
    from std_msgs.msg import String

    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.plumbing.messages import image_msg

    graph = Graph(tmp_path, [*GRAPH, f"train.run_dir={tmp_path / 'run'}"])
    store = tmp_path / "run" / "episodes.zarr"  # ros.recorder.store: the run's episode store
    digest = recorded_store(store)
    rclpy.init()
    probe, browser = Probe(rclpy), None
    try:
        graph.start("sim_robot", "task.image_size=[48,80]")  # the camera sends 80x48; the policy sees 64x64
        for name in ("safety", "console"):
            graph.start(name)
        address = console_address(graph, probe)

        # a camera that sent frames before any page was open, then stopped (a camera_stop fault, a slow camera): the
        # page opened later shows its newest frame at once and says how old it is (the old console kept none, so the
        # page said "no camera frames yet" while it had frames)
        side = "/camera/side/color/image_raw"
        side_camera = probe.node.create_publisher(Image, side, qos.STREAM_PUBLISHER)
        probe.until(lambda: probe.node.count_subscribers(side) >= 1, "the console on the side camera")
        probe.spin(1.0)  # matched both ways
        for n in range(20):
            side_camera.publish(image_msg(np.full((24, 32, 3), 10 * n, np.uint8), time.time(), "side_optical_frame"))
            probe.spin(0.05)

        browser = chromium(tmp_path / "chromium")
        browser.get(f"{address}/#token={TOKEN}")
        # the curves before any record: an axis without a scale, not "1 env steps"
        texts = canvas_texts(browser, "curves")
        assert {"env steps", "no episode yet"} <= set(texts) and "1 env steps" not in texts, texts
        probe.until(lambda: page(browser)["frames"].get("side", 0) >= 1, "the side camera's newest frame on the page")
        assert browser.execute_script("return document.getElementById('cam-side').naturalWidth") == 32
        probe.until(
            lambda: "no new frame for" in browser.find_element(By.ID, "stale-side").text, "the side camera stale"
        )

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
        # who drives: the safety node runs, no actor does, nothing commands the arm (the old page said idle)
        probe.until(lambda: browser.find_element(By.ID, "driver").text == "no actor", "no actor on the badge")

        # the operator's input: three axes at full scale is a full deflection, 1.00 of 0-1 (their norm read 1.73)
        full = Twist()
        full.linear.x = full.linear.y = full.linear.z = 1.0

        def twist_shown():
            probe.twist.publish(full)
            text = browser.find_element(By.ID, "twist").text
            return text not in ("-", "0.00") and text

        assert probe.until(twist_shown, "the operator's input on the page") == "1.00"

        # the policy's view beside it: the actor's own preprocessing (task.image_size 64x64), every pixel as the
        # actor's observation has it, upscaled on the page with nearest-neighbour
        from robot_rl.ros.plumbing.messages import colour_image

        probe.until(lambda: page(browser)["policyFrames"].get("front", 0) >= 2, "the policy's view drawn on the page")
        # every frame is decoded before it is shown: sampled for 2 s while new frames arrive, the camera's view is
        # never a half-loaded 0x0 image (a CI run once read it between two frames)
        sizes = browser.execute_async_script(SIZES_FOR_TWO_SECONDS, "cam-front")
        assert len(sizes) > 10 and {tuple(s) for s in sizes} == {(80, 48)}
        size = (
            "const i = document.getElementById(arguments[0]); return [i.naturalWidth, i.naturalHeight, i.clientWidth]"
        )
        assert browser.execute_script(size, "pol-front") == [64, 64, 192]
        rendering = "return getComputedStyle(document.getElementById('pol-front')).imageRendering"
        assert browser.execute_script(rendering) == "pixelated"
        assert "as the policy sees it 64x64" in browser.find_element(By.ID, "polcap-front").text
        shown, msg = policy_view(browser, probe)
        assert (msg.width, msg.height) == (80, 48) and np.array_equal(shown, colour_image(msg, (64, 64)))

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
        assert "1,200 env steps" in canvas_texts(browser, "curves")  # the axis up to the records' env steps

        # the run: the learner's updates/s and replay sizes (rl/learner_progress), env steps/s and the weights
        # version from the actor's records
        probe.until(lambda: probe.node.count_subscribers("/rl/learner_progress") >= 1, "the console on progress")
        probe.spin(1.0)  # matched both ways
        for updates, online in ((10, 100), (40, 160)):
            progress = {"online": online, "updates": updates, "received": {}, "online_size": online, "demo_size": 50}
            probe.progress.publish(String(data=json.dumps(progress)))
            probe.spin(2.0)
        probe.publish_record(
            kind="train", episode=31, env_steps=1240, success=True, length=40, interventions=0, weights=7,
            **{"return": 1.0},
        )  # fmt: skip
        run = probe.until(
            lambda: (r := page(browser)["telemetry"]["run"])["weights"] == 7 and r["updates_per_s"] and r,
            "the run's figures on the page",
        )
        assert 1.0 < run["updates_per_s"] < 100.0 and run["env_steps_per_s"] > 0
        assert (run["online_size"], run["demo_size"]) == (160, 50)
        assert browser.find_element(By.ID, "replay").text == "160 online, 50 demo"
        assert browser.find_element(By.ID, "weights").text == "7"
        assert float(browser.find_element(By.ID, "updates-rate").text) > 1.0
        assert float(browser.find_element(By.ID, "env-rate").text) > 0

        # success: the button's label and the success mark reach their topics
        probe.until(lambda: probe.node.count_publishers("/rl/operator_label") >= 1, "the console's label publisher")
        probe.spin(1.0)  # matched both ways: a label sent now arrives
        assert True not in probe.seen["/rl/success"]  # reach from its start pose, no actor: no success yet
        browser.find_element(By.CSS_SELECTOR, "button[data-action=success]").click()
        probe.until(lambda: True in probe.seen["/rl/operator_label"], "the operator's label on /rl/operator_label")
        probe.until(lambda: True in probe.seen["/rl/success"], "the success mark on /rl/success")

        # the episode list of the run's store; the chosen episode's recorded frames and its curves
        rows = probe.until(lambda: browser.find_elements(By.CSS_SELECTOR, "#episode-rows tr"), "the episode list")
        assert len(rows) == 2 and "operator: failure" in rows[0].text  # newest first
        blank = browser.execute_script("return document.getElementById('episode-curves').toDataURL()")
        # no episode chosen yet: no frame of it, and no broken image anywhere on the page
        assert not browser.find_element(By.ID, "episode-frame").is_displayed()
        assert browser.execute_script(BROKEN_IMAGES) == []
        rows[0].click()
        probe.until(lambda: page(browser)["episodeFrames"] >= 3, "the chosen episode's frames played on the page")
        assert browser.find_element(By.ID, "episode-frame").is_displayed()
        assert browser.execute_script("return document.getElementById('episode-frame').naturalWidth") == 16
        assert browser.execute_script("return document.getElementById('episode-curves').toDataURL()") != blank
        assert "episode 1" in browser.find_element(By.ID, "episode-title").text
        status, body = request(f"{address}/api/episodes/1/front/4", TOKEN, "GET")
        assert status == 200 and body[:2] == b"\xff\xd8"  # a JPEG
        assert request(f"{address}/api/episodes/1/front/4", None, "GET")[0] == 403
        assert request(f"{address}/api/episodes", "wrong-token-wrong-token", "GET")[0] == 403
        assert request(f"{address}/api/episodes/7", TOKEN, "GET")[0] == 404
        assert json.loads(request(f"{address}/api/episodes", TOKEN, "GET")[1])["episodes"][1]["operator_label"] is False
        if os.environ.get("ROBOT_RL_SCREENSHOT"):
            browser.set_window_size(1280, 1400)  # the episode list below the live view, the page from its top
            browser.execute_script("window.scrollTo(0, 0)")
            browser.save_screenshot(os.environ["ROBOT_RL_SCREENSHOT"])
        assert files_digest(store) == digest  # read only

        # every control has its key, and the page lists them: pause (p) and resume (u) on the latched rl/pause, the
        # page saying paused; checkpoint (c); stop (shift+q; a lone q does nothing)
        keys = {li.get_attribute("data-action") for li in browser.find_elements(By.CSS_SELECTOR, "#keys li")}
        buttons = {
            b.get_attribute("data-action") for b in browser.find_elements(By.CSS_SELECTOR, "button[data-action]")
        }
        assert keys == buttons == {"success", "failure", "hold", "release", "pause", "resume", "checkpoint", "stop"}
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys("p")
        probe.until(lambda: probe.seen["/rl/pause"][-1:] == [True], "the pause on /rl/pause")
        probe.until(lambda: browser.find_element(By.ID, "paused").is_displayed(), "paused on the page")
        body.send_keys("u")
        probe.until(lambda: probe.seen["/rl/pause"][-1:] == [False], "the resume on /rl/pause")
        probe.until(lambda: not browser.find_element(By.ID, "paused").is_displayed(), "no longer paused on the page")
        body.send_keys("c")
        probe.until(lambda: probe.seen["/rl/checkpoint_now"], "checkpoint now on /rl/checkpoint_now")
        body.send_keys("q")
        probe.spin(1.0)
        assert probe.seen["/rl/stop"] == []
        body.send_keys("Q")
        probe.until(lambda: probe.seen["/rl/stop"], "the stop on /rl/stop")

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

        # the session's nodes as the console hears them (issue 71 item 2): a node that goes is said gone, and with
        # the safety node gone the badge says so; the same node started again (as robot-rl launch restarts a node
        # that died) is said up again, started again once
        def safety_node():
            return browser.execute_script(NODE_ON_PAGE, "safety") or ["", ""]

        probe.until(lambda: safety_node()[0] == "node up", "the safety node up on the page")
        first = graph.processes["safety"]
        first.send_signal(signal.SIGINT)
        first.wait(timeout=30)
        probe.until(lambda: safety_node()[0] == "node gone", "the safety node gone on the page")
        assert "gone for" in safety_node()[1]
        probe.until(lambda: browser.find_element(By.ID, "driver").text == "no safety node", "no safety node badge")
        graph.start("safety")
        probe.until(  # the graph may name it before its claim comes: up, then up and started again
            lambda: (node := safety_node())[0] == "node up" and "started again 1x" in node[1],
            "the safety node up again on the page, started again once",
        )
        probe.until(lambda: browser.find_element(By.ID, "driver").text == "no actor", "its status on the badge again")
        assert graph.processes["console"].poll() is None and graph.processes["safety"].poll() is None
    finally:
        if browser is not None:
            browser.quit()
        graph.stop()
        probe.node.destroy_node()
        rclpy.shutdown()


def test_console_refuses_a_wrong_token_and_started_alone_says_no_safety_node_runs_and_no_camera_sends(tmp_path):
    """A wrong or missing token gets 403 and publishes nothing. The console started alone (no safety node, actor or
    camera in the graph), its page says so: not ``policy`` on the badge, the task camera it listens to without a
    frame, no broken image."""
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

        browser.get("about:blank")  # the address differs only in its fragment: loaded anew, not scrolled
        browser.get(f"{address}/#token={TOKEN}")
        probe.until(lambda: page(browser)["telemetry"], "the telemetry on the page")
        assert browser.find_element(By.ID, "driver").text == "no safety node"  # the old page said policy
        probe.until(lambda: listed_nodes(browser) == ["console"], "the console's own node on the page")
        assert browser.find_element(By.ID, "no-cameras").text == "listening to front: no frame yet"
        assert browser.execute_script(BROKEN_IMAGES) == []
    finally:
        if browser is not None:
            browser.quit()
        graph.stop()
        probe.node.destroy_node()
        rclpy.shutdown()


def test_console_settings_and_graphs():
    from robot_rl.cli.graph import graph_nodes
    from robot_rl.core.composed_config import load_config
    from robot_rl.core.config import ConfigError

    def names(*overrides: str) -> list[str]:
        return [node.name for node in graph_nodes(load_config(list(overrides)))]

    assert "console" in names("graph=real_train") and "console" in names("graph=collect_demos")
    assert "console" not in names("graph=sim_train") and "console" in names("graph=sim_train", "graph.console=true")
    assert "console" not in names("graph=real_train", "graph.console=false")
    with pytest.raises(ConfigError, match="graph.console"):
        names("graph=sim_train", "graph.console=yes")
    # a fleet: each robot's console its own port (all on 8080, all but the first exited 2, which stops a launch)
    fleet = graph_nodes(load_config(["graph=real_train", "fleet.robots=[left,right]", "console.port=8090"]))
    ports = {n.name: [a for a in n.command([]) if a.startswith("console.port=")] for n in fleet if "console" in n.name}
    assert ports == {"left/console": ["console.port=8090"], "right/console": ["console.port=8091"]}, ports
    require("rclpy")
    from robot_rl.cli.main import main
    from robot_rl.ros.console.console_live import Nodes, Rate, driver, violation_names
    from robot_rl.ros.console.console_node import console_settings
    from robot_rl.ros.links.transport import parse_progress
    from robot_rl.ros.plumbing.guard import MessageError

    assert violation_names(int(Violation.ESTOP | Violation.STALE_COMMAND)) == ["STALE_COMMAND", "ESTOP"]
    # who drives: what the console hears, never policy without a safety node's status
    stale = int(Violation.STALE_COMMAND)
    assert driver(None, 0, False, True) == driver(2.5, 0, False, True) == "no safety node"
    assert driver(0.1, int(Violation.ESTOP) | stale, True, True) == "hold"
    assert driver(0.1, stale, True, False) == "operator"
    assert (driver(0.1, stale, False, False), driver(0.1, stale, False, True), driver(0.1, 0, False, True)) == (
        "no actor", "idle", "policy",
    )  # fmt: skip
    # the session's nodes: a claim vouches for a node the graph does not name yet for 10 s; one the graph showed and
    # then missed is gone; a newer claim of the same name is a node started again
    nodes = Nodes()
    nodes.claimed("/robot_rl_actor", 100.0, now=1000.0)
    nodes.claimed("/left/robot_rl_safety", 101.0, now=1000.0)
    nodes.look({"/left/robot_rl_safety"}, now=1005.0)
    assert [(r["name"], r["up"]) for r in nodes.rows(1005.0)] == [("actor", True), ("left/safety", True)]
    nodes.look(set(), now=1011.0)
    assert [(r["up"], r["gone_for"]) for r in nodes.rows(1013.0)] == [(False, 2.0), (False, 2.0)]
    assert not nodes.running("/robot_rl_actor")
    nodes.claimed("/left/robot_rl_safety", 1012.0, now=1014.0)
    nodes.claimed("/left/robot_rl_safety", 1012.0, now=1015.0)  # the same claim heard again is no new start
    assert nodes.rows(1015.0)[1] == {
        "name": "left/safety",
        "up": True,
        "started": 1012.0,
        "restarts": 1,
        "gone_for": None,
    }
    rate = Rate(30.0)  # updates/s and env steps/s: growth over the window, 0 once the count stops, again after a drop
    assert rate.per_second() is None
    for t, count in ((0.0, 10), (2.0, 50), (4.0, 90)):
        rate.add(t, count)
    assert rate.per_second() == 20.0
    rate.add(40.0, 90)
    assert rate.per_second() == 0.0
    rate.add(41.0, 5)
    assert rate.per_second() is None
    good = {"online": 3, "updates": 1, "received": {"a": 3}, "online_size": 3, "demo_size": 0}
    assert parse_progress(json.dumps(good)) == good
    for bad in ({**good, "demo_size": -1}, {**good, "online_size": True}, {"online": 3, "updates": 1}, [good]):
        with pytest.raises(MessageError):
            parse_progress(json.dumps(bad))
    settings = console_settings(load_config([]).console)
    assert settings.host == "127.0.0.1" and len(settings.token) >= 16  # a random token when none is given
    for bad in ("console.host=localhost", "console.port=70000", "console.token=short", "console.jpeg_quality=0"):
        assert main(["console", bad]) == 2, bad


@pytest.mark.slow  # a robot-rl launch of six nodes
def test_console_pauses_checkpoints_and_stops_a_sim_train_launch(tmp_path):
    """Through the console's controls, on a live ``robot-rl launch sim_train`` (the wall clock, no learning): pause
    stops the actor's commands (the safety node holds the arm: STALE_COMMAND) with a ``paused`` record of reason
    ``operator``, resume brings them back, checkpoint now makes the learner write one at once, and stop ends the run
    as a spent budget does: the last episode's record says stopped, the launch exits 0 and the final checkpoint is
    there."""
    import signal
    import subprocess
    import sys

    rclpy = require("rclpy")
    from geometry_msgs.msg import PoseStamped
    from std_msgs.msg import String

    from robot_rl.ros.links.transport import parse_progress
    from robot_rl.ros.plumbing import qos

    run_dir = tmp_path / "run"
    overrides = [
        *[o for o in GRAPH if not o.startswith("task.")],
        "ros.eval_every_episodes=0",
        "task.episode_steps=20",
        "train.env_steps=100000",
        "train.start_training=100000",  # no updates: the test's CPU goes to the graph
        "train.checkpoint_every=100000",
        f"train.run_dir={run_dir}",
    ]
    log = tmp_path / "launch.log"
    with open(log, "w") as out:
        launch = subprocess.Popen(
            [sys.executable, "-m", "robot_rl.cli.main", "launch", "sim_train", *overrides],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    rclpy.init()
    probe = Probe(rclpy)
    actions: list[float] = []  # arrival times (monotonic s) of the actor's commands
    records: list[dict] = []
    saved: list[dict] = []
    progress: list[dict] = []  # the learner's progress, as the console gets it
    probe.node.create_subscription(
        String, "/rl/learner_progress", lambda m: progress.append(parse_progress(m.data)), qos.EVENT
    )
    probe.node.create_subscription(PoseStamped, "/rl/action", lambda m: actions.append(time.monotonic()), 50)
    probe.node.create_subscription(
        String, "/rl/episode_stats", lambda m: records.append(json.loads(m.data)), qos.EPISODE_LOG
    )
    probe.node.create_subscription(
        String, "/rl/checkpoint_saved", lambda m: saved.append(json.loads(m.data)), qos.EPISODE_LOG
    )
    try:
        found = probe.until(
            lambda: re.search(r"the console is at (http://[^/\s]+)/", log.read_text()), "the page", timeout=120
        )
        address = found.group(1)
        probe.until(lambda: len(actions) >= 20, "the actor's commands", timeout=120)
        # the learner says its replay buffers' sizes: the online steps it ingested, no demonstrations
        probe.until(lambda: progress and progress[-1]["online_size"] > 0, "the online buffer's size", timeout=120)
        assert all(p["demo_size"] == 0 and p["online_size"] == p["online"] for p in progress)

        assert post(f"{address}/api/pause", TOKEN) == 200
        probe.until(
            lambda: any(r["kind"] == "paused" and r["reason"] == "operator" for r in records), "the operator's pause"
        )
        probe.spin(0.5)  # a command already on its way
        held_from, flags_from = time.monotonic(), len(probe.seen["flags"])
        probe.spin(1.5)
        assert [t for t in actions if t > held_from] == []  # paused: the actor sends nothing
        # the safety node holds the measured pose at every tick of the pause, for the stale command; a tick may
        # report a late state first (STALE_STATE, also a hold: a loaded machine), so the reason is read over the pause
        held = probe.seen["flags"][flags_from:]
        hold = int(Violation.STALE_COMMAND | Violation.STALE_STATE)
        assert held and all(flags & hold for flags in held), held
        assert any(flags & int(Violation.STALE_COMMAND) for flags in held), held
        assert post(f"{address}/api/resume", TOKEN) == 200
        probe.until(lambda: [t for t in actions if t > held_from], "the actor's commands after resume")

        assert post(f"{address}/api/checkpoint", TOKEN) == 200
        probe.until(lambda: any(s["reason"] == "operator" for s in saved), "the learner's checkpoint now")
        assert (run_dir / "checkpoint" / "counters.json").exists()

        assert post(f"{address}/api/stop", TOKEN) == 200
        end = time.monotonic() + 120
        while launch.poll() is None and time.monotonic() < end:
            probe.spin(0.1)
        output = log.read_text()
        assert launch.returncode == 0 and "Traceback" not in output, output[-4000:]
        trained = [r for r in records if r["kind"] == "train"]
        assert trained[-1].get("stopped") is True and not any(r.get("stopped") for r in trained[:-1])
        assert "actor done" in output and "checkpoint (final)" in output, output[-4000:]
        counters = json.loads((run_dir / "checkpoint" / "counters.json").read_text())
        assert counters["online_received"] == trained[-1]["env_steps"]  # the learner holds every step the actor made
    finally:
        if launch.poll() is None:
            os.killpg(launch.pid, signal.SIGINT)
            try:
                launch.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(launch.pid, signal.SIGKILL)
                launch.wait()
        probe.node.destroy_node()
        rclpy.shutdown()
