"""The recorder node: every episode the actor plays, into the episode store (and MCAP on request).

Episodes are rebuilt from the transitions on ``/rl/transitions`` (the stream the learner gets) by the
:class:`~robot_rl.data.EpisodeRecorder` that ``robot-rl train`` records with too: an episode left without its last
step (the actor was stopped, a demonstration a stall paused or its actor's death cut) is dropped, so the store only
ever holds finished episodes, also after Ctrl-C or SIGTERM; an online one the actor's step budget, a stall or the
operator's pause cut short is committed when the actor says so on ``rl/episode_cut`` (its steps count in the budget),
one whose actor died (kill -9) when the actor the launch started again begins its first episode. Each
committed episode keeps the actor's episode uid and is acknowledged on ``/rl/transitions_ack``: an episode the
recorder never confirms (it was down) is recorded by the actor itself.
Malformed transition messages are dropped and counted. The operator's label (``rl/operator_label``, std_msgs/Bool:
the console's success or failure) is kept as the open episode's ``operator_label`` attribute (one that comes between
episodes is logged and not kept).
With ``ros.recorder.mcap=<folder>`` the raw messages of the cell's topics (cameras, state,
commands, teleop) are also written to a rosbag2 MCAP there, serialized as received.

Disk space: at start the node estimates what the run will write (``train.env_steps`` and the demonstrations' steps
times the bytes of a recorded step) and warns with the numbers when the store's disk has less; below
``data.min_free_mb`` it refuses with one line (exit code 2). When the disk fills mid-run (ENOSPC) the open episode is
dropped (every committed one stays whole), one line names the store and the free space, and a ``disk_full`` record
goes out on ``/rl/episode_stats``: the actor holds the arm until the recorder's ``disk_space`` record says there is
``data.min_free_mb`` free again (``ros.recorder.hold_on_full_disk``); until then transitions are not recorded.

    python -m robot_rl.ros.nodes.recorder_node task=pick_cube ros.recorder.store=data/demos.zarr
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

from omegaconf import OmegaConf
from rclpy.clock import Clock, ClockType
from std_msgs.msg import Bool, String, UInt8MultiArray

from robot_rl.core.composed_config import steps_to_record
from robot_rl.core.config import MB, ConfigError, check_disk_space, disk_full, free_bytes, non_negative

from ...data import EpisodeRecorder, EpisodeStore
from ...data.episode_store import EpisodeStoreError, bytes_per_step
from ...data.wire import TransitionSchema, decode_transitions
from ..links.topic_env import EPISODE_STATS
from ..links.transport import TRANSITIONS_TOPIC
from ..plumbing import qos
from ..plumbing.delivery import ACK_TOPIC, CUT_TOPIC, RECORDER_HEARTBEAT, parse_cut
from ..plumbing.guard import InputGuard
from ..plumbing.node_main import exit_with_error, node_config, node_task_spec, ros_node, spin
from ..plumbing.sim_clock import ClockError, sim_time_of, wait_for_clock

#: topics recorded to MCAP (name -> type) besides each camera's image and camera_info
MODULE = "robot_rl.ros.nodes.recorder_node"
MCAP_TOPICS = {
    "joint_states": "sensor_msgs/msg/JointState",
    "franka_robot_state_broadcaster/current_pose": "geometry_msgs/msg/PoseStamped",
    "franka_robot_state_broadcaster/external_wrench_in_base_frame": "geometry_msgs/msg/WrenchStamped",
    "rl/action": "geometry_msgs/msg/PoseStamped",
    "rl/gripper": "std_msgs/msg/Float64",
    "rl/equilibrium_pose": "geometry_msgs/msg/PoseStamped",
    "rl/safety_flags": "std_msgs/msg/UInt32",
    "rl/reward": "std_msgs/msg/Float64",
    "rl/success": "std_msgs/msg/Bool",
    "spacenav/twist": "geometry_msgs/msg/Twist",
    "spacenav/joy": "sensor_msgs/msg/Joy",
    "rl/intervention": "std_msgs/msg/Bool",
}


class McapRecorder:
    """Raw (serialized) messages of the given topics to a rosbag2 MCAP folder."""

    def __init__(self, node, folder: Path, topics: dict[str, str], guard: InputGuard):
        from rosbags.rosbag2 import StoragePlugin, Writer
        from rosbags.typesys import Stores, get_typestore

        if folder.exists():
            raise ConfigError("ros.recorder.mcap", str(folder), "a new folder (rosbag2 writes a new one)")
        self.types = get_typestore(Stores.ROS2_JAZZY)
        self.writer = Writer(folder, version=9, storage_plugin=StoragePlugin.MCAP)
        self.writer.open()
        self.written = 0
        for topic, kind in topics.items():  # relative names: the robot's namespace, as the bag names them
            connection = self.writer.add_connection(node.resolve_topic_name(topic), kind, typestore=self.types)
            guard.subscribe(
                _message_class(kind), topic, lambda data, c=connection: self._write(c, data), qos.TRANSITIONS, raw=True
            )

    def _write(self, connection, data: bytes) -> None:
        self.writer.write(connection, time.time_ns(), bytes(data))
        self.written += 1

    def close(self) -> None:
        self.writer.close()


def _message_class(kind: str):
    """``pkg/msg/Name`` -> the rclpy message class."""
    import importlib

    package, _, name = kind.split("/")
    return getattr(importlib.import_module(f"{package}.msg"), name)


DISK_CHECK_PERIOD = 2.0  # s between looks at the free space while the disk is full


class DiskWatch:
    """The store's disk while recording: on a full disk (:meth:`full`) the open episode is dropped, one line is
    logged and a ``disk_full`` record published; every ``DISK_CHECK_PERIOD`` s (:meth:`check`) the free space is
    looked at, and at ``data.min_free_mb`` again a ``disk_space`` record says so."""

    def __init__(self, node, recorder: EpisodeRecorder, path: Path, floor_mb: float):
        self.node, self.recorder, self.path, self.floor_mb = node, recorder, path, floor_mb
        self.records = node.create_publisher(String, EPISODE_STATS, qos.EPISODE_LOG)
        self.is_full = False

    def _publish(self, kind: str, free: int) -> None:
        record = {"kind": kind, "node": "recorder", "path": str(self.path), "free_mb": round(free / MB, 1)}
        self.records.publish(String(data=json.dumps(record)))

    def full(self) -> None:
        self.recorder.discard()
        free = free_bytes(self.path)
        if not self.is_full:
            self.node.get_logger().error(
                f"ros.recorder.store='{self.path}': no space left on device ({free / MB:.1f} MB free); every "
                f"episode recorded so far is kept; recording again at data.min_free_mb={self.floor_mb:g} free"
            )
            self._publish("disk_full", free)
        self.is_full = True

    def check(self) -> None:
        if not self.is_full:
            return
        free = free_bytes(self.path)
        if free >= max(self.floor_mb * MB, 1):
            self.is_full = False
            self.node.get_logger().info(f"{free / MB:.1f} MB free on the store's disk: recording again")
            self._publish("disk_space", free)

    def guarded(self, handle):
        """``handle(msg)`` that turns a full disk into :meth:`full` (and drops messages while full); other errors
        reach the node's input guard, which drops and counts them."""

        def call(msg) -> None:
            if self.is_full:
                return
            try:
                handle(msg)
            except Exception as error:
                if not disk_full(error):
                    raise
                self.full()

        return call


