"""Domain randomization for sim-to-real: a gymnasium wrapper driven by a list of entries.

An entry says what to change and how to sample it:

- ``target``: object name or regular expression (full match) — a MuJoCo body, geom, joint,
  actuator, light, camera, material or site for model attributes; an observation key for sensor
  attributes; ignored for controller and actuation attributes
- ``attribute``, one of
  - an MjModel array named by its object prefix: ``body_mass``, ``body_inertia``,
    ``geom_friction``, ``geom_rgba``, ``dof_damping`` (target = joint names), ``dof_armature``,
    ``light_diffuse``, ``light_pos``, ``cam_pos``, ``cam_fovy``, ``mat_rgba``, ... (``columns``
    picks columns of multi-column arrays, e.g. [0, 1, 2] for RGB)
  - ``controller.kp_pos`` / ``kp_rot`` / ``kd_pos`` / ``kd_rot``: Cartesian impedance gains
  - ``sensor.state_noise`` (std of Gaussian noise added to a vector observation, its units),
    ``sensor.image_noise`` (std, pixel levels 0-255), ``sensor.blur`` (Gaussian sigma, pixels),
    ``sensor.brightness`` and ``sensor.contrast`` (factors, 1 = unchanged)
  - ``actuation.action_delay`` (policy steps, rounded) and ``actuation.period_jitter``
    (fraction of the control period; each step runs round(n (1 + U(-j, j))) physics steps)
- ``distribution``: uniform or loguniform over ``range: [low, high]``, or normal with
  ``range: [mean, std]``
- ``mode``: ``absolute`` (the value), ``scale`` (times the saved default) or ``additive`` (plus
  the default); sensor and actuation attributes are absolute
- ``frequency``: ``startup`` (once), ``episode`` (every reset) or an integer N (every N steps)
- ``clamp: [low, high]`` on the final value, ``shared`` (one sample for all matched objects),
  ``seed`` (a stream of its own, still drawn from the env's seed), ``curriculum: {start_step, end_step, start_fraction, centre}``
  (the range grows linearly from ``start_fraction`` of its width around ``centre``, by default
  the neutral value: 1 for scale, 0 for additive, the low end of the range for absolute)

Defaults are saved when the wrapper is built and restored before every sample, so values never
drift. Sampled values are in ``info["randomization"]`` on every reset and step.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field, fields
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from robot_rl.core.config import ConfigError

#: MjModel attribute prefix -> (object type, number-of-objects attribute)
OBJECT_TYPES = {
    "body": (mujoco.mjtObj.mjOBJ_BODY, "nbody"),
    "geom": (mujoco.mjtObj.mjOBJ_GEOM, "ngeom"),
    "jnt": (mujoco.mjtObj.mjOBJ_JOINT, "njnt"),
    "dof": (mujoco.mjtObj.mjOBJ_JOINT, "njnt"),  # rows are the joints' dofs
    "actuator": (mujoco.mjtObj.mjOBJ_ACTUATOR, "nu"),
    "light": (mujoco.mjtObj.mjOBJ_LIGHT, "nlight"),
    "cam": (mujoco.mjtObj.mjOBJ_CAMERA, "ncam"),
    "mat": (mujoco.mjtObj.mjOBJ_MATERIAL, "nmat"),
    "site": (mujoco.mjtObj.mjOBJ_SITE, "nsite"),
}
DOFS_PER_JOINT = {0: 6, 1: 3, 2: 1, 3: 1}  # free, ball, slide, hinge
NON_NEGATIVE = {
    "body_mass",
    "body_inertia",
    "geom_friction",
    "geom_rgba",
    "mat_rgba",
    "dof_damping",
    "dof_armature",
    "dof_frictionloss",
    "light_diffuse",
    "light_ambient",
    "light_specular",
    "cam_fovy",
}
CONTROLLER_GAINS = ("kp_pos", "kp_rot", "kd_pos", "kd_rot")
SENSORS = ("state_noise", "image_noise", "blur", "brightness", "contrast")
ACTUATION = ("action_delay", "period_jitter")
NEUTRAL = {"scale": 1.0, "additive": 0.0}


@dataclass
class RandomizationEntry:
    name: str
    target: str
    attribute: str
    range: list[float]
    distribution: str = "uniform"
    mode: str = "scale"
    frequency: str | int = "episode"
    columns: list[int] | None = None
    shared: bool = False
    clamp: list[float] | None = None
    seed: int | None = None
    curriculum: dict[str, float] | None = None

    def __post_init__(self) -> None:
        key = f"randomization.entries.{self.name}"
        if self.distribution not in ("uniform", "loguniform", "normal"):
            raise ConfigError(f"{key}.distribution", self.distribution, "one of uniform, loguniform, normal")
        if self.mode not in ("absolute", "scale", "additive"):
            raise ConfigError(f"{key}.mode", self.mode, "one of absolute, scale, additive")
        if len(self.range) != 2:
            raise ConfigError(f"{key}.range", self.range, "[low, high] (normal: [mean, std])")
        low, high = map(float, self.range)
        if self.distribution == "normal" and high < 0:
            raise ConfigError(f"{key}.range", self.range, "[mean, std] with std >= 0")
        if self.distribution != "normal" and low > high:
            raise ConfigError(f"{key}.range", self.range, "[low, high] with low <= high")
        if self.distribution == "loguniform" and low <= 0:
            raise ConfigError(f"{key}.range", self.range, "positive bounds for a loguniform distribution")
        if self.clamp is not None and (len(self.clamp) != 2 or self.clamp[0] > self.clamp[1]):
            raise ConfigError(f"{key}.clamp", self.clamp, "[low, high] with low <= high")
        frequency = self.frequency
        if not (frequency in ("startup", "episode") or (isinstance(frequency, int) and frequency >= 1)):
            raise ConfigError(f"{key}.frequency", frequency, "startup, episode or a positive number of steps")
        kind, _, detail = self.attribute.partition(".")
        allowed = {"controller": CONTROLLER_GAINS, "sensor": SENSORS, "actuation": ACTUATION}
        if kind in allowed:
            if detail not in allowed[kind]:
                raise ConfigError(f"{key}.attribute", self.attribute, f"{kind}.<one of {', '.join(allowed[kind])}>")
            if kind != "controller" and self.mode != "absolute":
                raise ConfigError(f"{key}.mode", self.mode, f"absolute for {kind} attributes")
        elif self.attribute.split("_", 1)[0] not in OBJECT_TYPES:
            raise ConfigError(
                f"{key}.attribute",
                self.attribute,
                "an MjModel array (body_mass, geom_friction, ...), controller.*, sensor.* or actuation.*",
            )
        if self.curriculum is not None:
            unknown = set(self.curriculum) - {"start_step", "end_step", "start_fraction", "centre"}
            if unknown or self.curriculum.get("end_step", 0) <= self.curriculum.get("start_step", 0):
                raise ConfigError(
                    f"{key}.curriculum",
                    self.curriculum,
                    "{start_step, end_step > start_step, start_fraction in [0, 1], centre}",
                )

    @property
    def key(self) -> str:
        return f"randomization.entries.{self.name}"

    def width_fraction(self, step: int) -> float:
        """How much of the range is open at ``step`` (curriculum), 1 without a curriculum."""
        if self.curriculum is None:
            return 1.0
        start, end = self.curriculum.get("start_step", 0), self.curriculum["end_step"]
        first = float(self.curriculum.get("start_fraction", 0.0))
        progress = min(max((step - start) / (end - start), 0.0), 1.0)
        return first + (1.0 - first) * progress

    def sample(self, rng: np.random.Generator, size: int, step: int = 0) -> np.ndarray:
        """``size`` draws of the entry's distribution, narrowed by the curriculum."""
        low, high = map(float, self.range)
        fraction = self.width_fraction(step)
        if self.distribution == "normal":
            return rng.normal(low, high * fraction, size)
        centre = (self.curriculum or {}).get("centre", NEUTRAL.get(self.mode, low))
        centre = min(max(centre, low), high)
        if self.distribution == "loguniform":
            centre = np.log(centre)
            low, high = np.log(low), np.log(high)
            return np.exp(rng.uniform(centre - fraction * (centre - low), centre + fraction * (high - centre), size))
        return rng.uniform(centre - fraction * (centre - low), centre + fraction * (high - centre), size)

    def grid(self, points: int) -> np.ndarray:
        """``points`` values spanning the range (normal: mean +- 2 std), for robustness sweeps."""
        low, high = map(float, self.range)
        if self.distribution == "normal":
            return np.linspace(low - 2 * high, low + 2 * high, points)
        if self.distribution == "loguniform":
            return np.geomspace(low, high, points)
        return np.linspace(low, high, points)


