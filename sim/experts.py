"""Scripted experts: closed-loop controllers on privileged sim state that play the human.

Each expert reads the true object poses from the env and returns an action in the env's own
contract (float32 in [-1, 1]^D, TCP-frame deltas). The phase of a task is read off the state at
every call rather than remembered, so an expert can take over mid-episode from any state the
policy left behind: that is what interventions need.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from robot_rl.core.geometry import orientation_error, yaw_matrix
from robot_rl.sim.panda_env import PandaTaskEnv
from robot_rl.sim.tasks import PegInsertEnv, PickCubeEnv, ReachEnv

OPEN, CLOSE = -1.0, 1.0


class ScriptedExpert:
    """Base class: turns a desired TCP position/orientation (base frame) into an action."""

    def __init__(self, env: gym.Env):
        self.env: PandaTaskEnv = env.unwrapped

    def reset(self) -> None:
        """Called at the start of every episode; experts here keep no state."""

    def __call__(self, obs=None) -> np.ndarray:
        return self.act(obs)

    def act(self, obs=None) -> np.ndarray:
        raise NotImplementedError

    def command(self, target_pos: np.ndarray, gripper: float, target_rot: np.ndarray | None = None) -> np.ndarray:
        env = self.env
        rot = env.tcp_rot
        move = rot.T @ (np.asarray(target_pos) - env.tcp_pos) / env.pos_step
        action = np.zeros(env.action_dim, dtype=np.float32)
        action[:3] = np.clip(move, -1.0, 1.0)
        if env.action_dim == 7:
            target_rot = env.home_rot if target_rot is None else target_rot
            turn = rot.T @ orientation_error(target_rot, rot) / env.rot_step
            action[3:6] = np.clip(turn, -1.0, 1.0)
        action[-1] = gripper
        return action


class ReachExpert(ScriptedExpert):
    env: ReachEnv

    def act(self, obs=None) -> np.ndarray:
        return self.command(self.env.goal, OPEN)


class PickCubeExpert(ScriptedExpert):
    """Hover above the cube, descend with the gripper open, close, lift."""

    env: PickCubeEnv
    hover = 0.06  # m above the cube centre
    align_tol = 0.008  # m, xy distance at which the descent starts

    def act(self, obs=None) -> np.ndarray:
        env = self.env
        cube, tcp, width = env.cube_pos, env.tcp_pos, env.gripper_opening
        cube_width = 2 * env.cube_half_size
        xy_err = np.linalg.norm(cube[:2] - tcp[:2])
        grasp_rot = self._grasp_rotation()
        lift_to = np.array([tcp[0], tcp[1], env.cube_half_size + env.lift_height + 0.04])
        at_grasp_height = abs(tcp[2] - cube[2]) < 0.01

        if env.grasped():
            return self.command(lift_to, CLOSE, grasp_rot)
        if width < cube_width - 0.004:  # closed on nothing: open and start again from above
            return self.command(tcp + [0.0, 0.0, 0.03], OPEN, grasp_rot)
        if xy_err < self.align_tol and at_grasp_height:
            return self.command(cube, CLOSE, grasp_rot)
        if xy_err < self.align_tol and width > cube_width + 0.015:
            return self.command(cube, OPEN, grasp_rot)
        if tcp[2] < cube[2] + 0.03 and xy_err > 2 * self.align_tol:  # too low to move sideways
            return self.command([tcp[0], tcp[1], cube[2] + self.hover], OPEN, grasp_rot)
        return self.command(cube + [0.0, 0.0, self.hover], OPEN, grasp_rot)

    def _grasp_rotation(self) -> np.ndarray:
        """Home orientation turned about z to the cube's nearest face pair (7-D actions only)."""
        w, _, _, z = self.env.cube_quat
        yaw = 2.0 * np.arctan2(z, w)
        yaw = (yaw + np.pi / 4) % (np.pi / 2) - np.pi / 4
        return yaw_matrix(yaw) @ self.env.home_rot


class PegInsertExpert(ScriptedExpert):
    """Carry the held peg over the socket, align in xy, then push down while re-centring."""

    env: PegInsertEnv
    approach = 0.02  # m above the rim before descending
    align_tol = 0.0015  # m

    def act(self, obs=None) -> np.ndarray:
        env = self.env
        bottom, socket = env.peg_bottom, env.socket_pos
        xy_err = np.linalg.norm(bottom[:2] - socket[:2])
        rim = env.socket_height
        inside = bottom[2] < rim - 0.002
        if inside or xy_err < self.align_tol:
            goal_z = rim - env.insert_depth - 0.01
        else:
            goal_z = max(bottom[2], rim + self.approach) if xy_err > 3 * self.align_tol else rim + self.approach
        goal_bottom = np.array([socket[0], socket[1], goal_z])
        return self.command(env.tcp_pos + (goal_bottom - bottom), CLOSE)


EXPERTS: dict[type, type[ScriptedExpert]] = {
    ReachEnv: ReachExpert,
    PickCubeEnv: PickCubeExpert,
    PegInsertEnv: PegInsertExpert,
}


def make_expert(env: gym.Env) -> ScriptedExpert:
    """The scripted expert of a robot_rl MuJoCo task env (wrapped or not)."""
    for env_type, expert_type in EXPERTS.items():
        if isinstance(env.unwrapped, env_type):
            return expert_type(env)
    names = ", ".join(t.__name__ for t in EXPERTS)
    raise ValueError(f"no scripted expert for {type(env.unwrapped).__name__}; experts exist for {names}")
