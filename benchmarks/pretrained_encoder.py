"""What the frozen pretrained camera encoder (``agent.camera_encoder=pretrained``) costs beside the DrQ CNN and state.

- ``backbone_ms``: the frozen EfficientNet-Lite0 trunk on one 64x64 frame (one thread), per depth kept
  (``--blocks``; 16 is the whole trunk) and for the 1280-channel head the package's ``extract_features`` ends with;
- ``ingest_ms``: what the learner spends on one env step of two cameras when it stores the step (``FrozenFeatures.
  store``: ``agent.pretrained_views`` views per camera), the agent's default depth;
- ``update_ms``: one SAC ``agent.update`` (``--utd`` critic steps, each on a fresh batch of ``--batch`` from a 50/50
  sampler over an online and a demo buffer, the actor every second step), as the learner makes it, for
  ``state`` (the 10-float proprioception only), ``pretrained`` (two cameras' stored features and the state), ``drq``
  (two 64x64 cameras through the DrQ-v2 CNN, strides [2, 1, 1, 1]) and ``drq_strided`` (strides [2, 2, 2, 1], the
  pixel main job's);
- ``act_ms``: one ``act`` on one observation (two 64x64 frames and the state), for the same agents.

Medians over ``--repeats`` calls, one torch thread, the agents' defaults otherwise (``autocast: auto``); the agents'
updates (and acts) are timed in turns, one of each per round, wall and process-CPU ms (``*_cpu_ms``: on a shared
machine the steadier figure; ``update_vs_state`` divides those).
The buffers hold 16 distinct frames (their features for ``pretrained``) repeated: what an update costs does not
depend on what the frames show.

    python -m benchmarks.pretrained_encoder [--batch 256] [--utd 4] [--repeats 10] [--blocks 8 11 16]

Writes ``benchmarks/results/pretrained_encoder.json``.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import statistics
import time
from typing import Any

import numpy as np

from benchmarks.common import write_result

STATE_DIM, ACTION_DIM, SIDE, FRAMES = 10, 4, 64, 16
CAMERAS = ("front", "wrist")
AGENTS = {
    "state": ({}, False),
    "pretrained": ({"camera_encoder": "pretrained"}, True),
    "drq": ({"camera_encoder": "cnn", "camera_strides": [2, 1, 1, 1]}, True),
    "drq_strided": ({"camera_encoder": "cnn", "camera_strides": [2, 2, 2, 1]}, True),
}


def median_ms(call, repeats: int) -> float:
    """Median wall milliseconds of ``call()`` over ``repeats`` calls, after one unmeasured call."""
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return round(statistics.median(times), 2)


def interleaved_ms(calls: dict[str, Any], rounds: int) -> tuple[dict[str, float], dict[str, float]]:
    """Median wall and process-CPU milliseconds of each of ``calls`` ({name: call}), timed in turns, one call of
    each per round (after one unmeasured round), so load from other processes falls on all alike."""
    wall: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(rounds + 1):
        for name, call in calls.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            call()
            if round_:
                wall[name].append((time.perf_counter() - start) * 1e3)
                cpu[name].append((time.process_time() - start_cpu) * 1e3)
    return (
        {name: round(statistics.median(times), 2) for name, times in wall.items()},
        {name: round(statistics.median(times), 2) for name, times in cpu.items()},
    )


def backbone_ms(blocks: list[int], repeats: int) -> dict[str, float]:
    """The trunk on one frame, per depth kept, and the package's whole ``extract_features`` (1280 channels)."""
    import torch
    from efficientnet_lite_pytorch import EfficientNet

    from robot_rl.policies.pretrained import FrozenBackbone, require_weights

    frame = torch.randint(0, 256, (1, 3, SIDE, SIDE), dtype=torch.uint8)
    out = {}
    for depth in blocks:
        backbone = FrozenBackbone((SIDE, SIDE, 3), depth, torch.device("cpu"), "--blocks")
        out[f"blocks_{depth}_{'x'.join(map(str, backbone.output_shape))}"] = median_ms(
            functools.partial(backbone, frame), repeats
        )
    net = EfficientNet.from_name("efficientnet-lite0", image_size=[SIDE, SIDE])
    net.load_state_dict(torch.load(require_weights("--blocks"), map_location="cpu", weights_only=True))
    net.eval()
    with torch.no_grad():
        out["head_1280"] = median_ms(lambda: net.extract_features((frame.float() - 127) / 128), repeats)
    return out


