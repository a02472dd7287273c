"""robosuite tasks behind the robot_rl env contract (observation dict, TCP-frame delta actions).

robosuite's OSC_POSE controller takes deltas in the robot base frame, scaled so that an input
of 1 moves ``output_max``; this adapter sets ``output_max`` to ``pos_step`` / ``rot_step`` and
rotates the TCP-frame action into the base frame. With 4-D actions the orientation is servoed
back to the reset orientation, as in the MuJoCo tasks. Physics runs at robosuite's 500 Hz.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from robot_rl.core import config as check
from robot_rl.core.geometry import orientation_error, rotvec_from_matrix
from robot_rl.sim.arm_env import PROPRIO_FIELDS, ArmEnv

#: robot_rl camera name -> robosuite camera name
CAMERAS = {"front": "agentview", "wrist": "robot0_eye_in_hand"}
TASKS = ("Lift", "Stack", "Door")
PANDA_GRIPPER_TRAVEL = 0.08  # m, both fingers together


class RobosuiteEnv(ArmEnv):
    def __init__(
        self,
        env_name: str = "Lift",
        robot: str = "Panda",
        control_rate_hz: float = 10.0,
        action_dim: int = 7,
        pos_step: float = 0.02,
        rot_step: float = 0.1,
        cameras: Sequence[str] = (),
        image_size: int | Sequence[int] = 64,
        reward: str = "dense",
        object_state: bool = True,
        episode_steps: int = 100,
        terminate_on_success: bool = True,
        env_kwargs: dict[str, Any] | None = None,
        render_mode: str | None = "rgb_array",
    ):
        import robosuite
        from robosuite.controllers import load_composite_controller_config

        check.choice("env_name", env_name, TASKS)
        super().__init__(
            camera_names=tuple(CAMERAS),
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

        controller = load_composite_controller_config(controller="BASIC", robot=robot)
        arm = controller["body_parts"]["right"]
        arm["output_max"] = [pos_step] * 3 + [rot_step] * 3
        arm["output_min"] = [-pos_step] * 3 + [-rot_step] * 3
        arm["input_ref_frame"] = "base"
        render_cameras = [CAMERAS[c] for c in self.cameras] or ["agentview"]
        height, width = self.image_size
        self.env = robosuite.make(
            env_name,
            robots=robot,
            controller_configs=controller,
            has_renderer=False,
            has_offscreen_renderer=True,
            use_camera_obs=bool(self.cameras),
            camera_names=render_cameras,
            camera_heights=height,
            camera_widths=width,
            control_freq=control_rate_hz,
            horizon=episode_steps,
            ignore_done=True,
            reward_shaping=self.reward_type == "dense",
            **{"hard_reset": False, **(env_kwargs or {})},  # keep one model: domain randomization edits it
        )
        self._robot = self.env.robots[0]
        self._eef_site = self._robot.eef_site_id["right"]
        self._base_body = self.env.sim.model.body_name2id(self._robot.robot_model.root_body)
        self._raw_obs = self.env.reset()
        self.home_rot = self.tcp_rot
        self.build_spaces()

    @property
    def mj_model(self):
        """The MuJoCo model robosuite simulates (edited in place by domain randomization)."""
        if self.env.hard_reset:
            raise RuntimeError(
                "robosuite rebuilds its model on every reset with hard_reset=True; "
                "leave task.env_kwargs.hard_reset unset to randomize it"
            )
        return self.env.sim.model._model

    # ----------------------------------------------------------------- robot state
    def _base_pose(self) -> tuple[np.ndarray, np.ndarray]:
        data = self.env.sim.data
        return data.body_xpos[self._base_body].copy(), data.body_xmat[self._base_body].reshape(3, 3).copy()

    @property
    def tcp_pos(self) -> np.ndarray:
        """TCP position (m, robot base frame)."""
        base_pos, base_rot = self._base_pose()
        return base_rot.T @ (self.env.sim.data.site_xpos[self._eef_site] - base_pos)

    @property
    def tcp_rot(self) -> np.ndarray:
        """TCP orientation, 3x3 from the TCP frame to the robot base frame."""
        _, base_rot = self._base_pose()
        return base_rot.T @ self.env.sim.data.site_xmat[self._eef_site].reshape(3, 3)

    def tcp_velocity(self) -> np.ndarray:
        """(linear m/s, angular rad/s) of the TCP in the robot base frame."""
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(
            self.env.sim.model._model, self.env.sim.data._data, mujoco.mjtObj.mjOBJ_SITE, self._eef_site, vel, 0
        )
        _, base_rot = self._base_pose()
        return np.concatenate([base_rot.T @ vel[3:], base_rot.T @ vel[:3]])

    # ----------------------------------------------------------------- gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:  # robosuite's samplers share env.rng: reseed it in place
            self.env.rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state
        self._raw_obs = self.env.reset()
        self.home_rot = self.tcp_rot
        return self.begin_episode()

    def apply_action(self, action: np.ndarray) -> float:
        """Returns robosuite's shaped reward in [0, 1] as the progress (used when ``reward=dense``)."""
        rot = self.tcp_rot
        if self.action_dim == 7:
            turn = rot @ action[3:6]
        else:
            turn = np.clip(orientation_error(self.home_rot, rot) / self.rot_step, -1.0, 1.0)
        command = np.concatenate([rot @ action[:3], turn, action[-1:]])
        self._raw_obs, shaped_reward, _, _ = self.env.step(command)
        return shaped_reward

    def is_success(self) -> bool:
        return bool(self.env._check_success())

    def render(self):
        camera = CAMERAS[self.cameras[0]] if self.cameras else "agentview"
        height, width = self.image_size
        return self.env.sim.render(camera_name=camera, height=height, width=width)[::-1].copy()

    def close(self):
        self.env.close()

    # ----------------------------------------------------------------- helpers
    def state_fields(self) -> list[tuple[str, int]]:
        fields = list(PROPRIO_FIELDS)
        if self.object_state:
            fields.append(("object_state", int(np.size(self._raw_obs["object-state"]))))
        return fields

    def observation(self) -> dict[str, np.ndarray]:
        gripper = np.abs(self._raw_obs["robot0_gripper_qpos"]).sum() / PANDA_GRIPPER_TRAVEL
        parts = [self.tcp_pos, rotvec_from_matrix(self.home_rot.T @ self.tcp_rot), self.tcp_velocity(), [gripper]]
        if self.object_state:
            parts.append(self._raw_obs["object-state"])
        obs = {"state": np.concatenate([np.ravel(p) for p in parts]).astype(np.float32)}
        for camera in self.cameras:
            obs[camera] = self._raw_obs[f"{CAMERAS[camera]}_image"][::-1].copy()  # OpenGL rows bottom-up
        return obs
