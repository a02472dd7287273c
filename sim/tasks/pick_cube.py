"""pick_cube: grasp a cube from the table and lift it ``lift_height`` metres.

The start region is the cube's xy box ``[cube_low, cube_high]`` (m, base frame) with its yaw within
``cube_yaw_range``: the reset draws from it, and :meth:`PickCubeEnv.in_start_region` (the backward task's success,
the give-up rule of learned resets) tests a scene against it.
"""

from __future__ import annotations

import numpy as np

from robot_rl.core import config as check
from robot_rl.sim.panda_env import PandaTaskEnv
from robot_rl.sim.scene import SceneSpec
from robot_rl.sim.start_region import StartRegion

YAW_SLACK = 0.1  # rad: a cube put back this far beyond cube_yaw_range (about z, modulo 90 degrees) still counts
ON_TABLE = 0.003  # m: a cube whose bottom is this close to the table, flat, lies on it


class PickCubeEnv(PandaTaskEnv):
    home_tcp_pos = np.array([0.45, 0.0, 0.2])

    def __init__(
        self,
        cube_half_size: float = 0.02,
        cube_low: tuple[float, float] = (0.38, -0.12),
        cube_high: tuple[float, float] = (0.58, 0.12),
        cube_yaw_range: float = 0.0,
        lift_height: float = 0.1,
        **kwargs,
    ):
        self.cube_half_size = check.positive("cube_half_size", cube_half_size)
        if 2 * cube_half_size >= 0.075:
            raise check.ConfigError("cube_half_size", cube_half_size, "< 0.0375 m (the gripper opens to 0.08 m)")
        if np.any(np.asarray(cube_low, float) > np.asarray(cube_high, float)):
            raise check.ConfigError("cube_low", list(cube_low), f"<= cube_high={list(cube_high)} per axis")
        #: the cube's start xy box (m, base frame): the forward reset draws from it, in_start_region tests against it
        self.start_region = StartRegion(cube_low, cube_high)
        self.cube_yaw_range = check.non_negative("cube_yaw_range", cube_yaw_range)
        self.lift_height = check.positive("lift_height", lift_height)
        super().__init__(**kwargs)

    def bind_model(self) -> None:
        joint = self.model.joint("cube")
        self._cube_qpos, self._cube_body = joint.qposadr[0], self.model.body("cube").id

    def scene(self) -> SceneSpec:
        h = self.cube_half_size
        return SceneSpec(
            worldbody=(
                f'<body name="cube" pos="0.5 0 {h}"><freejoint name="cube"/>'
                f'<geom name="cube" type="box" size="{h} {h} {h}" rgba="0.85 0.15 0.1 1" mass="0.05" '
                'friction="1 0.01 0.0001" condim="4"/></body>'
            )
        )

    def reset_task(self, rng: np.random.Generator) -> None:
        self.place_cube(self.start_region.sample(rng), rng.uniform(-self.cube_yaw_range, self.cube_yaw_range))

    def place_cube(self, xy: np.ndarray, yaw: float) -> None:
        """Put the cube flat on the table at ``xy`` (m, base frame), turned ``yaw`` rad about z."""
        qpos = self._cube_qpos
        self.data.qpos[qpos : qpos + 3] = [xy[0], xy[1], self.cube_half_size]
        self.data.qpos[qpos + 3 : qpos + 7] = [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)]

    @property
    def cube_pos(self) -> np.ndarray:
        """Cube centre (m, base frame)."""
        return self.data.xpos[self._cube_body].copy()

    @property
    def cube_quat(self) -> np.ndarray:
        return self.data.xquat[self._cube_body].copy()

    def cube_yaw(self) -> float:
        """The cube's turn about z (rad), folded to [-pi/4, pi/4): a cube looks the same every 90 degrees."""
        w, _, _, z = self.cube_quat
        return float((2.0 * np.arctan2(z, w) + np.pi / 4) % (np.pi / 2) - np.pi / 4)

    def flat(self) -> bool:
        """The cube rests on a face: one of its axes within 0.1 rad of vertical."""
        return bool(np.max(np.abs(self.data.xmat[self._cube_body].reshape(3, 3)[2])) > np.cos(0.1))

    def in_start_region(self) -> bool:
        """The cube lies flat on the table inside the start region, its yaw within ``cube_yaw_range`` (+ slack)."""
        on_table = self.lifted() < ON_TABLE and self.flat()
        turned = abs(self.cube_yaw()) <= self.cube_yaw_range + YAW_SLACK
        return bool(on_table and turned and self.start_region.contains(self.cube_pos))

    def task_state(self) -> dict[str, np.ndarray]:
        return {"cube_pos": self.cube_pos, "cube_rel": self.cube_pos - self.tcp_pos, "cube_quat": self.cube_quat}

    def lifted(self) -> float:
        """Height of the cube's bottom above the table (m)."""
        return float(self.cube_pos[2] - self.cube_half_size)

    def grasped(self) -> bool:
        """The cube sits between the fingers and the gripper is closed on it."""
        near = np.linalg.norm(self.cube_pos - self.tcp_pos) < self.cube_half_size + 0.01
        return bool(near and self.gripper_opening < 2 * self.cube_half_size + 0.006)

    def is_success(self) -> bool:
        return self.lifted() > self.lift_height and self.grasped()

    def dense_reward(self) -> float:
        reach = 1.0 - np.tanh(10.0 * np.linalg.norm(self.cube_pos - self.tcp_pos))
        grasp = 0.5 if self.grasped() else 0.0
        lift = np.clip(self.lifted() / self.lift_height, 0.0, 1.0) if self.grasped() else 0.0
        return float(reach + grasp + 2.0 * lift) / 3.5

    def task_info(self) -> dict:
        return {"grasped": self.grasped(), "cube_height": self.lifted()}
