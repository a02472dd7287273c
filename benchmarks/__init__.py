"""Benchmarks of robot_rl; each module is a script (python -m benchmarks.<name>)."""

import robot_rl  # noqa: F401 - first, before numpy: the BLAS kernels the stack's processes get (robot_rl.core.blas)