def entries_from_config(config: dict[str, Any] | None) -> list[RandomizationEntry]:
    """Entries of a ``randomization`` config group: ``{entries: {name: {...}}}``."""
    if not config:
        return []
    known = {f.name for f in fields(RandomizationEntry)} - {"name"}
    entries = []
    for name, spec in (config.get("entries") or {}).items():
        if spec is None:  # an entry switched off by an override (entries.<name>=null)
            continue
        unknown = sorted(set(spec) - known)
        if unknown:
            raise ConfigError(
                f"randomization.entries.{name}.{unknown[0]}", spec[unknown[0]], "one of " + ", ".join(sorted(known))
            )
        missing = sorted({"target", "attribute", "range"} - set(spec))
        if missing:
            raise ConfigError(
                f"randomization.entries.{name}.{missing[0]}", None, "a value (target, attribute and range are required)"
            )
        entries.append(RandomizationEntry(name=name, **spec))
    return entries


@dataclass
class _Binding:
    """Where an entry writes: model array rows/columns with their saved defaults, or the
    observation keys of a sensor entry. ``value`` holds the current sample (after its mode)."""

    entry: RandomizationEntry
    rng: np.random.Generator
    labels: list[str]  # model rows; one label (the attribute) for the other kinds
    keys: list[str] = field(default_factory=list)  # sensor: the observation keys
    array: np.ndarray | None = None
    rows: np.ndarray | None = None
    columns: np.ndarray | None = None
    default: np.ndarray | None = None
    value: np.ndarray = field(default_factory=lambda: np.zeros(0))


