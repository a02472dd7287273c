"""ROS 2 launch file of the robot_rl graph `sim_train` (configs/graph/sim_train.yaml).

    ros2 launch launch/sim_train.launch.py overrides:="task=reach train.env_steps=2000"

Needs a full ROS 2 install (`launch` is not on PyPI) and robot_rl importable by that Python;
`robot-rl launch sim_train task=reach ...` starts the same nodes without it.
"""

from robot_rl.cli.graph import launch_description


def generate_launch_description():
    return launch_description("sim_train")
