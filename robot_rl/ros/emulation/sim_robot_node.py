"""The sim robot node: a robot_rl MuJoCo task at real time behind the topics of a real cell.

It publishes what a Franka under ros2_control and RealSense cameras would, takes the command
topics of a Cartesian impedance controller, and adds the task's reward/success signals (on the
real robot the reward classifier publishes those) and a reset service. The scripted human
(:mod:`robot_rl.ros.emulation.scripted_teleop`) runs here too, since it reads privileged sim state, and publishes
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
| out | ``/sim/violation`` | std_msgs/UInt32: :class:`~robot_rl.sim.constraints.Constraint` flags (with every arm state when ``safety.fast_critic.record_ticks`` or ``learn``) |
| out | ``/rl/safety_context`` | std_msgs/Float32MultiArray, latched: the task context of the safety node's fast critic (the keep-out zone's corners where it is now, m, and its velocity, m/s; base frame), for tasks with one |
| out | ``/clock`` | rosgraph_msgs/Clock: sim time only |
| in | ``/rl/equilibrium_pose`` (PoseStamped), ``/rl/gripper_command`` (std_msgs/Float64) | from the safety node |
| in | ``/rl/action`` | PoseStamped from the actor: sim time only, the stamp of the observation it answers |
| in | ``/servo_node/delta_twist_cmds`` | TwistStamped, base frame: MoveIt Servo's input (UR bridge), integrated into the target |
| srv | ``/rl/reset`` | std_srvs/SetBool: reset the task; ``data`` = the next episode is a demonstration (unless ``ros.sim_reset_service=false``: then ``robot_rl.ros.nodes.home_reset_node`` serves it, as on the real cell) |

Every command goes through the node's :class:`~robot_rl.ros.plumbing.guard.InputGuard` (``guard.dropped``):
a pose with NaN / inf or a zero quaternion, a non-finite twist or gripper command is dropped and
counted. A reset that fails answers ``success=False`` with the reason; the node keeps running.

Two clocks (:mod:`robot_rl.ros.plumbing.sim_clock`):

* real time (``ros.sim_time=false``): physics advances by wall-clock time on a ``state_rate_hz``
  timer (catching up at most 50 ms per tick, and saying so when it falls behind); images are
  rendered on their own timer. For rehearsing the cell's latencies.
* sim time (``ros.sim_time=true``): the node owns ``/clock`` and runs in lockstep with the actor.
  It publishes the observation of time T (the scripted human's input first, then the task signals,
  joints, images and last the pose), and waits for the actor's command stamped T (``/rl/action``,
  read only as the go signal). Then, for each state period of the control period, it waits for the
  safety node's arm command of that instant, applies it, steps the physics and publishes the pose and
  wrench the safety node's next tick reads. The safety node ticks the period's first instant on the
  actor's command and every later instant on its arm state (the states inside the command's period). ``/clock``
  moves once per period, to its first instant, after the safety node's answer (a clock that overtook the command
  on its way would make the node tick on the previous one): only the safety node works at the state rate, and
  every other node of the graph wakes for the clock once per period, not once per state period. No sleeping: a
  rehearsal runs as fast as the nodes answer. A reset moves the clock on by ``ros.reset_pause`` so the safety node
  sees the actor's last command go stale and holds the measured pose, as on the cell. While it waits,
  the clock and the stamped pose and wrench go out again every 0.1 s for nodes that join late.

    python -m robot_rl.ros.emulation.sim_robot_node task=pick_cube ros.camera_rate_hz=10 [ros.sim_time=true] [--ros-args ...]
"""

from __future__ import annotations

import sys
import time

import mujoco
import numpy as np
from geometry_msgs.msg import PoseStamped, TwistStamped, WrenchStamped
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Bool, Float32MultiArray, Float64, MultiArrayDimension, UInt32
from std_srvs.srv import SetBool

from robot_rl.core.geometry import matrix_from_rotvec
from robot_rl.core.interrupts import StopRequest

