"""LeRobot 0.4.4's HIL-SERL in ``benchmarks/peers.py`` (issue 75): one run, in ``.peers/lerobot-venv``.

    .peers/lerobot-venv/bin/python -m benchmarks.peers_lerobot SPEC.json OUT.json

As LeRobot's documentation runs it (``docs/source/hilserl_sim.mdx``: a ``gym_manipulator`` env named ``gym_hil`` at
``fps`` 10, the learner and the actor as two processes over gRPC, each with ``--config_path`` of one
``TrainRLServerPipelineConfig``; here one each, differing only in ``output_dir``, which each refuses when it exists):
the learner is ``python -m lerobot.rl.learner --config_path=...`` unchanged, the actor is
``lerobot.rl.actor.actor_cli`` in this process with three names of ``lerobot.rl.actor`` replaced:

* ``make_robot_env``: LeRobot's makes ``gym_hil/<task>`` with ``image_obs=True`` and a MuJoCo viewer window and
  reads a keyboard or gamepad (``InputsControlWrapper``). Here: the task's env from state (gym-hil's
  ``PandaPickCubeBase-v0`` wrapped as gym-hil's factory wraps it for LeRobot, or robot_rl's pick_cube with its
  ``state`` named ``agent_pos`` for LeRobot's observation step) and :class:`ScriptedIntervention` in place of
  ``InputsControlWrapper``: robot_rl's scripted human with the run's rules, reporting in the info keys
  ``InputsControlWrapper`` uses (``is_intervention``, ``teleop_action``), so LeRobot's processors
  (``GymHILAdapterProcessorStep``, ``InterventionActionProcessorStep``) handle takeovers as they handle a person's;
* ``update_policy_parameters`` (called at every episode's end): LeRobot's, then the benchmark's evaluation when one is
  due (LeRobot's actor has none): the actor's current weights, deterministic (the tanh of the Gaussian's mean, the
  gripper critic's argmax), robot_rl's ``evaluate`` on its evaluation seeds, in the actor's thread;
* ``act_with_policy``: LeRobot's, then its shutdown event set, so the actor ends after ``policy.online_steps``
  (LeRobot's actor waits for Ctrl-C);
* nothing else: its SAC (``SACConfig`` defaults: UTD 1, batch 256, discount 0.99, 100 online steps before learning;
  ``num_discrete_actions=3`` on gym-hil, its gripper critic, as LeRobot's gym-hil configs; a continuous gripper on
  pick_cube, whose gripper action is continuous), its replay buffers (the demonstrations as ``cfg.dataset``, a local
  LeRobotDataset written here from the same scripted demonstrations as the other systems'), threads for its
  concurrency (its default), CPU (``policy.device=cpu``), ``use_torch_compile`` as its default.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

from benchmarks.peers_tasks import (
    GYM_HIL_ID,
    Spec,
    demonstrations,
    evaluation,
    native_gripper,
    progress,
    read_spec,
    scripted_human,
    task_env,
    write_outcome,
)

FPS = 10  # LeRobot's gym-hil config: the actor keeps this rate (a precise sleep per step)
#: the task's observation keys -> LeRobot's (what its VanillaObservationProcessorStep makes of gym-hil's keys)
POLICY_KEYS = {
    "gym_hil": {"agent_pos": "observation.state", "environment_state": "observation.environment_state"},
    "pick_cube": {"state": "observation.state"},
}
LEROBOT_KEYS = {"gym_hil": {}, "pick_cube": {"state": "agent_pos"}}  # renamed for the actor's env
DISCRETE_GRIPPER = {"gym_hil": 3, "pick_cube": None}  # SACConfig.num_discrete_actions


def to_native(task: str, action: np.ndarray) -> np.ndarray:
    """A contract action in the action space of the env LeRobot's actor steps."""
    return native_gripper(action) if task == "gym_hil" else np.asarray(action, dtype=np.float32)


