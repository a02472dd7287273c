"""robot_rl: human-in-the-loop reinforcement learning for robot arms, ROS 2 native."""

__version__ = "0.1.0"
