"""The backward (reset) tasks: put a forward task's scene back into its start region, so that a learned policy can
make the resets a person makes today (issue 76; RoboFuME's backward policy).

A backward task is its forward task's env (same scene, actions, observations and settings, among them the start
region) with three hooks swapped:

* **start**: the reset draws a plausible end state of the forward task (:meth:`BackwardTask.sample_end_state`);
  ``reset(options={"scene": forward_env.scene_state()})`` starts where a forward episode left the scene;
* **success**: the forward task's :meth:`in_start_region` holds the scene, the object is at rest (below
  :data:`AT_REST`), and the arm is as the next forward episode needs it (:meth:`BackwardTask.arm_ready`);
* **progress** (the dense reward the scripted human's intervention rules read): fetch the object, bring it into
  the start region, settle it there, release.

Each backward task declares the **bounds** of the scenes it starts from (:meth:`BackwardTask.within_bounds`: where
forward episodes leave the object). A scene outside them (a cube pushed far off, a peg dropped on the table: its start
is in the hand) is not one the backward policy is asked to mend; a learned-reset loop asks the person then
(:mod:`robot_rl.runtime.reset_rule`).
"""

from __future__ import annotations

import numpy as np

from robot_rl.core import config as check
from robot_rl.sim.panda_env import AT_REST
from robot_rl.sim.scene import FINGER_TRAVEL
from robot_rl.sim.start_region import StartRegion
from robot_rl.sim.tasks.peg_insert import GRASP_BELOW_TOP, PegInsertEnv
from robot_rl.sim.tasks.pick_cube import ON_TABLE, PickCubeEnv

END_SPREAD = 0.08  # m: forward episodes leave the object up to this far outside the start region
END_YAW = 0.3  # rad: a pick_cube policy with 4-D actions (no turning) may leave the cube turned this far
OPEN_WIDTH = 2 * FINGER_TRAVEL - 0.01  # m: a gripper opened wider than this counts as open


class BackwardTask:
    """Mixin put before a forward task's class: the forward reset's draw and success swapped for the backward
    ones. ``object_joint`` names the free joint of the object to put back."""

    object_joint: str

    def reset_task(self, rng: np.random.Generator) -> None:
        self.sample_end_state(rng)

    def sample_end_state(self, rng: np.random.Generator) -> None:
        """Arrange the scene (arm, gripper, objects; no physics beyond settling a grasp) as a forward episode may
        have left it."""
        raise NotImplementedError

    def arm_ready(self) -> bool:
        """Whether the arm is as the next forward episode needs it."""
        return True

    def within_bounds(self) -> bool:
        """Whether the scene lies within the bounds this task declares for its starts (where forward episodes leave
        the object): one the backward policy is asked to mend."""
        raise NotImplementedError

    def at_rest(self) -> bool:
        return self.object_speed(self.object_joint) < AT_REST

    def is_success(self) -> bool:
        return bool(self.in_start_region() and self.at_rest() and self.arm_ready())

    def task_info(self) -> dict:
        return {**super().task_info(), "in_start_region": self.in_start_region()}


