"""The cell emulator: a MuJoCo task behind the interfaces of a real cell's drivers, for rehearsing the on-robot
session before the first day on the cell (``robot-rl launch cell robot=fr3|ur5e task=...``).

It stands in for the lab's bringup and for nothing else: the ``real_train`` and ``collect_demos`` graphs run against
it unchanged, with the reward classifier as the only reward, the operator on a SpaceMouse and ``home_reset`` homing
the arm. It speaks what the drivers speak (names after a robot config's remaps, ``configs/robot/<arm>.yaml``):

| driver | topics | as |
|---|---|---|
| Franka + a Cartesian impedance controller (CRISP-style) | in ``cartesian_impedance_controller/equilibrium_pose`` (PoseStamped); out ``franka/joint_states``, ``franka_robot_state_broadcaster/current_pose``, ``.../external_wrench_in_base_frame`` at ``cell.state_rate_hz`` | the arm tracks the target through the sim's impedance controller, with its lag |
| UR ROS 2 driver + MoveIt Servo | in ``servo_node/delta_twist_cmds`` (TwistStamped, base frame); out ``joint_states``, ``tcp_pose_broadcaster/pose``, ``force_torque_sensor_broadcaster/wrench`` | |
| realsense2_camera | ``camera/<name>/color/image_raw`` (rgb8) + ``camera_info`` at ``cell.camera_rate_hz`` | stamped by the camera's clock |
| SpaceMouse (hidraw) | the FIFO ``cell.spacemouse``, opened by the teleop node as its device | :mod:`robot_rl.ros.emulation.scripted_operator` |
| object tracker (vrpn_mocap, AprilTag) | ``vrpn_mocap/<object>/pose`` (PoseStamped, base frame) at ``cell.tracker.rate_hz`` | for policies that act from state |
| the person who resets the scene | in ``rl/scene_reset`` (std_msgs/Bool: a demonstration comes next), out ``rl/scene_ready`` (std_msgs/Empty) after ``cell.scene_reset_time`` s | ``home_reset`` with ``reset.scene_wait=true`` asks once the arm is home |
| the arm's error state (libfranka's reflexes) | out ``arm/error`` (std_msgs/String, latched, empty: no error); service ``arm/error_recovery`` (std_srvs/Trigger) | a contact force or TCP speed above ``cell.reflex`` stops the arm until recovered |

It publishes no reward, success or task state and serves no ``/rl/reset``: on a cell those come from the reward
node, the operator and ``home_reset``. The non-idealities of a real cell are ``cell.*`` keys (each default's source
is in ``configs/settings/tools.yaml``): camera latency, jitter, dropped frames, a camera clock offset, exposure and
white-balance drift (``sim/camera_drift.py``), the controller's command delay, state jitter and noise. Every
draw comes from ``seed``.

What only an emulator can know goes out on ``cell/report`` (std_msgs/String, JSON, every ``cell.report_period`` s
and at exit) and to the log: the state rate it holds, the reward classifier's true and false positives and
negatives against the sim's ground truth (the learner never sees it) and its false successes per truly failed scene
(``false_success_per_failed_episode``), the operator's takeover steps, reflexes and
scene resets. Faults for rehearsals and tests come on ``cell/fault`` (std_msgs/String, JSON
``{"fault": "camera_stop" | "spacemouse_unplug" | "reflex" | "state_gaps" | "camera_bump", "seconds": s}``; a reflex
trips ``EPISODE_SETTLE`` s into the next episode; a camera bump moves every camera by ``cell.camera_pose_error``, for
good, as a camera re-clamped between the demonstrations and training).

    python -m robot_rl.ros.emulation.cell_node robot=fr3 task=pick_cube cell.spacemouse=/tmp/cell_spacemouse
"""

from __future__ import annotations

import heapq
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np
from geometry_msgs.msg import PoseStamped
from std_msgs.msg import Bool, Empty, Float64, String
from std_srvs.srv import Trigger

from robot_rl.core.config import ConfigError, non_negative, positive
from robot_rl.core.geometry import matrix_from_rotvec

