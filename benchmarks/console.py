"""What the operator console costs and how late its frames are, with a real browser attached.

1. ``camera_to_screen_ms``: the sim robot on the wall clock (``ros.sim_time=false``) publishes one camera at
   ``--camera-rate`` Hz, the actor acts on it, and headless Chromium (Debian's, through chromium-driver and Selenium)
   shows the console's page: for each frame drawn, the page's wall clock at the image's load minus the camera's
   stamp (``window.robotRlConsole.latencies``; same machine, same clock). p50 and p99.
2. ``actor_steps_per_s_ratio``: the sim robot, the safety node and the actor in sim time (lockstep, as fast as the
   machine goes: where the console's CPU shows), the actor's env steps per s (from its ``/rl/episode_stats``
   records) with the console and the browser attached, over the same graph without them.

No learner (``train.sync=false``): the actor acts on its initial weights, so the figures are the graph's, not the
learning's.

    python -m benchmarks.console [--seconds 45] [--camera-rate 30]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import write_result

TOKEN = "benchmark-console-token-0123"
GRAPH = [
    "graph=sim_train",
    "graph.console=true",
    "task=reach",
    "task.cameras=[front]",
    "task.image_size=64",
    "task.episode_steps=50",
    "human.enabled=false",
    "train.demo_episodes=0",
    "train.env_steps=10000000",
    "train.sync=false",
    "ros.eval_every_episodes=0",
    "ros.transition_subscribers=[]",
    "ros.startup_timeout=60",
    "console.port=0",
    f"console.token={TOKEN}",
]


def start(nodes: dict, name: str, overrides: list[str], folder: Path) -> subprocess.Popen:
    log = open(folder / f"{name}.log", "w")  # noqa: SIM115 - the child writes it while it runs
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return subprocess.Popen(nodes[name].command(overrides), stdout=log, stderr=subprocess.STDOUT, env=env)


def browser(folder: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    flags = "--headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
    flags += " --disable-background-networking --disable-component-update --disable-sync --window-size=1280,720"
    for flag in [*flags.split(), f"--user-data-dir={folder}"]:
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def run_graph(rclpy, sim_time: bool, console: bool, seconds: float, camera_rate: float, folder: Path) -> dict:
    """Steps/s of the actor over ``seconds`` after its first episode, and the page's frame latencies (ms)."""
    from std_msgs.msg import String

    from robot_rl.cli.graph import graph_nodes
    from robot_rl.core.composed_config import load_config
    from robot_rl.ros.plumbing import qos

    overrides = [*GRAPH, f"ros.sim_time={'true' if sim_time else 'false'}", f"ros.camera_rate_hz={camera_rate}"]
    nodes = {node.name: node for node in graph_nodes(load_config(overrides))}
    folder.mkdir(parents=True, exist_ok=True)
    names = ["sim_robot", "safety", "actor", *(["console"] if console else [])]
    processes = [start(nodes, name, overrides, folder) for name in names]
    listener = rclpy.create_node("bench_console_listener")
    records: list[tuple[float, int]] = []
    listener.create_subscription(
        String,
        "/rl/episode_stats",
        lambda m: records.append((time.monotonic(), json.loads(m.data)["env_steps"])),
        qos.EPISODE_LOG,
    )
    page = None
    try:
        if console:
            address = None
            deadline = time.monotonic() + 120
            while address is None and time.monotonic() < deadline:
                found = re.search(r"the console is at (http://[^/\s]+)/", (folder / "console.log").read_text())
                address = found and found.group(1)
                rclpy.spin_once(listener, timeout_sec=0.1)
            page = browser(folder / "chromium")
            page.get(f"{address}/#token={TOKEN}")
        deadline = time.monotonic() + 180
        while len(records) < 2 and time.monotonic() < deadline:  # start-up: discovery, the first episode
            rclpy.spin_once(listener, timeout_sec=0.1)
        if len(records) < 2:
            raise RuntimeError(f"the actor sent no episodes; logs in {folder}")
        if page is not None:
            page.execute_script("window.robotRlConsole.latencies = []")
        first = len(records)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(listener, timeout_sec=0.1)
        window = records[first - 1 :]
        steps_per_s = (window[-1][1] - window[0][1]) / (window[-1][0] - window[0][0])
        latencies = page.execute_script("return window.robotRlConsole.latencies") if page is not None else []
        return {"steps_per_s": steps_per_s, "latencies_ms": latencies}
    finally:
        if page is not None:
            page.quit()
        for process in processes:
            process.send_signal(2)  # SIGINT: nodes stop as an operator stops them
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        listener.destroy_node()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=45.0, help="s measured per run, after the first episode")
    parser.add_argument("--camera-rate", type=float, default=30.0, help="Hz of the sim camera in the latency run")
    args = parser.parse_args()
    import rclpy

    from robot_rl.cli.graph import reserved_ros_domain

    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    with reserved_ros_domain() as domain, tempfile.TemporaryDirectory() as tmp:
        os.environ["ROS_DOMAIN_ID"] = str(domain)
        rclpy.init()
        try:
            folder = Path(tmp)
            without = run_graph(rclpy, True, False, args.seconds, args.camera_rate, folder / "without")
            attached = run_graph(rclpy, True, True, args.seconds, args.camera_rate, folder / "with")
            latency = run_graph(rclpy, False, True, args.seconds, args.camera_rate, folder / "latency")
        finally:
            rclpy.shutdown()
    ms = np.asarray(latency["latencies_ms"])
    if not ms.size:
        raise RuntimeError("the page drew no frames")
    figures = {
        "camera_to_screen_ms": {
            "p50": round(float(np.percentile(ms, 50)), 1),
            "p99": round(float(np.percentile(ms, 99)), 1),
            "frames": int(ms.size),
        },
        "actor_steps_per_s_ratio": round(attached["steps_per_s"] / without["steps_per_s"], 3),
        "actor_steps_per_s_without": round(without["steps_per_s"], 2),
        "actor_steps_per_s_with_console_and_browser": round(attached["steps_per_s"], 2),
    }
    path = write_result("console", figures, settings={"seconds": args.seconds, "camera_rate_hz": args.camera_rate})
    print(json.dumps(figures, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
