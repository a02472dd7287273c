"""Any registered gymnasium env behind the robot_rl contract (``task=gym task.id=...``).

Box observations become ``{"state": obs}``; Dict observations keep their Box entries (vectors
as float32, uint8 HxWxC images as cameras). Box actions are rescaled to [-1, 1]; both bounds
must be finite. ``info["success"]`` is taken from ``info["success"]`` or ``info["is_success"]``
and is False when the env reports neither.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from .config import ConfigError


class ContractWrapper(gym.Wrapper):
    def __init__(self, env: gym.Env):
        super().__init__(env)
        name = env.spec.id if env.spec else env
        space = env.observation_space
        if isinstance(space, gym.spaces.Box):
            self._keys = None
            spaces = {"state": gym.spaces.Box(-np.inf, np.inf, (int(np.prod(space.shape)),), np.float32)}
        elif isinstance(space, gym.spaces.Dict):
            self._keys = {}
            spaces = {}
            for key, sub in space.spaces.items():
                if not isinstance(sub, gym.spaces.Box):
                    raise ConfigError("task.id", name, f"Box entries only; {key!r} is {sub}")
                if sub.dtype == np.uint8 and len(sub.shape) == 3:
                    spaces[key] = sub
                else:
                    spaces[key] = gym.spaces.Box(-np.inf, np.inf, (int(np.prod(sub.shape)),), np.float32)
                self._keys[key] = spaces[key]
        else:
            raise ConfigError("task.id", name, f"an env with Box or Dict observations; it has {space}")
        action = env.action_space
        if not isinstance(action, gym.spaces.Box):
            raise ConfigError("task.id", name, f"an env with Box actions; it has {action}")
        if not (np.all(np.isfinite(action.low)) and np.all(np.isfinite(action.high))):
            raise ConfigError("task.id", name, f"finite action bounds; it has low={action.low}, high={action.high}")
        self._low, self._high = action.low.astype(np.float64), action.high.astype(np.float64)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Box(-1.0, 1.0, action.shape, np.float32)

    def _obs(self, obs: Any) -> dict[str, np.ndarray]:
        if self._keys is None:
            return {"state": np.asarray(obs, np.float32).ravel()}
        return {
            key: np.asarray(obs[key]) if space.dtype == np.uint8 else np.asarray(obs[key], np.float32).ravel()
            for key, space in self._keys.items()
        }

    @staticmethod
    def _info(info: dict[str, Any]) -> dict[str, Any]:
        return {**info, "success": bool(info.get("success", info.get("is_success", False)))}

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return self._obs(obs), self._info(info)

    def step(self, action):
        action = np.asarray(action, dtype=np.float64)
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action has non-finite values: {action.tolist()}")
        scaled = self._low + (np.clip(action, -1.0, 1.0) + 1.0) * 0.5 * (self._high - self._low)
        obs, reward, terminated, truncated, info = self.env.step(scaled.astype(self.env.action_space.dtype))
        return self._obs(obs), float(reward), terminated, truncated, self._info(info)
