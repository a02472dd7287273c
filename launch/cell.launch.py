"""ROS 2 launch file of the robot_rl graph `cell` (configs/graph/cell.yaml): the emulated cell to rehearse against.

    ros2 launch launch/cell.launch.py overrides:="robot=fr3 task=pick_cube"

Needs a full ROS 2 install (`launch` is not on PyPI) and robot_rl importable by that Python;
`robot-rl launch cell robot=fr3 task=pick_cube` starts the same node without it.
"""

from robot_rl.cli.graph import launch_description


def generate_launch_description():
    return launch_description("cell")
