"""Latency and throughput of the ROS 2 node graph, every part in its own process over DDS.

1. Camera stamp -> command published: the sim robot node publishes two 128x128 RGB cameras at
   10 Hz (plus state at 100 Hz); the actor node (pixel SAC policy, random weights, no human)
   waits for fresh frames each step and publishes ``/rl/action`` carrying the stamp of the
   newest frame it used. This process receives the commands: latency = receive time - stamp.
2. Transitions/s actor -> learner: a sender process publishes ``--transitions`` transitions
   with two 128x128 images and the state (one per message, as the actor sends them) as fast as
   it can and waits until all are acknowledged; this process receives them through the
   learner's transport: delivered transitions / time from the first to the last.
3. Weight update learner -> actor: this process publishes the SAC policy weights (pixel policy
   with two 128x128 camera encoders, and a state policy); an actor-side process decodes and
   loads them and reports the time from publish to loaded.

    python -m benchmarks.graph_latency [--seconds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np

from benchmarks.common import write_result

PIXEL_TASK = ["task=reach", "task.cameras=[front,wrist]", "task.image_size=128"]

SENDER = textwrap.dedent(
    """
    import sys, time, numpy as np, rclpy
    from robot_rl.data.transition import Provenance, Transition
    from robot_rl.ros.links.transport import RosActorLink
    from robot_rl.ros.plumbing.delivery import Outbox
    rclpy.init()
    node = rclpy.create_node("bench_transition_sender")
    outbox = Outbox("bench", memory_limit=2**34, record_timeout=3600.0, spill=lambda episode: None)
    transport = RosActorLink(node, expected_weights={}, outbox=outbox)
    transport.wait_for_subscribers(["bench_transition_receiver"], 30)
    rng = np.random.default_rng(0)
    obs = {"state": rng.random(19, dtype=np.float32), "front": rng.integers(0, 255, (128, 128, 3), dtype=np.uint8),
           "wrist": rng.integers(0, 255, (128, 128, 3), dtype=np.uint8)}
    for sent in range(int(sys.argv[1])):
        origin = Provenance(episode="bench", step=sent)
        step = Transition(obs, np.zeros(4, np.float32), 0.0, obs, False, False, first=sent == 0, origin=origin)
        transport.send_transitions([step])
    print(transport.flush(timeout=120), flush=True)
    """
)

WEIGHTS_RECEIVER = textwrap.dedent(
    """
    import json, time, rclpy
    from std_msgs.msg import String, UInt8MultiArray
    from robot_rl.ros.plumbing import qos
    from robot_rl.data.wire import decode_weights
    from robot_rl.core.composed_config import load_config
    from robot_rl.runtime.envs import make_env, observation_shapes
    from robot_rl.runtime.session import make_agent
    from omegaconf import OmegaConf
    cfg = load_config(%r)
    env = make_env(OmegaConf.to_container(cfg.task, resolve=True))
    agent = make_agent(cfg, observation_shapes(env), env.action_space.shape[0], 0)
    rclpy.init()
    node = rclpy.create_node("bench_weights_receiver")
    report = node.create_publisher(String, "/bench/weights_loaded", qos.EVENT)
    def on_weights(msg):
        weights, meta = decode_weights(msg.data)
        agent.load_policy_state(weights)
        report.publish(String(data=json.dumps({"version": meta["version"], "seconds": time.time() - meta["sent"]})))
    node.create_subscription(UInt8MultiArray, "/rl/policy_weights", on_weights, qos.LATCHED)
    rclpy.spin(node)
    """
)


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1e3
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 2),
        "p99_ms": round(float(np.percentile(ms, 99)), 2),
        "samples": len(seconds),
    }


def node(module: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")},
    )


def camera_to_command(rclpy, seconds: float) -> dict:
    from geometry_msgs.msg import PoseStamped

    from robot_rl.ros.plumbing import qos
    from robot_rl.ros.plumbing.messages import seconds as to_seconds

    overrides = [
        *PIXEL_TASK,
        "human.enabled=false",
        "train.demo_episodes=0",
        "ros.camera_rate_hz=10",
        "ros.eval_every_episodes=0",
        "ros.startup_timeout=60",
        "ros.transition_subscribers=[]",
        "train.env_steps=100000",
        "task.episode_steps=50",
    ]
    processes = [
        node("robot_rl.ros.emulation.sim_robot_node", *overrides),
        node("robot_rl.ros.safety.safety_node", "--rate-hz", "500", "robot.limits.state_timeout=0.05"),
        node("robot_rl.ros.nodes.actor_node", *overrides),
    ]
    listener = rclpy.create_node("bench_command_listener")
    latencies: list[float] = []

    def on_action(msg):
        latencies.append(listener.get_clock().now().nanoseconds * 1e-9 - to_seconds(msg.header.stamp))

    listener.create_subscription(PoseStamped, "/rl/action", on_action, qos.COMMAND)
    try:
        deadline = time.monotonic() + 120
        while not latencies and time.monotonic() < deadline:  # start-up: DDS discovery, model load, first reset
            rclpy.spin_once(listener, timeout_sec=0.05)
        latencies.clear()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            rclpy.spin_once(listener, timeout_sec=0.05)
    finally:
        for process in processes:
            process.kill()
            process.wait()
        listener.destroy_node()
    if not latencies:
        raise RuntimeError("no commands arrived from the actor")
    return {
        **percentiles(latencies),
        "commands_per_s": round(len(latencies) / seconds, 2),
        "policy_act_p50_ms": policy_act_ms(overrides),
    }


def policy_act_ms(overrides: list[str]) -> float:
    """Median time of one ``agent.act`` of the actor's policy here (1 torch thread, like the actor)."""
    import torch
    from omegaconf import OmegaConf

    from robot_rl.core.composed_config import load_config
    from robot_rl.runtime.envs import make_env, observation_shapes
    from robot_rl.runtime.session import make_agent

    torch.set_num_threads(1)
    cfg = load_config(overrides)
    env = make_env(OmegaConf.to_container(cfg.task, resolve=True))
    agent = make_agent(cfg, observation_shapes(env), env.action_space.shape[0], 0)
    obs, _ = env.reset(seed=0)
    times = []
    for _ in range(50):
        started = time.perf_counter()
        agent.act(obs, explore=True)
        times.append(time.perf_counter() - started)
    env.close()
    return round(float(np.median(times)) * 1e3, 2)


