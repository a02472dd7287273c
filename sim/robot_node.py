"""The sim robot node: a robot_rl MuJoCo task at real time behind the topics of a real cell.

It publishes what a Franka under ros2_control and RealSense cameras would, takes the command
topics of a Cartesian impedance controller, and adds the task's reward/success signals (on the
real robot the reward classifier publishes those) and a reset service. The scripted human
(:mod:`sim.scripted_teleop`) runs here too, since it reads privileged sim state, and publishes
what an operator's SpaceMouse would. The same actor, learner and safety nodes therefore run
unchanged against this node and against the real cell.

| direction | topic | type |
|---|---|---|
| out | ``/joint_states`` | sensor_msgs/JointState (arm joints rad, fingers m) |
| out | ``/franka_robot_state_broadcaster/current_pose`` | geometry_msgs/PoseStamped: TCP, base frame |
| out | ``/franka_robot_state_broadcaster/external_wrench_in_base_frame`` | geometry_msgs/WrenchStamped |
| out | ``/camera/<name>/color/image_raw``, ``.../camera_info`` | sensor_msgs/Image rgb8, CameraInfo |
| out | ``/rl/reward`` (std_msgs/Float64), ``/rl/success`` (std_msgs/Bool) | the task's signals |
| out | ``/rl/task_state`` | std_msgs/Float32MultiArray: privileged task features (labels in the layout) |
| out | ``/sim/violation`` | std_msgs/UInt32: :class:`~sim.constraints.Constraint` flags |
| in | ``/rl/equilibrium_pose`` (PoseStamped), ``/rl/gripper_command`` (std_msgs/Float64) | from the safety node |
| in | ``/servo_node/delta_twist_cmds`` | TwistStamped, base frame: MoveIt Servo's input (UR bridge), integrated into the target |
| srv | ``/rl/reset`` | std_srvs/SetBool: reset the task; ``data`` = the next episode is a demonstration (unless ``ros.sim_reset_service=false``: then ``hardware.home_reset`` serves it, as on the real cell) |

Every command goes through the node's :class:`~robot_rl.ros.guard.InputGuard` (``guard.dropped``):
a pose with NaN / inf or a zero quaternion, a non-finite twist or gripper command is dropped and
counted. A reset that fails answers ``success=False`` with the reason; the node keeps running.

Physics advances by wall-clock time on a ``state_rate_hz`` timer (catching up at most 50 ms per
tick, and saying so when it falls behind); images are rendered on their own timer.

    python -m sim.robot_node task=pick_cube ros.camera_rate_hz=10 [--ros-args ...]
"""

from __future__ import annotations

import sys
import time

import mujoco
import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped, WrenchStamped
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Bool, Float32MultiArray, Float64, MultiArrayDimension, UInt32
from std_srvs.srv import SetBool

from robot_rl.geometry import matrix_from_rotvec
from robot_rl.ros import qos
from robot_rl.ros.guard import InputGuard, MessageError, finite_scalar
from robot_rl.ros.messages import (camera_info_msg, image_msg, joint_state_msg, pinhole_matrix, pose_msg, pose_to_numpy,
                                   seconds, twist_to_numpy, wrench_msg)
from robot_rl.ros.senders import PublisherWatch, subscribe_with_sender
from robot_rl.ros.topic_env import camera_topic

from .panda_env import PandaTaskEnv
from .scripted_teleop import ScriptedTeleop

STATE_TOPICS = {
    "joint_states": "/joint_states",
    "pose": "/franka_robot_state_broadcaster/current_pose",
    "wrench": "/franka_robot_state_broadcaster/external_wrench_in_base_frame",
}
MAX_CATCH_UP = 0.05  # s of physics per tick at most
SERVO_TIMEOUT = 0.1  # s: MoveIt Servo's halt timeout


def camera_topics(name: str) -> tuple[str, str]:
    """(image, camera_info) topics of camera ``name``, as realsense2_camera names them."""
    return camera_topic(name), f"/camera/{name}/color/camera_info"