class ScriptedIntervention(gym.Wrapper):
    """robot_rl's scripted human in place of gym-hil's ``InputsControlWrapper``: the same rule as robot_rl's runs, the
    same info keys as a person's keyboard or gamepad. Counts online steps and takeover steps."""

    def __init__(self, env: gym.Env, human, task: str, rename: dict[str, str]):
        super().__init__(env)
        self.human, self.task, self.rename = human, task, rename
        self.steps = self.takeover_steps = 0
        if rename:
            self.observation_space = gym.spaces.Dict(
                {rename.get(key, key): space for key, space in env.observation_space.spaces.items()}
            )

    def _lerobot(self, obs: dict) -> dict:
        return {self.rename.get(key, key): value for key, value in obs.items()}

    def reset(self, **kwargs):
        self.human.begin_episode(demo=False)
        self.obs, info = self.env.reset(**kwargs)
        return self._lerobot(self.obs), info

    def step(self, action):
        active, human_action = self.human(self.obs, action)
        if active:
            action = to_native(self.task, human_action)
        self.obs, reward, terminated, truncated, info = self.env.step(action)
        self.human.observe(progress(self.env, reward))
        self.steps += 1
        self.takeover_steps += bool(active)
        info = {**info, "is_intervention": bool(active), "teleop_action": np.asarray(action, dtype=np.float32)}
        return self._lerobot(self.obs), reward, terminated, truncated, {**info, "rerecord_episode": False}


def actor_env(spec: Spec) -> ScriptedIntervention:
    """The env LeRobot's actor steps: gym-hil's in its own action space (the gripper in [0, 2]), pick_cube as it is."""
    env = gym.make(GYM_HIL_ID) if spec.task == "gym_hil" else task_env(spec)
    env.reset(seed=spec.seed + 10_000)  # LeRobot's actor resets without a seed: the episodes follow from this one
    return ScriptedIntervention(env, scripted_human(spec, env), spec.task, LEROBOT_KEYS[spec.task])


def demo_dataset(spec: Spec, root: Path) -> str:
    """The scripted demonstrations as a local LeRobotDataset at ``root`` (LeRobot's offline buffer); its repo id."""
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    env = task_env(spec)
    episodes = demonstrations(spec, env)
    env.close()
    keys = POLICY_KEYS[spec.task]
    first = episodes[0][0]
    features = {keys[key]: {"dtype": "float32", "shape": first[0][key].shape, "names": None} for key in keys} | {
        "action": {"dtype": "float32", "shape": (len(first[1]),), "names": None},
        "next.reward": {"dtype": "float32", "shape": (1,), "names": None},
        "next.done": {"dtype": "bool", "shape": (1,), "names": None},
        "complementary_info.discrete_penalty": {"dtype": "float32", "shape": (1,), "names": None},
    }
    repo_id = f"peers/{spec.task}_demos"
    dataset = LeRobotDataset.create(repo_id, fps=FPS, features=features, root=root, use_videos=False)
    for steps in episodes:
        for obs, action, reward, _, terminated, truncated, info in steps:
            frame = {keys[key]: np.asarray(obs[key], dtype=np.float32) for key in keys}
            frame["action"] = to_native(spec.task, action)
            frame["next.reward"] = np.array([reward], dtype=np.float32)
            frame["next.done"] = np.array([terminated or truncated])
            frame["complementary_info.discrete_penalty"] = np.array([info.get("discrete_penalty", 0.0)], np.float32)
            dataset.add_frame({**frame, "task": spec.task})
        dataset.save_episode()
    dataset.finalize()
    return repo_id


