"""Episode-store write speed and replay-buffer sampling speed, in one run.

Write: episodes of two 480x640 RGB cameras at 30 Hz (rendered MuJoCo views with sensor noise,
so they compress like camera frames) plus a 100 Hz state stream; real-time factor = seconds of
data / seconds to write. Sampling: transitions/s at batch 256 with 3-step returns, state-only
and with two 128x128 cameras. Medians of repeated blocks.

    python -m benchmarks.data_throughput [--seconds 20] [--episodes 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

from benchmarks.common import write_result
from robot_rl.data import EpisodeStore, ReplayBuffer
from robot_rl.data.tools import disk_bytes


def camera_frames(count: int) -> dict[str, list[np.ndarray]]:
    """Distinct 480x640 views of the pick_cube scene while the expert works."""
    from robot_rl.sim.experts import make_expert
    from robot_rl.sim.tasks import PickCubeEnv

    env = PickCubeEnv(cameras=["front", "wrist"], image_size=[480, 640])
    obs, _ = env.reset(seed=0)
    expert = make_expert(env)
    frames = {"front": [], "wrist": []}
    for _ in range(count):
        for key, sequence in frames.items():
            sequence.append(obs[key])
        obs, *_ = env.step(expert.act(obs))
    env.close()
    return frames


def write_episode(store: EpisodeStore, frames, seconds: float, rng: np.random.Generator) -> float:
    """Write ``seconds`` of data; returns the wall time it took."""
    camera_rate, state_rate = 30, 100
    steps = int(seconds * camera_rate)
    noisy = {
        key: [np.clip(f.astype(np.int16) + rng.normal(0, 2, f.shape), 0, 255).astype(np.uint8) for f in views]
        for key, views in frames.items()
    }
    writer = store.writer()
    start = time.perf_counter()
    obs = {"front": noisy["front"][0], "wrist": noisy["wrist"][0], "state": np.zeros(23, np.float32)}
    writer.start(obs)
    state_clock = 0
    for t in range(steps):
        while state_clock < (t + 1) * state_rate / camera_rate:
            writer.add_stream("state_100hz", rng.normal(size=23).astype(np.float32), state_clock / state_rate)
            state_clock += 1
        index = t % len(noisy["front"])
        obs = {
            "front": noisy["front"][index],
            "wrist": noisy["wrist"][index],
            "state": rng.normal(size=23).astype(np.float32),
        }
        writer.add(obs, rng.uniform(-1, 1, 7), 0.0, False, t == steps - 1, timestamp=t / camera_rate)
    writer.commit("online")
    return time.perf_counter() - start


def sampling_rate(buffer: ReplayBuffer, blocks: int = 5, batches: int = 40) -> float:
    rng = np.random.default_rng(0)
    rates = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(batches):
            buffer.sample(256, rng, n_step=3, gamma=0.99)
        rates.append(256 * batches / (time.perf_counter() - start))
    return statistics.median(rates)


def filled_buffer(capacity: int, space, episode_length: int = 100) -> ReplayBuffer:
    buffer = ReplayBuffer(capacity, space, action_dim=7)
    rng = np.random.default_rng(0)
    # fill the arrays directly through add() for correctness of the episode bookkeeping
    obs = {key: np.zeros(shape, dtype) for key, (shape, dtype) in space.items()}
    for index in range(capacity - capacity // episode_length - 1):
        t = index % episode_length
        buffer.add(obs, rng.uniform(-1, 1, 7), 1.0, obs, terminated=False, truncated=t == episode_length - 1)
    for key, (shape, dtype) in space.items():  # non-trivial contents
        buffer.obs[key][:] = rng.integers(0, 255, (capacity, *shape)).astype(dtype)
    return buffer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of data per written episode")
    parser.add_argument("--episodes", type=int, default=3)
    args = parser.parse_args()

    frames = camera_frames(30)
    folder = Path(tempfile.mkdtemp(prefix="robot_rl_bench_"))
    try:
        meta = {
            "task": "bench",
            "action_dim": 7,
            "observation_shapes": {"front": [480, 640, 3], "wrist": [480, 640, 3], "state": [23]},
        }
        store = EpisodeStore.create(folder / "store.zarr", meta)
        rng = np.random.default_rng(0)
        walls = [write_episode(store, frames, args.seconds, rng) for _ in range(args.episodes)]
        realtime = statistics.median(args.seconds / wall for wall in walls)
        per_minute = disk_bytes(folder / "store.zarr" / "episodes") / (args.episodes * args.seconds / 60)
        raw_per_minute = 60 * 30 * 2 * 480 * 640 * 3
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"write: {realtime:.1f}x real time, {per_minute / 1e9:.2f} GB per minute "
        f"(raw {raw_per_minute / 1e9:.2f} GB, ratio {raw_per_minute / per_minute:.2f})",
        flush=True,
    )

    state_rate = sampling_rate(filled_buffer(100_000, {"state": ((23,), np.float32)}))
    image_space = {"state": ((23,), np.float32), "front": ((128, 128, 3), np.uint8), "wrist": ((128, 128, 3), np.uint8)}
    image_rate = sampling_rate(filled_buffer(10_000, image_space))
    print(
        f"sampling at batch 256, 3-step returns: state-only {state_rate:,.0f}/s, two 128x128 cameras {image_rate:,.0f}/s"
    )

    path = write_result(
        "data_throughput",
        {
            "write_realtime_factor": realtime,
            "bytes_on_disk_per_minute": per_minute,
            "raw_bytes_per_minute": raw_per_minute,
            "sampled_transitions_per_second": {"state_only": state_rate, "two_cameras_128": image_rate},
        },
        settings={
            "cameras": "2 x 480x640 rgb8 at 30 Hz, lz4 (blosc), one frame per chunk",
            "state_stream_hz": 100,
            "seconds_per_episode": args.seconds,
            "episodes": args.episodes,
            "batch_size": 256,
            "n_step": 3,
            "buffer_capacity": {"state_only": 100_000, "two_cameras_128": 10_000},
            "statistic": "median over episodes / 5 blocks of 40 batches",
        },
    )
    print("wrote", path)


if __name__ == "__main__":
    main()