from ...sim.camera_drift import CameraDrift, offset_camera
from ...sim.panda_env import PandaTaskEnv
from ..plumbing import qos
from ..plumbing.messages import camera_info_msg, image_msg, pinhole_matrix, pose_msg
from .classifier_tally import ClassifierTally, described
from .scripted_operator import HidFifo, ScriptedOperator
from .sim_robot_node import SimRobot

FINGERS_OPEN = 0.08  # m: the sim gripper's finger joints' sum when open
FAULTS = ("camera_stop", "spacemouse_unplug", "reflex", "state_gaps", "camera_bump")
EPISODE_SETTLE = 1.5  # s into an episode an injected reflex trips (the actor is stepping; the episode goes on)
STATE_GAP = 0.005  # s: the gap of the state_gaps fault (a state broadcaster that misses 4 of 5 cycles now and then)


@dataclass(frozen=True)
class CellSettings:
    """``cell.*`` of the config (units in the names' comments there)."""

    state_rate_hz: float
    camera_rate_hz: float
    cameras: tuple[str, ...]
    image_size: int
    camera_latency: float
    camera_jitter: float
    camera_drop: float
    camera_clock_offset: float
    camera_exposure_drift: float
    camera_white_balance_drift: float
    camera_drift_period: float
    camera_pose_error: float
    command_delay: float
    state_jitter: float
    pose_noise: float
    scene_reset_time: float
    tracker_objects: tuple[str, ...]
    tracker_rate_hz: float
    tracker_noise: float
    reflex_force: float
    reflex_speed: float
    spacemouse: str
    operator_rate_hz: float
    operator_near_misses: float
    publish_reward: bool
    report_period: float

    @classmethod
    def from_config(cls, cell: dict[str, Any]) -> CellSettings:
        def rate(key: str) -> float:
            return positive(f"cell.{key}", cell[key])

        def share(key: str) -> float:
            value = non_negative(f"cell.{key}", cell[key])
            if value >= 1:
                raise ConfigError(f"cell.{key}", value, "a share in [0, 1)")
            return value

        tracker, reflex = cell["tracker"], cell["reflex"]
        return cls(
            state_rate_hz=rate("state_rate_hz"),
            camera_rate_hz=rate("camera_rate_hz"),
            cameras=tuple(cell["cameras"] or ()),
            image_size=int(positive("cell.image_size", cell["image_size"], integer=True)),
            camera_latency=non_negative("cell.camera_latency", cell["camera_latency"]),
            camera_jitter=non_negative("cell.camera_jitter", cell["camera_jitter"]),
            camera_drop=share("camera_drop"),
            camera_clock_offset=float(cell["camera_clock_offset"]),
            camera_exposure_drift=non_negative("cell.camera_exposure_drift", cell["camera_exposure_drift"]),
            camera_white_balance_drift=non_negative(
                "cell.camera_white_balance_drift", cell["camera_white_balance_drift"]
            ),
            camera_drift_period=positive("cell.camera_drift_period", cell["camera_drift_period"]),
            camera_pose_error=non_negative("cell.camera_pose_error", cell["camera_pose_error"]),
            command_delay=non_negative("cell.command_delay", cell["command_delay"]),
            state_jitter=non_negative("cell.state_jitter", cell["state_jitter"]),
            pose_noise=non_negative("cell.pose_noise", cell["pose_noise"]),
            scene_reset_time=non_negative("cell.scene_reset_time", cell["scene_reset_time"]),
            tracker_objects=tuple(tracker["objects"] or ()),
            tracker_rate_hz=positive("cell.tracker.rate_hz", tracker["rate_hz"]),
            tracker_noise=non_negative("cell.tracker.noise", tracker["noise"]),
            reflex_force=positive("cell.reflex.max_force", reflex["max_force"]),
            reflex_speed=positive("cell.reflex.max_speed", reflex["max_speed"]),
            spacemouse=str(cell["spacemouse"]),
            operator_rate_hz=positive("cell.operator_rate_hz", cell["operator_rate_hz"]),
            operator_near_misses=share("operator_near_misses"),
            publish_reward=bool(cell["publish_reward"]),
            report_period=positive("cell.report_period", cell["report_period"]),
        )