from ...sim.panda_env import PandaTaskEnv
from ..links.topic_env import camera_topic
from ..plumbing import qos
from ..plumbing.guard import InputGuard, MessageError, finite_scalar
from ..plumbing.messages import (
    STAMP_TOLERANCE_NS,
    camera_info_msg,
    image_msg,
    joint_state_msg,
    pinhole_matrix,
    pose_msg,
    pose_to_numpy,
    seconds,
    stamp_ns,
    twist_to_numpy,
    wrench_msg,
)
from ..plumbing.senders import PublisherWatch, subscribe_with_sender
from ..plumbing.sim_clock import CLOCK_TOPIC
from ..safety.fast_critic import CONTEXT_TOPIC
from .scripted_teleop import ScriptedTeleop

STATE_TOPICS = {
    "joint_states": "joint_states",
    "pose": "franka_robot_state_broadcaster/current_pose",
    "wrench": "franka_robot_state_broadcaster/external_wrench_in_base_frame",
}
MAX_CATCH_UP = 0.05  # s of physics per tick at most
SERVO_TIMEOUT = 0.1  # s: MoveIt Servo's halt timeout
SIM_START = 1.0  # s: sim time of the first observation (ROS time 0 means "no clock yet")
CLOCK_REPEAT = 0.1  # s (wall clock) between two /clock messages while the sim waits, for nodes that join late


def lockstep_chunks(physics_dt: float, state_rate_hz: float, control_rate_hz: float) -> tuple[int, int]:
    """(physics steps per state period, state periods per control period) of sim time; the state period is
    rounded to whole physics steps and must divide the control period."""
    from robot_rl.core.config import ConfigError

    steps = max(round(1.0 / (state_rate_hz * physics_dt)), 1)
    per_period = 1.0 / (control_rate_hz * physics_dt * steps)
    if abs(per_period - round(per_period)) > 1e-6 or round(per_period) < 1:
        raise ConfigError(
            "ros.state_rate_hz",
            state_rate_hz,
            f"a rate whose period ({steps} physics steps of "
            f"{physics_dt * 1e3:g} ms) divides the control period ({1e3 / control_rate_hz:g} ms)",
        )
    return steps, round(per_period)


def camera_topics(name: str) -> tuple[str, str]:
    """(image, camera_info) topics of camera ``name``, as realsense2_camera names them."""
    return camera_topic(name), f"camera/{name}/color/camera_info"


