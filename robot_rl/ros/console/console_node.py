"""The console node: the operator's web page for an on-robot session (``docs/console.md``).

One page served with aiohttp from ``robot_rl/ros/console/static/`` (plain HTML/JS, no build step, nothing from the
internet), fed over one websocket:

* every camera (``camera/<name>/color/image_raw``: the task's ``task.cameras`` and any other found in the graph),
  as it sends (downscaled to at most ``console.image_width`` px, JPEG-encoded) and, for the task's cameras, as the
  policy sees it: the actor's own preprocessing (:func:`~robot_rl.ros.plumbing.messages.colour_image`, resized to
  ``task.image_size``), PNG-encoded so no pixel changes, which the page upscales with nearest-neighbour; at most
  ``console.camera_rate_hz`` frames per s per camera, only while a page is connected; a slow browser gets the newest
  frame, never a queue, and a page that connects gets each camera's newest frame at once (the telemetry says per
  camera the frames heard and the age of the newest);
* from the safety node's ``rl/safety_status`` (10 Hz: the console never subscribes to its 500-1000 Hz ticks, flags
  or the arm's pose stream) the measured TCP position (m), the flags of every tick since the last status as
  :class:`~robot_rl.safety.Violation` names and the fast-loop critic's risk (0-1); the commanded target
  (``rl/action``, m); who drives (:func:`~robot_rl.ros.console.console_live.driver`: ``no safety node``, ``hold``,
  ``operator``, ``no actor``, ``idle`` or ``policy``) and the operator's input (``spacenav/twist``: its largest axis,
  0-1);
* the session's nodes: each one's claims to its name (``/rl/node_claims``, one per start: restarts counted) and
  whether the ROS graph shows it (:class:`~robot_rl.ros.console.console_live.Nodes`);
* ``rl/success_probability`` (the reward classifier), ``rl/learner_progress``, the operator's pause
  (``rl/pause``) and the learner's checkpoints (``rl/checkpoint_saved``);
* the actor's ``rl/episode_stats`` records (train, eval, demo, paused), from which the page draws the success and
  intervention-rate curves;
* the run: the learner's updates/s and the actor's env steps/s (each count's growth, sampled as it stands every
  ``TELEMETRY_PERIOD`` s, over the last ``RATE_WINDOW`` s: 0 when nothing moves), the replay buffers' sizes
  (``rl/learner_progress``) and the weights version the actor last played (its records' ``weights``);
* the episode list of the run's episode store (``ros.recorder.store``, opened read-only on each request): GET
  ``/api/episodes``, ``/api/episodes/<index>`` (its actions, rewards and takeovers) and
  ``/api/episodes/<index>/<camera>/<step>`` (one recorded frame as JPEG), each with the token header.

Controls are POSTs to ``/api/<action>`` carrying the token in the ``X-Console-Token`` header (the live stream
carries it as ``?token=``); a bad or missing token gets 403 and publishes nothing. Nothing here commands the arm:

* ``success``: ``rl/operator_label`` (std_msgs/Bool true, once: the operator's label, kept for the recorder and a
  classifier's retraining) and ``rl/success`` true + ``rl/reward`` 1.0 for ``console.label_hold`` s at 50 Hz, as
  the teleop node's success key does (the actor ends the episode as a success);
* ``failure``: ``rl/operator_label`` false (the reward node says no success for the rest of the episode; the
  recorder keeps the label with the episode);
* ``hold``: ``rl/estop`` true, the safety node's software e-stop (it holds the arm until an operator resets it);
* ``release``: ``rl/estop_reset``, obeyed by the safety node because ``robot_rl_console`` is one of its operators;
* ``pause`` / ``resume``: ``rl/pause`` true / false (latched: an actor that starts later obeys it); paused, the actor
  sends no command and the safety node holds the arm;
* ``checkpoint``: ``rl/checkpoint_now``, the learner writes a checkpoint at once (``rl/checkpoint_saved`` says so);
* ``stop``: ``rl/stop``, the actor ends the run as a spent step budget does (a launch then stops every node).

The page binds ``console.host`` (default 127.0.0.1) on ``console.port``; the address with the token
(``http://host:port/#token=...``) is printed at start.

    python -m robot_rl.ros.console.console_node [console.host=0.0.0.0] [console.port=8080] [--ros-args ...]
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import secrets
import socket
import struct
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from aiohttp import WSMsgType, web
from geometry_msgs.msg import PoseStamped, Twist
from sensor_msgs.msg import Image
from std_msgs.msg import Bool, Empty, Float64, String

from robot_rl.core.config import ConfigError, image_size, integer, positive
from robot_rl.core.interrupts import StopRequest

from ...safety import Violation
from ..links.topic_env import PAUSE, STOP, camera_topic
from ..links.transport import parse_progress
from ..plumbing import qos
from ..plumbing.guard import InputGuard, MessageError, finite, finite_scalar
from ..plumbing.messages import colour_image, image_to_numpy, pose_to_numpy, seconds
from ..plumbing.name_claim import CLAIMS_TOPIC, parse_claim
from ..plumbing.node_main import exit_with_error, node_config, ros_node, spinning_in_background, stop_requests
from .console_episodes import Episodes, encoded
from .console_live import Live

MODULE = "robot_rl.ros.console.console_node"
NODE_NAME = "robot_rl_console"
ACTOR_NODE = "robot_rl_actor"  # robot_rl.ros.nodes.actor_node's name: in the graph or not tells idle from no actor
STATIC = Path(__file__).with_name("static")
TOKEN_HEADER = "X-Console-Token"
MIN_TOKEN = 16  # characters of a token given in console.token
TELEMETRY_PERIOD = 0.1  # s between telemetry messages to the page
DISCOVERY_PERIOD = 1.0  # s between looks at the graph (its cameras and nodes)
LABEL_RATE_HZ = 50.0  # rl/success messages per s while a success mark lasts


@dataclass(frozen=True)
class ConsoleSettings:
    """``console.*`` (configs/settings/ros.yaml): host, port, token, frame width (px), frame rate (Hz), JPEG quality,
    label hold (s)."""

    host: str
    port: int
    token: str
    image_width: int
    camera_rate_hz: float
    jpeg_quality: int
    label_hold: float

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/#token={self.token}"


def console_settings(console: Any) -> ConsoleSettings:
    """Checked settings of the ``console`` config section; a token is drawn when none is given."""
    host = console.host
    try:
        ipaddress.ip_address(str(host))
    except ValueError:
        raise ConfigError("console.host", host, "an IP address (127.0.0.1: this machine only; 0.0.0.0: any)") from None
    port = integer("console.port", console.port)
    if not 0 <= port <= 65535:
        raise ConfigError("console.port", port, "a TCP port 0..65535 (0: any free port)")
    token = console.token
    if token is None:
        token = secrets.token_urlsafe(24)
    elif not isinstance(token, str) or len(token) < MIN_TOKEN or not token.isprintable() or " " in token:
        raise ConfigError("console.token", "<hidden>", f"null or a string of at least {MIN_TOKEN} characters")
    quality = integer("console.jpeg_quality", console.jpeg_quality)
    if not 1 <= quality <= 100:
        raise ConfigError("console.jpeg_quality", quality, "an integer 1..100")
    return ConsoleSettings(
        host=str(host),
        port=port,
        token=token,
        image_width=int(positive("console.image_width", console.image_width, integer=True)),
        camera_rate_hz=float(positive("console.camera_rate_hz", console.camera_rate_hz)),
        jpeg_quality=quality,
        label_hold=float(positive("console.label_hold", console.label_hold)),
    )


def port_taken(settings: ConsoleSettings, error: OSError) -> ConfigError:
    """The one line for a page whose port cannot be bound."""
    return ConfigError("console.port", settings.port, f"a port free on {settings.host} ({error.strerror})")


def check_port(settings: ConsoleSettings) -> None:
    """:func:`port_taken` when the page's port is in use on its host (another session's console): ``robot-rl launch``
    asks before any node starts. Port 0 (any free one) is never taken."""
    if settings.port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the page's server binds: TIME_WAIT is free
        try:
            probe.bind((settings.host, settings.port))
        except OSError as error:
            raise port_taken(settings, error) from None


def jpeg_frame(msg: Image, width: int, quality: int) -> bytes:
    """A colour (or mono8) camera image as JPEG bytes, downscaled to at most ``width`` px wide."""
    image = image_to_numpy(msg)
    if image.dtype != np.uint8:
        raise MessageError(f"a {msg.encoding} image; expected a colour or mono8 image")
    if image.shape[1] > width:
        height = max(1, round(image.shape[0] * width / image.shape[1]))
        image = cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA)
    return encoded(image, ".jpg", [cv2.IMWRITE_JPEG_QUALITY, quality])


def policy_frame(msg: Image, size: tuple[int, int]) -> bytes:
    """A colour camera image as the actor's observation has it (:func:`colour_image`: ``size`` (height, width) px),
    as PNG bytes: lossless, every pixel the policy reads."""
    return encoded(colour_image(msg, size), ".png", [cv2.IMWRITE_PNG_COMPRESSION, 1])


def frame_packet(camera: str, stamp: float, image: bytes, view: str = "raw") -> bytes:
    """A websocket binary message: 2-byte big-endian header length, the JSON header (camera, its stamp in s, the
    console's wall-clock send time in s, the view: ``raw`` (a JPEG as the camera sends) or ``policy`` (a PNG as the
    policy sees)), then the image."""
    header = json.dumps({"camera": camera, "stamp": stamp, "sent": time.time(), "view": view}).encode()
    return struct.pack("!H", len(header)) + header + image


class Hub:
    """The connected pages: frames and telemetry handed over from the ROS thread, sent newest-first per page."""

    def __init__(self):
        self.loop: asyncio.AbstractEventLoop | None = None
        self.clients: set[Client] = set()

    def post_frame(self, camera: str, packet: bytes) -> None:
        """Thread-safe: the newest frame of ``camera`` for every page."""
        if self.loop is not None and self.clients:
            self.loop.call_soon_threadsafe(self._frame, camera, packet)

    def _frame(self, camera: str, packet: bytes) -> None:
        for client in self.clients:
            client.frames[camera] = packet
            client.wake.set()


class Client:
    """One page's websocket and what is waiting for it (the newest frame per camera, the newest telemetry)."""

    def __init__(self, ws: web.WebSocketResponse):
        self.ws, self.wake = ws, asyncio.Event()
        self.frames: dict[str, bytes] = {}
        self.telemetry: str | None = None

    async def send_forever(self) -> None:
        """Send what is waiting whenever something new comes, until the page goes away."""
        try:
            while not self.ws.closed:
                await self.wake.wait()
                self.wake.clear()
                telemetry, self.telemetry = self.telemetry, None
                frames, self.frames = self.frames, {}
                if telemetry is not None:
                    await self.ws.send_str(telemetry)
                for packet in frames.values():
                    await self.ws.send_bytes(packet)
        except (ConnectionError, RuntimeError):  # the page closed mid-send: its handler cleans up
            pass