def tracker_topic(name: str) -> str:
    """Where a vrpn_mocap client publishes rigid body ``name``'s pose."""
    return f"vrpn_mocap/{name}/pose"


class CellEmulator(SimRobot):
    """The sim arm on the wall clock behind driver interfaces (module docstring)."""

    def __init__(
        self,
        node,
        env: PandaTaskEnv,
        settings: CellSettings,
        frame_id: str,
        seed: int,
        workspace,
        arm: str | None,
        robot_joints: tuple[list[str], list[str], float] | None = None,
    ):
        """``arm``: ``robot.arm`` of the robot config (``ur``: MoveIt Servo's twists in; otherwise, as on a Franka,
        a Cartesian impedance controller's target pose). ``robot_joints``: (arm joint names, gripper joint names,
        the gripper joints' sum when open) the robot's driver reports (:meth:`joint_state`); None: the sim's."""
        self.settings = settings
        self.rng = np.random.default_rng([int(seed), 48])  # the cell's noise: its own stream of the run's seed
        super().__init__(
            node,
            env,
            settings.state_rate_hz,
            settings.camera_rate_hz,
            frame_id,
            seed,
            reset_service=False,
            workspace=workspace,
            task_signals=False,
            arm_inputs=("servo",) if arm == "ur" else ("pose",),
        )
        self.operator: ScriptedOperator | None = None
        self.robot_joints = robot_joints
        self.drift = {  # how each camera's light will wander
            name: CameraDrift(
                settings.camera_exposure_drift,
                settings.camera_white_balance_drift,
                settings.camera_drift_period,
                self.rng,
            )
            for name in self.cameras
        }
        self.frames: list[tuple[float, int, str, np.ndarray, float]] = []  # heap of (due, n, camera, frame, stamp)
        self.frame_count = 0
        self.commands: list[tuple[float, int, Any, bytes | None]] = []  # delayed arm commands (due, n, msg, gid)
        self.faults: dict[str, float] = {}  # fault -> monotonic time it ends
        self.error = ""  # the arm's reflex, until recovered
        self.reflex_next_episode = False  # an injected collision waits for the next episode ...
        self.reflex_at: float | None = None  # ... and comes at this monotonic time, EPISODE_SETTLE s into it
        self.scene_due: tuple[float, bool] | None = None
        self.tally = ClassifierTally()
        self.scene_succeeded = False  # the task was done at some moment on the scene now in place (the sim's truth)
        self.truth: list[bool] = []  # per scene so far (the first: before any episode), for cell/report
        self.counts = {"state_messages": 0, "frames": 0, "frames_dropped": 0, "reflexes": 0, "scene_resets": 0}
        self.next_tracker = self.next_operator = 0.0
        self.started_at = time.monotonic()
        self.rate_mark = (self.started_at, 0)  # (time, state messages) of the last report: the rate since
        self.trackers = {
            name: node.create_publisher(PoseStamped, tracker_topic(name), qos.STREAM_PUBLISHER)
            for name in settings.tracker_objects
        }
        for name in settings.tracker_objects:
            if mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_BODY, name) < 0:
                raise ConfigError("cell.tracker.objects", name, f"a body of task {type(env).__name__}'s scene")
        self.error_pub = node.create_publisher(String, "arm/error", qos.LATCHED)
        self.error_pub.publish(String(data=""))
        self.report_pub = node.create_publisher(String, "cell/report", qos.LATCHED)
        self.scene_ready_pub = node.create_publisher(Empty, "rl/scene_ready", qos.EVENT)
        self.guard.subscribe(Bool, "rl/scene_reset", self._on_scene_reset, qos.EVENT)
        self.guard.subscribe(String, "cell/fault", self._on_fault, qos.EVENT)
        node.create_service(Trigger, "arm/error_recovery", self._on_recovery)
        if settings.publish_reward:  # the ground-truth run: the sim's reward and success, as in sim_train
            self.reward_pub = node.create_publisher(Float64, "rl/reward", qos.STREAM_PUBLISHER)
            self.success_pub = node.create_publisher(Bool, "rl/success", qos.STREAM_PUBLISHER)
        else:
            self.guard.subscribe(Bool, "rl/success", self._on_classifier, qos.STREAM_SUBSCRIBER)
        node.create_timer(settings.report_period, self.report)

    # ----------------------------------------------------------------- the operator and the scene
    def start(self, operator: ScriptedOperator | None) -> None:  # type: ignore[override]
        """The first scene (the arm at home, as a cell is found in the morning), then the operator."""
        self.operator = operator
        self.env.reset(seed=self.seed)
        self.episodes = 1
        self.started = None
        self.physics_steps = 0
        self.reset_stamp = self.time()

    def _on_scene_reset(self, msg) -> None:
        """``home_reset`` has the arm home: the person puts the objects back, which takes its time. The episode
        played on the scene before is over: whether it truly succeeded is logged (``cell: scene N truly ...``)."""
        if self.scene_due is None:
            self.truth.append(self.scene_succeeded)
            false_success = self.tally.end_scene(self.scene_succeeded)
            said = "" if false_success is None else f" (the classifier said success at {described(false_success)})"
            self.node.get_logger().info(
                f"cell: scene {len(self.truth) - 1} truly {'succeeded' if self.scene_succeeded else 'failed'}{said}"
            )
            self.scene_due = (time.monotonic() + self.settings.scene_reset_time, bool(msg.data))

    def reset_scene(self, demo: bool) -> None:
        """The objects placed anew (the arm stays where it is), at rest."""
        env = self.env
        env.reset_task(np.random.default_rng([self.seed, self.episodes]))
        free = np.flatnonzero(env.model.jnt_type == mujoco.mjtJoint.mjJNT_FREE)
        for joint in free:
            start = env.model.jnt_dofadr[joint]
            env.data.qvel[start : start + 6] = 0.0
        mujoco.mj_forward(env.model, env.data)
        self.episodes += 1
        self.counts["scene_resets"] += 1
        self.scene_succeeded = False
        self.tally.begin_scene()
        if self.reflex_next_episode:
            self.reflex_next_episode, self.reflex_at = False, time.monotonic() + EPISODE_SETTLE
        if self.operator is not None:
            self.operator.begin_episode(demo)
        self.scene_ready_pub.publish(Empty())

    # ----------------------------------------------------------------- commands, with the controller's delay
    def _on_pose_command(self, msg, gid: bytes | None) -> None:
        if self.error:
            return  # a reflex: the arm takes no command until recovered
        if self.settings.command_delay <= 0:
            super()._on_pose_command(msg, gid)
            return
        self.frame_count += 1
        heapq.heappush(self.commands, (time.monotonic() + self.settings.command_delay, self.frame_count, msg, gid))

    def _apply_due_commands(self, now: float) -> None:
        while self.commands and self.commands[0][0] <= now:
            _, _, msg, gid = heapq.heappop(self.commands)
            if not self.error:
                super()._on_pose_command(msg, gid)

    def _integrate_servo(self, dt: float) -> None:
        if not self.error:
            super()._integrate_servo(dt)

    # ----------------------------------------------------------------- the arm's reflex (libfranka)
    def check_reflex(self) -> None:
        force = float(np.linalg.norm(self.env.wrench_in_base()[0]))
        speed = float(np.linalg.norm(self.env.tcp_velocity()[:3]))
        if force > self.settings.reflex_force:
            self.trip(f"cartesian_reflex: contact force {force:.0f} N > {self.settings.reflex_force:g} N")
        elif speed > self.settings.reflex_speed:
            self.trip(f"cartesian_velocity_violation: {speed:.2f} m/s > {self.settings.reflex_speed:g} m/s")

    def trip(self, error: str) -> None:
        """Stop the arm where it is and report ``error`` until a recovery call."""
        if self.error:
            return
        self.error = error
        self.counts["reflexes"] += 1
        self.env.controller.set_target(self.env.tcp_pos, self.env.tcp_rot)
        self.commands.clear()
        self.error_pub.publish(String(data=error))
        self.node.get_logger().error(f"arm error: {error}; the arm stopped until arm/error_recovery is called")

    def _on_recovery(self, request, response):
        was, self.error = self.error, ""
        if was:
            self.env.controller.set_target(self.env.tcp_pos, self.env.tcp_rot)
            self.error_pub.publish(String(data=""))
            self.node.get_logger().info(f"arm error recovered ({was})")
        response.success, response.message = True, f"recovered from {was}" if was else "no error"
        return response

    # ----------------------------------------------------------------- faults
    def _on_fault(self, msg) -> None:
        request = json.loads(msg.data)
        fault, duration = request.get("fault"), float(request.get("seconds", 0.0))
        if fault not in FAULTS or not np.isfinite(duration) or duration < 0:
            raise ValueError(f"fault {msg.data[:80]!r}; expected {{'fault': one of {FAULTS}, 'seconds': >= 0}}")
        self.node.get_logger().warning(f"fault: {fault} for {duration:g} s")
        if fault == "reflex":  # a collision early in the next episode
            self.reflex_next_episode = True
        elif fault == "camera_bump":  # each camera re-clamped a few millimetres off (between demos and training)
            for name in self.cameras:
                offset = offset_camera(self.env.model, name, self.settings.camera_pose_error, self.rng)
                self.node.get_logger().info(f"cell: camera {name} moved by {np.round(offset * 1000, 1)} mm")
        else:
            self.faults[fault] = time.monotonic() + duration
            if fault == "spacemouse_unplug" and self.operator is not None:
                self.operator.device.unplug()

    def faulty(self, fault: str, now: float) -> bool:
        end = self.faults.get(fault)
        if end is None:
            return False
        if now < end:
            return True
        del self.faults[fault]
        if fault == "spacemouse_unplug" and self.operator is not None:
            self.operator.device.plug()
        return False

    def _on_classifier(self, msg) -> None:
        self.tally.add(bool(msg.data), bool(self.env.is_success()), self.env.task_info())

    # ----------------------------------------------------------------- the cell's clock
    def tick(self) -> None:
        now = time.monotonic()
        self._apply_due_commands(now)
        if self.scene_due is not None and now >= self.scene_due[0]:
            demo = self.scene_due[1]
            self.scene_due = None
            self.reset_scene(demo)
        super().tick()  # physics to now, then the state (publish_state)
        if not self.error:
            self.check_reflex()
        if self.reflex_at is not None and now >= self.reflex_at:
            self.reflex_at = None
            self.trip("cartesian_reflex: a collision (injected)")
        if self.operator is not None and now >= self.next_operator:
            self.next_operator = now + 1.0 / self.settings.operator_rate_hz
            self.faulty("spacemouse_unplug", now)  # plugged back once the fault is over
            self.operator.tick(now, self.env.dense_reward())
        self.publish_due_frames(now)

    def publish_state(self) -> None:
        now = time.monotonic()
        if self.faulty("state_gaps", now) and (now - self.started_at) % (2 * STATE_GAP) < STATE_GAP:
            return  # no state in every other 5 ms window
        if self.settings.state_jitter and self.rng.random() < 0.5:
            time.sleep(min(abs(self.rng.normal(0.0, self.settings.state_jitter)), 0.5 / self.settings.state_rate_hz))
        self.publish_task_signals()
        self.publish_arm_state()
        self.counts["state_messages"] += 1

    def joint_state(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """The arm's joints under the robot's names (``robot.joint_names``: a Panda's body behind a UR's driver
        reports its first six) and the gripper as the robot's gripper joints report it (``ros.gripper_joints``,
        their sum ``ros.gripper_max_opening`` when open: two Franka fingers in m, one Robotiq knuckle in rad)."""
        names, position, velocity, effort = super().joint_state()
        if not self.robot_joints:
            return names, position, velocity, effort
        arm = [i for i, name in enumerate(names) if not name.startswith("finger")]
        fingers = [i for i, name in enumerate(names) if name.startswith("finger")]
        arm_names, gripper_names, max_opening = self.robot_joints
        arm = arm[: len(arm_names)]
        scale = max_opening / FINGERS_OPEN
        grip = position[fingers] * scale
        grip_velocity = velocity[fingers] * scale
        if len(gripper_names) == 1:
            grip, grip_velocity = grip.sum(keepdims=True), grip_velocity.sum(keepdims=True)
        return (
            [*arm_names[: len(arm)], *gripper_names],
            np.concatenate([position[arm], grip]),
            np.concatenate([velocity[arm], grip_velocity]),
            np.concatenate([effort[arm], np.zeros(len(gripper_names))]),
        )

    def measured_tcp_pos(self) -> np.ndarray:
        """The sim's TCP position with the driver's noise (``cell.pose_noise``, m std per axis)."""
        return self.env.tcp_pos + self.rng.normal(0.0, self.settings.pose_noise, 3)

    def publish_task_signals(self) -> None:
        """What a cell has instead of the sim's task signals: the object tracker (and, in the ground-truth run, the
        sim's reward and success)."""
        now = time.monotonic()
        self.scene_succeeded = self.scene_succeeded or bool(self.env.is_success())
        if self.settings.publish_reward:
            success = self.env.is_success()
            self.success_pub.publish(Bool(data=bool(success)))  # then its reward, which carries it (TopicEnv)
            self.reward_pub.publish(Float64(data=float(self.env.reward(success))))
        if self.trackers and now >= self.next_tracker:
            self.next_tracker = now + 1.0 / self.settings.tracker_rate_hz
            stamp = self.time()
            for name, publisher in self.trackers.items():
                body = self.env.data.body(name)
                position = body.xpos + self.rng.normal(0.0, self.settings.tracker_noise, 3)
                rotation = body.xmat.reshape(3, 3) @ matrix_from_rotvec(
                    self.rng.normal(0.0, self.settings.tracker_noise, 3)
                )
                publisher.publish(pose_msg(position, rotation, stamp, self.frame_id))

    def publish_images(self) -> None:
        """A frame per camera is exposed now (its light drifting), stamped by the camera's clock, and reaches its topic
        after the camera's latency (with jitter) unless it is dropped, or the camera stopped (fault ``camera_stop``)."""
        now, settings = time.monotonic(), self.settings
        if self.faulty("camera_stop", now):
            return
        for name in self.cameras:
            if self.rng.random() < settings.camera_drop:
                self.counts["frames_dropped"] += 1
                continue
            frame = self.drift[name](self.env._render_camera(name), now)
            stamp = self.time() + settings.camera_clock_offset
            delay = max(settings.camera_latency + self.rng.normal(0.0, settings.camera_jitter), 0.0)
            self.frame_count += 1
            heapq.heappush(self.frames, (now + delay, self.frame_count, name, frame, stamp))
        self.publish_due_frames(now)

    def publish_due_frames(self, now: float) -> None:
        while self.frames and self.frames[0][0] <= now:
            _, _, name, frame, stamp = heapq.heappop(self.frames)
            image_pub, info_pub = self.cameras[name]
            frame_id = f"{name}_color_optical_frame"
            image_pub.publish(image_msg(frame, stamp, frame_id))
            fovy = float(self.env.model.cam_fovy[self.env.model.camera(name).id])
            k = pinhole_matrix(frame.shape[1], frame.shape[0], fovy)
            info_pub.publish(camera_info_msg(frame.shape[1], frame.shape[0], k, stamp, frame_id))
            self.counts["frames"] += 1

    # ----------------------------------------------------------------- what only the emulator knows
    def report_record(self) -> dict[str, Any]:
        now = time.monotonic()
        since, messages = self.rate_mark
        self.rate_mark = (now, self.counts["state_messages"])
        operator = self.operator
        return {
            "state_rate_hz": (self.counts["state_messages"] - messages) / max(now - since, 1e-9),
            "state_rate_configured_hz": self.settings.state_rate_hz,
            **self.counts,
            "classifier": {**self.tally.counts, **self.tally.rates()},
            "operator_takeover_steps": operator.takeover_steps if operator else 0,
            "scenes_truly_succeeded": [int(success) for success in [*self.truth, self.scene_succeeded]],  # + now
            "arm_error": self.error,
            "seconds": now - self.started_at,
        }

    def report(self, final: bool = False) -> None:
        """The record on ``cell/report`` and a line in the log (at exit, the whole record: ``cell report: {...}``)."""
        record = self.report_record()
        self.report_pub.publish(String(data=json.dumps(record)))
        log = self.node.get_logger()
        if final:
            log.info(f"cell report: {json.dumps(record)}")
            return
        log.info(
            f"cell: state {record['state_rate_hz']:.0f} Hz (of {self.settings.state_rate_hz:g}), "
            f"{record['frames']} frames ({record['frames_dropped']} dropped), classifier "
            f"{json.dumps(record['classifier'])}, {record['reflexes']} reflexes, {record['scene_resets']} scene resets"
        )


def cell_task(cfg) -> dict[str, Any]:
    """The task the cell's scene comes from, with the cell's cameras rendered at the cell's image size."""
    from omegaconf import OmegaConf

    task = OmegaConf.to_container(cfg.task, resolve=True)
    cameras = list(cfg.cell.cameras or [])
    return {**task, "cameras": cameras, "image_size": int(cfg.cell.image_size), "privileged_state": False}


def robot_joints(cfg) -> tuple[list[str], list[str], float] | None:
    """The joint names a robot config's driver reports, or None without a robot config."""
    names = cfg.robot.get("joint_names")
    if not names:
        return None
    return list(names), list(cfg.ros.gripper_joints), float(cfg.ros.gripper_max_opening)


def main(argv: list[str] | None = None) -> int:
    from omegaconf import OmegaConf

    from robot_rl.core.config import settings_of
    from robot_rl.runtime.envs import make_env, make_expert
    from robot_rl.runtime.teleop import InterventionRules, ScriptedHuman

    from ...safety.robot_limits import workspace_of
    from ..plumbing.node_main import exit_with_error, node_config, ros_node, spin

    device = None
    try:
        cfg, ros_args = node_config(sys.argv[1:] if argv is None else argv)
        settings = CellSettings.from_config(OmegaConf.to_container(cfg.cell, resolve=True))
        task = cell_task(cfg)
        env = make_env(task).unwrapped
        if not isinstance(env, PandaTaskEnv):
            raise ConfigError("task", task.get("name"), "a robot_rl MuJoCo task (the cell emulator runs PandaTaskEnv)")
        rules = settings_of("human", InterventionRules, OmegaConf.to_container(cfg.human, resolve=True))
        teleop = cfg.teleop_device
        human = ScriptedHuman(make_expert(task, env), rules) if task.get("expert") and settings.spacemouse else None
        device = HidFifo(settings.spacemouse) if human is not None else None
        operator = None
        if device is not None:
            operator = ScriptedOperator(
                env,
                human,
                device,
                dict(teleop.spacemouse_signs),
                float(teleop.full_scale),
                dict(teleop.spacemouse_buttons),
                1.0 / env.control_rate_hz,
                settings.operator_near_misses,
                int(cfg.seed),
            )
    except ConfigError as error:
        if device is not None:
            device.close()
        return exit_with_error("robot_rl.ros.emulation.cell_node", error)
    try:
        with ros_node("robot_rl_cell", ros_args) as node:
            try:
                cell = CellEmulator(
                    node,
                    env,
                    settings,
                    cfg.ros.frame_id,
                    int(cfg.seed),
                    workspace_of(cfg.robot.limits),
                    cfg.robot.get("arm"),
                    robot_joints(cfg),
                )
            except ConfigError as error:
                return exit_with_error("robot_rl.ros.emulation.cell_node", error)
            cell.start(operator)
            node.get_logger().info(
                f"cell: {task.get('name')} on the wall clock, state at {settings.state_rate_hz:g} Hz, cameras "
                f"{list(settings.cameras)} at {settings.camera_rate_hz:g} Hz, tracker {list(settings.tracker_objects)}, "
                f"SpaceMouse {settings.spacemouse or 'none'}"
            )
            try:
                spin(node)
            finally:
                cell.report(final=True)
                env.close()
    finally:
        if device is not None:
            device.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
