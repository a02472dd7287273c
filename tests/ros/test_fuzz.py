"""Hostile and malformed messages on every topic the training graph subscribes to, while it trains.

A ``sim_train`` graph (sim robot, safety node, learner, recorder, actor) and a reward node run as
real processes; the test plays the camera (good frames on the real topic) and floods every sensor,
teleop, reward and transport topic with thousands of truncated, oversized, NaN / inf and wrong-typed
messages. Every node must stay up, training must go on, and the nodes' logs must show the drops.
The safety node's command inputs (``/rl/action``, ``/rl/gripper``, ``/rl/estop``, ``/rl/estop_reset``)
and ``/rl/equilibrium_pose`` get nothing: a foreign publisher there latches the safety node by design.
"""

import io
import re
import signal
import subprocess
import time

import numpy as np
import pytest

from tests.conftest import require
from tests.ros.graph_helpers import STATE_RATE_HZ, Graph, Watcher, python, stop_processes

CAMERA = "/camera/front/color/image_raw"
POSE = "/franka_robot_state_broadcaster/current_pose"
WRENCH = "/franka_robot_state_broadcaster/external_wrench_in_base_frame"
BAD = [float("nan"), float("inf"), float("-inf"), 1e30, -1e300]


def junk_image(rng):
    from sensor_msgs.msg import Image

    msg = Image(height=32, width=32, encoding="rgb8", step=96)
    case = rng.integers(7)
    size = 32 * 96
    if case == 0:  # truncated
        size = int(rng.integers(0, 32 * 96))
    elif case == 1:  # a header claiming a huge frame
        msg.height, msg.width = int(rng.integers(5000, 2**32)), int(rng.integers(5000, 2**32))
        msg.step = int(rng.integers(0, 2**32))
    elif case == 2:
        msg.encoding = str(rng.choice(["yuv422", "", "bayer_rggb8", "rgb8 " * 20, "32FC3"]))
    elif case == 3:  # rows shorter than the pixels
        msg.step = int(rng.integers(0, 96))
        size = 32 * msg.step
    elif case == 4:  # more data than height * step
        size += int(rng.integers(1, 5000))
    elif case == 5:  # readable, but not colour
        msg.encoding, msg.step, size = "mono8", 32, 32 * 32
    else:  # oversized payload, header of a small frame
        size = int(rng.integers(100_000, 1_000_000))
    msg.data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
    return msg


def junk_joint_state(rng):
    from sensor_msgs.msg import JointState

    names = ["joint1", "finger_left", "finger_right"]
    case = rng.integers(4)
    if case == 0:  # arrays that do not match the names
        return JointState(name=names, position=rng.random(int(rng.choice([0, 1, 2, 5]))).tolist())
    if case == 1:  # no finger joints
        return JointState(name=["joint1", "joint2"], position=[0.1, 0.2])
    if case == 2:  # non-finite finger positions
        return JointState(name=names, position=[0.0, float(rng.choice(BAD[:3])), 0.01])
    return JointState(name=names, position=[0.0, 0.01, 0.01], velocity=[0.0])  # velocity of the wrong length


def junk_pose(rng):
    from geometry_msgs.msg import PoseStamped

    msg = PoseStamped()
    msg.header.stamp.sec = int(rng.integers(0, 2**31))
    values = rng.random(7)
    case = rng.integers(3)
    if case == 0:  # non-finite or far-away position
        values[rng.integers(3)] = rng.choice(BAD)
    elif case == 1:  # non-finite orientation
        values[3 + rng.integers(4)] = rng.choice(BAD[:3])
    else:  # zero quaternion
        values[3:] = 0.0
    p, q = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z, q.x, q.y, q.z, q.w = map(float, values)
    return msg


def junk_wrench(rng):
    from geometry_msgs.msg import WrenchStamped

    msg = WrenchStamped()
    msg.wrench.force.x, msg.wrench.torque.z = float(rng.choice(BAD[:3])), float(rng.normal())
    return msg


def junk_float(rng):
    from std_msgs.msg import Float64

    return Float64(data=float(rng.choice(BAD)))


