"""The tracker node: an object tracker's poses -> the task state a policy acting from state reads.

A cell tracks its objects with motion capture (vrpn_mocap: ``vrpn_mocap/<body>/pose``) or fiducials (AprilTag
detections turned into poses): geometry_msgs/PoseStamped in the robot's base frame. The actor reads those
features as ``/rl/task_state`` (std_msgs/Float32MultiArray, labelled), laid out as the task's sim observation
lays them out, so a policy trained in sim acts on the cell unchanged. For each feature of the task's state after
the arm's (``<object>_pos``, ``<object>_rel`` = object minus TCP position, ``<object>_quat`` as w, x, y, z) the node
needs the object's pose on ``tracker.topics.<object>`` (default ``vrpn_mocap/<object>/pose``); each new object pose
sends the task state, once every tracked object and the TCP pose have come. A task whose state has no object
features needs no tracker: the node says so and exits 0; a feature it cannot build is named with what it needs
(exit 2). Every pose is validated (finite, a unit quaternion); a bad one is dropped and counted.

    python -m robot_rl.ros.nodes.tracker_node task=pick_cube [tracker.topics.cube=vrpn_mocap/cube/pose]
"""

from __future__ import annotations

import sys

import numpy as np
from geometry_msgs.msg import PoseStamped
from std_msgs.msg import Float32MultiArray, MultiArrayDimension

from robot_rl.core.config import ConfigError

from ..links.topic_env import POSE, PROPRIO, TASK_STATE
from ..plumbing import qos
from ..plumbing.guard import InputGuard
from ..plumbing.messages import pose_to_numpy
from ..plumbing.node_main import exit_with_error, node_config, node_task_spec, ros_node, spin

FEATURES = {"pos": 3, "rel": 3, "quat": 4}  # <object>_<kind> -> size


def tracked_features(layout: dict[str, tuple[int, int]]) -> list[tuple[str, str, str]]:
    """[(feature, object, kind)] of a task's state layout after the arm's; a feature no tracker gives raises."""
    features = []
    for name, (_, size) in layout.items():
        if name in PROPRIO:
            continue
        obj, _, kind = name.rpartition("_")
        if not obj or FEATURES.get(kind) != size:
            raise ConfigError(
                "task",
                name,
                "state features an object tracker gives (<object>_pos, <object>_rel, <object>_quat); set "
                "task.object_state=false for a policy without them",
            )
        features.append((name, obj, kind))
    return features


def quaternion_wxyz(rotation: np.ndarray) -> np.ndarray:
    """A rotation matrix as a unit quaternion (w, x, y, z) with w >= 0, MuJoCo's convention."""
    import mujoco

    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(rotation, dtype=float).ravel())
    return quat if quat[0] >= 0 else -quat


class TaskStateFromTracker:
    """Object poses and the TCP pose in, labelled task state out (module docstring)."""

    def __init__(self, node, features: list[tuple[str, str, str]], topics: dict[str, str]):
        self.features = features
        self.poses: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.tcp: np.ndarray | None = None
        self.guard = InputGuard(node)
        self.pub = node.create_publisher(Float32MultiArray, TASK_STATE, qos.STREAM_PUBLISHER)
        self.guard.subscribe(PoseStamped, POSE, self._on_tcp, qos.STREAM_SUBSCRIBER)
        for obj in dict.fromkeys(obj for _, obj, _ in features):
            topic = topics.get(obj, f"vrpn_mocap/{obj}/pose")
            self.guard.subscribe(PoseStamped, topic, lambda m, o=obj: self._on_object(o, m), qos.STREAM_SUBSCRIBER)
        self.layout = [
            MultiArrayDimension(label=name, size=FEATURES[kind], stride=FEATURES[kind]) for name, _, kind in features
        ]

    def _on_tcp(self, msg) -> None:
        self.tcp = pose_to_numpy(msg.pose)[0]

    def _on_object(self, obj: str, msg) -> None:
        self.poses[obj] = pose_to_numpy(msg.pose)
        if self.tcp is None or len(self.poses) < len({o for _, o, _ in self.features}):
            return
        parts = []
        for _, name, kind in self.features:
            position, rotation = self.poses[name]
            if kind == "pos":
                parts.append(position)
            elif kind == "rel":
                parts.append(position - self.tcp)
            else:
                parts.append(quaternion_wxyz(rotation))
        msg = Float32MultiArray()
        msg.layout.dim = self.layout
        msg.data = np.concatenate(parts).astype(np.float32).tolist()
        self.pub.publish(msg)


def main(argv: list[str] | None = None) -> int:
    from omegaconf import OmegaConf

    try:
        cfg, ros_args = node_config(sys.argv[1:] if argv is None else argv)
        task = OmegaConf.to_container(cfg.task, resolve=True)
        layout = node_task_spec(cfg).state_layout or {}
        features = tracked_features(layout)
        topics = OmegaConf.to_container(cfg.tracker.topics, resolve=True) or {}
    except ConfigError as error:
        return exit_with_error("robot_rl.ros.nodes.tracker_node", error)
    if not features:
        print(f"robot_rl.ros.nodes.tracker_node: task {task.get('name')} has no object state; no tracker needed")
        return 0
    with ros_node("robot_rl_tracker", ros_args) as node:
        TaskStateFromTracker(node, features, topics)
        node.get_logger().info(f"task state {[name for name, _, _ in features]} from the object tracker")
        spin(node)
    return 0


if __name__ == "__main__":
    sys.exit(main())
