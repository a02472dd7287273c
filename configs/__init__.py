"""Hydra config groups of robot_rl (a package so that an installed robot-rl finds them)."""