class SimRobot:
    """Owns the task env, its real-time clock and the node's publishers."""

    def __init__(
        self,
        node,
        env: PandaTaskEnv,
        state_rate_hz: float,
        camera_rate_hz: float,
        frame_id: str,
        seed: int,
        reset_service: bool = True,
        command_senders: tuple[str, ...] = ("robot_rl_safety",),
        sim_time: bool = False,
        reset_pause: float = 0.15,
        command_wait: float = 1.0,
        workspace: np.ndarray | None = None,
        violation_every_state: bool = False,
        task_signals: bool = True,
        arm_inputs: tuple[str, ...] = ("pose", "servo"),
    ):
        """``command_senders``: the nodes whose arm and gripper commands the sim arm obeys (the safety node);
        a command from any other publisher is dropped and counted, as no real arm should take it.
        ``workspace``: ``[[x, y, z] low, high]`` (m, base frame) the arm holds its targets in, as a real arm's
        controller does (``robot.limits.workspace``; default the task's workspace).
        ``sim_time``: lockstep on ``/clock`` (module docstring), with a reset moving the clock ``reset_pause`` s
        on and ``command_wait`` wall s allowed for the safety node's answer to each ``/clock`` message.
        ``violation_every_state``: the constraint bits go out with every arm state, just before it (they label the
        safety node's ticks, ``safety.fast_critic.record_ticks``), not once per observation with the task's signals.
        ``task_signals``: publish the sim's reward, success, task state and constraint bits (false: the cell emulator,
        where those come from the reward classifier, the operator and an object tracker). ``arm_inputs``: the command
        inputs the arm takes: ``pose`` (a Cartesian impedance controller's equilibrium pose), ``servo`` (MoveIt
        Servo's twists); the sim robot takes both, the cell emulator its driver's one."""
        self.node, self.env, self.frame_id = node, env, frame_id
        self.violation_every_state = violation_every_state
        self.workspace = np.asarray(env.workspace if workspace is None else workspace, float)
        self.teleop: ScriptedTeleop | None = None
        self.seed, self.episodes = seed, 0
        self.sim_time, self.command_wait = sim_time, command_wait
        self.physics_dt = float(env.model.opt.timestep)
        self.chunk_steps, self.chunks = lockstep_chunks(self.physics_dt, state_rate_hz, env.control_rate_hz)
        self.chunk_ns = round(self.chunk_steps * self.physics_dt * 1e9)
        self.pause_ns = round(reset_pause * 1e9)
        self.now_ns = round(SIM_START * 1e9)  # sim time; the observation's time between two periods
        self.clock_ns = 0  # the last /clock published
        self.action_stamp_ns = 0  # sim time: the observation the actor's newest command answers
        self.arm_command_ns = 0  # sim time: stamp of the newest arm command obeyed
        # the safety node sends one gripper command, then one arm command per tick; the gripper's has no stamp, so
        # in sim time an instant's commands are in once as many gripper commands as arm commands came
        self.arm_commands = self.gripper_commands = 0
        moving = (mujoco.mjtJoint.mjJNT_SLIDE, mujoco.mjtJoint.mjJNT_HINGE)  # arm and fingers, not free objects
        self.joint_names = [env.model.joint(i).name for i in range(env.model.njnt) if env.model.jnt_type[i] in moving]
        self.joint_qpos = [env.model.joint(name).qposadr[0] for name in self.joint_names]
        self.joint_dof = [env.model.joint(name).dofadr[0] for name in self.joint_names]
        self.pub = {
            "joint_states": node.create_publisher(JointState, STATE_TOPICS["joint_states"], qos.STREAM_PUBLISHER),
            "pose": node.create_publisher(PoseStamped, STATE_TOPICS["pose"], qos.STREAM_PUBLISHER),
            "wrench": node.create_publisher(WrenchStamped, STATE_TOPICS["wrench"], qos.STREAM_PUBLISHER),
            "safety_context": node.create_publisher(Float32MultiArray, CONTEXT_TOPIC, qos.LATCHED),
        }
        if task_signals:
            self.pub |= {
                "reward": node.create_publisher(Float64, "rl/reward", qos.STREAM_PUBLISHER),
                "success": node.create_publisher(Bool, "rl/success", qos.STREAM_PUBLISHER),
                "task_state": node.create_publisher(Float32MultiArray, "rl/task_state", qos.STREAM_PUBLISHER),
                "violation": node.create_publisher(UInt32, "sim/violation", qos.STREAM_PUBLISHER),
            }
        self.cameras = {
            name: (
                node.create_publisher(Image, camera_topics(name)[0], qos.STREAM_PUBLISHER),
                node.create_publisher(CameraInfo, camera_topics(name)[1], qos.STREAM_PUBLISHER),
            )
            for name in env.cameras
        }
        self.guard = InputGuard(node)
        # the gripper's subscription before the pose's: an executor serves ready subscriptions in that order, and
        # in sim time the pose command of an instant is the sign that the instant's commands are in
        gripper_topic = subscribe_with_sender(
            node, self.guard, Float64, "rl/gripper_command", self._on_gripper_command, qos.COMMAND
        )
        senders = frozenset(command_senders)
        watched = {gripper_topic: senders}
        pose_topic = None
        if "pose" in arm_inputs:
            pose_topic = subscribe_with_sender(
                node, self.guard, PoseStamped, "rl/equilibrium_pose", self._on_pose_command, qos.COMMAND
            )
            watched[pose_topic] = senders
        if "servo" in arm_inputs:
            self.guard.subscribe(TwistStamped, "servo_node/delta_twist_cmds", self._on_servo_command, qos.COMMAND)
        self.servo: tuple[np.ndarray, float] | None = None  # (twist, monotonic receive time)
        self.command_senders = PublisherWatch(node, {}, watched, discovery_grace=5.0)
        self.pose_topic, self.gripper_topic = pose_topic, gripper_topic
        if reset_service:
            node.create_service(SetBool, "rl/reset", self._on_reset)
        if sim_time:
            self.clock_pub = node.create_publisher(Clock, CLOCK_TOPIC, qos.CLOCK)
            self.guard.subscribe(PoseStamped, "rl/action", self._on_action, qos.COMMAND)
        else:
            node.create_timer(1.0 / state_rate_hz, self.tick)
            if self.cameras:
                node.create_timer(1.0 / camera_rate_hz, self.publish_images)

    def start(self, teleop: ScriptedTeleop | None) -> None:
        """The scripted human (it reads this node's clock, so it comes after it), then the first episode."""
        self.teleop = teleop
        self.reset(demo=False)

    def time(self) -> float:
        """The robot's clock, s: sim time, or the node's (wall) clock in real time."""
        if self.sim_time:
            return self.now_ns * 1e-9
        return self.node.get_clock().now().nanoseconds * 1e-9

    # ----------------------------------------------------------------- episode
    def reset(self, demo: bool) -> int:
        seed = self.seed + self.episodes
        self.env.reset(seed=seed)
        self.episodes += 1
        self.started: float | None = None  # the physics clock starts at the first tick
        self.physics_steps = 0
        if self.teleop is not None:
            self.teleop.begin_episode(demo)
        if self.sim_time:
            # the pause: the safety node ticks once with the actor's last command gone stale, holding the measured
            # pose (it waits for the episode's first observation, one state period later); the clock goes first,
            # so the actor hears the scripted human's input of the new episode at the new time
            pause_ns = self.now_ns + self.pause_ns
            self.now_ns = pause_ns + self.chunk_ns
            self.reset_stamp = pause_ns * 1e-9
            self.publish_clock(pause_ns)
            self.end_period()
        else:
            self.reset_stamp = self.time()
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
        self.arm_commands += 1
        if seconds(msg.header.stamp) < self.reset_stamp - STAMP_TOLERANCE_NS * 1e-9:
            return  # a command for the pose before the reset
        pos, rot = pose_to_numpy(msg.pose)
        self.env.controller.set_target(np.clip(pos, self.workspace[0], self.workspace[1]), rot)
        self.arm_command_ns = max(self.arm_command_ns, stamp_ns(msg.header.stamp))

    def _on_action(self, msg) -> None:
        """Sim time: the actor's command for the observation stamped ``header.stamp`` (the safety node takes
        it from the same topic; this node only learns that the period may start)."""
        self.action_stamp_ns = max(self.action_stamp_ns, stamp_ns(msg.header.stamp))

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
        self.env.controller.set_target(np.clip(target, self.workspace[0], self.workspace[1]), rot)

    def _on_gripper_command(self, msg, gid: bytes | None) -> None:
        if not self.command_senders.admits(self.gripper_topic, gid):
            return
        self.gripper_commands += 1
        self.env.set_gripper_command(float(np.clip(finite_scalar("gripper command", msg.data), -1.0, 1.0)))

    # ----------------------------------------------------------------- the clock
    def tick(self) -> None:
        if self.started is None:
            self.started = time.monotonic()
        due = int((time.monotonic() - self.started) / self.physics_dt) - self.physics_steps
        limit = int(MAX_CATCH_UP / self.physics_dt)
        if due > limit:
            self.node.get_logger().warning(
                f"sim is {due * self.physics_dt:.3f} s behind real time; skipping ahead", throttle_duration_sec=5.0
            )
            self.physics_steps += due - limit
            due = limit
        if due > 0:
            self._integrate_servo(due * self.physics_dt)
            self.env.simulate(due)
            self.physics_steps += due
        self.publish_state()
        if self.teleop is not None:
            self.teleop.tick(time.monotonic(), self.env.dense_reward())

    # ----------------------------------------------------------------- sim time
    def run_lockstep(self, stop: StopRequest) -> None:
        """Sim time: one control period per command of the actor, until ``stop`` or shutdown."""
        import rclpy

        from ..plumbing.node_main import executor_of, release

        self.executor = executor_of(self.node)
        repeat_at = 0.0
        try:
            while rclpy.ok() and not stop.is_set():
                if self.action_stamp_ns < self.now_ns - STAMP_TOLERANCE_NS:  # waiting for the actor (or a reset)
                    if time.monotonic() >= repeat_at:  # the clock and the stamped arm state again, for nodes that join
                        repeat_at = time.monotonic() + CLOCK_REPEAT  # late (the time stands: nothing else repeats)
                        self.publish_clock(again=True)
                        self.publish_arm_state(joints=False)
                    self.executor.spin_once(timeout_sec=CLOCK_REPEAT)
                    continue
                for chunk in range(self.chunks):
                    if not self.wait_for_arm_command(stop):  # the safety node ticks the period's first instant on the
                        return  # actor's command, every later one on the arm state published before
                    if not chunk:  # the graph's time, once that command is obeyed
                        self.publish_clock()
                    self._integrate_servo(self.chunk_steps * self.physics_dt)
                    self.env.simulate(self.chunk_steps)
                    self.now_ns += self.chunk_ns
                    if chunk < self.chunks - 1:
                        self.publish_arm_state(joints=False)  # what the safety node's next tick reads
                self.end_period()
        finally:
            release(self.executor, self.node)

    def publish_clock(self, at_ns: int | None = None, again: bool = False) -> None:
        """``/clock`` at ``at_ns`` (default: the robot's time; ``again``: the last one once more, the time stands)."""
        if not again:
            self.clock_ns = self.now_ns if at_ns is None else at_ns
        msg = Clock()
        msg.clock.sec, msg.clock.nanosec = divmod(self.clock_ns, 1_000_000_000)
        self.clock_pub.publish(msg)

    def wait_for_arm_command(self, stop: StopRequest) -> bool:
        """Spin until the safety node's arm command of the robot's time arrived (its gripper command goes out just
        before), at most ``command_wait`` wall s: without one the arm keeps its last command, as a real arm would.
        False on stop."""
        import rclpy

        start = time.monotonic()
        deadline, repeat_at = start + self.command_wait, start + CLOCK_REPEAT
        while self.arm_command_ns < self.now_ns - STAMP_TOLERANCE_NS or self.gripper_commands < self.arm_commands:
            if stop.is_set() or not rclpy.ok():
                return False
            if time.monotonic() > repeat_at:  # the answer was lost, dropped while its sender was being discovered,
                repeat_at = time.monotonic() + CLOCK_REPEAT  # or the safety node started late: the instant again
                self.publish_arm_state(joints=False)
                self.publish_clock(again=True)
            if time.monotonic() > deadline:
                self.node.get_logger().warning(
                    f"no arm command for sim time {self.now_ns * 1e-9:.3f} s within {self.command_wait:g} s; "
                    "is the safety node running (with ros.sim_time=true)? The arm keeps its last command",
                    throttle_duration_sec=5.0,
                )
                self.gripper_commands = max(self.gripper_commands, self.arm_commands)  # one lost: count on
                return True
            self.executor.spin_once(timeout_sec=0.01)
        return True

    def end_period(self) -> None:
        """The observation of the robot's time: the scripted human's rule step and input first, then the state
        (the pose last: the actor reads the observation once the pose of its time is in) and the images."""
        if self.teleop is not None:
            self.teleop.decide(self.env.dense_reward())
            self.teleop.publish()
        self.publish_task_signals()
        self.publish_images()
        self.publish_arm_state()

    def publish_state(self) -> None:
        self.publish_task_signals()
        self.publish_arm_state()

    def publish_arm_state(self, joints: bool = True) -> None:
        """Joint states, wrench and TCP pose (what the safety node reads every tick), after the constraint bits with
        ``violation_every_state`` (they label the safety node's ticks before this state,
        :mod:`robot_rl.ros.safety.safety_ticks`). The joint states (the gripper opening the actor reads) are left out of a
        repeat: only stamps tell a repeat from news, and the actor waits for the pose by its stamp, for the rest by
        arrival."""
        env, now = self.env, self.time()
        if self.violation_every_state:
            self.publish_violation()
        if joints:
            self.pub["joint_states"].publish(joint_state_msg(*self.joint_state(), now))
        self.pub["wrench"].publish(wrench_msg(*env.wrench_in_base(), now, self.frame_id))
        self.pub["pose"].publish(pose_msg(self.measured_tcp_pos(), env.tcp_rot, now, self.frame_id))

    def joint_state(self) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """(names, positions rad or m, velocities, efforts N m or N) of the arm's and fingers' joints."""
        data = self.env.data
        return (
            self.joint_names,
            data.qpos[self.joint_qpos],
            data.qvel[self.joint_dof],
            data.qfrc_actuator[self.joint_dof],
        )

    def measured_tcp_pos(self) -> np.ndarray:
        """The TCP position the arm's driver reports (m, base frame): the sim's, exactly."""
        return self.env.tcp_pos

    def publish_task_signals(self) -> None:
        """Reward, success, constraint flags (unless they go with every arm state), the privileged task state and the
        safety layer's task context."""
        env = self.env
        context = env.safety_context()  # the keep-out zone where it is now: what a cell's obstacle tracker would send
        if context.size:
            self.pub["safety_context"].publish(Float32MultiArray(data=context.tolist()))
        success = env.is_success()
        self.pub["success"].publish(Bool(data=bool(success)))  # then its reward, which carries it (TopicEnv)
        self.pub["reward"].publish(Float64(data=env.reward(success)))
        if not self.violation_every_state:
            self.publish_violation()
        features = env.task_state()
        if features:
            msg = Float32MultiArray()
            msg.layout.dim = [
                MultiArrayDimension(label=name, size=int(np.size(v)), stride=int(np.size(v)))
                for name, v in features.items()
            ]
            msg.data = np.concatenate([np.ravel(v) for v in features.values()]).astype(np.float32).tolist()
            self.pub["task_state"].publish(msg)

    def publish_violation(self) -> None:
        self.pub["violation"].publish(UInt32(data=int(self.env.violation())))

    def publish_images(self) -> None:
        for name, (image_pub, info_pub) in self.cameras.items():
            now = self.time()
            frame = self.env._render_camera(name)
            image_pub.publish(image_msg(frame, now, f"{name}_color_optical_frame"))
            fovy = float(self.env.model.cam_fovy[self.env.model.camera(name).id])
            k = pinhole_matrix(frame.shape[1], frame.shape[0], fovy)
            info_pub.publish(camera_info_msg(frame.shape[1], frame.shape[0], k, now, f"{name}_color_optical_frame"))