def transitions_per_second(rclpy, count: int) -> dict:
    from robot_rl.data.wire import TransitionSchema
    from robot_rl.ros.links.transport import RosLearnerLink

    receiver = rclpy.create_node("bench_transition_receiver")
    schema = TransitionSchema({"state": (19,), "front": (128, 128, 3), "wrist": (128, 128, 3)}, 4)
    transport = RosLearnerLink(receiver, schema=schema)
    sender = subprocess.Popen([sys.executable, "-c", SENDER, str(count)], stdout=subprocess.PIPE, text=True)
    try:
        while transport.transitions_received == 0 and sender.poll() is None:
            rclpy.spin_once(receiver, timeout_sec=0.05)
        started = time.monotonic()
        deadline = started + 300
        while transport.transitions_received < count and time.monotonic() < deadline:
            rclpy.spin_once(receiver, timeout_sec=0.01)
            transport.arrivals.take_all()  # the learner takes what arrived
        elapsed = time.monotonic() - started
        acked = sender.communicate(timeout=120)[0].strip()
    finally:
        sender.kill()
        receiver.destroy_node()
    received = transport.transitions_received
    return {
        "transitions_per_s": round((received - 1) / elapsed, 1),
        "sent": count,
        "received": received,
        "all_acknowledged": acked == "True",
        "payload": "state (19) + two 128x128x3 uint8 images, obs and next_obs (~197 kB per transition)",
    }


def weight_updates(rclpy, updates: int, task: list[str]) -> dict:
    from omegaconf import OmegaConf
    from std_msgs.msg import String, UInt8MultiArray

    from robot_rl.core.composed_config import load_config
    from robot_rl.data.wire import encode_weights
    from robot_rl.ros.links.transport import WEIGHTS_TOPIC
    from robot_rl.ros.plumbing import qos
    from robot_rl.runtime.envs import make_env, observation_shapes
    from robot_rl.runtime.session import make_agent

    cfg = load_config(task)
    env = make_env(OmegaConf.to_container(cfg.task, resolve=True))
    agent = make_agent(cfg, observation_shapes(env), env.action_space.shape[0], 0)
    weights = agent.policy_state()
    megabytes = len(encode_weights(weights, {"version": 0})) / 1e6
    learner = rclpy.create_node("bench_weights_sender")
    publisher = learner.create_publisher(UInt8MultiArray, WEIGHTS_TOPIC, qos.LATCHED)  # the learner's, plus a send time
    loaded: list[dict] = []
    learner.create_subscription(String, "/bench/weights_loaded", lambda m: loaded.append(json.loads(m.data)), qos.EVENT)
    receiver = subprocess.Popen([sys.executable, "-c", WEIGHTS_RECEIVER % (task,)])
    try:
        deadline = time.monotonic() + 60
        while publisher.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        for version in range(updates):
            before = len(loaded)
            publisher.publish(UInt8MultiArray(data=encode_weights(weights, {"version": version, "sent": time.time()})))
            deadline = time.monotonic() + 10
            while len(loaded) == before and time.monotonic() < deadline:
                rclpy.spin_once(learner, timeout_sec=0.01)
    finally:
        receiver.kill()
        learner.destroy_node()
    samples = [entry["seconds"] for entry in loaded[1:]]  # the first includes the receiver's warm-up
    return {**percentiles(samples), "megabytes": round(megabytes, 2), "note": "publish -> decoded and loaded"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--transitions", type=int, default=3000)
    parser.add_argument("--updates", type=int, default=30)
    args = parser.parse_args()
    import rclpy

    rclpy.init()
    try:
        figures = {"camera_to_command": camera_to_command(rclpy, args.seconds)}
        print("camera stamp -> command:", figures["camera_to_command"])
        figures["transitions"] = transitions_per_second(rclpy, args.transitions)
        print("transitions:", figures["transitions"])
        figures["weight_update_pixels"] = weight_updates(rclpy, args.updates, PIXEL_TASK)
        print("weight update, pixel policy:", figures["weight_update_pixels"])
        figures["weight_update_state"] = weight_updates(rclpy, args.updates, ["task=reach"])
        print("weight update, state policy:", figures["weight_update_state"])
    finally:
        rclpy.shutdown()
    path = write_result(
        "graph_latency",
        figures,
        setup="two 128x128 cameras at 10 Hz, state at 100 Hz, "
        "pixel SAC (front + wrist CNN encoders), Fast DDS, every node its own process",
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
