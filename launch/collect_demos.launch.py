"""ROS 2 launch file of the robot_rl graph `collect_demos` (configs/graph/collect_demos.yaml).

    ros2 launch launch/collect_demos.launch.py overrides:="task=reach train.env_steps=2000"

Needs a full ROS 2 install (`launch` is not on PyPI) and robot_rl importable by that Python;
`robot-rl launch collect_demos task=reach ...` starts the same nodes without it.
"""

from robot_rl.cli.graph import launch_description


def generate_launch_description():
    return launch_description("collect_demos")
