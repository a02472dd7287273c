"""The base gymnasium env of the robot_rl MuJoCo tasks: a Panda under operational-space control.

Action (float32, [-1, 1]^D): D = 7 is (dx, dy, dz, drx, dry, drz, gripper) with the pose delta in
the TCP frame, scaled by ``pos_step`` metres and ``rot_step`` radians per policy step; D = 4 is
(dx, dy, dz, gripper) with the orientation held at the reset orientation. Gripper -1 opens,
+1 closes. The new target pose is the measured TCP pose plus the delta, clipped to the
workspace box (metres, base frame); a Cartesian impedance controller tracks it at physics
rate (:mod:`robot_rl.sim.controller`).

Observation dict: ``state`` (float32, layout in :attr:`PandaTaskEnv.state_layout`) and one
uint8 HxWx3 image per requested camera. ``info["success"]`` is set on every step.

``reset(options={"scene": scene})`` starts an episode where another left the scene (:meth:`PandaTaskEnv.scene_state`
of this env or of another task on the same scene, e.g. a backward task after its forward one) instead of drawing a
fresh start.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from robot_rl.core import config as check
from robot_rl.core.geometry import delta_target, orientation_error, rotvec_from_matrix
from robot_rl.safety import ArmState, Command
from robot_rl.sim.arm_env import PROPRIO_FIELDS, ArmEnv
from robot_rl.sim.constraints import ConstraintMonitor, Constraints
from robot_rl.sim.controller import CartesianImpedanceController, ImpedanceGains
from robot_rl.sim.disturbances import Push, Pushes
from robot_rl.sim.fast_critic_loop import FastStream, SimFastLoop
from robot_rl.sim.scene import ARM_JOINT_RANGES, CAMERA_NAMES, FINGER_TRAVEL, SceneSpec, scene_xml
from robot_rl.sim.start_region import StartRegion

HOME_QPOS = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])  # radians, Franka "ready" pose
# TCP pointing down, fingers opening along the world y axis.
DOWN = np.diag([1.0, -1.0, -1.0])
#: MuJoCo's state parts that :class:`SceneState` keeps: joints, velocities, controls, the impedance target, time
SCENE_PHYSICS = mujoco.mjtState.mjSTATE_INTEGRATION
AT_REST = 0.01  # m/s: an object slower than this (:meth:`PandaTaskEnv.object_speed`) is at rest


@dataclass(frozen=True)
class SceneState:
    """Where everything in a task's scene is, to start another episode from it: ``physics`` is MuJoCo's integration
    state (``mj_getState`` with :data:`SCENE_PHYSICS`: joint positions in rad and m, velocities, the gripper's and
    the impedance target's commands), ``fixtures`` the positions (m, base frame, one row each) of the fixed bodies
    the task places at reset (peg_insert's socket)."""

    physics: np.ndarray
    fixtures: np.ndarray


class PandaTaskEnv(ArmEnv):
    """Shared physics, action mapping, observations and cameras; tasks fill in the hooks."""

    #: default TCP position at reset (m, base frame); tasks override
    home_tcp_pos = np.array([0.45, 0.0, 0.25])

    def __init__(
        self,
        control_rate_hz: float = 10.0,
        physics_rate_hz: float = 500.0,
        action_dim: int = 4,
        pos_step: float = 0.02,
        rot_step: float = 0.1,
        cameras: Sequence[str] = (),
        image_size: int | Sequence[int] = 64,
        reward: str = "dense",
        force_torque: bool = False,
        object_state: bool = True,
        episode_steps: int = 100,
        terminate_on_success: bool = True,
        workspace: Sequence[Sequence[float]] = ((0.25, -0.35, 0.005), (0.75, 0.35, 0.45)),
        tcp_init_noise: float = 0.02,
        controller: dict[str, float] | None = None,
        constraints: dict | None = None,
        pushes: dict | None = None,
        mesh_visuals: bool = True,
        render_shadows: bool = False,
        render_mode: str | None = "rgb_array",
    ):
        super().__init__(
            camera_names=CAMERA_NAMES,
            control_rate_hz=control_rate_hz,
            action_dim=action_dim,
            pos_step=pos_step,
            rot_step=rot_step,
            cameras=cameras,
            image_size=image_size,
            reward=reward,
            object_state=object_state,
            episode_steps=episode_steps,
            terminate_on_success=terminate_on_success,
            render_mode=render_mode,
        )
        check.positive("physics_rate_hz", physics_rate_hz)
        substeps = physics_rate_hz / control_rate_hz
        if abs(substeps - round(substeps)) > 1e-6 or round(substeps) < 1:
            raise check.ConfigError(
                "physics_rate_hz", physics_rate_hz, f"an integer multiple of control_rate_hz={control_rate_hz}"
            )
        self.tcp_init_noise = check.non_negative("tcp_init_noise", tcp_init_noise)
        #: the box (m, base frame) the reset draws the TCP's start from: the home position +- tcp_init_noise
        self.tcp_start = StartRegion(self.home_tcp_pos - tcp_init_noise, self.home_tcp_pos + tcp_init_noise)
        self.workspace = np.asarray(workspace, dtype=float)
        if self.workspace.shape != (2, 3) or np.any(self.workspace[0] >= self.workspace[1]):
            raise check.ConfigError(
                "workspace", workspace, "[[x_min, y_min, z_min], [x_max, y_max, z_max]] with min < max"
            )
        try:
            gains = ImpedanceGains(**(controller or {}))
        except TypeError:
            raise check.ConfigError(
                "controller", controller, "keys of " + ", ".join(ImpedanceGains.__annotations__)
            ) from None
        for key, value in vars(gains).items():
            check.non_negative(f"controller.{key}", value)
        self.force_torque = bool(force_torque)
        self.render_shadows = bool(render_shadows)
        self.n_substeps = round(substeps)
        self.physics_rate_hz = float(physics_rate_hz)
        self.fast_loop: SimFastLoop | None = None  # see attach_fast_loop
        self._fast_stream: FastStream | None = None

        self.pushes = Pushes.from_config(pushes)
        self._planned: list[Push] = []  # pushes of this policy step and any still going
        try:
            self.constraints = Constraints.from_config(constraints)
        except check.ConfigError as error:
            raise check.ConfigError(error.key, error.value, error.expected) from None
        spec = self.scene()
        spec.image_size, spec.mesh_visuals = self.image_size, mesh_visuals
        spec.worldbody += self.constraints.keep_out_mjcf()
        self.model = mujoco.MjModel.from_xml_string(scene_xml(spec, 1.0 / physics_rate_hz))
        self.data = mujoco.MjData(self.model)
        self._tcp = self.model.site("tcp").id
        self._fingers = [self.model.joint(n).qposadr[0] for n in ("finger_left", "finger_right")]
        self._finger_act = [self.model.actuator(n).id for n in ("finger_left", "finger_right")]
        self._arm_qpos = np.arange(7)
        self._sensor_adr = [self.model.sensor(n).adr[0] for n in ("wrist_force", "wrist_torque")]
        self._hand = self.model.body("hand").id
        robot = {b for b in range(self.model.nbody) if self._descends_from(b, self.model.body("link0").id)}
        self.constraint_monitor = ConstraintMonitor(self.constraints, self.model, robot, np.array(ARM_JOINT_RANGES))
        self.home_rot = DOWN.copy()
        self.home_qpos = self.solve_ik(self.home_tcp_pos, self.home_rot, HOME_QPOS)
        self.controller = CartesianImpedanceController(self.model, self.data, gains)
        self.bind_model()
        self._renderer: mujoco.Renderer | None = None
        self._ft_tare = np.zeros(6)
        mujoco.mj_forward(self.model, self.data)
        self.build_spaces()

    def _descends_from(self, body: int, ancestor: int) -> bool:
        while body != ancestor and body != 0:
            body = self.model.body_parentid[body]
        return body == ancestor

    # ----------------------------------------------------------------- task hooks
    def scene(self) -> SceneSpec:
        """MJCF the task adds to the table scene."""
        return SceneSpec()

    def bind_model(self) -> None:
        """Look up the task's ids in the compiled model (called once, before the first reset)."""

    def reset_task(self, rng: np.random.Generator) -> None:
        """Place the task's objects (positions in metres, base frame)."""

    def task_state(self) -> dict[str, np.ndarray]:
        """Privileged task features appended to ``state`` when ``object_state`` is on."""
        return {}

    def placed_fixtures(self) -> list[int]:
        """Ids of the fixed bodies :meth:`reset_task` moves (in the model, not the state), kept in a scene."""
        return []

    def in_start_region(self) -> bool:
        """Whether the scene's objects are where this task's reset puts them (its declared start region): a forward
        episode may start from the scene as it is. Tasks with objects override it; a scene without any always is."""
        return True

    # ----------------------------------------------------------------- robot state
    @property
    def tcp_pos(self) -> np.ndarray:
        """TCP position (m, base frame)."""
        return self.data.site_xpos[self._tcp].copy()

    @property
    def tcp_rot(self) -> np.ndarray:
        """TCP orientation, 3x3 matrix from the TCP frame to the base frame."""
        return self.data.site_xmat[self._tcp].reshape(3, 3).copy()

    @property
    def gripper_opening(self) -> float:
        """Distance between the finger pads (m), 0 closed to 0.08 open."""
        return float(self.data.qpos[self._fingers].sum())

    def tcp_velocity(self) -> np.ndarray:
        """(linear m/s, angular rad/s) of the TCP in the base frame."""
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(self.model, self.data, mujoco.mjtObj.mjOBJ_SITE, self._tcp, vel, 0)
        return np.concatenate([vel[3:], vel[:3]])

    def wrench(self) -> np.ndarray:
        """Force (N) and torque (N m) at the wrist in the hand frame, tared at reset."""
        force_adr, torque_adr = self._sensor_adr
        raw = np.concatenate(
            [self.data.sensordata[force_adr : force_adr + 3], self.data.sensordata[torque_adr : torque_adr + 3]]
        )
        return raw - self._ft_tare

    def wrench_in_base(self) -> tuple[np.ndarray, np.ndarray]:
        """(force N, torque N m) of :meth:`wrench` in the base frame: what a real arm's driver reports as its
        external wrench and the safety node reads."""
        force, torque = np.split(self.wrench(), 2)
        hand_to_base = self.tcp_rot
        return hand_to_base @ force, hand_to_base @ torque

    def arm_state(self) -> ArmState:
        """The measured arm as the safety layers see it: TCP pose and base-frame wrench at the sim time (s)."""
        force, torque = self.wrench_in_base()
        return ArmState(self.tcp_pos, self.tcp_rot, float(self.data.time), force, torque)

    # ----------------------------------------------------------------- the fast loop
    def safety_context(self) -> np.ndarray:
        """The task context the fast-loop critic reads after the arm's state, float32, base frame: the keep-out
        zone's low and high corners where it is now (m) and its velocity (m/s), (9,), for a task with a keep-out zone
        (on a cell: a tracked obstacle's box and twist, sent with each policy step); empty otherwise. Without the
        velocity a critic cannot tell a zone that comes at the arm from one that moves away."""
        if self.constraints.keep_out is None:
            return np.zeros(0, np.float32)
        t = float(self.data.time)
        low, high = self.constraint_monitor.keep_out_at(t)
        return np.concatenate((low, high, self.constraint_monitor.keep_out_velocity_at(t))).astype(np.float32)

    def attach_fast_loop(self, loop: SimFastLoop | None) -> None:
        """Run ``loop`` (the safety node's tick: fast-loop critic, then hard layer) every control substep from the
        next reset on; None: the policy's target goes straight to the impedance controller."""
        if loop is not None:
            loop.ticks_per_step(self.control_rate_hz, round(self.physics_rate_hz / self.control_rate_hz))
        self.fast_loop, self._fast_stream = loop, None

    def _run_fast_loop(self, command: Command) -> None:
        """One policy step as fast ticks of the attached loop, each followed by its physics steps; the ticks are
        kept for :meth:`info`."""
        loop = self.fast_loop
        loop.set_context(self.safety_context())  # what the task tells the safety layer once per policy step
        loop.begin_step(self.np_random)
        per_tick = round(self.physics_rate_hz / loop.rate_hz)
        ticks = max(1, self.n_substeps // per_tick)  # randomized control periods change the number of ticks
        times, risks = np.empty(ticks), np.empty(ticks, np.float32)
        features = np.empty((ticks, loop.feature_width), np.float32)
        flags, violations = np.empty(ticks, np.uint32), np.empty(ticks, np.uint32)
        for index in range(ticks):
            arm = self.arm_state()
            sent, flags[index], features[index] = loop.tick(arm, command)
            self.controller.set_target(sent.pos, sent.rot)
            self.set_gripper_command(sent.gripper)
            self.simulate(per_tick)
            times[index], risks[index], violations[index] = arm.stamp, loop.risk, self.violation()
        if self.n_substeps > ticks * per_tick:
            self.simulate(self.n_substeps - ticks * per_tick)
        self._fast_stream = FastStream(times, features, risks, flags, violations)

    # ----------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """A fresh start drawn from the task's start region, or with ``options={"scene": SceneState}`` the scene as
        another episode left it (the arm, the objects and the gripper's command as they were, the clock at 0). Either
        way the impedance target starts at the TCP: the arm holds where the episode finds it."""
        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        self._planned = []
        scene = (options or {}).get("scene")
        if scene is not None:
            self._restore_scene(scene)
        else:
            self.place_arm(self.tcp_start.sample(self.np_random), -1.0)
            self.reset_task(self.np_random)
        mujoco.mj_forward(self.model, self.data)
        self.controller.set_target(self.tcp_pos, self.home_rot if scene is None else self.tcp_rot)
        mujoco.mj_forward(self.model, self.data)  # sensors with the impedance holding this pose
        self._ft_tare = np.zeros(6)
        self._ft_tare = self.wrench()
        if self.fast_loop is not None:
            self.fast_loop.reset(self.arm_state(), -1.0)
            self._fast_stream = None
        return self.begin_episode()

    def scene_state(self) -> SceneState:
        """The scene now, for ``reset(options={"scene": ...})`` of this env or of another task on the same scene."""
        physics = np.empty(mujoco.mj_stateSize(self.model, SCENE_PHYSICS))
        mujoco.mj_getState(self.model, self.data, physics, SCENE_PHYSICS)
        return SceneState(physics, self.model.body_pos[self.placed_fixtures()].copy())

    def _restore_scene(self, scene: SceneState) -> None:
        fixtures = self.placed_fixtures()
        if scene.physics.shape != (mujoco.mj_stateSize(self.model, SCENE_PHYSICS),) or np.shape(scene.fixtures) != (
            len(fixtures),
            3,
        ):
            raise ValueError(f"scene state from another scene: {type(self).__name__} cannot start from it")
        mujoco.mj_setState(self.model, self.data, scene.physics, SCENE_PHYSICS)
        self.model.body_pos[fixtures] = scene.fixtures
        self.data.time = 0.0

    def object_speed(self, joint: str) -> float:
        """Linear speed (m/s) of the body on the free joint ``joint`` plus its angular speed (rad/s) times 0.1 m:
        below :data:`AT_REST` the object is at rest."""
        adr = self.model.joint(joint).dofadr[0]
        return float(
            np.linalg.norm(self.data.qvel[adr : adr + 3]) + 0.1 * np.linalg.norm(self.data.qvel[adr + 3 : adr + 6])
        )

    def apply_action(self, action: np.ndarray) -> None:
        if self.pushes is not None:
            now = float(self.data.time)
            self._planned = [push for push in self._planned if push.end > now]
            self._planned += self.pushes.schedule(self.np_random, now, self.n_substeps / self.physics_rate_hz)
        target = delta_target(
            self.tcp_pos, self.tcp_rot, action, self.pos_step, self.rot_step, self.workspace, self.home_rot
        )
        if self.fast_loop is not None:
            self._run_fast_loop(Command(*target, float(action[-1]), float(self.data.time)))
            return
        self.controller.set_target(*target)
        self.set_gripper_command(float(action[-1]))
        self.simulate(self.n_substeps)

    def render(self):
        return self._render_camera(self.cameras[0] if self.cameras else "front")

    def close(self):
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # ----------------------------------------------------------------- helpers
    def simulate(self, n_physics_steps: int) -> None:
        """Advance physics; the impedance law is evaluated inside every physics step. While a push is planned in
        this span, one physics step at a time, the push's force on the hand in the steps it covers."""
        end = self.data.time + (n_physics_steps - 0.5) / self.physics_rate_hz
        if not any(push.start <= end and push.end > self.data.time for push in self._planned):
            self.data.xfrc_applied[self._hand] = 0.0
            mujoco.mj_step(self.model, self.data, n_physics_steps)
            return
        for _ in range(n_physics_steps):
            now = self.data.time
            force = sum((push.force for push in self._planned if push.start <= now < push.end), np.zeros(3))
            self.data.xfrc_applied[self._hand, :3] = force
            mujoco.mj_step(self.model, self.data, 1)
        self.data.xfrc_applied[self._hand] = 0.0

    def set_gripper_command(self, command: float) -> None:
        """Gripper command in [-1, 1]: -1 fully open, +1 fully closed."""
        self.data.ctrl[self._finger_act] = FINGER_TRAVEL * (1.0 - command) / 2.0

    def place_arm(self, tcp_pos: np.ndarray, gripper: float) -> None:
        """Put the arm (no physics) with the TCP at ``tcp_pos`` (m, base frame), pointing down, and the fingers
        where the gripper ``command`` (-1 open .. +1 closed) sends them, commanded so."""
        self.data.qpos[self._arm_qpos] = self.solve_ik(tcp_pos, self.home_rot, self.home_qpos)
        self.set_gripper_command(gripper)
        self.data.qpos[self._fingers] = FINGER_TRAVEL * (1.0 - gripper) / 2.0

    def hold(self, joint: str, offset: Sequence[float], half_width: float) -> None:
        """Put the object on the free joint ``joint`` upright between the finger pads, its centre ``offset`` (m,
        base frame) from the TCP, close the gripper on its ``half_width`` (m) and let the grasp settle (100 physics
        steps: 0.2 s at 500 Hz)."""
        mujoco.mj_forward(self.model, self.data)
        tcp = self.tcp_pos
        adr = self.model.joint(joint).qposadr[0]
        self.data.qpos[adr : adr + 3] = tcp + offset
        self.data.qpos[adr + 3 : adr + 7] = [1.0, 0.0, 0.0, 0.0]
        self.data.qpos[self._fingers] = min(half_width, FINGER_TRAVEL)
        self.set_gripper_command(1.0)
        self.controller.set_target(tcp, self.home_rot)
        self.simulate(100)

    def solve_ik(self, pos: np.ndarray, rot: np.ndarray, q_init: np.ndarray, iterations: int = 200) -> np.ndarray:
        """Arm joint angles (rad) that put the TCP at ``pos`` with orientation ``rot``.

        Damped least squares on a scratch copy of the state; raises if it does not converge.
        """
        data = mujoco.MjData(self.model)
        data.qpos[self._arm_qpos] = q_init
        jacp, jacr = np.zeros((3, self.model.nv)), np.zeros((3, self.model.nv))
        lo, hi = np.array(ARM_JOINT_RANGES).T
        for _ in range(iterations):
            mujoco.mj_kinematics(self.model, data)
            mujoco.mj_comPos(self.model, data)
            error = np.concatenate(
                [pos - data.site_xpos[self._tcp], orientation_error(rot, data.site_xmat[self._tcp].reshape(3, 3))]
            )
            if np.linalg.norm(error[:3]) < 1e-5 and np.linalg.norm(error[3:]) < 1e-4:
                return data.qpos[self._arm_qpos].copy()
            mujoco.mj_jacSite(self.model, data, jacp, jacr, self._tcp)
            jac = np.vstack([jacp[:, :7], jacr[:, :7]])
            step = jac.T @ np.linalg.solve(jac @ jac.T + 1e-4 * np.eye(6), error)
            data.qpos[self._arm_qpos] = np.clip(data.qpos[self._arm_qpos] + step, lo, hi)
        raise RuntimeError(f"inverse kinematics did not reach TCP position {pos} (m, base frame)")

    def state_fields(self) -> list[tuple[str, int]]:
        fields = list(PROPRIO_FIELDS)
        if self.force_torque:
            fields += [("force", 3), ("torque", 3)]
        if self.object_state:
            fields += [(name, int(np.size(value))) for name, value in self.task_state().items()]
        return fields

    def _state(self) -> np.ndarray:
        parts = [
            self.tcp_pos,
            rotvec_from_matrix(self.home_rot.T @ self.tcp_rot),
            self.tcp_velocity(),
            [self.gripper_opening / (2 * FINGER_TRAVEL)],
        ]
        if self.force_torque:
            parts.append(self.wrench())
        if self.object_state:
            parts.extend(self.task_state().values())
        return np.concatenate([np.ravel(p) for p in parts]).astype(np.float32)

    def violation(self) -> int:
        """Bit mask of the :class:`~robot_rl.sim.constraints.Constraint` flags violated now (0 = none)."""
        speed = float(np.linalg.norm(self.tcp_velocity()[:3]))
        return self.constraint_monitor.check(self.data, self.tcp_pos, speed, self.data.qpos[self._arm_qpos])

    def info(self, clipped: int, success: bool) -> dict:
        info = {**super().info(clipped, success), "violation": self.violation()}
        if self._fast_stream is not None:  # the last policy step's fast ticks; a violation within it counts
            info["fast_loop"] = self._fast_stream
            info["violation"] |= int(np.bitwise_or.reduce(self._fast_stream.violation))
        return info

    def observation(self) -> dict[str, np.ndarray]:
        obs = {"state": self._state()}
        for camera in self.cameras:
            obs[camera] = self._render_camera(camera)
        return obs

    def _render_camera(self, camera: str) -> np.ndarray:
        if self._renderer is None:
            self._renderer = mujoco.Renderer(self.model, *self.image_size)
            self._renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = self.render_shadows
        self._renderer.update_scene(self.data, camera=camera)
        return self._renderer.render().copy()
