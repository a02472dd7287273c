"""The two tasks of ``benchmarks/peers.py`` (issue 75), as every system of the comparison builds them: importable in the
project's environment and in the peers' own (``benchmarks/peers_setup.sh``; robot_rl is installed in each).

* ``gym_hil``: gym-hil 0.1.14's ``PandaPickCubeBase-v0`` (LeRobot's own sim task) from state: ``agent_pos`` (7 joint
  positions (rad), 7 joint velocities (rad/s), the gripper command (0 open .. 255 closed), the pinch point xyz (m))
  and ``environment_state`` (the cube's centre, m). Wrapped as gym-hil's own factory wraps it for LeRobot
  (``wrap_env``: the end-effector action wrapper, 0.025 m per unit of x, y, z, the gripper a command in [0, 2], 1:
  hold, above: close, below: open; the gripper penalty in ``info["discrete_penalty"]``, -0.05 as gym-hil's keyboard
  task), without the viewer, keyboard or reset delay. Sparse reward (1 when the cube is 0.1 m up, which ends the
  episode), 100 steps at 10 Hz. Two changes, both in :func:`hil_pick_cube_class`: the cube's start is drawn from the env's
  own seeded generator in gym-hil's sampling box (gym-hil's ``random_block_position`` draws it from numpy's global
  one, so ``reset(seed=...)`` would not fix it; with the fixed start every evaluation episode would be the same episode), and ``dense_reward()``
  (gym-hil's own dense formula) tells the scripted human how far along the task is.
  Registered as ``peers/GymHilPickCube-v0``; ``info["success"]`` copies gym-hil's ``succeed``.
* ``pick_cube``: robot_rl's ``robot_rl/PickCube-v0`` from state, the main job's task config.

:class:`GymHilPickExpert` is the scripted expert of the gym-hil task (gym-hil has none); robot_rl's
``PickCubeExpert`` is pick_cube's. Both act in the robot_rl action contract ([-1, 1] per dimension, what
``robot-rl train task=gym`` and SB3 see through robot_rl's gym adapter); :func:`native_gripper` maps an action to
gym-hil's own space, which LeRobot's actor uses.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

GYM_HIL_ID = "peers/GymHilPickCube-v0"
EPISODE_STEPS = 100  # both tasks: 10 s at 10 Hz
STEP_SIZE = 0.025  # m per unit action of x, y, z (gym-hil's DEFAULT_EE_STEP_SIZE)
GRIPPER_PENALTY = -0.05  # gym-hil's PandaPickCubeKeyboard-v0, LeRobot's tutorial task


def make_gym_hil(**kwargs) -> gym.Env:
    """``gym_hil/PandaPickCubeBase-v0`` (state), wrapped as gym-hil's factory wraps it for LeRobot (see the module)."""
    from gym_hil.wrappers.factory import wrap_env

    env = hil_pick_cube_class()(**kwargs)
    env = wrap_env(env, gripper_penalty=GRIPPER_PENALTY, reset_delay_seconds=0.0)
    return SuccessInfo(env)


@functools.cache
def hil_pick_cube_class() -> type:
    """gym-hil's ``PandaPickCubeGymEnv`` with the two changes of the module (made on first use: gym-hil is imported
    only then)."""
    import mujoco
    from gym_hil.envs import PandaPickCubeGymEnv
    from gym_hil.envs.panda_pick_gym_env import _SAMPLING_BOUNDS

    class HilPickCube(PandaPickCubeGymEnv):
        def reset(self, seed=None, **kwargs):
            """gym-hil's reset (the cube at its fixed start), then the cube moved to a start drawn from the env's own
            generator in gym-hil's sampling box (m)."""
            super().reset(seed=seed, **kwargs)
            self._data.jnt("block").qpos[:3] = (*self.np_random.uniform(*_SAMPLING_BOUNDS), self._block_z)
            mujoco.mj_forward(self._model, self._data)
            return self._compute_observation(), {}

        def dense_reward(self) -> float:
            """Progress in [0, 1]: 0.3 exp(-20 |cube - pinch| / m) + 0.7 (lift / 0.1 m), gym-hil's dense reward."""
            block = self._data.sensor("block_pos").data
            pinch = self._data.sensor("2f85/pinch_pos").data
            lift = np.clip((block[2] - self._z_init) / (self._z_success - self._z_init), 0.0, 1.0)
            return float(0.3 * np.exp(-20.0 * np.linalg.norm(block - pinch)) + 0.7 * lift)

    return HilPickCube


class SuccessInfo(gym.Wrapper):
    """``info["success"]``, the robot_rl contract's flag, from gym-hil's ``info["succeed"]`` (False at a reset)."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs, {**info, "success": False}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "success": bool(info.get("succeed", False))}


def native_gripper(action: np.ndarray) -> np.ndarray:
    """A contract action ([-1, 1]^4) in gym-hil's own space (x, y, z in [-1, 1], the gripper in [0, 2])."""
    native = np.asarray(action, dtype=np.float32).copy()
    native[-1] += 1.0
    return native


