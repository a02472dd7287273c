"""A gymnasium env backed by ROS 2 topics: the actor's view of a real (or sim) robot cell.

The observation and action contract is the one of the robot_rl MuJoCo tasks, so a policy moves
between ``robot-rl train`` and the node graph unchanged:

* action (float32 [-1, 1]^D): TCP-frame delta (``pos_step`` m, ``rot_step`` rad per unit) +
  gripper, turned into an absolute TCP target from the newest measured pose
  (:func:`robot_rl.core.geometry.delta_target`) and published on ``/rl/action`` (PoseStamped, base
  frame; the header stamp is the stamp of the newest camera frame (or pose, without cameras) the
  action was computed from) and
  ``/rl/gripper`` (Float64). The safety node sits between these topics and the arm.
* ``state``: TCP position (m), orientation as a rotation vector relative to the orientation at
  reset, linear/angular velocity (finite differences of the pose stream), gripper opening (0-1,
  from the finger joints), then ``/rl/task_state`` when the task has privileged features.
* one HxWx3 uint8 RGB image per camera from ``/camera/<name>/color/image_raw``.
* an arm that reports an error on ``/arm/error`` (a Franka's reflex: it stopped and takes no command until
  recovered) ends the episode at that step, truncated, with ``info["arm_error"]`` naming it; the reset recovers
  it (``robot_rl.ros.nodes.home_reset_node``'s ``reset.recovery_service``).
* reward and success from ``/rl/reward`` / ``/rl/success``, one reading: a publisher of the two (the reward node, the
  sim robot, the cell, the console, the teleop node) sends an instant's success, then its reward, and a reward
  carries the success that came before it, so a step never reads a new success with the reward of the frame
  before (a terminal step with reward 0). In sim time the two of the period are the only ones after the command.
  ``/rl/reset`` (std_srvs/SetBool)
  resets the cell, ``data`` saying whether a human demonstration comes next. Before a reset the
  env stops commanding for ``reset_pause`` s, longer than the safety node's command timeout, so
  the safety node holds the measured pose and follows the arm through the reset.

Every message is validated on arrival (:mod:`robot_rl.ros.plumbing.messages`) through the env's
:class:`~robot_rl.ros.plumbing.guard.InputGuard` (``env.guard``): a malformed one (wrong image size or
encoding, missing joints, NaN, a zero quaternion, a reward beyond ``MAX_REWARD``, another task-state
layout) is dropped and counted, so the inbox only ever holds values an observation can be built from.

Every step waits one control period, then for state, images and reward received after the
command went out. In sim time (``sim_time``) it does not sleep: the sim robot steps the period as
soon as the command is in, and the step waits for the pose stamped one control period after the
observation it answered (stream timeouts stay on the wall clock, so a dead sim is still noticed).
A stream that stays silent for ``stream_timeout`` raises
:class:`StreamStalled` naming it; the actor pauses the episode and waits for it to return. The operator's pause
(``/rl/pause``, std_msgs/Bool, latched: true pauses, false resumes; the console's pause and resume) raises
:class:`OperatorPause`, a stall of its own, at the next reset or step, before any command goes out: the actor takes
the same path (the episode in progress ends: an online one is recorded as it is, a demonstration dropped; the arm
holds on the safety node's stale-command rule) and
:meth:`TopicEnv.wait_for_streams` waits until the operator resumes. The recorder's ``disk_full`` record on
``/rl/episode_stats`` holds the actor the same way until its ``disk_space`` record (``ros.recorder.hold_on_full_disk``):
a session does not train on what nobody keeps. So does the safety node's e-stop latch (``estop`` of its
``/rl/safety_status``: the operator's e-stop, a foreign publisher, a teleop gone silent) until an operator resets it:
no episode is played on an arm that does not move.

With ``safety_ticks`` (``safety.fast_critic.record_ticks`` or ``learn``) the env also takes the safety node's ticks
(``/rl/safety_ticks``, :mod:`robot_rl.ros.safety.safety_ticks`) and gives each step those before its observation as
``info["fast_loop"]``, as a MuJoCo task's own fast loop does in ``robot-rl train``: the actor sends them with the
transition, and the step's ``info["violation"]`` has the constraint bits of all of them. In sim time the step waits
(at most ``TICKS_WAIT`` wall s) for the ticks up to the last arm state before its observation; in real time it takes
those that came, and the rest go with the next step. Ticks before the episode's first observation (the reset's,
late ones of the episode before) are dropped, counted in ``ticks.dropped``.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy._rclpy_pybind11 import NodeNameNonExistentError
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Bool, Float32MultiArray, Float64, Float64MultiArray, String, UInt32
from std_srvs.srv import SetBool

from robot_rl.core.geometry import delta_target, rotvec_from_matrix

from ..plumbing import qos
from ..plumbing.guard import InputGuard, MessageError, finite_scalar
from ..plumbing.messages import colour_image, joint_positions, labelled_array, pose_msg, pose_to_numpy, seconds
from ..plumbing.name_claim import CLAIMS_TOPIC, parse_claim
from ..safety.safety_ticks import TICKS_TOPIC, VIOLATION_TOPIC, TickInbox

PROPRIO = ("tcp_pos", "tcp_rotvec", "tcp_linvel", "tcp_angvel", "gripper")
POSE = "franka_robot_state_broadcaster/current_pose"
JOINTS = "joint_states"
REWARD, SUCCESS, TASK_STATE, VIOLATION = "rl/reward", "rl/success", "rl/task_state", VIOLATION_TOPIC
PAUSE = "rl/pause"  # std_msgs/Bool, latched: the operator's pause (true) and resume (false)
RESET_SERVICE = "rl/reset"  # std_srvs/SetBool: the scene reset (data: the next episode is a demonstration)
RESET_AGAIN_AFTER = 2.0  # s after a reset server's restart before the request goes again (discovery matches it)
EPISODE_STATS = "rl/episode_stats"  # std_msgs/String JSON records: the actor's episodes; the recorder's disk_full
STOP = "rl/stop"  # std_msgs/Empty: the operator's stop (the actor node ends the run)
SAFETY_STATUS = "rl/safety_status"  # std_msgs/String, JSON: the safety node's status; its estop holds the actor
ARM_ERROR = "arm/error"  # std_msgs/String, latched: the arm's own error (a Franka's reflex); empty or absent: none
MAX_VELOCITY_GAP = 0.1  # s: poses further apart (a reset, a stall) give no velocity (zero)
COMMAND_REPEAT = 0.2  # s (wall clock): sim time, the step's command again while the period it started is not over
OPEN_FRACTION = 0.9  # a gripper measured this open (of gripper_max_opening) at a reset is open; less holds something
MAX_REWARD = 1e6  # |reward| beyond this is a fault of the publisher: it would swamp the critic's targets
TICKS_WAIT = 0.5  # s (wall clock): sim time, the longest a step waits for the safety node's ticks of its period
TYPES = {
    POSE: "geometry_msgs/msg/PoseStamped",
    JOINTS: "sensor_msgs/msg/JointState",
    REWARD: "std_msgs/msg/Float64",
    SUCCESS: "std_msgs/msg/Bool",
    TASK_STATE: "std_msgs/msg/Float32MultiArray",
}


def camera_topic(name: str) -> str:
    """The realsense2_camera colour topic of camera ``name``."""
    return f"camera/{name}/color/image_raw"


class StreamStalled(RuntimeError):
    """A stream the actor needs went silent."""

    def __init__(self, topic: str, silent_for: float):
        super().__init__(f"no message on {topic} for {silent_for:.2f} s")
        self.topic = topic


class OperatorPause(StreamStalled):
    """The actor is held by a word on ``topic``: the operator's pause (``/rl/pause`` true; its text, the pause's
    reason, is ``operator``) or the recorder's full disk (``/rl/episode_stats``); the text is the reason."""

    def __init__(self, topic: str, reason: str = "operator"):
        RuntimeError.__init__(self, reason)
        self.topic = topic


