"""The robot_rl MuJoCo tasks."""

from .peg_insert import PegInsertEnv
from .pick_cube import PickCubeEnv
from .reach import ReachEnv

__all__ = ["PegInsertEnv", "PickCubeEnv", "ReachEnv"]