def check_store_disk(cfg, path: Path, metadata: dict, warn) -> float:
    """Refuse a store whose disk is below ``data.min_free_mb`` (DiskSpaceError), warn when it has less than the run
    may write: ``train.env_steps`` and the demonstrations' steps, each :func:`bytes_per_step`. The floor, MB."""
    floor = non_negative("data.min_free_mb", OmegaConf.select(cfg, "data.min_free_mb", default=0))
    steps = steps_to_record(cfg)
    shapes = {key: tuple(shape) for key, shape in metadata["observation_shapes"].items()}
    need = steps * bytes_per_step(shapes, int(metadata["action_dim"]))
    check_disk_space("ros.recorder.store", path, need, floor, warn=warn)
    return floor


def drain(node, recorder: EpisodeRecorder, quiet: float, cap: float) -> None:
    """Take what already arrived (an actor that just finished flushed its last episode to us)
    until no transition came for ``quiet`` s, at most ``cap`` s: committing an episode can take
    a while on a loaded machine, and the messages behind it must not be dropped."""
    import rclpy

    end = time.monotonic() + cap
    started = time.monotonic()
    while time.monotonic() < end and time.monotonic() - max(recorder.last_receipt, started) < quiet:
        rclpy.spin_once(node, timeout_sec=0.05)


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, ros_args = node_config(sys.argv[1:] if argv is None else argv)
        task = OmegaConf.to_container(cfg.task, resolve=True)
        metadata = node_task_spec(cfg).metadata()
        sim_time = sim_time_of(cfg)
        store_path = Path(str(cfg.ros.recorder.store))
        floor_mb = check_store_disk(cfg, store_path, metadata, warn=lambda line: print(f"{MODULE}: warning: {line}"))
    except ConfigError as error:
        return exit_with_error(MODULE, error)
    with ros_node("robot_rl_recorder", ros_args, sim_time) as node:
        try:
            if sim_time:  # before the store is made: a graph without a sim clock leaves nothing behind
                wait_for_clock(node, float(cfg.ros.startup_timeout))
            store = EpisodeStore.create(
                cfg.ros.recorder.store,
                {**metadata, "source": "robot_rl.ros.nodes.recorder_node", "clock": "sim" if sim_time else "wall"},
            )
        except (ClockError, EpisodeStoreError) as error:
            return exit_with_error(MODULE, error)
        acks = node.create_publisher(String, ACK_TOPIC, qos.EVENT)
        session = uuid.uuid4().hex[:8]  # a restarted recorder is another one: it has none of the episodes begun before

        def acknowledge(uids: list[str]) -> None:
            acks.publish(String(data=json.dumps({"node": "recorder", "session": session, "episodes": uids})))

        clock = (lambda: node.get_clock().now().nanoseconds * 1e-9) if sim_time else time.time
        recorder = EpisodeRecorder(store, node.get_logger(), acknowledge, clock)
        schema = TransitionSchema(store.observation_shapes, int(store.metadata["action_dim"]))
        guard = InputGuard(node)
        disk = DiskWatch(node, recorder, store_path, floor_mb)
        guard.subscribe(
            UInt8MultiArray,
            TRANSITIONS_TOPIC,
            disk.guarded(lambda msg: recorder.add_numbered(decode_transitions(msg.data, schema)[0])),
            qos.TRANSITIONS,
        )
        guard.subscribe(String, CUT_TOPIC, disk.guarded(lambda msg: recorder.cut(*parse_cut(msg.data))), qos.EVENT)
        node.create_timer(DISK_CHECK_PERIOD, disk.check, clock=Clock(clock_type=ClockType.STEADY_TIME))

        def on_label(msg) -> None:
            if not recorder.label(bool(msg.data)):
                node.get_logger().warning(f"operator label {bool(msg.data)} between episodes: not kept")

        guard.subscribe(Bool, "rl/operator_label", on_label, qos.EVENT)
        # the heartbeat (robot_rl.ros.plumbing.delivery), with the recent episodes again for acks that were missed; on
        # the wall clock, as the actor's record_timeout is
        node.create_timer(
            RECORDER_HEARTBEAT, lambda: acknowledge(recorder.recent), clock=Clock(clock_type=ClockType.STEADY_TIME)
        )
        mcap = None
        if cfg.ros.recorder.mcap:
            topics = dict(MCAP_TOPICS)
            for camera in task.get("cameras") or ():
                topics[f"camera/{camera}/color/image_raw"] = "sensor_msgs/msg/Image"
                topics[f"camera/{camera}/color/camera_info"] = "sensor_msgs/msg/CameraInfo"
            mcap = McapRecorder(node, Path(cfg.ros.recorder.mcap), topics, guard)
        node.get_logger().info(
            f"recording episodes to {store.path}" + (f" and MCAP to {cfg.ros.recorder.mcap}" if mcap else "")
        )
        try:
            spin(node)
        finally:
            drain(node, recorder, quiet=0.5, cap=5.0)  # the last transitions of an actor that just finished
            recorder.discard()
            if mcap is not None:
                mcap.close()
            node.get_logger().info(f"recorder stopped: {recorder.committed} episodes committed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
