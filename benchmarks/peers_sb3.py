"""Stable-Baselines3's SAC in ``benchmarks/peers.py`` (issue 75): one run, in ``.peers/sb3-venv`` (its own torch).

    .peers/sb3-venv/bin/python -m benchmarks.peers_sb3 SPEC.json OUT.json

SB3 SAC (``MultiInputPolicy``, its defaults: UTD 1, batch 256, 100 uniform random steps first, target entropy -|A|,
discount 0.97 like robot_rl's and ``benchmarks/gym_sb3.py``'s) on the task's env as robot_rl builds it (the same
dict observation and [-1, 1] actions, which is SB3's own scaled action space), with the scripted demonstrations
(:func:`benchmarks.peers_tasks.demonstrations`: the episodes robot_rl plays first, same seeds) put into its replay
buffer before ``learn()``. SB3 has no human-in-the-loop: no takeovers (its buffer stores the policy's action, not an
executed one). Evaluated every ``eval_every`` steps by robot_rl's ``evaluate`` (deterministic, same seeds). One torch
thread, as ``train.torch_threads=1``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from benchmarks.gym_sb3 import DISCOUNT
from benchmarks.peers_tasks import Spec, demonstrations, evaluation, read_spec, task_env, write_outcome


def preload(model, episodes: list[list[tuple]]) -> int:
    """The demo transitions into ``model``'s replay buffer (one env: a batch of 1 each); a truncated episode's last
    step is marked ``TimeLimit.truncated``, as SB3 marks its own, so it is bootstrapped. Returns the count."""
    count = 0
    for steps in episodes:
        for obs, action, reward, next_obs, terminated, truncated, _ in steps:
            model.replay_buffer.add(
                {key: value[None] for key, value in obs.items()},
                {key: value[None] for key, value in next_obs.items()},
                np.asarray(action, dtype=np.float32)[None],
                np.array([reward], dtype=np.float32),
                np.array([terminated or truncated]),
                [{"TimeLimit.truncated": truncated and not terminated}],
            )
            count += 1
    return count


def run(spec: Spec) -> dict:
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)
    started = time.monotonic()
    env, eval_env = task_env(spec), task_env(spec)
    demos = demonstrations(spec, env)
    model = SAC("MultiInputPolicy", env, gamma=DISCOUNT, seed=spec.seed, device="cpu", verbose=0)
    demo_transitions = preload(model, demos)
    history: list[dict] = []

    def act(obs):
        return model.predict(obs, deterministic=True)[0]

    class Evaluate(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % spec.eval_every == 0 or self.num_timesteps == spec.steps:
                history.append(evaluation(spec, eval_env, act, self.num_timesteps, started))
            return True

    model.learn(total_timesteps=spec.steps, callback=Evaluate())
    return {
        "history": history,
        "takeover_steps": 0,
        "demo_transitions": demo_transitions,
        "wall_seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> None:
    spec_path, out_path = argv or sys.argv[1:]
    write_outcome(out_path, run(read_spec(spec_path)))


if __name__ == "__main__":
    main()
