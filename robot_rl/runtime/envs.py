"""Task registry: gymnasium ids for the robot_rl tasks and construction from a task config.

The core names the sim tasks only by entry-point strings, so importing ``robot_rl`` never
imports MuJoCo or robosuite. A task config (``configs/task/*.yaml``) holds ``name``, the
gymnasium ``id``, an optional ``expert`` entry point and the env's keyword arguments.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

import gymnasium as gym

from robot_rl.core.config import Config, ConfigError, plain
from robot_rl.core.observation_keys import PRIVILEGED_KEY
from robot_rl.data.task_spec import TaskSpec
from robot_rl.safety.fast_critic import fast_critic_config
from robot_rl.sim.fast_critic_loop import SimFastLoop, sim_fast_loop

ENTRY_POINTS = {
    "robot_rl/Reach-v0": "robot_rl.sim.tasks.reach:ReachEnv",
    "robot_rl/PickCube-v0": "robot_rl.sim.tasks.pick_cube:PickCubeEnv",
    "robot_rl/PegInsert-v0": "robot_rl.sim.tasks.peg_insert:PegInsertEnv",
    "robot_rl/PickCubeReset-v0": "robot_rl.sim.tasks.backward:PickCubeResetEnv",  # the backward (reset) tasks
    "robot_rl/PegInsertReset-v0": "robot_rl.sim.tasks.backward:PegInsertResetEnv",
    "robot_rl/Robosuite-v0": "robot_rl.sim.robosuite_env:RobosuiteEnv",
}
#: task-config keys that are not env keyword arguments
TASK_KEYS = ("name", "id", "expert", "kwargs", "privileged_state")

for _env_id, _entry_point in ENTRY_POINTS.items():
    if _env_id not in gym.registry:
        gym.register(_env_id, entry_point=_entry_point, disable_env_checker=True)


def load_entry_point(entry_point: str) -> Any:
    """Import ``"package.module:attribute"``."""
    module, _, attribute = entry_point.partition(":")
    return getattr(importlib.import_module(module), attribute)


def env_kwargs(task: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in task.items() if key not in TASK_KEYS}


def make_env(task: Mapping[str, Any], **overrides: Any) -> gym.Env:
    """Build the env a task config describes; a bad value raises ConfigError naming ``task.<key>``.

    ``task.name == "gym"``: any gymnasium env (``task.id``, ``task.imports``, ``task.kwargs``,
    ``task.success_key``) wrapped to the robot_rl contract (:mod:`robot_rl.runtime.gym_adapter`).
    ``task.privileged_state``: the observation also carries :class:`PrivilegedState`.
    """
    env = _make_task_env(task, overrides)
    return PrivilegedState(env) if task.get("privileged_state") else env


def _make_task_env(task: Mapping[str, Any], overrides: dict[str, Any]) -> gym.Env:
    if task.get("name") == "gym":
        from robot_rl.runtime.gym_adapter import make_gym_env

        return make_gym_env(task, overrides)
    env_id = task.get("id")
    if env_id not in gym.registry:
        known = ", ".join(sorted(ENTRY_POINTS))
        raise ConfigError("task.id", env_id, f"a registered gymnasium id such as {known}")
    kwargs = {**env_kwargs(task), **overrides}
    entry_point = gym.registry[env_id].entry_point
    if isinstance(entry_point, str):
        known = _accepted_keywords(load_entry_point(entry_point))
        for key, value in kwargs.items():
            if key not in known:
                raise ConfigError(f"task.{key}", value, "one of the task's keys: " + ", ".join(sorted(known)))
    try:
        return gym.make(env_id, **kwargs)
    except ConfigError as error:
        raise error.under("task") from None


class PrivilegedState(gym.ObservationWrapper):
    """Adds ``privileged_state``: a copy of ``state`` taken inside every randomization wrapper, so
    sensor noise applied to ``state`` later leaves it clean.

    Only the critic of an actor-critic agent reads it (asymmetric actor-critic, Pinto et al. 2018):
    its value targets stay sharp while the actor learns to act from what a real cell would give it.
    Only a simulator knows this state, so a policy trained with it still acts without it.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        if "state" not in env.observation_space.spaces:
            raise ConfigError(
                "task.privileged_state", True, "a task with a state observation (task.object_state or proprioception)"
            )
        self.observation_space = gym.spaces.Dict(
            {**env.observation_space.spaces, PRIVILEGED_KEY: env.observation_space.spaces["state"]}
        )

    def observation(self, observation: dict[str, Any]) -> dict[str, Any]:
        return {**observation, PRIVILEGED_KEY: observation["state"].copy()}


def _accepted_keywords(env_class: type) -> set[str]:
    """Keyword arguments of ``env_class.__init__`` and of the base classes it forwards to."""
    names: set[str] = set()
    for cls in env_class.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None or cls is object:
            continue
        for name, parameter in inspect.signature(init).parameters.items():
            if name != "self" and parameter.kind not in (
                inspect.Parameter.VAR_KEYWORD,
                inspect.Parameter.VAR_POSITIONAL,
            ):
                names.add(name)
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(init).parameters.values()):
            break
    return names


def make_expert(task: Mapping[str, Any], env: gym.Env):
    """The task's scripted expert (the sim's stand-in for a human), or a ConfigError."""
    entry_point = task.get("expert")
    if not entry_point:
        raise ConfigError(
            "task.expert",
            entry_point,
            f"a scripted expert; task {task.get('name')!r} has none, so run "
            "without demos and interventions (train.demo_episodes=0 human.enabled=false)",
        )
    return load_entry_point(entry_point)(env)


def observation_shapes(env: gym.Env) -> dict[str, tuple[int, ...]]:
    return {key: tuple(space.shape) for key, space in env.observation_space.spaces.items()}


def task_spec(task: Mapping[str, Any], env: gym.Env | None = None) -> TaskSpec:
    """The :class:`TaskSpec` of a task config, read from ``env`` (built from ``task`` and closed when not given):
    the one place an env is built only to learn what its observations and actions look like."""
    spec_env = make_env(task) if env is None else env
    try:
        layout = getattr(spec_env.unwrapped, "state_layout", None)
        return TaskSpec(
            task=task.get("name"),
            robot=task.get("robot") or ("panda" if str(task.get("id", "")).startswith("robot_rl/") else None),
            observation_shapes=observation_shapes(spec_env),
            action_dim=int(spec_env.action_space.shape[0]),
            control_rate_hz=task.get("control_rate_hz"),
            state_layout=None if layout is None else {name: tuple(part) for name, part in layout.items()},
        )
    finally:
        if env is None:
            spec_env.close()


def fast_loop_of(cfg: Config) -> SimFastLoop | None:
    """The sim's fast loop (:func:`~robot_rl.sim.fast_critic_loop.sim_fast_loop`) of a config's
    ``safety.fast_critic`` and ``robot.limits``; None without ``safety.fast_critic.sim_rate_hz``."""
    return sim_fast_loop(fast_critic_config(cfg), plain(cfg["robot"]["limits"]))
