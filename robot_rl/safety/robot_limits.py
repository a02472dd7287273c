"""``robot.limits`` of the config: the hard layer's limits of one arm, in units of the arm, not of a tick.

Every robot config (``configs/robot/<arm>.yaml``) and the sim's default (``configs/settings/safety.yaml``) carry them; the
safety node turns them into the per-tick :class:`~robot_rl.safety.hard_limits.SafetyLimits` of its rate, and the sim
robot node holds its arm's targets inside the same workspace. Base frame, metres, radians, seconds:

================== =====================================================================================
``workspace``      ``[[x, y, z] low, [x, y, z] high]``: the box the TCP target stays in (m)
``cone_axis``      the tool z axis the cone is centred on, a base-frame direction (normalised here)
``cone_half_angle`` rad the tool z axis may tilt from ``cone_axis`` (0, pi/2)
``max_speed``      m/s the commanded TCP target may move
``max_rotation_rate`` rad/s it may turn
``max_gripper_rate`` gripper command units per s (the command runs from -1 open to 1 closed)
``max_force``      N of measured external force before the arm stops and retreats
``max_torque``     N m of measured external torque, likewise
``retreat_distance`` m the TCP backs off along the force
``command_timeout`` s without a command before the arm holds its measured pose
``state_timeout``  s without arm state before the node holds its last command
``max_lead``       m the target may lead the measured TCP position, or null (no bound): how far the arm goes on its
                   last target if the safety node dies
================== =====================================================================================
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from robot_rl.core.config import ConfigError, non_negative, positive

from .hard_limits import SafetyLimits

KEY = "robot.limits"
#: per-second rate of the config -> per-tick field of SafetyLimits
RATES = {
    "max_speed": "max_translation_step",
    "max_rotation_rate": "max_rotation_step",
    "max_gripper_rate": "max_gripper_step",
}
SCALARS = (
    "cone_half_angle",
    "max_force",
    "max_torque",
    "retreat_distance",
    "command_timeout",
    "state_timeout",
    *RATES,
)
VECTORS = ("workspace", "cone_axis")
OPTIONAL = ("max_lead",)  # null: no bound


def _vector(key: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        array = None
    if array is None or array.shape != shape or not np.all(np.isfinite(array)):
        raise ConfigError(f"{KEY}.{key}", value, f"finite numbers of shape {list(shape)}")
    return array


def safety_limits(limits: Mapping[str, Any], rate_hz: float) -> SafetyLimits:
    """The per-tick hard limits of a safety node ticking at ``rate_hz`` from ``robot.limits``; a missing, unknown or
    out-of-range key raises :class:`ConfigError` naming ``robot.limits.<key>``."""
    keys = {*VECTORS, *SCALARS, *OPTIONAL}
    if not isinstance(limits, Mapping):
        raise ConfigError(KEY, limits, f"a mapping with keys {sorted(keys)}")
    unknown, missing = set(limits) - keys, keys - set(limits)
    if unknown or missing:
        name = min(unknown or missing)
        raise ConfigError(f"{KEY}.{name}", limits.get(name), "not a limit" if unknown else "a value (it is missing)")
    positive("safety rate_hz", rate_hz)
    for key in SCALARS:
        (non_negative if key == "retreat_distance" else positive)(f"{KEY}.{key}", limits[key])
    lead = None if limits["max_lead"] is None else float(positive(f"{KEY}.max_lead", limits["max_lead"]))
    workspace, axis = _vector("workspace", limits["workspace"], (2, 3)), _vector("cone_axis", limits["cone_axis"], (3,))
    if np.any(workspace[0] >= workspace[1]):
        raise ConfigError(f"{KEY}.workspace", limits["workspace"], "[[x, y, z] low, [x, y, z] high] with low < high")
    if np.linalg.norm(axis) == 0:
        raise ConfigError(f"{KEY}.cone_axis", limits["cone_axis"], "a non-zero direction")
    if not 0 < limits["cone_half_angle"] < math.pi / 2:
        raise ConfigError(f"{KEY}.cone_half_angle", limits["cone_half_angle"], "radians in (0, pi/2)")
    return SafetyLimits(
        workspace_low=tuple(workspace[0].tolist()),
        workspace_high=tuple(workspace[1].tolist()),
        cone_axis=tuple(axis.tolist()),
        **{key: float(limits[key]) for key in SCALARS if key not in RATES},
        **{field: float(limits[key]) / rate_hz for key, field in RATES.items()},
        max_lead=lead,
    )


def workspace_of(limits: Mapping[str, Any]) -> np.ndarray:
    """``[[x, y, z] low, [x, y, z] high]`` (m, base frame) of ``robot.limits``, checked."""
    return np.stack(safety_limits(limits, 1.0).corners)