@dataclass
class TopicEnvSettings:
    control_rate_hz: float
    action_dim: int
    pos_step: float  # m per unit action
    rot_step: float  # rad per unit action
    workspace: np.ndarray  # [[x, y, z] min, max], m, base frame
    episode_steps: int
    cameras: tuple[str, ...]
    image_size: tuple[int, int]
    terminate_on_success: bool
    stream_timeout: float = 1.0  # s
    reset_pause: float = 0.3  # s without commands before a reset (> the safety node's command timeout): it holds
    reset_timeout: float = 120.0  # s a reset may take (homing, the scene put back by a person) before the actor pauses
    frame_id: str = "base"
    gripper_joints: tuple[str, ...] = ("finger_left", "finger_right")
    gripper_max_opening: float = 0.08  # m, sum of the finger joints when fully open
    sim_time: bool = False  # the sim robot node steps in lockstep with this env (robot_rl.ros.plumbing.sim_clock)
    safety_ticks: bool = False  # take the safety node's ticks, each step's as info["fast_loop"]
    hold_on_full_disk: bool = True  # hold while the recorder's disk is full (its disk_full record, until disk_space)
    state_rate_hz: float = 100.0  # sim time: the sim robot's arm states per s (the instants the safety node ticks)

    @classmethod
    def from_config(cls, task: dict[str, Any], ros: dict[str, Any], safety_ticks: bool = False) -> TopicEnvSettings:
        from robot_rl.core.config import ConfigError, image_size

        if task.get("privileged_state"):
            raise ConfigError(
                "task.privileged_state",
                True,
                "false on a robot cell: only a simulator knows the clean "
                "state (train with it in sim; the actor acts without it)",
            )
        return cls(
            control_rate_hz=float(task["control_rate_hz"]),
            action_dim=int(task["action_dim"]),
            pos_step=float(task["pos_step"]),
            rot_step=float(task["rot_step"]),
            workspace=np.asarray(task["workspace"], float),
            episode_steps=int(task["episode_steps"]),
            cameras=tuple(task.get("cameras") or ()),
            image_size=image_size("task.image_size", task["image_size"]),
            terminate_on_success=bool(task.get("terminate_on_success", True)),
            stream_timeout=float(ros["stream_timeout"]),
            reset_pause=float(ros["reset_pause"]),
            reset_timeout=float(ros["reset_timeout"]),
            frame_id=str(ros["frame_id"]),
            gripper_joints=tuple(ros["gripper_joints"]),
            gripper_max_opening=float(ros["gripper_max_opening"]),
            sim_time=bool(ros.get("sim_time")),
            safety_ticks=safety_ticks,
            state_rate_hz=float(ros.get("state_rate_hz", 100.0)),
            hold_on_full_disk=bool((ros.get("recorder") or {}).get("hold_on_full_disk", True)),
        )


