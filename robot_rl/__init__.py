"""robot_rl: human-in-the-loop reinforcement learning for robot arms, ROS 2 native."""

from robot_rl.core.blas import choose_openblas_kernel

choose_openblas_kernel()  # before anything loads numpy: the BLAS kernels this CPU can run (robot_rl.core.blas)

__version__ = "0.1.0"