def main(argv: list[str] | None = None) -> int:
    from omegaconf import OmegaConf

    from robot_rl.core.config import ConfigError, settings_of
    from robot_rl.runtime.envs import make_env, make_expert
    from robot_rl.runtime.teleop import InterventionRules, ScriptedHuman

    from ...safety.fast_critic import fast_critic_config
    from ...safety.robot_limits import workspace_of
    from ..plumbing.node_main import exit_with_error, node_config, ros_node, spin, stop_requests
    from ..plumbing.sim_clock import sim_time_of

    try:
        cfg, ros_args = node_config(sys.argv[1:] if argv is None else argv)
        task = OmegaConf.to_container(cfg.task, resolve=True)
        env = make_env(task).unwrapped
        if not isinstance(env, PandaTaskEnv):
            raise ConfigError("task", task.get("name"), "a robot_rl MuJoCo task (the sim robot node runs PandaTaskEnv)")
        rules = settings_of("human", InterventionRules, OmegaConf.to_container(cfg.human, resolve=True))
        human = ScriptedHuman(make_expert(task, env), rules) if task.get("expert") else None
        sim_time, workspace = sim_time_of(cfg), workspace_of(cfg.robot.limits)
        violation_every_state = fast_critic_config(cfg).records_ticks  # they label the safety node's ticks
        lockstep_chunks(float(env.model.opt.timestep), float(cfg.ros.state_rate_hz), env.control_rate_hz)
    except ConfigError as error:
        return exit_with_error("robot_rl.ros.emulation.sim_robot_node", error)
    with ros_node("robot_rl_sim_robot", ros_args) as node:
        robot = SimRobot(
            node,
            env,
            float(cfg.ros.state_rate_hz),
            float(cfg.ros.camera_rate_hz),
            cfg.ros.frame_id,
            int(cfg.seed),
            bool(cfg.ros.sim_reset_service),
            tuple(cfg.ros.arm_command_senders),
            sim_time,
            float(cfg.ros.reset_pause),
            float(cfg.ros.stream_timeout),
            workspace,
            violation_every_state,
        )
        robot.start(None if human is None else ScriptedTeleop(node, env, human, 1.0 / env.control_rate_hz, robot.time))
        clock = "in lockstep on sim time (/clock)" if sim_time else "at real time"
        node.get_logger().info(f"sim robot: {task.get('name')} {clock}, cameras {list(env.cameras)}")
        try:
            if sim_time:
                with stop_requests() as stop:
                    robot.run_lockstep(stop)
            else:
                spin(node)
        finally:
            env.close()  # its renderer now, while EGL is still up (not in the interpreter's last garbage collection)
    return 0


if __name__ == "__main__":
    sys.exit(main())