class ConsoleRos:
    """The console's ROS side: subscriptions into :class:`Live` and the :class:`Hub`, and the control publishers."""

    def __init__(
        self, node, settings: ConsoleSettings, cameras: list[str], policy_size: tuple[int, int], live: Live, hub: Hub
    ):
        """``cameras``: the task's (the policy's, shown also as it sees them, ``policy_size`` (height, width) px)."""
        self.node, self.settings, self.live, self.hub = node, settings, live, hub
        self.policy_cameras, self.policy_size = set(cameras), policy_size
        self.guard = InputGuard(node)
        self.cameras: dict[str, float] = {}  # camera -> wall time of the last frame sent
        self.newest: dict[str, Image] = {}  # camera -> its newest frame: what a page that connects sees first
        self.estop = node.create_publisher(Bool, "rl/estop", qos.EVENT)
        self.estop_reset = node.create_publisher(Empty, "rl/estop_reset", qos.EVENT)
        self.label = node.create_publisher(Bool, "rl/operator_label", qos.EVENT)
        self.success = node.create_publisher(Bool, "rl/success", qos.STREAM_PUBLISHER)
        self.reward = node.create_publisher(Float64, "rl/reward", qos.STREAM_PUBLISHER)
        self.pause = node.create_publisher(Bool, PAUSE, qos.LATCHED)
        self.checkpoint = node.create_publisher(Empty, "rl/checkpoint_now", qos.EVENT)
        self.stop = node.create_publisher(Empty, STOP, qos.EVENT)
        stream, g = qos.STREAM_SUBSCRIBER, self.guard
        g.subscribe(String, "rl/safety_status", self._on_status, stream)
        g.subscribe(PoseStamped, "rl/action", lambda m: live.set(target=self._position(m)), stream)
        g.subscribe(Bool, "rl/intervention", lambda m: live.set(intervention=bool(m.data)), stream)
        g.subscribe(Twist, "spacenav/twist", self._on_twist, stream)
        g.subscribe(Float64, "rl/success_probability", lambda m: live.set(probability=self._number(m.data)), stream)
        g.subscribe(String, "rl/learner_progress", lambda m: live.set(learner=parse_progress(m.data)), stream)
        g.subscribe(Bool, PAUSE, lambda m: live.set(paused=bool(m.data)), qos.LATCHED)
        g.subscribe(String, "rl/checkpoint_saved", lambda m: live.set(checkpoint=self._json(m.data)), qos.EPISODE_LOG)
        g.subscribe(String, "rl/episode_stats", self._on_record, qos.EPISODE_LOG)
        g.subscribe(String, CLAIMS_TOPIC, lambda m: live.claimed(*parse_claim(m.data)[:2]), qos.LATCHED_READER)
        for camera in cameras:
            self.add_camera(camera)
        node.create_timer(DISCOVERY_PERIOD, self.look_at_graph)

    @staticmethod
    def _position(msg) -> list[float]:
        return pose_to_numpy(msg.pose)[0].round(4).tolist()

    @staticmethod
    def _number(value) -> float | None:
        value = float(value)
        return None if np.isnan(value) else finite_scalar("value", value)  # NaN: no estimate (the critic's)

    @staticmethod
    def _json(text: str) -> dict:
        value = json.loads(text)
        if not isinstance(value, dict):
            raise MessageError("expected a JSON object")
        return value

    def _on_status(self, msg) -> None:
        """The safety node's status: flags (a non-negative integer), the TCP position (3 finite m, or null), the
        fast critic's risk (0-1 or null)."""
        status = self._json(msg.data)
        flags, tcp, risk = status.get("flags"), status.get("tcp"), status.get("risk")
        if not isinstance(flags, int) or isinstance(flags, bool) or not 0 <= flags < 2**32:
            raise MessageError(f"flags={flags!r}; expected an unsigned 32-bit integer")
        if tcp is not None and (not isinstance(tcp, list) or len(tcp) != 3):
            raise MessageError(f"tcp={tcp!r}; expected null or [x, y, z] in m")
        pose = None if tcp is None else finite("tcp", tcp).round(4).tolist()
        risk = None if risk is None else finite_scalar("risk", risk)
        self.live.status(flags, pose, risk)

    def _on_record(self, msg) -> None:
        """An actor's episode record: a JSON object whose ``env_steps`` (when given) is an integer >= 0 and whose
        ``weights`` (when given) is one or null (no weights from a learner yet)."""
        record = self._json(msg.data)
        steps, weights = record.get("env_steps", 0), record.get("weights")
        if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
            raise MessageError(f"env_steps={steps!r}; expected an integer >= 0")
        if weights is not None and (not isinstance(weights, int) or isinstance(weights, bool) or weights < 0):
            raise MessageError(f"weights={weights!r}; expected null or an integer >= 0")
        self.live.add_record(record)

    def _on_twist(self, msg) -> None:
        """The operator's input: the largest of the twist's six axes, each normalised to [-1, 1] (``spacenav/twist``),
        as a share of full deflection 0-1 (their norm would read up to 2.45 with every axis at full scale)."""
        twist = finite("twist", [msg.linear.x, msg.linear.y, msg.linear.z, msg.angular.x, msg.angular.y, msg.angular.z])
        self.live.set(twist=round(min(float(np.abs(twist).max()), 1.0), 3))

    def add_camera(self, camera: str) -> None:
        if camera in self.cameras:
            return
        self.cameras[camera] = 0.0
        self.live.camera(camera, frame=False)
        self.guard.subscribe(Image, camera_topic(camera), lambda m: self._on_frame(camera, m), qos.STREAM_SUBSCRIBER)
        self.node.get_logger().info(f"camera {camera} on {self.node.resolve_topic_name(camera_topic(camera))}")

    def look_at_graph(self) -> None:
        """Subscribe to every ``<namespace>/camera/<name>/color/image_raw`` in the graph not yet shown, and tell
        :class:`Live` the nodes the graph shows (fully qualified names)."""
        prefix = self.node.get_namespace().rstrip("/") + "/camera/"
        for topic, _ in self.node.get_topic_names_and_types():
            name, _, rest = topic[len(prefix) :].partition("/")
            if topic.startswith(prefix) and rest == "color/image_raw" and name:
                self.add_camera(name)
        nodes = self.node.get_node_names_and_namespaces()
        self.live.graph({f"{namespace.rstrip('/')}/{name}" for name, namespace in nodes})

    def _on_frame(self, camera: str, msg) -> None:
        """A camera's frame: kept as its newest, and for the pages at most ``console.camera_rate_hz`` per s."""
        self.newest[camera] = msg
        self.live.camera(camera, frame=True)
        now = time.time()
        if now - self.cameras[camera] < 1.0 / self.settings.camera_rate_hz or not self.hub.clients:
            return
        self.cameras[camera] = now
        for key, packet in self.packets(camera, msg):
            self.hub.post_frame(key, packet)

    def packets(self, camera: str, msg) -> Iterator[tuple[str, bytes]]:
        """The page's frames of one camera message, each with its key: the raw view, then for a task camera the
        policy's (a frame the actor refuses raises :class:`MessageError` after its raw view)."""
        stamp = seconds(msg.header.stamp)
        jpeg = jpeg_frame(msg, self.settings.image_width, self.settings.jpeg_quality)
        yield camera, frame_packet(camera, stamp, jpeg)
        if camera in self.policy_cameras:
            yield f"{camera}:policy", frame_packet(camera, stamp, policy_frame(msg, self.policy_size), "policy")

    def newest_packets(self) -> list[tuple[str, bytes]]:
        """Every camera's newest frame as the page's packets: a page that connects gets them at once, not only with
        each camera's next frame (a slow or stopped camera's last view, with its stamp)."""
        packets: list[tuple[str, bytes]] = []
        for camera, msg in self.newest.copy().items():
            try:
                packets.extend(self.packets(camera, msg))
            except MessageError:  # dropped and counted when it came
                pass
        return packets

    async def control(self, action: str) -> None:
        """Carry out an operator's control (module docstring)."""
        self.node.get_logger().info(f"operator: {action}")
        if action == "hold":
            self.estop.publish(Bool(data=True))
        elif action == "release":
            self.estop_reset.publish(Empty())
        elif action in ("pause", "resume"):
            self.pause.publish(Bool(data=action == "pause"))
        elif action == "checkpoint":
            self.checkpoint.publish(Empty())
        elif action == "stop":
            self.stop.publish(Empty())
        elif action in ("success", "failure"):
            self.label.publish(Bool(data=action == "success"))
            if action == "success":
                end = time.monotonic() + self.settings.label_hold
                while time.monotonic() < end:
                    self.success.publish(Bool(data=True))
                    self.reward.publish(Float64(data=1.0))
                    await asyncio.sleep(1.0 / LABEL_RATE_HZ)


