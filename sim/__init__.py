"""MuJoCo tasks, controllers and scripted experts for robot_rl."""