class SimRobot:
    """Owns the task env, its real-time clock and the node's publishers."""

    def __init__(self, node, env: PandaTaskEnv, state_rate_hz: float, camera_rate_hz: float, frame_id: str,
                 teleop: ScriptedTeleop | None, seed: int, reset_service: bool = True,
                 command_senders: tuple[str, ...] = ("robot_rl_safety",)):
        """``command_senders``: the nodes whose arm and gripper commands the sim arm obeys (the safety node);
        a command from any other publisher is dropped and counted, as no real arm should take it."""
        self.node, self.env, self.frame_id, self.teleop = node, env, frame_id, teleop
        self.seed, self.episodes = seed, 0
        self.physics_dt = float(env.model.opt.timestep)
        moving = (mujoco.mjtJoint.mjJNT_SLIDE, mujoco.mjtJoint.mjJNT_HINGE)  # arm and fingers, not free objects
        self.joint_names = [env.model.joint(i).name for i in range(env.model.njnt) if env.model.jnt_type[i] in moving]
        self.joint_qpos = [env.model.joint(name).qposadr[0] for name in self.joint_names]
        self.joint_dof = [env.model.joint(name).dofadr[0] for name in self.joint_names]
        self.pub = {
            "joint_states": node.create_publisher(JointState, STATE_TOPICS["joint_states"], qos.STREAM_PUBLISHER),
            "pose": node.create_publisher(PoseStamped, STATE_TOPICS["pose"], qos.STREAM_PUBLISHER),
            "wrench": node.create_publisher(WrenchStamped, STATE_TOPICS["wrench"], qos.STREAM_PUBLISHER),
            "reward": node.create_publisher(Float64, "/rl/reward", qos.STREAM_PUBLISHER),
            "success": node.create_publisher(Bool, "/rl/success", qos.STREAM_PUBLISHER),
            "task_state": node.create_publisher(Float32MultiArray, "/rl/task_state", qos.STREAM_PUBLISHER),
            "violation": node.create_publisher(UInt32, "/sim/violation", qos.STREAM_PUBLISHER),
        }
        self.cameras = {name: (node.create_publisher(Image, camera_topics(name)[0], qos.STREAM_PUBLISHER),
                               node.create_publisher(CameraInfo, camera_topics(name)[1], qos.STREAM_PUBLISHER))
                        for name in env.cameras}
        self.guard = InputGuard(node)
        pose_topic = subscribe_with_sender(node, self.guard, PoseStamped, "/rl/equilibrium_pose",
                                           self._on_pose_command, qos.COMMAND)
        self.guard.subscribe(TwistStamped, "/servo_node/delta_twist_cmds", self._on_servo_command, qos.COMMAND)
        self.servo: tuple[np.ndarray, float] | None = None  # (twist, monotonic receive time)
        gripper_topic = subscribe_with_sender(node, self.guard, Float64, "/rl/gripper_command",
                                              self._on_gripper_command, qos.COMMAND)
        senders = frozenset(command_senders)
        self.command_senders = PublisherWatch(node, {}, {pose_topic: senders, gripper_topic: senders},
                                              discovery_grace=5.0)
        self.pose_topic, self.gripper_topic = pose_topic, gripper_topic
        if reset_service:
            node.create_service(SetBool, "/rl/reset", self._on_reset)
        self.reset(demo=False)
        node.create_timer(1.0 / state_rate_hz, self.tick)
        if self.cameras:
            node.create_timer(1.0 / camera_rate_hz, self.publish_images)

    # ----------------------------------------------------------------- episode
    def reset(self, demo: bool) -> int:
        seed = self.seed + self.episodes
        self.env.reset(seed=seed)
        self.episodes += 1
        self.started: float | None = None  # the physics clock starts at the first tick
        self.reset_stamp = self.node.get_clock().now().nanoseconds * 1e-9
        self.physics_steps = 0
        if self.teleop is not None:
            self.teleop.begin_episode(demo)
        self.publish_state()
        return seed

    def _on_reset(self, request, response):
        try:
            seed = self.reset(bool(request.data))
        except Exception as error:  # noqa: BLE001 - a failed reset is the caller's answer, not the node's end
            self.node.get_logger().error(f"reset failed: {error}")
            response.success, response.message = False, f"reset failed: {error}"
        else:
            response.success, response.message = True, f"seed {seed}"
        return response

    # ----------------------------------------------------------------- commands
    def _on_pose_command(self, msg, gid: bytes | None) -> None:
        if not self.command_senders.admits(self.pose_topic, gid):
            return
        if seconds(msg.header.stamp) < self.reset_stamp:
            return  # a command for the pose before the reset
        pos, rot = pose_to_numpy(msg.pose)
        self.env.controller.set_target(np.clip(pos, self.env.workspace[0], self.env.workspace[1]), rot)

    def _on_servo_command(self, msg) -> None:
        """MoveIt Servo's input (UR bridge): a base-frame twist, m/s and rad/s, integrated into the target."""
        if msg.header.frame_id not in ("", self.frame_id):
            raise MessageError(f"servo twist in frame {msg.header.frame_id[:40]!r}; expected {self.frame_id!r}")
        self.servo = (twist_to_numpy(msg.twist), time.monotonic())

    def _integrate_servo(self, dt: float) -> None:
        if self.servo is None or time.monotonic() - self.servo[1] > SERVO_TIMEOUT:
            return  # like MoveIt Servo: no command for 0.1 s -> halt (the target stays)
        twist = self.servo[0]
        target = self.env.controller.target_pos + twist[:3] * dt
        rot = matrix_from_rotvec(twist[3:] * dt) @ self.env.controller.target_rot
        self.env.controller.set_target(np.clip(target, self.env.workspace[0], self.env.workspace[1]), rot)

    def _on_gripper_command(self, msg, gid: bytes | None) -> None:
        if not self.command_senders.admits(self.gripper_topic, gid):
            return
        self.env.set_gripper_command(float(np.clip(finite_scalar("gripper command", msg.data), -1.0, 1.0)))

    # ----------------------------------------------------------------- the clock
    def tick(self) -> None:
        if self.started is None:
            self.started = time.monotonic()
        due = int((time.monotonic() - self.started) / self.physics_dt) - self.physics_steps
        limit = int(MAX_CATCH_UP / self.physics_dt)
        if due > limit:
            self.node.get_logger().warning(f"sim is {due * self.physics_dt:.3f} s behind real time; skipping ahead",
                                           throttle_duration_sec=5.0)
            self.physics_steps += due - limit
            due = limit
        if due > 0:
            self._integrate_servo(due * self.physics_dt)
            self.env.simulate(due)
            self.physics_steps += due
        self.publish_state()
        if self.teleop is not None:
            self.teleop.tick(time.monotonic(), self.env.dense_reward())

    def publish_state(self) -> None:
        env, now = self.env, self.node.get_clock().now().nanoseconds * 1e-9
        data = env.data
        self.pub["joint_states"].publish(joint_state_msg(
            self.joint_names, data.qpos[self.joint_qpos], data.qvel[self.joint_dof], data.qfrc_actuator[self.joint_dof], now))
        self.pub["pose"].publish(pose_msg(env.tcp_pos, env.tcp_rot, now, self.frame_id))
        force, torque = np.split(env.wrench(), 2)
        hand_to_base = env.tcp_rot
        self.pub["wrench"].publish(wrench_msg(hand_to_base @ force, hand_to_base @ torque, now, self.frame_id))
        success = env.is_success()
        self.pub["reward"].publish(Float64(data=env.reward(success)))
        self.pub["success"].publish(Bool(data=bool(success)))
        self.pub["violation"].publish(UInt32(data=int(env.violation())))
        features = env.task_state()
        if features:
            msg = Float32MultiArray()
            msg.layout.dim = [MultiArrayDimension(label=name, size=int(np.size(v)), stride=int(np.size(v)))
                              for name, v in features.items()]
            msg.data = np.concatenate([np.ravel(v) for v in features.values()]).astype(np.float32).tolist()
            self.pub["task_state"].publish(msg)

    def publish_images(self) -> None:
        for name, (image_pub, info_pub) in self.cameras.items():
            now = self.node.get_clock().now().nanoseconds * 1e-9
            frame = self.env._render_camera(name)
            image_pub.publish(image_msg(frame, now, f"{name}_color_optical_frame"))
            fovy = float(self.env.model.cam_fovy[self.env.model.camera(name).id])
            k = pinhole_matrix(frame.shape[1], frame.shape[0], fovy)
            info_pub.publish(camera_info_msg(frame.shape[1], frame.shape[0], k, now, f"{name}_color_optical_frame"))


