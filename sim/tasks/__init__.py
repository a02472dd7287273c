"""The robot_rl MuJoCo tasks."""

from robot_rl.sim.tasks.peg_insert import PegInsertEnv
from robot_rl.sim.tasks.pick_cube import PickCubeEnv
from robot_rl.sim.tasks.reach import ReachEnv

__all__ = ["PegInsertEnv", "PickCubeEnv", "ReachEnv"]