class GymHilPickExpert:
    """Scripted pick for ``peers/GymHilPickCube-v0`` from its observation alone: over the cube, down with the gripper
    open, close and wait for the fingers, lift. Acts in the robot_rl contract (``[-1, 1]^4``: x, y, z in units of
    0.025 m, the gripper -1 open .. +1 close)."""

    hover = 0.05  # m above the cube centre before the descent
    align_tol = 0.008  # m, xy distance at which the descent starts
    grasp_tol = 0.008  # m, pinch-to-cube height at which the gripper closes
    close_steps = 5  # policy steps the fingers get to close before the lift

    def __init__(self, env: gym.Env | None = None):
        self.reset()

    def reset(self) -> None:
        self.closing = 0

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        pinch = np.asarray(obs["agent_pos"][-3:], dtype=np.float64)
        cube = np.asarray(obs["environment_state"], dtype=np.float64)
        xy_err = np.linalg.norm(cube[:2] - pinch[:2])
        if self.closing >= self.close_steps:  # holding: lift
            return self.command(pinch, cube + [0.0, 0.0, 0.2], close=True)
        if self.closing or (xy_err < self.align_tol and abs(pinch[2] - cube[2]) < self.grasp_tol):
            self.closing += 1
            return self.command(pinch, pinch, close=True)
        if xy_err < self.align_tol:
            return self.command(pinch, cube, close=False)
        if pinch[2] < cube[2] + 0.03 and xy_err > 2 * self.align_tol:  # too low to move sideways
            return self.command(pinch, [pinch[0], pinch[1], cube[2] + self.hover], close=False)
        return self.command(pinch, cube + [0.0, 0.0, self.hover], close=False)

    @staticmethod
    def command(pinch: np.ndarray, target, close: bool) -> np.ndarray:
        """Proportional move of the pinch point to ``target`` (m), saturated at one step size, and the gripper."""
        move = np.clip((np.asarray(target) - pinch) / STEP_SIZE, -1.0, 1.0)
        return np.array([*move, 1.0 if close else -1.0], dtype=np.float32)


class Spec(NamedTuple):
    """One run of one peer, as the driver (``benchmarks/peers.py``) hands it to the peer's worker process in JSON:
    ``config`` is robot_rl's composed config of the task (``task``, ``human`` and ``train`` are read: the env, the
    scripted human's rules, the demo count), ``steps`` the online env-step budget (demos not counted), evaluations
    of ``eval_episodes`` deterministic episodes every ``eval_every`` steps on robot_rl's evaluation seeds."""

    task: str
    config: dict[str, Any]
    seed: int
    steps: int
    eval_every: int
    eval_episodes: int
    run_dir: str


def read_spec(path: str | Path) -> Spec:
    return Spec(**json.loads(Path(path).read_text()))


def write_outcome(path: str | Path, outcome: dict[str, Any]) -> None:
    """A worker's figures (``history``: dicts of env_steps, success_rate, wall_seconds; ``takeover_steps``; ...)."""
    Path(path).write_text(json.dumps(outcome, indent=2) + "\n")


def task_env(spec: Spec) -> gym.Env:
    """The task's env through robot_rl's registry and gym adapter: what ``robot-rl train`` acts on."""
    from robot_rl.runtime.envs import make_env

    return make_env(spec.config["task"])


def scripted_human(spec: Spec, env: gym.Env):
    """robot_rl's scripted human (``robot_rl.runtime.teleop.ScriptedHuman``) with the run's rules, on ``env``."""
    from robot_rl.runtime.run_setup import scripted_human as human_of

    return human_of(spec.config, spec.config["task"], env)


def progress(env: gym.Env, reward: float) -> float:
    """What the scripted human judges the policy by (robot_rl's ``task_progress``: the task's dense reward)."""
    from robot_rl.runtime.evaluate import task_progress

    return task_progress(env, reward)


def demonstrations(spec: Spec, env: gym.Env) -> list[list[tuple]]:
    """``train.demo_episodes`` episodes of the scripted human in demo mode on seeds ``seed``, ``seed + 1``, ... (the
    episodes robot_rl plays first): per episode its steps (obs, action, reward, next obs, terminated, truncated,
    info), actions in the robot_rl contract."""
    human, episodes = scripted_human(spec, env), []
    for index in range(spec.config["train"]["demo_episodes"]):
        human.begin_episode(demo=True)
        obs, _ = env.reset(seed=spec.seed + index)
        steps = []
        while True:
            _, action = human(obs, None)
            next_obs, reward, terminated, truncated, info = env.step(action)
            human.observe(progress(env, reward))
            steps.append((obs, action, float(reward), next_obs, terminated, truncated, info))
            obs = next_obs
            if terminated or truncated:
                break
        episodes.append(steps)
    return episodes


class PolicyAgent:
    """A peer's deterministic policy (``act(obs) -> contract action``) behind robot_rl's agent interface, so that
    robot_rl's own ``evaluate`` scores it on the same seeds and episodes as robot_rl's runs."""

    def __init__(self, act: Callable[[dict[str, np.ndarray]], np.ndarray]):
        self._act = act

    def act(self, obs: dict[str, np.ndarray], explore: bool = False) -> np.ndarray:
        return np.asarray(self._act(obs), dtype=np.float32)

    def begin_episode(self) -> None:
        pass

    def executed(self, action: np.ndarray) -> None:
        pass


def evaluation(spec: Spec, env: gym.Env, act: Callable, env_steps: int, started: float) -> dict[str, Any]:
    """One evaluation of ``act`` (deterministic) by robot_rl's ``evaluate`` on ``env``: env steps, success rate, wall
    seconds since ``started`` (``time.monotonic()`` at the worker's start, demos included, as robot_rl counts)."""
    from robot_rl.runtime.evaluate import EVAL_SEED, evaluate

    result = evaluate(PolicyAgent(act), env, spec.eval_episodes, seed=EVAL_SEED)
    entry = {
        "env_steps": env_steps,
        "success_rate": result["success_rate"],
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    print(json.dumps(entry), flush=True)
    return entry


if GYM_HIL_ID not in gym.registry:
    gym.register(GYM_HIL_ID, entry_point=make_gym_hil, max_episode_steps=EPISODE_STEPS, disable_env_checker=True)
