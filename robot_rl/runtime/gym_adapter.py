"""Any gymnasium env behind the robot_rl contract: ``task=gym task.id=... [task.imports=[package]]``.

Finding the env (:func:`make_gym_env`):

* ``task.imports``: packages imported first, for suites that register their ids when imported
  (``gymnasium_robotics``, ``panda_gym``). One that fails to import is a ConfigError naming it and
  the pip command that installs it.
* ``task.id``: a registered id (``Pendulum-v1``) or gymnasium's own ``module:EnvId`` form
  (``panda_gym:PandaReach-v3``: the module is imported, then the id looked up).
* ``task.kwargs``: keyword arguments of ``gymnasium.make`` (``+task.kwargs.reward_type=dense``).

Observation, always a dict (what the agents read):

* a Box observation is ``{"state": vector}``, or ``{"pixels": image}`` when it is a uint8 HxWxC image;
* a Dict or Tuple observation, nested to any depth, gives one entry per leaf, keyed by its path joined
  with ``.`` (a Tuple's position is its name): ``observation``, ``achieved_goal`` and ``desired_goal``
  for the goal-conditioned suites, ``robot.joint_pos`` for ``{"robot": {"joint_pos": ...}}``. A ``/``
  inside a key becomes ``.`` as well, since the episode store uses ``/`` as its path separator.
* leaves: a uint8 HxWxC Box is a camera, passed as it is; any other Box is flattened to a float32
  vector in the env's own units; Discrete, MultiDiscrete and MultiBinary become float32 one-hot or 0/1
  vectors (:func:`gymnasium.spaces.flatten`). Agents concatenate the vectors in sorted key order.

Action: a Box with finite bounds. The agent acts in [-1, 1] per dimension; values are clipped to it and
mapped linearly onto the env's [low, high] (the env's own units). NaN or inf raises ValueError.

Success: ``info["success"]`` (a bool, on every reset and step) is read from the first key of
``task.success_key`` that the env's info holds. ``null`` tries :data:`SUCCESS_KEYS` and gives False
when the env reports none of them (an env without a notion of success, e.g. Pendulum). Keys given by
name must show up at least once per episode: an episode that ends without any of them raises a
ConfigError listing the keys the env's info has.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from robot_rl.core.config import ConfigError

#: info keys read as the success flag when ``task.success_key`` is null, in this order
SUCCESS_KEYS = ("success", "is_success", "goal_achieved", "task_success")
#: the install command of the suites the ``suites`` extra of pyproject.toml brings
INSTALL_HINTS = {"gymnasium_robotics": "pip install -e .[suites]", "panda_gym": "pip install -e .[suites]"}
#: for a missing package robot_rl does not know: a mistyped name is no package to install (a typosquatted one may be)
UNKNOWN_PACKAGE_HINT = (
    "check the name; a suite of your own must be installed in this environment by its maintainers' instructions; the "
    "suites robot_rl installs: " + ", ".join(INSTALL_HINTS) + " (pip install -e .[suites])"
)
DISCRETE_SPACES = (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)
LeafPath = tuple[str | int, ...]  # keys (Dict) and positions (Tuple) from the observation's root to a leaf


def make_gym_env(task: Mapping[str, Any], overrides: Mapping[str, Any]) -> ContractWrapper:
    """The env of a ``task=gym`` config wrapped to the robot_rl contract; ``overrides`` are extra keyword
    arguments of ``gymnasium.make``. Bad values raise ConfigError naming ``task.<key>``."""
    for package in names("task.imports", task.get("imports") or None, "a package name or a list of them"):
        import_package("task.imports", package)
    given = task.get("id")
    if not isinstance(given, str) or not given.strip():
        raise ConfigError("task.id", given, "a gymnasium id such as Pendulum-v1 or panda_gym:PandaReach-v3")
    module, _, env_id = given.rpartition(":")
    if module:
        import_package("task.id", module)
    if env_id not in gym.registry:
        close = difflib.get_close_matches(env_id, list(gym.registry), n=3)
        raise ConfigError(
            "task.id",
            given,
            "a registered gymnasium id" + (f" (close: {', '.join(close)})" if close else "") + "; a suite's ids "
            "are registered when it is imported: task.imports=[package] or task.id=package:EnvId",
        )
    kwargs = dict(task.get("kwargs") or {})
    try:
        env = gym.make(env_id, **kwargs, **overrides)
    except TypeError as error:
        raise ConfigError("task.kwargs", kwargs, f"arguments {env_id} accepts ({error})") from None
    expected = "an info key or a list of them (null: the default list)"
    return ContractWrapper(env, names("task.success_key", task.get("success_key"), expected))


def names(key: str, value: Any, expected: str) -> tuple[str, ...]:
    """A config value that is one name or a non-empty list of names, as a tuple (None: empty)."""
    values = [] if value is None else [value] if isinstance(value, str) else value
    well_formed = isinstance(values, Sequence) and all(isinstance(v, str) and v.strip() for v in values)
    if not well_formed or (value is not None and not values):
        raise ConfigError(key, value, expected)
    return tuple(values)


def import_package(key: str, package: str) -> None:
    """Import ``package``; an import error is a ConfigError naming the missing package and how to install it."""
    try:
        importlib.import_module(package)
    except ImportError as error:
        missing = (error.name or package).split(".")[0]
        install = (
            INSTALL_HINTS.get(missing) or UNKNOWN_PACKAGE_HINT
        )  # never a pip command for a name that may be a typo
        raise ConfigError(key, package, f"an importable package ({' '.join(str(error).split())}: {install})") from None


class ContractWrapper(gym.Wrapper):
    """Dict observations, actions in [-1, 1] and ``info["success"]`` for any gymnasium env (see the module)."""

    def __init__(self, env: gym.Env, success_keys: tuple[str, ...] = ()):
        """``success_keys``: the info keys read as the success flag, the first present wins (empty: SUCCESS_KEYS)."""
        super().__init__(env)
        self._name = env.spec.id if env.spec else type(env.unwrapped).__name__
        space = env.observation_space
        if not isinstance(space, (gym.spaces.Box, gym.spaces.Dict, gym.spaces.Tuple, *DISCRETE_SPACES)):
            raise ConfigError("task.id", self._name, f"an env with Box, Dict or Tuple observations; it has {space}")
        self._leaves: dict[str, tuple[LeafPath, gym.Space]] = {}  # entry name -> (path in the env's observation, space)
        for path, leaf in _leaves(space):
            name = ".".join(map(str, path)).replace("/", ".") or ("pixels" if _is_camera(leaf) else "state")
            if name in self._leaves:
                raise ConfigError("task.id", self._name, f"observation keys that stay distinct; two are {name!r}")
            self._leaves[name] = (path, leaf)
        self.observation_space = gym.spaces.Dict(
            {name: _contract_space(name, leaf, self._name) for name, (_, leaf) in self._leaves.items()}
        )
        action = env.action_space
        if not isinstance(action, gym.spaces.Box):
            raise ConfigError("task.id", self._name, f"an env with Box actions; it has {action}")
        if not (np.all(np.isfinite(action.low)) and np.all(np.isfinite(action.high))):
            raise ConfigError(
                "task.id", self._name, f"finite action bounds; it has low={action.low}, high={action.high}"
            )
        self._low, self._high = action.low.astype(np.float64), action.high.astype(np.float64)
        self.action_space = gym.spaces.Box(-1.0, 1.0, action.shape, np.float32)
        self._success_keys = success_keys or SUCCESS_KEYS
        self._success_named = bool(success_keys)
        self._success_seen = False  # this episode's infos held one of the success keys

    def _obs(self, obs: Any) -> dict[str, np.ndarray]:
        entries = {}
        for name, (path, leaf) in self._leaves.items():
            value = obs
            for part in path:
                value = value[part]
            if _is_camera(leaf):
                entries[name] = np.asarray(value, np.uint8)
            elif isinstance(leaf, gym.spaces.Box):
                entries[name] = np.asarray(value, np.float32).ravel()
            else:
                entries[name] = np.asarray(gym.spaces.flatten(leaf, value), np.float32)
        return entries

    def _info(self, info: dict[str, Any], episode_over: bool) -> dict[str, Any]:
        key = next((k for k in self._success_keys if k in info), None)
        self._success_seen = self._success_seen or key is not None
        if episode_over and self._success_named and not self._success_seen:
            raise ConfigError(
                "task.success_key",
                list(self._success_keys),
                f"a key of {self._name}'s info dict, which holds {sorted(info)} (none of them in a whole episode)",
            )
        if key is None:
            return {**info, "success": False}
        flag = np.asarray(info[key])
        if flag.size != 1:
            raise ConfigError("task.success_key", key, f"an info key holding one flag; it holds shape {flag.shape}")
        return {**info, "success": bool(flag.item())}

    def reset(self, **kwargs) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        self._success_seen = False
        return self._obs(obs), self._info(info, episode_over=False)

    def step(self, action) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        action = np.asarray(action, dtype=np.float64)
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action has non-finite values: {action.tolist()}")
        scaled = self._low + (np.clip(action, -1.0, 1.0) + 1.0) * 0.5 * (self._high - self._low)
        obs, reward, terminated, truncated, info = self.env.step(scaled.astype(self.env.action_space.dtype))
        return self._obs(obs), float(reward), terminated, truncated, self._info(info, terminated or truncated)


def _leaves(space: gym.Space, path: LeafPath = ()) -> Iterator[tuple[LeafPath, gym.Space]]:
    """(path, space) of every leaf of a nested Dict / Tuple space, in the space's order."""
    if isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            yield from _leaves(sub, (*path, key))
    elif isinstance(space, gym.spaces.Tuple):
        for index, sub in enumerate(space.spaces):
            yield from _leaves(sub, (*path, index))
    else:
        yield path, space


def _is_camera(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def _contract_space(name: str, leaf: gym.Space, env_name: str) -> gym.spaces.Box:
    """The space of one observation entry: the camera's own Box, or an unbounded float32 vector."""
    if _is_camera(leaf):
        return leaf
    if isinstance(leaf, (gym.spaces.Box, *DISCRETE_SPACES)):
        return gym.spaces.Box(-np.inf, np.inf, (gym.spaces.flatdim(leaf),), np.float32)
    raise ConfigError(
        "task.id", env_name, f"Box, Discrete, MultiDiscrete or MultiBinary observation entries; {name!r} is {leaf}"
    )
