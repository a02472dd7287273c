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
from robot_rl.sim.tasks.backward import OPEN_WIDTH, PegInsertResetEnv, PickCubeResetEnv
from robot_rl.sim.tasks.pick_cube import ON_TABLE

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
    """Hover above the cube, descend with the gripper open, close, lift. With ``near_miss_height`` set, a near miss
    played on purpose: the cube lifted only that far (m, its bottom above the table, below the task's lift height) and
    held there, a failure that looks like a success (the negatives a reward classifier confuses most)."""

    env: PickCubeEnv
    hover = 0.06  # m above the cube centre
    align_tol = 0.008  # m, xy distance at which the descent starts
    near_miss_height: float | None = None

    def act(self, obs=None) -> np.ndarray:
        env = self.env
        cube, tcp, width = env.cube_pos, env.tcp_pos, env.gripper_opening
        cube_width = 2 * env.cube_half_size
        xy_err = np.linalg.norm(cube[:2] - tcp[:2])
        grasp_rot = self._grasp_rotation()
        lift = env.lift_height + 0.04 if self.near_miss_height is None else self.near_miss_height
        lift_to = np.array([tcp[0], tcp[1], env.cube_half_size + lift])
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
        return yaw_matrix(self.env.cube_yaw()) @ self.env.home_rot


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


class PickCubeResetExpert(PickCubeExpert):
    """pick_cube's backward task: fetch the cube as the forward expert grasps it, carry it over the nearest point
    ``margin`` inside the start region's edge, set it down (turned back to the home orientation), open, and lift
    the open fingers straight up to the home height."""

    env: PickCubeResetEnv
    carry = 0.05  # m the cube's bottom clears the table while carried
    margin = 0.02  # m inside the start region's edge where the cube is set down
    place_tol = 0.005  # m, xy distance at which the cube goes down

    def act(self, obs=None) -> np.ndarray:
        env = self.env
        cube, tcp, low = env.cube_pos, env.tcp_pos, env.cube_half_size
        if env.in_start_region() and not env.grasped():  # in place: let go, then clear upward
            if env.gripper_opening < OPEN_WIDTH:
                return self.command(tcp, OPEN)
            return self.command([tcp[0], tcp[1], max(tcp[2], env.tcp_start.centre[2])], OPEN)
        if not env.grasped():
            return super().act(obs)
        goal = env.start_region.inner_point(cube[:2], self.margin)
        if np.linalg.norm(goal - cube[:2]) > self.place_tol:
            if cube[2] < low + self.carry - 0.01:  # up first, then across
                target = [cube[0], cube[1], low + self.carry]
            else:
                target = [goal[0], goal[1], max(cube[2], low + self.carry)]
        elif env.lifted() > ON_TABLE:
            target = [goal[0], goal[1], low - 0.005]  # down, pressing lightly on the table
        else:
            return self.command(tcp, OPEN)
        return self.command(tcp + (np.asarray(target) - cube), CLOSE)


class PegInsertResetExpert(ScriptedExpert):
    """peg_insert's backward task: pull the held peg straight up until its bottom clears the rim by ``lift``
    (re-centred over the hole while in it), then carry it to the start region's centre."""

    env: PegInsertResetEnv
    lift = 0.01  # m above the rim before the peg moves sideways

    def act(self, obs=None) -> np.ndarray:
        env = self.env
        peg, bottom, socket = env.peg_pos, env.peg_bottom, env.socket_pos
        clear = env.socket_height + self.lift
        if bottom[2] < clear:
            in_hole = np.linalg.norm(bottom[:2] - socket[:2]) < env.clearance + env.peg_half_width
            xy = socket[:2] if in_hole else peg[:2]
            goal = np.array([xy[0], xy[1], peg[2] + clear + 0.01 - bottom[2]])
        else:
            goal = env.start_region.centre
        return self.command(env.tcp_pos + (goal - peg), CLOSE)


EXPERTS: dict[type, type[ScriptedExpert]] = {
    ReachEnv: ReachExpert,
    PickCubeEnv: PickCubeExpert,
    PegInsertEnv: PegInsertExpert,
    PickCubeResetEnv: PickCubeResetExpert,
    PegInsertResetEnv: PegInsertResetExpert,
}


def make_expert(env: gym.Env) -> ScriptedExpert:
    """The scripted expert of a robot_rl MuJoCo task env (wrapped or not): that of its class, else of the nearest
    base class that has one."""
    for env_type in type(env.unwrapped).__mro__:
        if env_type in EXPERTS:
            return EXPERTS[env_type](env)
    names = ", ".join(t.__name__ for t in EXPERTS)
    raise ValueError(f"no scripted expert for {type(env.unwrapped).__name__}; experts exist for {names}")