def junk_task_state(rng):
    from std_msgs.msg import Float32MultiArray, MultiArrayDimension

    msg = Float32MultiArray()
    msg.layout.dim = [MultiArrayDimension(label=str(rng.choice(["goal", "cube", ""])), size=int(rng.integers(0, 5)))]
    msg.data = [float("nan")] * int(rng.integers(0, 5))
    return msg


def junk_twist(rng, stamped: bool):
    from geometry_msgs.msg import Twist, TwistStamped

    msg = TwistStamped() if stamped else Twist()
    twist = msg.twist if stamped else msg
    twist.linear.x, twist.angular.y = float(rng.choice(BAD[:3])), float(rng.normal())
    return msg


def junk_joy(rng):
    from sensor_msgs.msg import Joy

    if rng.integers(2):
        return Joy(axes=[0.0] * 6, buttons=[1] * int(rng.integers(0, 2)))  # too few buttons
    return Joy(axes=[float("nan")] * 3, buttons=[1, 0])


def junk_bytes(rng):
    """Random bytes, a truncated zip, or an npz of the wrong arrays: never a codec payload."""
    from std_msgs.msg import UInt8MultiArray

    case = rng.integers(3)
    if case == 0:
        data = rng.integers(0, 256, int(rng.integers(0, 65536)), dtype=np.uint8).tobytes()
    elif case == 1:
        data = b"PK\x03\x04" + rng.integers(0, 256, int(rng.integers(0, 512)), dtype=np.uint8).tobytes()
    else:
        buffer = io.BytesIO()
        np.savez(buffer, __meta__=np.frombuffer(b'{"kind": "weights", "version": 99}', np.uint8), x=rng.random((3, 3)))
        data = buffer.getvalue()
        data = data[: int(rng.integers(len(data) // 2, len(data) + 1))]
    return UInt8MultiArray(data=data)


def wrong_type(rng):
    from std_msgs.msg import String

    return String(data="x" * int(rng.integers(0, 100)))


def train_classifier(path):
    from robot_rl.policies.reward_classifier import RewardClassifierConfig, train_reward_classifier

    rng = np.random.default_rng(0)
    labels = np.arange(16) % 2 == 0
    frames = np.where(labels[:, None, None, None], 200, 40) + rng.integers(-20, 20, (16, 16, 16, 3))
    model, _ = train_reward_classifier(
        {"front": frames.astype(np.uint8)},
        labels,
        np.arange(16) // 4,
        RewardClassifierConfig(updates=2, batch_size=8, consecutive_frames=1),  # alternating frames
        seed=0,
    )
    model.save(path)


@pytest.mark.slow
def test_training_graph_survives_a_flood_of_malformed_messages(tmp_path):
    rclpy = require("rclpy")
    from geometry_msgs.msg import PoseStamped, Twist, TwistStamped, WrenchStamped
    from sensor_msgs.msg import Image, JointState, Joy
    from std_msgs.msg import Empty, Float32MultiArray, Float64, String, UInt8MultiArray

    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.plumbing.messages import image_msg

    run = tmp_path / "run"
    classifier = tmp_path / "classifier.pt"
    train_classifier(classifier)
    graph = Graph(
        tmp_path,
        [
            "task=reach",
            "task.cameras=[front]",
            "task.image_size=32",
            "task.episode_steps=10",
            f"train.run_dir={run}",
            "train.demo_episodes=1",
            "train.start_training=20",
            "train.weights_every=5",
            "train.checkpoint_every=1000",
            "train.env_steps=100000",
            "train.batch_size=32",
            "ros.eval_every_episodes=0",
            "ros.stream_timeout=1.0",
            "ros.sim_time=false",
        ],
        safety_rate_hz=STATE_RATE_HZ,
    )  # the test plays a camera on the wall clock
    rclpy.init()
    watcher = Watcher(rclpy)
    node = watcher.node
    camera = node.create_publisher(Image, CAMERA, qos.STREAM_PUBLISHER)

    def publish_frame():
        camera.publish(
            image_msg(
                np.full((32, 32, 3), 128, np.uint8),
                node.get_clock().now().nanoseconds * 1e-9,
                "front_color_optical_frame",
            )
        )

    node.create_timer(0.05, publish_frame)  # the camera: good 20 Hz frames between the junk
    # (topic, type, junk maker, QoS): what the graph subscribes to, minus the safety node's command inputs
    targets = [
        (CAMERA, Image, junk_image, qos.STREAM_PUBLISHER),
        ("/joint_states", JointState, junk_joint_state, qos.STREAM_PUBLISHER),
        (POSE, PoseStamped, junk_pose, qos.STREAM_PUBLISHER),
        (WRENCH, WrenchStamped, junk_wrench, qos.STREAM_PUBLISHER),
        ("/rl/reward", Float64, junk_float, qos.STREAM_PUBLISHER),
        ("/rl/task_state", Float32MultiArray, junk_task_state, qos.STREAM_PUBLISHER),
        ("/spacenav/twist", Twist, lambda rng: junk_twist(rng, stamped=False), qos.STREAM_PUBLISHER),
        ("/spacenav/joy", Joy, junk_joy, qos.STREAM_PUBLISHER),
        ("/servo_node/delta_twist_cmds", TwistStamped, lambda rng: junk_twist(rng, stamped=True), qos.COMMAND),
        ("/rl/gripper_command", Float64, junk_float, qos.COMMAND),
        ("/rl/transitions", UInt8MultiArray, junk_bytes, qos.EVENT),
        ("/rl/policy_weights", UInt8MultiArray, junk_bytes, qos.LATCHED),
        # wrong types on topics whose own type (Bool, UInt32) has no malformed value (one process can publish one
        # type per topic only)
        ("/rl/success", String, wrong_type, qos.STREAM_PUBLISHER),
        ("/rl/intervention", String, wrong_type, qos.STREAM_PUBLISHER),
        ("/sim/violation", String, wrong_type, qos.STREAM_PUBLISHER),
    ]
    reward_log = open(tmp_path / "reward.log", "w")
    reward = None
    try:
        # the sim robot's own rendering goes elsewhere; the test plays the camera
        graph.start("sim_robot", "--ros-args", "-r", f"{CAMERA}:=/sim/unused_front")
        for name in ("safety", "learner", "recorder", "actor"):
            graph.start(name)
        reward = subprocess.Popen(  # its outputs renamed: the sim robot is the reward source of this graph
            [
                python(),
                "-m",
                "robot_rl.ros.nodes.reward_node",
                f"classifier.out={classifier}",
                "--ros-args",
                "-r",
                "/rl/success:=/fuzz/success",
                "-r",
                "/rl/reward:=/fuzz/reward",
            ],
            stdout=reward_log,
            stderr=subprocess.STDOUT,
        )
        watcher.wait_for(lambda rs: any(r["kind"] == "train" for r in rs), timeout=240, what="training episodes")
        publishers = [(node.create_publisher(kind, topic, profile), make) for topic, kind, make, profile in targets]

        rng = np.random.default_rng(0)
        sent, rounds = 0, 300
        for _ in range(rounds):  # ~4500 messages over ~15-20 s, with the good camera frames in between
            for publisher, make in publishers:
                publisher.publish(make(rng))
                sent += 1
            watcher.spin(0.05)
        assert sent >= 4000
        for process in [*graph.processes.values(), reward]:
            assert process.poll() is None, f"{process.args[:3]} died during the flood: {process.returncode}"

        count = len([r for r in watcher.records if r["kind"] == "train"])
        # the junk on /rl/gripper_command came from a foreign publisher of the arm's command: the safety node latched
        # its hold and the session paused (an e-stop's latch pauses the actor). The flood ends, its publishers go, and
        # the operator releases the arm (a node named as the console, an operator of the safety node), as on a cell
        for publisher, _ in publishers:
            node.destroy_publisher(publisher)
        console = rclpy.create_node("robot_rl_console")
        release = console.create_publisher(Empty, "/rl/estop_reset", qos.EVENT)

        last_release = [0.0]

        def released_and_training(records) -> bool:
            if time.monotonic() - last_release[0] > 0.5:  # the operator's button, twice a second until obeyed
                release.publish(Empty())
                last_release[0] = time.monotonic()
            return len([r for r in records if r["kind"] == "train"]) >= count + 3

        try:
            watcher.wait_for(released_and_training, timeout=120, what="training going on after the flood")
        finally:
            console.destroy_node()
        assert all(process.poll() is None for process in [*graph.processes.values(), reward])

        def drops(log: str, topic: str) -> bool:
            return re.search(rf"dropped \d+ bad message\(s\) on {re.escape(topic)} ", log) is not None

        actor = graph.log("actor")
        for topic in (
            CAMERA,
            "/joint_states",
            POSE,
            "/rl/reward",
            "/spacenav/twist",
            "/spacenav/joy",
            "/rl/policy_weights",
        ):
            assert drops(actor, topic), f"no counted drops on {topic} in the actor's log"
        sim = graph.log("sim_robot")
        assert drops(sim, "/servo_node/delta_twist_cmds") and drops(sim, "/rl/gripper_command")
        assert drops(graph.log("learner"), "/rl/transitions")

        # the sim robot and the reward node stop cleanly on Ctrl-C and kill
        graph.processes["sim_robot"].send_signal(signal.SIGINT)
        reward.send_signal(signal.SIGTERM)
        assert graph.processes["sim_robot"].wait(timeout=10) == 0 and reward.wait(timeout=10) == 0
        reward_text = (tmp_path / "reward.log").read_text()
        assert drops(reward_text, CAMERA), reward_text[-2000:]
        for text in (reward_text, graph.log("sim_robot")):
            assert "Traceback" not in text, text[-3000:]
    finally:
        graph.stop()
        if reward is not None:
            stop_processes([reward])
        reward_log.close()
        node.destroy_node()
        rclpy.shutdown()


def test_every_subscription_of_the_actor_drops_junk_without_raising():
    """Without DDS: junk straight into each guarded callback of a TopicEnv and its teleop mux."""
    rclpy = require("rclpy")
    from geometry_msgs.msg import PoseStamped, Twist
    from sensor_msgs.msg import Image, JointState, Joy
    from std_msgs.msg import Float32MultiArray, Float64

    from robot_rl.ros.links.teleop_source import TopicTeleop
    from robot_rl.ros.links.topic_env import JOINTS, REWARD, TASK_STATE, TopicEnv, TopicEnvSettings

    junk = {
        Image: junk_image,
        JointState: junk_joint_state,
        PoseStamped: junk_pose,
        Float64: junk_float,
        Float32MultiArray: junk_task_state,
        Joy: junk_joy,
        Twist: lambda rng: junk_twist(rng, stamped=False),
    }
    layout = {
        "tcp_pos": (0, 3),
        "tcp_rotvec": (3, 3),
        "tcp_linvel": (6, 3),
        "tcp_angvel": (9, 3),
        "gripper": (12, 1),
        "goal_pos": (13, 3),
    }
    settings = TopicEnvSettings(
        control_rate_hz=10.0,
        action_dim=4,
        pos_step=0.02,
        rot_step=0.1,
        workspace=np.array([[0.3, -0.3, 0.0], [0.7, 0.3, 0.4]]),
        episode_steps=10,
        cameras=("front",),
        image_size=(32, 32),
        terminate_on_success=True,
    )
    rclpy.init()
    node = rclpy.create_node("robot_rl_test_junk_callbacks")
    try:
        env = TopicEnv(node, settings, layout)
        TopicTeleop(env, deadzone=0.05, hold=0.3)
        env.subscribe_streams()  # as the first reset does, after the teleop source
        rng = np.random.default_rng(1)
        fed = {}
        for subscription in node.subscriptions:
            if subscription.msg_type in junk:
                for _ in range(200):
                    subscription.callback(junk[subscription.msg_type](rng))  # raises nothing
                fed[subscription.topic_name] = 200
        expected = {node.resolve_topic_name(t) for t in (CAMERA, POSE, JOINTS, REWARD, TASK_STATE)}
        assert set(fed) >= expected | {"/spacenav/twist", "/spacenav/joy"}
        assert env.guard.dropped == fed and not env.guard.accepted
        assert not env.inbox.latest  # nothing malformed reached an observation
    finally:
        node.destroy_node()
        rclpy.shutdown()