ACTIONS = ("success", "failure", "hold", "release", "pause", "resume", "checkpoint", "stop")


def web_app(settings: ConsoleSettings, ros: ConsoleRos, live: Live, hub: Hub, episodes: Episodes) -> web.Application:
    """The page, its static files, the live stream (``/ws``), the controls (``/api/<action>``) and the episode store
    (``/api/episodes...``)."""

    def authorized(token: str | None) -> bool:
        return token is not None and hmac.compare_digest(token.encode(), settings.token.encode())

    async def index(request: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})

    async def control(request: web.Request) -> web.Response:
        if not authorized(request.headers.get(TOKEN_HEADER)):
            raise web.HTTPForbidden(text="bad or missing token\n")
        action = request.match_info["action"]
        if action not in ACTIONS:
            raise web.HTTPNotFound(text=f"no control {action}; expected one of {', '.join(ACTIONS)}\n")
        if action == "success":
            request.app["tasks"].add(task := asyncio.create_task(ros.control(action)))
            task.add_done_callback(request.app["tasks"].discard)
        else:
            await ros.control(action)
        return web.json_response({"action": action})

    async def episode_data(request: web.Request) -> web.Response:
        """GET ``/api/episodes[/<index>[/<camera>/<step>]]`` with the token header: read in a worker thread."""
        if not authorized(request.headers.get(TOKEN_HEADER)):
            raise web.HTTPForbidden(text="bad or missing token\n")
        info = request.match_info
        if "step" in info:
            jpeg = await asyncio.to_thread(episodes.frame, info["index"], info["camera"], info["step"])
            return web.Response(body=jpeg, content_type="image/jpeg", headers={"Cache-Control": "no-store"})
        if "index" in info:
            return web.json_response(await asyncio.to_thread(episodes.curves, info["index"]))
        return web.json_response(await asyncio.to_thread(episodes.listing))

    async def stream(request: web.Request) -> web.WebSocketResponse:
        if not authorized(request.query.get("token")):
            raise web.HTTPForbidden(text="bad or missing token\n")
        ws = web.WebSocketResponse(heartbeat=10.0)
        await ws.prepare(request)
        client = Client(ws)
        sent, records = live.records_after(0)
        await ws.send_str(json.dumps({"type": "hello", "violations": [v.name for v in Violation if v]}))
        client.telemetry = json.dumps({"type": "telemetry", **live.snapshot(), "records": records})
        client.frames.update(await asyncio.to_thread(ros.newest_packets))
        client.wake.set()
        hub.clients.add(client)
        request.app["pages"][client] = sent
        sender = asyncio.create_task(client.send_forever())
        try:
            async for msg in ws:
                if msg.type == WSMsgType.ERROR:
                    break
        finally:
            hub.clients.discard(client)
            request.app["pages"].pop(client, None)
            sender.cancel()
        return ws

    app = web.Application()
    app["tasks"], app["pages"] = set(), {}
    app.router.add_get("/", index)
    app.router.add_static("/static/", STATIC)
    app.router.add_get("/ws", stream)
    app.router.add_post("/api/{action}", control)
    app.router.add_get("/api/episodes", episode_data)
    app.router.add_get("/api/episodes/{index}", episode_data)
    app.router.add_get("/api/episodes/{index}/{camera}/{step}", episode_data)
    return app