class PickCubeResetEnv(BackwardTask, PickCubeEnv):
    """Put the cube back down, flat, inside pick_cube's start region, open the gripper and lift the open fingers
    ``release_height`` metres clear of the cube's top. It starts with the cube held (lifted, as a success leaves it,
    or low) or lying on the table up to :data:`END_SPREAD` outside the start region, the arm somewhere above."""

    object_joint = "cube"

    def __init__(self, release_height: float = 0.05, **kwargs):
        self.release_height = check.positive("release_height", release_height)
        super().__init__(**kwargs)
        grown = self.start_region.low - END_SPREAD, self.start_region.high + END_SPREAD
        #: where forward episodes leave the cube (m, base frame, xy): the start region grown by END_SPREAD, within
        #: the workspace (a box to draw from, as a start region is)
        self.end_region = StartRegion(
            np.maximum(grown[0], self.workspace[0, :2]), grown[1].clip(None, self.workspace[1, :2])
        )

    def sample_end_state(self, rng: np.random.Generator) -> None:
        h = self.cube_half_size
        if rng.random() < 0.5:  # held: lifted as a success leaves it, or lower
            tcp = np.append(self.end_region.sample(rng), rng.uniform(h + 0.02, h + self.lift_height + 0.06))
            self.place_arm(tcp, 1.0)
            self.hold(self.object_joint, [0.0, 0.0, 0.0], h)
            return
        xy = self.end_region.sample(rng)
        for _ in range(100):  # outside the start region: a cube inside would leave nothing to do
            if not self.start_region.contains(xy):
                break
            xy = self.end_region.sample(rng)
        yaw = rng.uniform(-np.pi / 4, np.pi / 4) if self.action_dim == 7 else rng.uniform(-END_YAW, END_YAW)
        self.place_cube(xy, yaw)
        tcp = np.append(self.end_region.sample(rng), rng.uniform(2 * h + 0.04, self.tcp_start.high[2]))
        self.place_arm(tcp, rng.choice([-1.0, 1.0]))

    def within_bounds(self) -> bool:
        """The cube's xy within :attr:`end_region` (held or on the table: not fallen below the table's top)."""
        return bool(self.end_region.contains(self.cube_pos) and self.lifted() > -ON_TABLE)

    def clearance(self) -> float:
        """Height (m) of the TCP above the cube's top."""
        return float(self.tcp_pos[2] - self.cube_pos[2] - self.cube_half_size)

    def arm_ready(self) -> bool:
        """The gripper open, off the cube, its fingers ``release_height`` above the cube's top."""
        released = self.gripper_opening > OPEN_WIDTH and not self.grasped()
        return bool(released and self.clearance() >= self.release_height)

    def dense_reward(self) -> float:
        away = self.start_region.distance(self.cube_pos)  # m
        carried = 2.0 * (1.0 - np.tanh(10.0 * away))
        if away > 0.0:  # fetch the cube and bring it in
            reach = 1.0 - np.tanh(10.0 * np.linalg.norm(self.cube_pos - self.tcp_pos))
            return float(reach + 0.5 * self.grasped() + carried) / 6.0
        # inside: set it down, let go, clear the fingers
        down = 1.0 - np.tanh(20.0 * self.lifted())
        opened = min(self.gripper_opening / OPEN_WIDTH, 1.0)
        released = 0.0 if self.grasped() else 0.5 * opened + np.clip(self.clearance() / self.release_height, 0, 1)
        return float(1.5 + carried + down + released) / 6.0


class PegInsertResetEnv(BackwardTask, PegInsertEnv):
    """Pull the peg out of the socket and bring it back, held upright in the closed gripper, to peg_insert's start
    region (the peg's forward start is in the hand, so it is not laid on the table). It starts with the peg in the
    socket, as deep as a success leaves it or less, or held above and around the socket."""

    object_joint = "peg"

    def sample_end_state(self, rng: np.random.Generator) -> None:
        self.place_socket(rng)
        socket = self.model.body_pos[self._socket_body]
        grasp = self.peg_half_length - GRASP_BELOW_TOP  # m from the peg's centre up to the TCP
        if rng.random() < 0.5:  # in the socket: centred within the clearance, 5 mm deep to 1 cm past insert_depth
            xy = socket[:2] + rng.uniform(-self.clearance, self.clearance, 2) / 2
            bottom = self.socket_height - rng.uniform(0.005, self.insert_depth + 0.01)
        else:  # above the rim, up to END_SPREAD to the side
            xy = socket[:2] + rng.uniform(-END_SPREAD, END_SPREAD, 2)
            bottom = self.socket_height + rng.uniform(0.005, END_SPREAD)
        self.place_arm(np.append(xy, bottom + self.peg_half_length + grasp), 1.0)
        self.grasp_peg()

    def within_bounds(self) -> bool:
        """The peg in the closed gripper: a peg dropped on the table cannot be brought back to a start in the hand."""
        return self.grasped()

    def dense_reward(self) -> float:
        out = 1.0 - np.tanh(20.0 * max(self.socket_height + 0.005 - self.peg_bottom[2], 0.0))
        brought = 1.0 - np.tanh(10.0 * self.start_region.distance(self.peg_pos))
        return float(self.grasped() + out + 2.0 * brought) / 4.0