class Inbox:
    """The newest message of each stream with its monotonic arrival time; waiters are woken on arrival.
    ``resolve``: a topic key -> the name a stall reports (the node's fully qualified, remapped name)."""

    def __init__(self, resolve: Callable[[str], str] = str):
        self.latest: dict[str, tuple[Any, float]] = {}
        self.resolve = resolve
        self.changed = threading.Condition()

    def put(self, topic: str, value: Any) -> None:
        with self.changed:
            self.latest[topic] = (value, time.monotonic())
            self.changed.notify_all()

    def wait_newer(
        self,
        topics: list[str],
        after: float,
        timeout: float,
        complete: Callable[[dict[str, Any]], bool] = lambda values: True,
    ) -> dict[str, Any]:
        """The newest value of every topic, once each arrived after ``after`` and the values are ``complete``;
        StreamStalled otherwise."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                stale = [t for t in topics if t not in self.latest or self.latest[t][1] <= after]
                if not stale:
                    values = {t: self.latest[t][0] for t in topics}
                    if complete(values):
                        return values
                    stale = topics[:1]
                left = deadline - time.monotonic()
                if left <= 0:  # the stream silent the longest is named: the cause (a camera), not what follows
                    first = min(stale, key=lambda t: self.latest[t][1] if t in self.latest else -math.inf)
                    last = max((self.latest[first][1] if first in self.latest else after), after)  # from it (a reward)
                    raise StreamStalled(self.resolve(first), time.monotonic() - last)
                self.changed.wait(min(left, 0.05))


class TopicEnv(gym.Env):
    def __init__(self, node, settings: TopicEnvSettings, state_layout: dict[str, tuple[int, int]]):
        self.node, self.settings = node, settings
        names = list(state_layout)
        if tuple(names[: len(PROPRIO)]) != PROPRIO:
            raise ValueError(f"state layout must start with {PROPRIO}, got {names}")
        self.extra_fields = {k: v for k, v in state_layout.items() if k not in PROPRIO}
        if any(k in ("force", "torque") for k in self.extra_fields):
            raise ValueError("force/torque in the state is not supported over topics yet; set task.force_torque=false")
        self.state_dim = sum(size for _, size in state_layout.values())
        spaces = {"state": gym.spaces.Box(-np.inf, np.inf, (self.state_dim,), np.float32)}
        for camera in settings.cameras:
            spaces[camera] = gym.spaces.Box(0, 255, (*settings.image_size, 3), np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (settings.action_dim,), np.float32)
        self.inbox = Inbox(node.resolve_topic_name)  # keyed by topic name (relative: the robot's namespace)
        self.guard = InputGuard(node)  # drop counts per topic: guard.dropped
        self.streams = [POSE, JOINTS, REWARD, SUCCESS, *[camera_topic(c) for c in settings.cameras]]
        if self.extra_fields:
            self.streams.append(TASK_STATE)
        self.lockstep_inputs: list[str] = []  # sim time: the human's input topics, one message per observation
        self._previous_pose: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float] | None = None  # inbox entry
        self.demo_next = False  # set by the teleop source before a reset
        self.arm_error = ""  # the arm's own error (ARM_ERROR), until recovered
        self.reference_rot = np.eye(3)
        self._steps, self._last_command = 0, 0.0
        # the gripper as it is, in [-1, 1] (-1 open, +1 closed): the last command sent; at a reset, open when the fingers
        # measure at least OPEN_FRACTION open, else closed (a part held from the start). A take-over keeps it.
        self.gripper_command = -1.0
        self._obs_stamp = 0.0
        self._episode_start = 0.0  # s: the stamp of the episode's first observation

        self.subscriptions: dict[str, Any] = {}  # the observation's streams, from the first reset (subscribe_streams)
        self.action_pub = node.create_publisher(PoseStamped, "rl/action", qos.COMMAND)
        self.gripper_pub = node.create_publisher(Float64, "rl/gripper", qos.COMMAND)
        self.reset_client = node.create_client(SetBool, RESET_SERVICE)
        self.started_at: dict[str, float] = {}  # node (fully qualified name) -> its latest start (wall s, its claim)
        self.ticks = TickInbox() if settings.safety_ticks else None  # the safety node's ticks (safety_ticks)
        self.ticks_late = 0  # sim time: steps whose ticks were not all in after TICKS_WAIT
        self.holds: dict[str, str] = {}  # topic -> why the actor is held: the operator's pause, the recorder's disk
        self.guard.subscribe(Bool, PAUSE, self._on_pause, qos.LATCHED)
        self.guard.subscribe(String, CLAIMS_TOPIC, self._on_claim, qos.LATCHED_READER)  # a reset server's restart
        self.guard.subscribe(String, SAFETY_STATUS, self._on_safety_status, qos.STREAM_SUBSCRIBER)
        if settings.hold_on_full_disk:
            self.guard.subscribe(String, EPISODE_STATS, self._on_record, qos.EPISODE_LOG)

    # ----------------------------------------------------------------- inputs
    def subscribe_streams(self) -> None:
        """Subscribe the observation's streams, once (the first reset does): after the teleop source (built on this
        env) subscribed, because an executor serves ready subscriptions in the order they were made, and the
        observation's last message wakes the actor, which then reads the human's input of the same instant."""
        if self.subscriptions:
            return
        stream, subscribe = qos.stream_subscriber(self.settings.sim_time), self.guard.subscribe
        self.subscriptions = {
            POSE: subscribe(PoseStamped, POSE, self._on_pose, stream),
            JOINTS: subscribe(JointState, JOINTS, self._on_joints, stream),
            SUCCESS: subscribe(Bool, SUCCESS, lambda m: self.inbox.put(SUCCESS, bool(m.data)), stream),
            REWARD: subscribe(Float64, REWARD, self._on_reward, stream),  # after success: served after it
            VIOLATION: subscribe(UInt32, VIOLATION, lambda m: self.inbox.put(VIOLATION, int(m.data)), stream),
            ARM_ERROR: subscribe(String, ARM_ERROR, self._on_arm_error, qos.LATCHED),
        }
        if self.extra_fields:
            self.subscriptions[TASK_STATE] = subscribe(Float32MultiArray, TASK_STATE, self._on_task_state, stream)
        if self.ticks is not None:
            self.subscriptions[TICKS_TOPIC] = subscribe(
                Float64MultiArray, TICKS_TOPIC, self.ticks.on_message, qos.TICKS
            )
        for camera in self.settings.cameras:
            topic = camera_topic(camera)
            self.subscriptions[topic] = subscribe(Image, topic, lambda m, t=topic: self._on_image(t, m), stream)

    @property
    def paused(self) -> bool:
        """Whether the actor is held: the operator paused it, or the recorder's disk is full."""
        return bool(self.holds)

    def _hold(self, topic: str, reason: str | None) -> None:
        if reason is None:
            self.holds.pop(topic, None)
        else:
            self.holds[topic] = reason

    def _on_pause(self, msg) -> None:
        self._hold(PAUSE, "operator" if msg.data else None)
        self.node.get_logger().info("paused by the operator" if msg.data else "resumed by the operator")

    def _on_record(self, msg) -> None:
        """The recorder's word on its disk (``disk_full`` holds the actor, ``disk_space`` releases it); the actor's
        own records pass by."""
        record = json.loads(msg.data)
        if not isinstance(record, dict) or record.get("node") != "recorder":
            return
        if record.get("kind") == "disk_full":
            free = finite_scalar("free_mb", record.get("free_mb"))
            self._hold(
                EPISODE_STATS, f"the recorder's disk is full ({str(record.get('path'))[:200]}, {free:g} MB free)"
            )
            self.node.get_logger().error(f"holding: {self.holds[EPISODE_STATS]}; nothing would record what it does")
        elif record.get("kind") == "disk_space":
            self._hold(EPISODE_STATS, None)
            self.node.get_logger().info("the recorder's disk has space again")

    def _on_safety_status(self, msg) -> None:
        """The safety node's e-stop latch: held while its status names why (``estop``), released when it says null."""
        status = json.loads(msg.data)
        if not isinstance(status, dict):
            raise MessageError("expected a JSON object")
        why = status.get("estop")
        reason = None if why is None else f"the arm is held: {str(why)[:200]}"
        if reason != self.holds.get(SAFETY_STATUS):
            self._hold(SAFETY_STATUS, reason)
            if reason is None:
                self.node.get_logger().info("the arm's e-stop is reset")
            else:
                self.node.get_logger().warning(f"holding: {reason}")

    def check_pause(self) -> None:
        """Raise :class:`OperatorPause` while the actor is held (the operator's pause first)."""
        for topic in sorted(self.holds, key=lambda t: t != PAUSE):
            raise OperatorPause(self.node.resolve_topic_name(topic), self.holds[topic])

    def _on_pose(self, msg) -> None:
        """TCP pose -> (position m, rotation, linear m/s, angular rad/s, stamp s), velocities by finite differences of
        consecutive poses (zero across a gap: the sim robot's clock jumps over a reset's pause)."""
        pos, rot = pose_to_numpy(msg.pose)
        t = seconds(msg.header.stamp)
        previous = self._previous_pose
        if previous is not None and t == previous[4]:  # sim time: the sim robot says an instant again while it waits
            self.inbox.put(POSE, previous)  # (its velocity stands; a zero one would depend on how long it waited)
            return
        linvel, angvel = np.zeros(3), np.zeros(3)
        if previous is not None and 0 < t - previous[4] <= MAX_VELOCITY_GAP:
            p0, r0, _, _, t0 = previous
            linvel = (pos - p0) / (t - t0)
            angvel = rotvec_from_matrix(rot @ r0.T) / (t - t0)
        self._previous_pose = (pos, rot, linvel, angvel, t)
        self.inbox.put(POSE, self._previous_pose)

    def _on_arm_error(self, msg) -> None:
        self.arm_error = str(msg.data)[:200]

    def _on_joints(self, msg) -> None:
        """Gripper opening as a fraction of ``gripper_max_opening`` (the sum of the finger joints)."""
        opening = joint_positions(msg, self.settings.gripper_joints).sum()
        self.inbox.put(JOINTS, opening / self.settings.gripper_max_opening)

    def _on_reward(self, msg) -> None:
        reward = finite_scalar("reward", msg.data)
        if abs(reward) > MAX_REWARD:
            raise MessageError(f"reward={reward:g} is beyond +-{MAX_REWARD:g}; expected a bounded reward")
        latest = self.inbox.latest.get(SUCCESS)
        self.inbox.put(REWARD, (reward, None if latest is None else latest[0]))  # the success it goes with

    def _on_task_state(self, msg) -> None:
        expected = [(name, size) for name, (_, size) in self.extra_fields.items()]
        self.inbox.put(TASK_STATE, labelled_array(msg, expected))

    def _on_image(self, topic: str, msg) -> None:
        """Colour frame at the policy's image size, with its stamp (s)."""
        self.inbox.put(topic, (colour_image(msg, self.settings.image_size), seconds(msg.header.stamp)))

    def topics(self) -> dict[str, str]:
        """The topics this env reads, with their types (for start-up checks)."""
        return {topic: TYPES.get(topic, "sensor_msgs/msg/Image") for topic in self.streams}

    @property
    def tcp_rot(self) -> np.ndarray:
        """Newest measured TCP orientation (3x3, TCP to base frame)."""
        latest = self.inbox.latest.get(POSE)
        return np.eye(3) if latest is None else latest[0][1]

    def _on_claim(self, msg) -> None:
        name, started, _ = parse_claim(msg.data)
        self.started_at[name] = max(started, self.started_at.get(name, started))

    def reset_servers(self) -> set[str]:
        """The nodes that serve the reset service now (fully qualified names)."""
        service, node, servers = self.node.resolve_service_name(RESET_SERVICE), self.node, set()
        for name, namespace in node.get_node_names_and_namespaces():
            try:
                served = node.get_service_names_and_types_by_node(name, namespace)
            except NodeNameNonExistentError:  # it left the graph between the two looks
                served = []
            if any(served_name == service for served_name, _ in served):
                servers.add(f"{namespace.rstrip('/')}/{name}")
        return servers

    def call_reset(self) -> str:
        """Ask for the scene reset and wait up to ``reset_timeout`` s for its answer (homing, then maybe a person at
        the scene). A node serving the reset that starts again meanwhile (its claim to its name, newer than the
        request: the launch restarted it after it died) never answers what its predecessor took: the request goes
        again, ``RESET_AGAIN_AFTER`` s after that claim, once discovery has matched the new server (a killed reset
        node's request waited out the 120 s, ``benchmarks/cell_faults.py``). Returns the answer's message."""
        request = SetBool.Request(data=bool(self.demo_next))
        servers, asked_at = self.reset_servers(), time.time()
        future = self.reset_client.call_async(request)
        deadline = time.monotonic() + self.settings.reset_timeout
        while not future.done():
            if time.monotonic() > deadline:
                raise StreamStalled(f"{self.reset_client.service_name} (no response)", self.settings.reset_timeout)
            restarted = [name for name in servers if self.started_at.get(name, 0.0) > asked_at]
            if restarted and time.time() - self.started_at[restarted[0]] >= RESET_AGAIN_AFTER:
                self.node.get_logger().warning(
                    f"{restarted[0]} started again while it served the reset: asking the new one for the reset"
                )
                self.reset_client.remove_pending_request(future)
                servers, asked_at = self.reset_servers() | set(restarted), time.time()
                future = self.reset_client.call_async(request)
                deadline = time.monotonic() + self.settings.reset_timeout
            time.sleep(0.002)
        return future.result().message

    # ----------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.check_pause()
        self.subscribe_streams()
        timeout = self.settings.stream_timeout
        if not self.settings.sim_time:  # the arm holds (in sim time the sim robot's clock makes the pause)
            time.sleep(max(self._last_command + self.settings.reset_pause - time.monotonic(), 0.0))
        if not self.reset_client.wait_for_service(timeout_sec=timeout):
            raise StreamStalled(f"{self.reset_client.service_name} (std_srvs/SetBool service)", timeout)
        if self.settings.sim_time:  # the sim robot publishes the reset's observation once: be matched to hear it
            self._wait_for_publishers(timeout)
        called = time.monotonic()
        answer = self.call_reset()
        # in sim time the reset's observation is published once, maybe before the answer; in real time
        # the streams go on, and what came before the answer may predate the reset
        requested = called if self.settings.sim_time else time.monotonic()
        self._previous_pose = None  # no velocity across the reset
        values = self.inbox.wait_newer(self.streams + self.lockstep_inputs, requested, timeout)
        self.reference_rot = values[POSE][1]
        self._steps, self._last_command = 0, time.monotonic()
        self.gripper_command = -1.0 if values[JOINTS] >= OPEN_FRACTION else 1.0
        obs = self._observation(values)
        self._episode_start = self._obs_stamp  # the episode's ticks start with its first observation
        return obs, {"success": self._reward_and_success(values)[1], "reset": answer}

    def step(self, action):
        self.check_pause()  # before the command: paused, the actor sends nothing and the safety node holds the arm
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (self.settings.action_dim,) or not np.all(np.isfinite(action)):
            raise ValueError(f"action must be {self.settings.action_dim} finite values, got {action.tolist()}")
        action = np.clip(action, -1.0, 1.0)
        pos, rot = self.inbox.latest[POSE][0][:2]
        s = self.settings
        target_pos, target_rot = delta_target(pos, rot, action, s.pos_step, s.rot_step, s.workspace, self.reference_rot)
        sent = time.monotonic()
        # the gripper first: in sim time the pose is the go signal of the sim robot's period
        gripper, command = (
            Float64(data=float(action[-1])),
            pose_msg(target_pos, target_rot, self._obs_stamp, s.frame_id),
        )
        self.gripper_pub.publish(gripper)
        self.action_pub.publish(command)
        self.gripper_command = gripper.data
        if s.sim_time:  # the sim robot steps the period as soon as it has the command; its end is the pose stamped
            values = self._wait_for_period(sent, gripper, command)  # one control period later
        else:
            period_end = max(self._last_command + 1.0 / s.control_rate_hz, sent)
            time.sleep(max(period_end - time.monotonic(), 0.0))
            self._last_command = period_end
            values = self.inbox.wait_newer(self.streams, sent, s.stream_timeout)
        self._steps += 1
        reward, success = self._reward_and_success(values)
        terminated = success and s.terminate_on_success
        truncated = (self._steps >= s.episode_steps or bool(self.arm_error)) and not terminated
        obs = self._observation(values)
        info = {
            "success": success,
            "violation": int(self.inbox.latest.get(VIOLATION, (0, 0))[0]),
            "stamp": self._obs_stamp,  # s, on the node's clock: the sim time of the period's end on sim time
        }
        if self.arm_error:  # the arm stopped itself: the episode is cut here, and says why
            info["arm_error"] = self.arm_error
        if self.ticks is not None:
            fast = self._step_ticks()
            if fast is not None:  # a violation within the step counts, as with a MuJoCo task's own fast loop
                info["fast_loop"] = fast
                info["violation"] |= int(np.bitwise_or.reduce(fast.violation))
        return obs, reward, terminated, truncated, info

    def _reward_and_success(self, values: dict[str, Any]) -> tuple[float, bool]:
        """The step's reward and success, of one instant: in real time the success that came with the reward."""
        reward, success = values[REWARD]
        if self.settings.sim_time or success is None:
            success = values[SUCCESS]
        return float(reward), bool(success)

    def _step_ticks(self):
        """The safety node's ticks of this step, between the episode's first observation and this step's (a
        FastStream, or None); those before the episode (the reset's, the episode before's late ones) are dropped.
        In sim time first wait for the ticks of the last arm state before the observation (one state period
        earlier), sent once its constraint bits are in."""
        if self.settings.sim_time:
            last = self._obs_stamp - 1.0 / self.settings.state_rate_hz - 1e-6
            if not self.ticks.wait_until(last, TICKS_WAIT):
                self.ticks_late += 1
                self.node.get_logger().warning(
                    f"no safety node ticks up to sim time {last:.3f} s on {TICKS_TOPIC} within {TICKS_WAIT} s "
                    f"({self.ticks_late} steps so far); does the safety node run with "
                    "safety.fast_critic.record_ticks=true (or learn=true) too?",
                    throttle_duration_sec=5.0,
                )
        self.ticks.drop_before(self._episode_start - 1e-9)
        return self.ticks.take(self._obs_stamp - 1e-9)

    def _wait_for_period(self, sent: float, gripper: Float64, command: PoseStamped) -> dict[str, Any]:
        """Sim time: the observation that ends the period the command started (the pose stamped one control period
        after the observation it answers, every other stream and lockstep input newer than ``sent``). The command
        goes out again every ``COMMAND_REPEAT`` wall s meanwhile: the safety node drops a command whose sender it
        has not yet discovered, and the sim robot and the safety node take each instant's command once."""
        s = self.settings
        period_end = self._obs_stamp + 1.0 / s.control_rate_hz
        deadline = time.monotonic() + s.stream_timeout
        while True:
            try:
                return self.inbox.wait_newer(
                    self.streams + self.lockstep_inputs,
                    sent,
                    min(COMMAND_REPEAT, max(deadline - time.monotonic(), 0.0)),
                    lambda values: values[POSE][4] >= period_end - 1e-6,
                )
            except StreamStalled as stalled:
                if time.monotonic() >= deadline:
                    raise StreamStalled(stalled.topic, time.monotonic() - sent) from None
            self.gripper_pub.publish(gripper)
            self.action_pub.publish(command)

    def _wait_for_publishers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            unmatched = [topic for topic in self.streams if self.subscriptions[topic].get_publisher_count() == 0]
            if not unmatched:
                return
            if time.monotonic() > deadline:
                raise StreamStalled(f"{self.subscriptions[unmatched[0]].topic_name} (no publisher matched)", timeout)
            time.sleep(0.01)

    def wait_for_streams(self, timeout: float) -> None:
        """Block until the operator's pause is over and every stream delivers again (after a stall); StreamStalled
        (:class:`OperatorPause` while paused) after ``timeout``. In sim time the sim robot publishes an observation
        only when asked (a step, a reset), so the streams' wait returns at once."""
        self.subscribe_streams()
        deadline = time.monotonic() + timeout
        while self.paused:
            if time.monotonic() > deadline:
                self.check_pause()
            time.sleep(0.02)
        if not self.settings.sim_time:
            self.inbox.wait_newer(self.streams, time.monotonic(), timeout)

    # ----------------------------------------------------------------- observation
    def _observation(self, values: dict[str, Any]) -> dict[str, np.ndarray]:
        pos, rot, linvel, angvel, stamp = values[POSE]
        parts = [pos, rotvec_from_matrix(self.reference_rot.T @ rot), linvel, angvel, [values[JOINTS]]]
        if self.extra_fields:
            parts.append(values[TASK_STATE])
        obs = {"state": np.concatenate([np.ravel(p) for p in parts]).astype(np.float32)}
        camera_stamps = []
        for camera in self.settings.cameras:
            obs[camera], camera_stamp = values[camera_topic(camera)]
            camera_stamps.append(camera_stamp)
        self._obs_stamp = max(camera_stamps) if camera_stamps else stamp  # what the command will carry
        return obs