async def telemetry_forever(app: web.Application, live: Live, hub: Hub) -> None:
    """Every ``TELEMETRY_PERIOD`` s, the newest telemetry and the new episode records to every page."""
    while True:
        await asyncio.sleep(TELEMETRY_PERIOD)
        snapshot = live.snapshot()
        for client, sent in list(app["pages"].items()):
            app["pages"][client], records = live.records_after(sent)
            client.telemetry = json.dumps({"type": "telemetry", **snapshot, "records": records})
            client.wake.set()


async def serve(
    settings: ConsoleSettings, ros: ConsoleRos, live: Live, hub: Hub, episodes: Episodes, stop: StopRequest
) -> None:
    """Serve the page until ``stop`` is set; prints the page's address with its token once it listens."""
    hub.loop = asyncio.get_running_loop()
    app = web_app(settings, ros, live, hub, episodes)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, settings.host, settings.port).start()
    except OSError as error:
        await runner.cleanup()
        raise port_taken(settings, error) from None
    port = runner.addresses[0][1]
    settings = ConsoleSettings(**{**settings.__dict__, "port": port})
    print(f"{MODULE}: the console is at {settings.url}", flush=True)
    ticker = asyncio.create_task(telemetry_forever(app, live, hub))
    try:
        while not stop.is_set():
            await asyncio.sleep(0.1)
    finally:
        ticker.cancel()
        for client in list(hub.clients):
            await client.ws.close()
        await runner.cleanup()


def run(argv: list[str]) -> int:
    """The console node until Ctrl-C / SIGTERM (``robot-rl console`` calls it); a bad setting raises ConfigError."""
    from omegaconf import OmegaConf

    cfg, ros_args = node_config(argv)
    settings = console_settings(cfg.console)
    task = OmegaConf.to_container(cfg.task, resolve=True)
    cameras = [str(c) for c in task.get("cameras") or []]
    policy_size = image_size("task.image_size", task["image_size"])
    hub = Hub()
    episodes = Episodes(str(cfg.ros.recorder.store), settings.jpeg_quality)
    with ros_node(NODE_NAME, ros_args) as node:
        live = Live(actor=f"{node.get_namespace().rstrip('/')}/{ACTOR_NODE}")
        ros = ConsoleRos(node, settings, cameras, policy_size, live, hub)
        with spinning_in_background(node), stop_requests() as stop:
            asyncio.run(serve(settings, ros, live, hub, episodes, stop))
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except ConfigError as error:
        return exit_with_error(MODULE, error)


if __name__ == "__main__":
    sys.exit(main())