def main(argv: list[str] | None = None) -> int:
    from omegaconf import OmegaConf

    from robot_rl.config import ConfigError, settings_of
    from robot_rl.envs import make_env, make_expert
    from robot_rl.ros.node_main import exit_with_error, node_config, ros_node, spin
    from robot_rl.teleop import InterventionRules, ScriptedHuman

    try:
        cfg, ros_args = node_config(sys.argv[1:] if argv is None else argv)
        task = OmegaConf.to_container(cfg.task, resolve=True)
        env = make_env(task).unwrapped
        if not isinstance(env, PandaTaskEnv):
            raise ConfigError("task", task.get("name"), "a robot_rl MuJoCo task (the sim robot node runs PandaTaskEnv)")
        rules = settings_of("human", InterventionRules, OmegaConf.to_container(cfg.human, resolve=True))
        human = ScriptedHuman(make_expert(task, env), rules) if task.get("expert") else None
    except ConfigError as error:
        return exit_with_error("sim.robot_node", error)
    with ros_node("robot_rl_sim_robot", ros_args) as node:
        teleop = None if human is None else ScriptedTeleop(node, env, human, 1.0 / env.control_rate_hz)
        SimRobot(node, env, float(cfg.ros.state_rate_hz), float(cfg.ros.camera_rate_hz), cfg.ros.frame_id, teleop,
                 int(cfg.seed), bool(cfg.ros.sim_reset_service), tuple(cfg.ros.arm_command_senders))
        node.get_logger().info(f"sim robot: {task.get('name')} at real time, cameras {list(env.cameras)}")
        spin(node)
    return 0


if __name__ == "__main__":
    sys.exit(main())
