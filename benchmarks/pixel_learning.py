"""The main job from pixels: pick_cube with front + wrist cameras (64x64), no privileged object state.

Two parts, one run:

1. Cost of one SAC update (batch ``--batch``, two 64x64 cameras) for the DrQ-v2 encoder
   (strides [2, 1, 1, 1]) and the strided one (``--strides``), measured side by side on the same
   batch: median seconds over ``--repeats`` updates each.
2. ``robot-rl train`` from pixels with scripted demos and interventions (the main job's human), the
   strided encoder, evaluated every ``--eval-every`` steps with 20 deterministic episodes: env steps
   and wall-clock to 80% success (or the final success).

    python -m benchmarks.pixel_learning [--steps 12000] [--strides 2 2 2 1]     (needs: pip install -e .[bench])

On a 2-core CPU the run takes about an hour. ``--device cuda`` runs the update timing and the learner on the
GPU and writes ``pixel_learning_cuda.json`` / ``.png`` (the CPU run writes ``pixel_learning.json``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.common import (
    curve,
    device_synchronize,
    machine,
    run_training,
    save_figure,
    style_success_axis,
    to_threshold,
    write_result,
)

PIXEL_TASK = ["task.cameras=[front,wrist]", "task.object_state=false", "task.image_size=64"]


def update_seconds(strides: list[int], batch: int, utd: int, repeats: int, threads: int, device: str) -> float:
    """Median wall seconds of one ``agent.update`` (``utd`` critic steps) on a fixed random pixel batch, the
    device's queue drained after each."""
    import torch

    from robot_rl.policies.sac import SACAgent, SACConfig

    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    shapes = {"state": (10,), "front": (64, 64, 3), "wrist": (64, 64, 3)}
    agent = SACAgent(shapes, 4, SACConfig(utd=utd, camera_strides=strides, device=device))
    synchronize = device_synchronize(device)
    obs = {
        "state": rng.normal(size=(batch, 10)).astype(np.float32),
        **{key: rng.integers(0, 256, (batch, 64, 64, 3), dtype=np.uint8) for key in ("front", "wrist")},
    }
    sample = {
        "obs": obs,
        "next_obs": obs,
        "action": rng.uniform(-1, 1, (batch, 4)).astype(np.float32),
        "reward": np.zeros(batch, np.float32),
        "discount": np.full(batch, 0.97, np.float32),
    }
    agent.update(lambda: sample)  # warm-up
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        agent.update(lambda: sample)
        synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=12_000)
    parser.add_argument("--eval-every", type=int, default=2_000)
    parser.add_argument("--strides", type=int, nargs="+", default=[2, 2, 2, 1])
    parser.add_argument("--utd", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--extra", nargs="*", default=[], help="more robot-rl overrides")
    parser.add_argument("--runs", default="runs/pixel_learning")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="the learner's (agent.device)")
    parser.add_argument("--eval-episodes", type=int, default=20, help="deterministic episodes per evaluation")
    args = parser.parse_args()
    name = "pixel_learning" if args.device == "cpu" else f"pixel_learning_{args.device}"

    cost = {
        "drqv2_2111": update_seconds([2, 1, 1, 1], args.batch, args.utd, args.repeats, args.threads, args.device),
        "strided": update_seconds(args.strides, args.batch, args.utd, args.repeats, args.threads, args.device),
    }
    cost["speedup"] = round(cost["drqv2_2111"] / cost["strided"], 2)
    print(
        f"seconds per update (utd {args.utd}, batch {args.batch}): DrQ-v2 [2,1,1,1] {cost['drqv2_2111']:.3f}, "
        f"{args.strides} {cost['strided']:.3f} ({cost['speedup']}x)",
        flush=True,
    )

    overrides = [
        f"seed={args.seed}",
        f"train.env_steps={args.steps}",
        f"train.eval_every={args.eval_every}",
        f"train.eval_episodes={args.eval_episodes}",
        "train.final_eval_episodes=20",
        f"train.batch_size={args.batch}",
        f"train.torch_threads={args.threads}",
        f"agent.utd={args.utd}",
        f"agent.device={args.device}",
        f"agent.camera_strides=[{','.join(map(str, args.strides))}]",
        *PIXEL_TASK,
        *args.extra,
    ]
    summary = run_training(Path(args.runs) / "pixels", overrides)
    history = summary["eval_history"]
    training = {
        "history": curve(history),
        "to_80": to_threshold(history),
        "to_90": to_threshold(history, 0.9),
        "final_success": summary["final_eval_success"],
        "final_mean_length": summary["final_eval_mean_length"],
        "intervention_steps": summary["intervention_steps"],
        "wall_seconds": round(summary["wall_seconds"], 1),
        "intervention_rate": [(h["env_steps"], round(h["intervention_rate"], 3)) for h in history],
    }
    print("pixels", training["to_80"], training["to_90"], "final", training["final_success"], flush=True)
    plot(training, Path(__file__).parent / "results" / f"{name}.png", learner_label(args.device))
    path = write_result(
        name,
        {"update_seconds": cost, "training": training},
        settings={
            "task": "pick_cube, front + wrist 64x64 cameras, object_state=false",
            "overrides": overrides,
            "eval": f"{args.eval_episodes} deterministic episodes per evaluation, 20 at the end",
            "device": args.device,
        },
    )
    print("wrote", path)


def learner_label(device: str) -> str:
    """Where the learner ran, for the plot: the GPU's name on ``cuda`` (this machine's, as ``machine()`` reads it)."""
    return machine()["gpu"] if device == "cuda" else f"{machine()['cpu']} ({device})"


def plot(training: dict, path: Path, learner: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 3.5), dpi=120)
    steps = [h[0] for h in training["history"]]
    axis.plot(steps, [h[1] for h in training["history"]], "o-", label="eval success")
    axis.plot(steps, [rate for _, rate in training["intervention_rate"]], "s--", label="intervention rate")
    style_success_axis(axis, "online env steps", "rate")
    axis.set_title(f"pick_cube from front + wrist 64x64 cameras\nlearner on {learner}")
    save_figure(figure, path)


if __name__ == "__main__":
    main()
