"""reach: bring the TCP within ``success_radius`` metres of a random goal point."""

from __future__ import annotations

import numpy as np

from robot_rl.core import config as check
from robot_rl.sim.panda_env import PandaTaskEnv
from robot_rl.sim.scene import SceneSpec


class ReachEnv(PandaTaskEnv):
    def __init__(
        self,
        goal_low: tuple[float, float, float] = (0.35, -0.2, 0.08),
        goal_high: tuple[float, float, float] = (0.6, 0.2, 0.35),
        success_radius: float = 0.02,
        **kwargs,
    ):
        self.goal_low, self.goal_high = np.asarray(goal_low, float), np.asarray(goal_high, float)
        if np.any(self.goal_low > self.goal_high):
            raise check.ConfigError("goal_low", list(goal_low), f"<= goal_high={list(goal_high)} per axis")
        self.success_radius = check.positive("success_radius", success_radius)
        self.goal = (self.goal_low + self.goal_high) / 2
        super().__init__(**kwargs)

    def bind_model(self) -> None:
        self._goal_site = self.model.site("goal").id

    def scene(self) -> SceneSpec:
        return SceneSpec(worldbody='<site name="goal" pos="0.5 0 0.2" size="0.015" rgba="0.1 0.8 0.1 0.6"/>')

    def reset_task(self, rng: np.random.Generator) -> None:
        self.goal = rng.uniform(self.goal_low, self.goal_high)
        self.model.site_pos[self._goal_site] = self.goal

    def task_state(self) -> dict[str, np.ndarray]:
        return {"goal_pos": self.goal.copy(), "goal_rel": self.goal - self.tcp_pos}

    def distance(self) -> float:
        return float(np.linalg.norm(self.goal - self.tcp_pos))

    def is_success(self) -> bool:
        return self.distance() < self.success_radius

    def dense_reward(self) -> float:
        return 1.0 - np.tanh(10.0 * self.distance())

    def task_info(self) -> dict:
        return {"distance": self.distance()}