def agent_and_sampler(kind: str, batch: int, utd: int):
    """The agent of ``kind`` and a 50/50 sampler over buffers holding what its replay stores."""
    from robot_rl.data import MixedSampler, ReplayBuffer
    from robot_rl.policies.sac import SACAgent, SACConfig
    from robot_rl.runtime.replay_router import replay_space

    flags, cameras = AGENTS[kind]
    shapes = {"state": (STATE_DIM,), **{camera: (SIDE, SIDE, 3) for camera in CAMERAS if cameras}}
    agent = SACAgent(shapes, ACTION_DIM, SACConfig(utd=utd, device="cpu", **flags), seed=0)
    rng = np.random.default_rng(0)
    frames = [
        {camera: rng.integers(0, 256, (SIDE, SIDE, 3), dtype=np.uint8) for camera in shapes if camera != "state"}
        for _ in range(FRAMES)
    ]
    frozen = agent.frozen_features
    stored = [frozen.store(frame) if frozen is not None else frame for frame in frames]  # 16 backbone passes
    buffers = []
    for capacity in (4000, 4000):
        buffer = ReplayBuffer(capacity, replay_space(shapes, frozen), ACTION_DIM)
        for step in range(capacity - capacity // 101 - 1):
            obs = {**stored[step % FRAMES], "state": rng.normal(size=STATE_DIM).astype(np.float32)}
            buffer.add(obs, rng.uniform(-1, 1, ACTION_DIM), -1.0, obs, False, step % 100 == 99)
        buffers.append(buffer)
    sampler = MixedSampler(*buffers, demo_fraction=0.5, seed=0)
    return agent, (lambda: sampler.sample(batch)), frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--utd", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--blocks", type=int, nargs="+", default=[8, 11, 16])
    args = parser.parse_args()

    import torch

    torch.set_num_threads(1)
    figures: dict[str, Any] = {"backbone_ms": backbone_ms(args.blocks, args.repeats * 3)}
    updates, acts = {}, {}
    for kind in AGENTS:
        agent, sample, frames = agent_and_sampler(kind, args.batch, args.utd)
        obs = {**frames[0], "state": np.zeros(STATE_DIM, np.float32)}
        updates[kind] = functools.partial(agent.update, sample)
        acts[kind] = functools.partial(agent.act, obs)
        if agent.frozen_features is not None:
            shifts = itertools.count(1)  # a new step's frames every time (the memo answers a repeated one)

            def ingest(frozen=agent.frozen_features, frame=frames[0], shifts=shifts) -> None:
                frozen.store({key: np.roll(value, next(shifts), axis=1) for key, value in frame.items()})

            figures["ingest_ms"] = median_ms(ingest, args.repeats)
            figures["views"] = agent.config.pretrained_views
            figures["blocks"] = agent.config.pretrained_blocks
    figures["update_ms"], figures["update_cpu_ms"] = interleaved_ms(updates, args.repeats)
    figures["act_ms"], figures["act_cpu_ms"] = interleaved_ms(acts, args.repeats * 3)
    figures["update_vs_state"] = {
        kind: round(ms / figures["update_cpu_ms"]["state"], 2) for kind, ms in figures["update_cpu_ms"].items()
    }
    path = write_result(
        "pretrained_encoder", figures, settings={"batch": args.batch, "utd": args.utd, "repeats": args.repeats}
    )
    print(figures)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