def train_config(spec: Spec, repo_id: str, root: Path, port: int, role: str) -> dict:
    """The ``TrainRLServerPipelineConfig`` of LeRobot's learner or actor (``role``; see the module): the two differ
    only in ``output_dir`` (each refuses one that exists, so the documented ``null``, a folder named by the second it
    starts in, is replaced by one each)."""
    env = task_env(spec)
    spaces = env.observation_space.spaces
    action_dim = env.action_space.shape[0]
    env.close()
    names = {"gym_hil": ("agent_pos", "environment_state"), "pick_cube": ("agent_pos",)}[spec.task]
    kinds = {"agent_pos": "STATE", "environment_state": "ENV"}
    shapes = {"agent_pos": spaces["agent_pos" if spec.task == "gym_hil" else "state"].shape}
    if spec.task == "gym_hil":
        shapes["environment_state"] = spaces["environment_state"].shape
    discrete = DISCRETE_GRIPPER[spec.task]
    features = {name: {"type": kinds[name], "shape": list(shapes[name])} for name in names}
    features["action"] = {"type": "ACTION", "shape": [action_dim - (1 if discrete else 0)]}
    features_map = {name: POLICY_KEYS["gym_hil"][name] for name in names} | {"action": "action"}
    return {
        "output_dir": str(root / role),
        "job_name": f"peers_{spec.task}_seed{spec.seed}",
        "seed": spec.seed,
        "batch_size": 256,
        "save_checkpoint": False,
        "log_freq": 100,
        "dataset": {"repo_id": repo_id, "root": str(root / "demos")},
        "wandb": {"enable": False},
        "env": {
            "type": "gym_manipulator",
            "name": "gym_hil",
            "task": "PandaPickCubeBase-v0",
            "fps": FPS,
            "features": features,
            "features_map": features_map,
            "processor": {"control_mode": "gamepad", "gripper": {"use_gripper": True, "gripper_penalty": -0.05}},
        },
        "policy": {
            "type": "sac",
            "device": "cpu",
            "storage_device": "cpu",
            "push_to_hub": False,
            "online_steps": spec.steps,
            "num_discrete_actions": discrete,
            "actor_learner_config": {"learner_host": "127.0.0.1", "learner_port": port},
        },
    }


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Evaluations:
    """The benchmark's evaluations of the actor's weights, when due (every ``eval_every`` online steps)."""

    def __init__(self, spec: Spec, env: ScriptedIntervention, started: float):
        self.spec, self.env, self.started = spec, env, started
        self.eval_env = task_env(spec)
        self.history: list[dict] = []
        self.due = spec.eval_every

    def act(self, policy):
        import torch

        keys, discrete = POLICY_KEYS[self.spec.task], DISCRETE_GRIPPER[self.spec.task]

        def act(obs: dict[str, np.ndarray]) -> np.ndarray:
            batch = {keys[key]: torch.as_tensor(obs[key], dtype=torch.float32)[None] for key in keys}
            with torch.no_grad():
                _, _, means = policy.actor(batch, None)
                action = torch.tanh(means)[0].numpy()
                if discrete:  # gym-hil's gripper: the critic's argmax in {0, 1, 2}, -1 in the contract's [-1, 1]
                    index = int(torch.argmax(policy.discrete_critic(batch, None), dim=-1)[0])
                    action = np.append(action, index - 1.0)
            return action

        return act

    def maybe(self, policy, final: bool = False) -> None:
        if final or self.env.steps >= self.due:
            self.history.append(evaluation(self.spec, self.eval_env, self.act(policy), self.env.steps, self.started))
            while self.due <= self.env.steps:
                self.due += self.spec.eval_every


def run(spec: Spec) -> dict:
    """Demos -> dataset, the learner process, the actor here; the figures."""
    from lerobot.rl import actor

    started = time.monotonic()
    root = Path(spec.run_dir)
    root.mkdir(parents=True, exist_ok=True)
    repo_id = demo_dataset(spec, root / "demos")
    port, configs = free_port(), {}
    for role in ("learner", "actor"):
        configs[role] = root / f"{role}_config.json"
        configs[role].write_text(json.dumps(train_config(spec, repo_id, root, port, role), indent=2))
    env = actor_env(spec)
    evaluations = Evaluations(spec, env, started)
    policies = []
    update, act_with_policy = actor.update_policy_parameters, actor.act_with_policy

    def update_and_evaluate(policy, parameters_queue, device):
        update(policy=policy, parameters_queue=parameters_queue, device=device)
        policies[:] = [policy]
        evaluations.maybe(policy)

    def act_then_stop(cfg, shutdown_event, **queues):
        act_with_policy(cfg=cfg, shutdown_event=shutdown_event, **queues)
        shutdown_event.set()

    actor.make_robot_env = lambda cfg: (env, None)
    actor.update_policy_parameters = update_and_evaluate
    actor.act_with_policy = act_then_stop
    with (root / "learner.log").open("w") as log:
        learner = subprocess.Popen(
            [sys.executable, "-m", "lerobot.rl.learner", f"--config_path={configs['learner']}"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            sys.argv = ["lerobot.rl.actor", f"--config_path={configs['actor']}"]
            actor.actor_cli()
        finally:
            learner.send_signal(signal.SIGINT)
            try:
                learner.wait(timeout=60)
            except subprocess.TimeoutExpired:
                learner.kill()
                learner.wait()
    if not policies:
        raise RuntimeError(f"LeRobot's actor ended before its first episode; the learner's log: {root / 'learner.log'}")
    evaluations.maybe(policies[0], final=True)
    return {
        "history": evaluations.history,
        "takeover_steps": env.takeover_steps,
        "online_steps": env.steps,
        "wall_seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the demos are a local dataset; nothing from a hub
    spec_path, out_path = argv or sys.argv[1:]
    write_outcome(out_path, run(read_spec(spec_path)))


if __name__ == "__main__":
    main()
