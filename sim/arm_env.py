"""The robot_rl env contract, shared by the MuJoCo tasks and the robosuite adapter.

:class:`ArmEnv` validates the settings every arm env has, owns the spaces and does the step
bookkeeping: action checks (wrong shape or NaN/inf raise before anything moves), clipping to
[-1, 1] with a count, sparse/dense reward, termination on success, truncation after
``episode_steps``, and ``info["success"]`` on every step. Subclasses move the arm
(:meth:`apply_action`) and describe the world (:meth:`state_fields`, :meth:`observation`,
:meth:`is_success`, :meth:`dense_reward`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from robot_rl.core import config as check

#: proprioceptive fields at the start of every ``state`` vector: (name, size)
PROPRIO_FIELDS = [("tcp_pos", 3), ("tcp_rotvec", 3), ("tcp_linvel", 3), ("tcp_angvel", 3), ("gripper", 1)]


class ArmEnv(gym.Env):
    metadata: ClassVar[dict] = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        *,
        camera_names: Sequence[str],
        control_rate_hz: float,
        action_dim: int,
        pos_step: float,
        rot_step: float,
        cameras: Sequence[str],
        image_size: int | Sequence[int],
        reward: str,
        object_state: bool,
        episode_steps: int,
        terminate_on_success: bool,
        render_mode: str | None,
    ):
        self.control_rate_hz = check.positive("control_rate_hz", control_rate_hz)
        self.action_dim = check.choice("action_dim", action_dim, (4, 7))
        self.pos_step = check.positive("pos_step", pos_step)
        self.rot_step = check.positive("rot_step", rot_step)
        self.cameras = check.subset("cameras", list(cameras), camera_names)
        self.image_size = check.image_size("image_size", image_size)
        self.reward_type = check.choice("reward", reward, ("dense", "sparse"))
        self.episode_steps = check.positive("episode_steps", episode_steps, integer=True)
        self.object_state = bool(object_state)
        self.terminate_on_success = bool(terminate_on_success)
        self.render_mode = render_mode
        self.action_space = gym.spaces.Box(-1.0, 1.0, (self.action_dim,), np.float32)
        self._steps = 0
        self.clipped_actions_total = 0

    # ----------------------------------------------------------------- subclass hooks
    def state_fields(self) -> list[tuple[str, int]]:
        """(name, size) of each field of ``state``, in order."""
        raise NotImplementedError

    def observation(self) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def apply_action(self, action: np.ndarray) -> float | None:
        """Execute a clipped action for one control period; may return the env's own progress
        in [0, 1] (used instead of :meth:`dense_reward`)."""
        raise NotImplementedError

    def is_success(self) -> bool:
        raise NotImplementedError

    def dense_reward(self) -> float:
        """Task progress in [0, 1] (1 = done); the dense reward is progress - 1, and 0 on success."""
        raise NotImplementedError

    def task_info(self) -> dict[str, Any]:
        return {}

    # ----------------------------------------------------------------- contract
    def build_spaces(self) -> None:
        """Set ``state_layout`` (name -> (offset, size)) and ``observation_space``."""
        self.state_layout, offset = {}, 0
        for name, size in self.state_fields():
            self.state_layout[name] = (offset, size)
            offset += size
        spaces = {"state": gym.spaces.Box(-np.inf, np.inf, (offset,), np.float32)}
        for camera in self.cameras:
            spaces[camera] = gym.spaces.Box(0, 255, (*self.image_size, 3), np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)

    def begin_episode(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Reset the counters; the reset observation and info."""
        self._steps = 0
        self.clipped_actions_total = 0
        return self.observation(), self.info(0, self.is_success())

    def step(self, action):
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (self.action_dim,):
            raise ValueError(f"action has shape {action.shape}; this env expects ({self.action_dim},)")
        bad = np.flatnonzero(~np.isfinite(action))
        if bad.size:
            raise ValueError(f"action has non-finite values at indices {bad.tolist()}: {action.tolist()}")
        clipped = int(np.count_nonzero(np.abs(action) > 1.0))
        self.clipped_actions_total += clipped
        own_reward = self.apply_action(np.clip(action, -1.0, 1.0))
        self._steps += 1

        success = self.is_success()
        reward = self.reward(success, own_reward)
        terminated = success and self.terminate_on_success
        truncated = self._steps >= self.episode_steps and not terminated
        return self.observation(), reward, terminated, truncated, self.info(clipped, success)

    def reward(self, success: bool, progress: float | None = None) -> float:
        """Sparse: 1 on success. Dense: every step costs (1 - progress) until success, so finishing
        early pays; ``progress`` defaults to :meth:`dense_reward`."""
        if self.reward_type == "sparse":
            return float(success)
        progress = float(progress) if progress is not None else self.dense_reward()
        return 0.0 if success else progress - 1.0

    def info(self, clipped: int, success: bool) -> dict[str, Any]:
        return {
            "success": bool(success),
            "action_clipped": clipped,
            "clipped_actions_total": self.clipped_actions_total,
            **self.task_info(),
        }