class DomainRandomization(gym.Wrapper):
    """Applies :class:`RandomizationEntry` samples to a MuJoCo env (the robot_rl tasks, or any
    env whose ``unwrapped`` exposes ``model`` or ``mj_model``)."""

    def __init__(self, env: gym.Env, entries: list[RandomizationEntry], seed: int = 0, stream: int = 0):
        """``seed``: the env's seed (a run's, an env's of ``train.num_envs``, a fleet actor's): envs built with
        different seeds draw different samples. ``stream``: the randomization set's own ``seed`` key, which picks a
        stream of draws for the set but never makes two env seeds draw alike."""
        super().__init__(env)
        self.entries = entries
        self.steps = 0  # env steps since construction (drives curricula)
        self.episode_steps = 0
        self._sampled: dict[str, dict[str, float]] | None = None  # labelled copy of the samples, rebuilt on change
        self._bindings = [self._bind(entry, index, seed, stream) for index, entry in enumerate(entries)]
        self._delay_queue: deque[np.ndarray] = deque()
        self._base_substeps = getattr(self.env.unwrapped, "n_substeps", None)
        for binding in self._bindings:
            if binding.entry.frequency == "startup":
                self._resample(binding)

    # ----------------------------------------------------------------- binding
    @property
    def model(self) -> mujoco.MjModel:
        unwrapped = self.env.unwrapped
        model = getattr(unwrapped, "mj_model", None) or getattr(unwrapped, "model", None)
        if not isinstance(model, mujoco.MjModel):
            raise TypeError(f"{type(unwrapped).__name__} exposes no MuJoCo model (model or mj_model)")
        return model

    def _bind(self, entry: RandomizationEntry, index: int, seed: int, stream: int) -> _Binding:
        own = () if entry.seed is None else (int(entry.seed),)  # an entry's own stream, under the env's seed
        rng = np.random.default_rng([int(seed), int(stream), index, *own])
        kind, _, detail = entry.attribute.partition(".")
        if kind == "controller":
            controller = getattr(self.env.unwrapped, "controller", None)
            if controller is None:
                raise ConfigError(
                    f"{entry.key}.attribute", entry.attribute, "an env with a Cartesian impedance controller"
                )
            return _Binding(entry, rng, [entry.attribute], default=np.array([getattr(controller.gains, detail)]))
        if kind == "sensor":
            keys = [key for key in self.observation_space.spaces if re.fullmatch(entry.target, key)]
            if not keys:
                raise ConfigError(
                    f"{entry.key}.target",
                    entry.target,
                    "an observation key (pattern) matching one of " + ", ".join(self.observation_space.spaces),
                )
            return _Binding(entry, rng, [entry.attribute], keys=keys)
        if kind == "actuation":
            if detail == "period_jitter" and not hasattr(self.env.unwrapped, "n_substeps"):
                raise ConfigError(f"{entry.key}.attribute", entry.attribute, "an env with a physics sub-step count")
            return _Binding(entry, rng, [entry.attribute])
        return self._bind_model_array(entry, rng)

    def _bind_model_array(self, entry: RandomizationEntry, rng: np.random.Generator) -> _Binding:
        model = self.model
        prefix = entry.attribute.split("_", 1)[0]
        if not hasattr(model, entry.attribute):
            raise ConfigError(f"{entry.key}.attribute", entry.attribute, "an attribute of mujoco.MjModel")
        objtype, count = OBJECT_TYPES[prefix]
        names = [mujoco.mj_id2name(model, objtype, i) or "" for i in range(getattr(model, count))]
        matched = [i for i, name in enumerate(names) if re.fullmatch(entry.target, name)]
        if not matched:
            shown = ", ".join(n for n in names if n)[:300]
            raise ConfigError(
                f"{entry.key}.target", entry.target, f"a name (pattern) of a {prefix} in the model: {shown}"
            )
        if prefix == "dof":
            rows = [model.jnt_dofadr[i] + k for i in matched for k in range(DOFS_PER_JOINT[int(model.jnt_type[i])])]
            labels = [f"{names[i]}[{k}]" for i in matched for k in range(DOFS_PER_JOINT[int(model.jnt_type[i])])]
        else:
            rows, labels = matched, [names[i] for i in matched]
        array = getattr(model, entry.attribute)
        array2d = array.reshape(array.shape[0], -1)
        columns = np.arange(array2d.shape[1]) if entry.columns is None else np.asarray(entry.columns)
        if columns.max() >= array2d.shape[1]:
            raise ConfigError(f"{entry.key}.columns", entry.columns, f"column indices below {array2d.shape[1]}")
        rows = np.asarray(rows)
        return _Binding(
            entry, rng, labels, array=array2d, rows=rows, columns=columns, default=array2d[np.ix_(rows, columns)].copy()
        )

    # ----------------------------------------------------------------- sampling
    def set_training_step(self, step: int) -> None:
        """Where the curricula are (defaults to this wrapper's own step count)."""
        self.steps = step

    def random_state(self) -> list[dict[str, Any]]:
        """Where each entry's draws are (numpy generator states, JSON-able): a checkpoint keeps it, so a resumed run
        draws on instead of replaying its first episodes' samples."""
        return [binding.rng.bit_generator.state for binding in self._bindings]

    def load_random_state(self, states: list[dict[str, Any]]) -> None:
        """Draw on from :meth:`random_state`'s ``states`` (another set of entries: ValueError)."""
        if len(states) != len(self._bindings):
            raise ValueError(f"{len(states)} randomization streams saved; this env draws {len(self._bindings)}")
        for binding, state in zip(self._bindings, states):
            binding.rng.bit_generator.state = state

    def _resample(self, binding: _Binding, value: np.ndarray | None = None) -> None:
        entry = binding.entry
        shape = binding.default.shape if binding.default is not None else (1,)
        if value is None:
            size = 1 if entry.shared else int(np.prod(shape))
            value = (
                np.broadcast_to(entry.sample(binding.rng, size, self.steps), shape)
                if entry.shared
                else entry.sample(binding.rng, size, self.steps).reshape(shape)
            )
        value = np.broadcast_to(np.asarray(value, float), shape)
        if binding.default is not None:
            value = {"absolute": value, "scale": binding.default * value, "additive": binding.default + value}[
                entry.mode
            ]
        if entry.clamp is not None:
            value = np.clip(value, *entry.clamp)
        self._check(binding, value)
        binding.value = np.array(value, dtype=float)
        self._sampled = None
        self._apply(binding)

    def _check(self, binding: _Binding, value: np.ndarray) -> None:
        entry = binding.entry
        name = entry.attribute.partition(".")[2] or entry.attribute
        must_be_positive = entry.attribute in NON_NEGATIVE or entry.attribute.startswith(
            ("controller.", "sensor.", "actuation.")
        )
        if must_be_positive and (value < 0).any():
            raise ConfigError(
                f"{entry.key}.range",
                entry.range,
                f"values that keep {name} >= 0; sampled {float(value.min()):.4g} (narrow the range or add a clamp)",
            )

    def _apply(self, binding: _Binding) -> None:
        kind, _, detail = binding.entry.attribute.partition(".")
        if binding.array is not None:
            binding.array[np.ix_(binding.rows, binding.columns)] = binding.value
        elif kind == "controller":
            controller = self.env.unwrapped.controller
            gains = {g: getattr(controller.gains, g) for g in CONTROLLER_GAINS}
            controller.set_gains(type(controller.gains)(**{**gains, detail: float(binding.value[0])}))

    def sampled_values(self) -> dict[str, dict[str, float]]:
        """{entry name: {object (and column) label: value}} of the current samples (one shared dict until
        the next sample: read it, do not modify it)."""
        if self._sampled is not None:
            return self._sampled
        out = {}
        for binding in self._bindings:
            value = binding.value.reshape(len(binding.labels), -1)
            if binding.array is None or binding.array.shape[1] == 1:  # one number per object: no column index
                out[binding.entry.name] = {label: float(v[0]) for label, v in zip(binding.labels, value)}
            else:
                out[binding.entry.name] = {
                    f"{label}[{c}]": float(x)
                    for label, v in zip(binding.labels, value)
                    for c, x in zip(binding.columns, v)
                }
        self._sampled = out
        return out

    def fix(self, name: str, value: float) -> None:
        """Hold entry ``name`` at ``value`` (after its mode) instead of sampling it, for sweeps."""
        for binding in self._bindings:
            if binding.entry.name == name:
                binding.entry = RandomizationEntry(
                    **{
                        **binding.entry.__dict__,
                        "frequency": "startup",
                        "distribution": "uniform",
                        "range": [value, value],
                        "curriculum": None,
                    }
                )
                self._resample(binding, np.array(value))
                return
        raise KeyError(name)

    def _sensor_value(self, name: str) -> tuple[_Binding, float] | None:
        for binding in self._bindings:
            if binding.entry.attribute == name:
                return binding, float(binding.value[0])
        return None

    # ----------------------------------------------------------------- gym API
    def reset(self, **kwargs):
        for binding in self._bindings:
            if binding.entry.frequency != "startup":
                self._resample(binding)
        self._apply_substeps()
        self.episode_steps = 0
        self._delay_queue.clear()
        obs, info = self.env.reset(**kwargs)
        return self._observe(obs), {**info, "randomization": self.sampled_values()}

    def step(self, action):
        for binding in self._bindings:
            frequency = binding.entry.frequency
            if isinstance(frequency, int) and self.episode_steps and self.episode_steps % frequency == 0:
                self._resample(binding)
        self._apply_substeps()
        obs, reward, terminated, truncated, info = self.env.step(self._delayed(np.asarray(action, np.float32)))
        self.steps += 1
        self.episode_steps += 1
        return self._observe(obs), reward, terminated, truncated, {**info, "randomization": self.sampled_values()}

    def _delayed(self, action: np.ndarray) -> np.ndarray:
        found = self._sensor_value("actuation.action_delay")
        delay = round(found[1]) if found else 0
        if not delay:
            return action
        if not self._delay_queue:
            self._delay_queue.extend([action] * delay)  # the first action is held until the delay has passed
        self._delay_queue.append(action)
        while len(self._delay_queue) > delay + 1:
            self._delay_queue.popleft()
        return self._delay_queue.popleft()

    def _apply_substeps(self) -> None:
        found = self._sensor_value("actuation.period_jitter")
        if found is None:
            return
        binding, jitter = found
        scale = 1.0 + binding.rng.uniform(-jitter, jitter)
        self.env.unwrapped.n_substeps = max(1, round(self._base_substeps * scale))

    def _observe(self, obs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = dict(obs)
        for binding in self._bindings:
            kind, _, detail = binding.entry.attribute.partition(".")
            if kind != "sensor":
                continue
            value = float(binding.value[0])
            for key in binding.keys:
                out[key] = corrupt(out[key], detail, value, binding.rng)
        return out


def corrupt(observation: np.ndarray, kind: str, value: float, rng: np.random.Generator) -> np.ndarray:
    """One sensor corruption of a vector (float) or HxWx3 uint8 image observation."""
    if observation.dtype != np.uint8:
        if kind != "state_noise":
            raise ValueError(f"sensor.{kind} applies to images, not to a vector observation")
        return (observation + rng.normal(0.0, value, observation.shape)).astype(observation.dtype)
    image = observation.astype(np.float32)
    if kind == "state_noise":
        raise ValueError("sensor.state_noise applies to vector observations, not to images")
    if kind == "image_noise":
        image = image + rng.normal(0.0, value, image.shape)
    elif kind == "blur" and value > 0:
        import cv2

        image = cv2.GaussianBlur(image, (0, 0), sigmaX=value)
    elif kind == "brightness":
        image = image * value
    elif kind == "contrast":
        image = (image - image.mean()) * value + image.mean()
    return np.clip(image, 0, 255).astype(np.uint8)
