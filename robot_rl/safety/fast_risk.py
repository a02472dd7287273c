"""The fast-loop risk model: a learned critic the safety node evaluates every tick, before the hard layer.

The policy-rate filter (:mod:`robot_rl.safety.filter` in the actor, 10 Hz) sees the policy's observation. The fast
loop (``robot_rl.ros.safety_node``, 500 Hz-1 kHz) sees only the arm: this module defines what it feeds a risk model
from that, a small numpy MLP, its loaders, and :class:`FastRiskFilter`, which makes the decision with the same
:class:`~robot_rl.safety.filter.SafetyFilter` (line search, recovery, hysteresis, dwell, deadline, bypass).

Feature layout (:data:`LAYOUT_VERSION` 1; every vector in the robot base frame). The state, :data:`STATE_FEATURES`,
19 values:

=================  =====  ==========================================================================================
``tcp_position``   0:3    measured TCP position, m
``tcp_rotvec``     3:6    measured TCP orientation (TCP -> base) as a rotation vector, rad, angle in [0, pi] (tool
                          straight down is near pi, where the axis' sign may flip: train on this same convention)
``tcp_linear``     6:9    TCP linear velocity, m/s, finite difference of the measured positions
``tcp_angular``    9:12   TCP angular velocity, rad/s, finite difference of the measured orientations
``force``          12:15  measured external force, N
``torque``         15:18  measured external torque, N m
``gripper``        18     the gripper command last sent, -1 open .. 1 closed
=================  =====  ==========================================================================================

The action, :data:`DELTA_FEATURES`, 7 values: the candidate command as a delta from the measured state, in physical
units (not normalised): ``delta_position`` 0:3 (target - measured, m), ``delta_rotvec`` 3:6 (rotation vector of
R_target R_measured^T, rad), ``delta_gripper`` 6 (target - last sent gripper command). The model's input is the
state followed by the delta, :data:`INPUT_WIDTH` = 26 columns, then C >= 0 columns of **task context** (up to
:data:`MAX_CONTEXT`): a compact summary of the task state the fast loop cannot measure, given once per policy step
(the sim tasks give the keep-out zone's corners where it is now and its velocity,
:meth:`~robot_rl.sim.panda_env.PandaTaskEnv.safety_context`; C is the first layer's inputs less 26). Input
normalisation is folded into the first layer.

Model: ``[(W0, b0), ..., (Wn, bn)]``, W_i of shape (in, out), ReLU or tanh after every layer but the last, whose
single output is a logit: risk = sigmoid(logit) in [0, 1]. Stored as an ``.npz`` (``W0``, ``b0``, ..., ``activation``
"relu" | "tanh", ``layout``, optional ``version``) read with ``allow_pickle=False``; every array is checked (names,
float32/float64, finite, shapes that chain from :data:`INPUT_WIDTH` to 1, a bounded size) and a bad one raises
:class:`FastRiskError` naming what is wrong.

Candidates scored in one batch when the commanded delta alone is risky or the filter is engaged
(:class:`FastRiskFilter`; otherwise the commanded delta is scored alone): the commanded delta scaled by ``scales`` (the
line search over its translation and rotation; the gripper is kept), then the recovery candidates: hold the
measured pose, retreat ``retreat_distance`` along the measured external force (the direction the hard layer
retreats in: with the push, away from the contact) and, with ``escape_step`` > 0, steps of that length along
+-x, +-y, +-z. A model that is missing, raises, returns NaN or misses its CPU-time deadline, or an arm state older
than the hard layer's ``state_timeout``, or a model that reads task context the loop was not given (or of another
width), is bypassed: the command passes unchanged, and the hard layer (always applied after this) alone protects
the arm.
"""

from __future__ import annotations

import io
import math
import threading
import time
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from robot_rl.core.config import ConfigError, is_integer, is_number, require_all, settings_of, yaml_defaults
from robot_rl.core.folders import write_new_file
from robot_rl.core.geometry import matrix_from_rotvec, rotvec_from_matrix

from .filter import FilterResult, FilterSettings, SafetyFilter
from .hard_limits import ArmState, Command, Violation

try:  # the forward pass in C (robot_rl/safety/_mlp.c), built when robot_rl is installed with a C compiler
    from ._mlp import forward as native_forward
    from ._mlp import score_candidates as native_score_candidates
    from ._mlp import score_command as native_score_command
except ImportError:  # no compiler at install: the same pass in numpy
    native_forward = native_score_candidates = native_score_command = None
FORWARD = "c" if native_forward is not None else "numpy"  # how FastRiskModel computes, for logs and benchmarks

LAYOUT_VERSION = 1
STATE_FEATURES = (  # (name, width, unit), in order
    ("tcp_position", 3, "m"),
    ("tcp_rotvec", 3, "rad"),
    ("tcp_linear", 3, "m/s"),
    ("tcp_angular", 3, "rad/s"),
    ("force", 3, "N"),
    ("torque", 3, "N m"),
    ("gripper", 1, "command units"),
)
DELTA_FEATURES = (("delta_position", 3, "m"), ("delta_rotvec", 3, "rad"), ("delta_gripper", 1, "command units"))
STATE_WIDTH = sum(width for _, width, _ in STATE_FEATURES)  # 19
DELTA_WIDTH = sum(width for _, width, _ in DELTA_FEATURES)  # 7
INPUT_WIDTH = STATE_WIDTH + DELTA_WIDTH  # 26
FORCE = slice(12, 15)  # where the force sits in the state
ACTIVATIONS = ("relu", "tanh")
MAX_LAYERS = 8
MAX_WIDTH = 1024
MAX_CONTEXT = 64  # task-context columns after the 26
MAX_PARAMETERS = 250_000  # 2 x 128 hidden is 20,000: a model this size still fits a 1 kHz tick
MAX_BYTES = 16 * 2**20  # an .npz file or weights message, also unpacked
MIN_TWIST_DT = 2e-4  # s: poses closer together than this (two received in one burst) are not differenced


class FastRiskError(ValueError):
    """A fast-loop risk model (file, message or weights dict) is malformed; the text says what was expected."""


def feature_slices(layout: Sequence[tuple[str, int, str]]) -> dict[str, slice]:
    """``{name: slice}`` of a feature layout (:data:`STATE_FEATURES` or :data:`DELTA_FEATURES`)."""
    slices, start = {}, 0
    for name, width, _ in layout:
        slices[name] = slice(start, start + width)
        start += width
    return slices


# ----------------------------------------------------------------------------- features
class TcpMotion:
    """The measured TCP pose as features, and its twist by finite difference: position (m), rotation vector (rad),
    linear (m/s) and angular (rad/s) velocity, base frame, as :attr:`features` (12,) (the state's first 12 values).

    A pose closer than ``MIN_TWIST_DT`` to the one the twist was last differenced from (two poses of one burst of
    received messages) updates the pose but keeps the twist, measured over the longer span at the next pose."""

    def __init__(self) -> None:
        self.features = np.zeros(12)
        self._reference: tuple[np.ndarray, np.ndarray, float] | None = None  # (position, rotation, time s)

    def update(self, pos: np.ndarray, rot: np.ndarray, t: float) -> None:
        """A measured pose: position (3,) m and rotation (3, 3) TCP -> base, measured at ``t`` s (one clock)."""
        features = self.features.copy()
        features[0:3], features[3:6] = pos, rotvec_from_matrix(rot)
        if self._reference is None:
            self._reference = (pos, rot, t)
        else:
            before, turned_from, then = self._reference
            dt = t - then
            if dt >= MIN_TWIST_DT:
                features[6:9] = (pos - before) / dt
                features[9:12] = turn_between(rot, turned_from)
                features[9:12] /= dt
                self._reference = (pos, rot, t)
            elif dt < 0:  # a clock that went back (a restarted sim): start again
                features[6:12] = 0.0
                self._reference = (pos, rot, t)
        self.features = features  # one assignment: a reader sees the old features or the new, never half of each


def fast_state(
    motion: np.ndarray, force: np.ndarray, torque: np.ndarray, gripper: float, context: np.ndarray | tuple = ()
) -> np.ndarray:
    """The state of :data:`STATE_FEATURES` (19,) float32 from :attr:`TcpMotion.features` (12,), the external force
    (N) and torque (N m) and the gripper command last sent (-1 open .. 1 closed), all base frame; then ``context``
    (C,) when given (the model's input before the delta: one numpy call for both)."""
    return np.concatenate((motion, force, torque, (gripper,), context), dtype=np.float32)


def command_delta(arm: ArmState, command: Command, gripper: float) -> np.ndarray:
    """The delta of :data:`DELTA_FEATURES` (7,) from the measured ``arm`` to ``command`` (m, rad, gripper units
    from ``gripper``, the command last sent), base frame."""
    (tx, ty, tz), (mx, my, mz) = command.pos.tolist(), arm.pos.tolist()
    return np.array((tx - mx, ty - my, tz - mz, *turn_between(command.rot, arm.rot), command.gripper - gripper))


def tick_features(state: np.ndarray, arm: ArmState, handed: Command, gripper: float, context: np.ndarray) -> np.ndarray:
    """A tick's row as it is recorded (26 + C,) float32: the fast ``state`` (:func:`fast_state`), the delta of the
    command the hard layer was ``handed`` from the measured ``arm`` (:func:`command_delta`, ``gripper`` the command
    last sent), then the task ``context`` (C,): what a fast critic learns from, labelled by what followed."""
    features = np.empty(INPUT_WIDTH + context.size, np.float32)
    features[:STATE_WIDTH] = state
    features[STATE_WIDTH:INPUT_WIDTH] = command_delta(arm, handed, gripper)
    features[INPUT_WIDTH:] = context
    return features


def turn_between(target: np.ndarray, measured: np.ndarray) -> tuple[float, float, float]:
    """The rotation vector (rad, base frame) of R_target R_measured^T, as :func:`rotvec_from_matrix` gives it, on
    Python floats: the fast loop computes it every tick, where numpy's per-call overhead on 3x3 arrays dominates."""
    (a0, a1, a2), (a3, a4, a5), (a6, a7, a8) = target.tolist()
    (b0, b1, b2), (b3, b4, b5), (b6, b7, b8) = measured.tolist()
    trace = a0 * b0 + a1 * b1 + a2 * b2 + a3 * b3 + a4 * b4 + a5 * b5 + a6 * b6 + a7 * b7 + a8 * b8
    # the antisymmetric part of M = A B^T, M[i][j] = (row i of A) . (row j of B): axis * sin(angle)
    x = 0.5 * ((a6 * b3 + a7 * b4 + a8 * b5) - (a3 * b6 + a4 * b7 + a5 * b8))
    y = 0.5 * ((a0 * b6 + a1 * b7 + a2 * b8) - (a6 * b0 + a7 * b1 + a8 * b2))
    z = 0.5 * ((a3 * b0 + a4 * b1 + a5 * b2) - (a0 * b3 + a1 * b4 + a2 * b5))
    angle = math.acos(min(max((trace - 1.0) / 2.0, -1.0), 1.0))
    if angle < 1e-6:
        return x, y, z
    if math.pi - angle < 1e-4:  # sin(angle) ~ 0: the axis from the symmetric part
        x, y, z = rotvec_from_matrix(target @ measured.T).tolist()
        return x, y, z
    scale = angle / math.sin(angle)
    return x * scale, y * scale, z * scale


def command_from_delta(arm: ArmState, delta: np.ndarray, gripper: float, stamp: float) -> Command:
    """The command a pose delta (m, rad; base frame) from the measured ``arm`` stands for, with ``gripper`` and
    ``stamp`` (s) passed through."""
    dx, dy, dz, rx, ry, rz = np.asarray(delta).tolist()[:6]  # on Python floats: fewer numpy calls in the tick
    px, py, pz = arm.pos.tolist()
    return Command(np.array((px + dx, py + dy, pz + dz)), matrix_from_rotvec((rx, ry, rz)) @ arm.rot, gripper, stamp)


# ----------------------------------------------------------------------------- the model
class FastRiskModel:
    """A small MLP over (state, delta, task context) -> risk in [0, 1], float32, torch-free.

    ``__call__(state (19 + C,), deltas (K, 7)) -> (K,)`` scores every candidate in one batch, the state followed by the
    :attr:`context_width` C context values. Every numpy call costs 2-4 us of Python on a 2-core machine, more than
    the arithmetic of a 128-wide layer, so the whole pass is one call into C (``robot_rl/safety/_mlp.c``, built at
    install; :attr:`native`) where it was built; the safety node's tick also builds its input there, from the arm's
    and the command's arrays (:meth:`score_command`, :meth:`score_candidates`). The numpy pass (the reference; without
    a compiler) makes few calls: each layer is one matrix product on an input with a trailing column of ones (the
    bias folded in as the weight's last row), and the activation writes into the next layer's input; these buffers
    are kept per batch size and per thread. Constructing one checks the layers (:func:`check_layers`)."""

    def __init__(self, layers: Sequence[tuple[np.ndarray, np.ndarray]], activation: str = "relu"):
        check_layers(layers, activation)
        self.native = native_forward is not None  # the pass in C (see FORWARD); False: numpy
        self.layers = [(np.ascontiguousarray(w, np.float32), np.ascontiguousarray(b, np.float32)) for w, b in layers]
        self.activation = activation
        first, first_bias = self.layers[0]
        self.context_width = first.shape[0] - INPUT_WIDTH
        # rows in the order of the input buffer: state, context, delta, then the bias (against the ones column)
        rows = (first[:STATE_WIDTH], first[INPUT_WIDTH:], first[STATE_WIDTH:INPUT_WIDTH], first_bias[None])
        self._weights = (  # each layer's weights then bias row: the C pass takes the tuple as it is
            np.ascontiguousarray(np.concatenate(rows)),
            *(np.ascontiguousarray(np.concatenate((w, b[None]))) for w, b in self.layers[1:]),
        )
        self._local = threading.local()  # per thread: {K: the layers' input buffers}

    @property
    def parameters(self) -> int:
        return sum(w.size + b.size for w, b in self.layers)

    @property
    def hidden(self) -> list[int]:
        """The widths of the hidden layers."""
        return [w.shape[1] for w, _ in self.layers[:-1]]

    def _inputs(self, rows: int) -> list[np.ndarray]:
        """Each layer's input buffer for ``rows`` candidates, its last column ones."""
        buffers = getattr(self._local, "buffers", None)
        if buffers is None:
            buffers = self._local.buffers = {}
        inputs = buffers.get(rows)
        if inputs is None:
            inputs = buffers[rows] = [np.ones((rows, weight.shape[0]), np.float32) for weight in self._weights]
        return inputs

    def score_command(
        self, motion: np.ndarray, arm: ArmState, command: Command, gripper: float, context: np.ndarray, row: np.ndarray
    ) -> float | None:
        """The risk of ``command`` alone, from :attr:`TcpMotion.features` ``motion`` (12,), the measured ``arm``, the
        gripper command last sent and the task ``context`` (C,) float32 (empty for a model without context), in one
        call into C (:attr:`native` models only): what ``self(fast_state(...), command_delta(...)[None])`` gives. The
        model's input, (26 + C,) float32, is written to ``row`` (for :meth:`score_candidates`). None, and ``row``
        unwritten, when the command is within 1e-4 rad of a half turn from the measured orientation."""
        return native_score_command(
            self._weights, motion, arm.force, arm.torque, gripper, context, arm.pos, arm.rot, command.pos,
            command.rot, command.gripper, row, self.activation == "tanh",
        )  # fmt: skip

    def score_candidates(
        self, row: np.ndarray, factors: np.ndarray, recoveries: np.ndarray, candidates: np.ndarray, risks: np.ndarray
    ) -> None:
        """Score the candidates of ``row``'s command (:meth:`score_command`) in one call into C: writes
        ``candidates`` (S + R, 7), the delta times each row of ``factors`` (S, 7) then ``recoveries`` (R, 7), and
        their ``risks`` (S + R,); all float32 (:attr:`native` models only)."""
        native_score_candidates(self._weights, row, factors, recoveries, candidates, risks, self.activation == "tanh")

    def __call__(self, state: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        if not isinstance(deltas, np.ndarray) or deltas.ndim != 2:
            deltas = np.reshape(deltas, (-1, DELTA_WIDTH))
        inputs = self._inputs(len(deltas))
        first, width = inputs[0], STATE_WIDTH + self.context_width
        first[:, :width] = state  # a state of another width raises: the filter bypasses the model
        first[:, width:-1] = deltas
        if self.native:
            risks = np.empty(len(deltas), np.float32)
            native_forward(self._weights, first, risks, self.activation == "tanh")
            return risks
        x = first @ self._weights[0]
        relu = self.activation == "relu"
        for weight, layer_input in zip(self._weights[1:], inputs[1:]):
            hidden = layer_input[:, :-1]
            if relu:
                np.maximum(x, 0.0, out=hidden)
            else:
                np.tanh(x, out=hidden)
            x = layer_input @ weight
        # the sigmoid on Python floats (a handful of them: cheaper than four numpy calls), through tanh: no overflow
        return np.array([0.5 + 0.5 * math.tanh(0.5 * logit) for logit in x.reshape(-1).tolist()], np.float32)

    # ------------------------------------------------------------------ arrays, files, messages
    def to_arrays(self, version: int | None = None) -> dict[str, np.ndarray]:
        """``{"W0", "b0", ..., "activation", "layout"[, "version"]}``: what :meth:`from_arrays` reads."""
        arrays: dict[str, np.ndarray] = {}
        for index, (weight, bias) in enumerate(self.layers):
            arrays[f"W{index}"], arrays[f"b{index}"] = weight, bias
        arrays["activation"], arrays["layout"] = np.array(self.activation), np.array(LAYOUT_VERSION)
        if version is not None:
            arrays["version"] = np.array(version, np.int64)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, Any], source: str = "weights") -> tuple[FastRiskModel, int]:
        """(model, version) from a weights dict (``to_arrays``' keys; ``version`` defaults to 0), checked: a bad one
        raises :class:`FastRiskError` naming ``source`` and what is wrong."""
        try:
            names = set(arrays)
            count = sum(1 for name in names if name.startswith("W"))
            layer_names = {f"{kind}{i}" for i in range(count) for kind in "Wb"}
            unexpected = sorted(names - layer_names - {"activation", "layout", "version"})
            if unexpected:
                raise FastRiskError(
                    f"unexpected arrays {unexpected[:5]}; expected W0, b0, W1, b1, ..., activation, layout "
                    "and optionally version"
                )
            missing = sorted((layer_names | {"W0", "b0", "layout"}) - names)
            if missing:
                raise FastRiskError(f"missing arrays {missing[:5]}")
            layout = _integer("layout", arrays["layout"])
            if layout != LAYOUT_VERSION:
                raise FastRiskError(
                    f"layout={layout}: a model for another feature layout; this robot_rl reads layout {LAYOUT_VERSION}"
                )
            version = _integer("version", arrays["version"]) if "version" in names else 0
            activation = np.asarray(arrays.get("activation", "relu"))
            if activation.dtype.kind != "U" or activation.shape != () or str(activation) not in ACTIVATIONS:
                raise FastRiskError(f"activation={activation!r}; expected one of {', '.join(ACTIVATIONS)}")
            layers = [(np.asarray(arrays[f"W{i}"]), np.asarray(arrays[f"b{i}"])) for i in range(count)]
            return cls(layers, str(activation)), version
        except FastRiskError as error:
            raise FastRiskError(f"{source}: {error}") from None

    @classmethod
    def load(cls, path: str | Path) -> tuple[FastRiskModel, int]:
        """(model, version) of an ``.npz`` file (:meth:`save`), checked."""
        path = Path(path)
        try:
            data = path.read_bytes() if path.stat().st_size <= MAX_BYTES else None
        except OSError as error:
            raise FastRiskError(f"{path}: cannot be read ({error.strerror or error})") from None
        if data is None:
            raise FastRiskError(f"{path}: larger than {MAX_BYTES} bytes")
        return cls.from_arrays(read_npz(data, str(path)), str(path))

    def save(self, path: str | Path, version: int = 0) -> None:
        """Write the model as a new ``.npz`` file (FileExistsError when ``path`` exists: nothing is overwritten)."""
        write_new_file(path, self.to_bytes(version))

    def to_bytes(self, version: int) -> bytes:
        """An uncompressed ``.npz`` of :meth:`to_arrays` with ``version``: a file's or a weights message's bytes."""
        buffer = io.BytesIO()
        np.savez(buffer, **self.to_arrays(version))
        return buffer.getvalue()

    @classmethod
    def from_bytes(
        cls, data: bytes | bytearray | memoryview, source: str = "weights message"
    ) -> tuple[FastRiskModel, int]:
        """(model, version) of the bytes of an ``.npz`` (e.g. a ``std_msgs/UInt8MultiArray``'s data), checked."""
        return cls.from_arrays(read_npz(data, source), source)


def read_npz(data: bytes | bytearray | memoryview, source: str) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` of at most ``MAX_BYTES`` (also unpacked: no zip bombs), without pickle."""
    if len(data) > MAX_BYTES:
        raise FastRiskError(f"{source}: {len(data)} bytes, more than the limit of {MAX_BYTES}")
    try:
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
        if unpacked > MAX_BYTES:
            raise FastRiskError(f"{source}: {unpacked} bytes unpacked, more than the limit of {MAX_BYTES}")
        with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except FastRiskError:
        raise
    except Exception as error:  # noqa: BLE001 - not a zip, not .npy members, object arrays (pickle), truncated
        raise FastRiskError(f"{source}: not an npz archive of plain arrays ({type(error).__name__}: {error})") from None


def _integer(name: str, value: Any) -> int:
    array = np.asarray(value)
    if array.shape != () or array.dtype.kind not in "iu" or int(array) < 0:
        raise FastRiskError(f"{name}={value!r}; expected an integer >= 0")
    return int(array)


def check_layers(layers: Sequence[tuple[np.ndarray, np.ndarray]], activation: str) -> None:
    """Raise :class:`FastRiskError` unless ``layers`` is an MLP this module runs: 1..``MAX_LAYERS`` pairs of
    float32/float64 finite (W (in, out), b (out,)), the first taking ``INPUT_WIDTH`` inputs (plus up to
    ``MAX_CONTEXT`` context inputs), each the previous one's outputs, the last giving 1; widths up to ``MAX_WIDTH``,
    ``MAX_PARAMETERS`` in all."""
    if activation not in ACTIVATIONS:
        raise FastRiskError(f"activation={activation!r}; expected one of {', '.join(ACTIVATIONS)}")
    if not 1 <= len(layers) <= MAX_LAYERS:
        raise FastRiskError(f"{len(layers)} layers; expected 1 to {MAX_LAYERS}")
    width, parameters = INPUT_WIDTH, 0
    for index, (weight, bias) in enumerate(layers):
        last = index == len(layers) - 1
        for name, array in ((f"W{index}", weight), (f"b{index}", bias)):
            array = np.asarray(array)
            if array.dtype not in (np.float32, np.float64):
                raise FastRiskError(f"{name} is {array.dtype}; expected float32 or float64")
        weight, bias = np.asarray(weight), np.asarray(bias)
        if index == 0 and weight.ndim == 2 and INPUT_WIDTH <= weight.shape[0] <= INPUT_WIDTH + MAX_CONTEXT:
            width = weight.shape[0]  # the 26 inputs and the task context's
        if weight.ndim != 2 or weight.shape[0] != width:
            expected = (
                f"[{INPUT_WIDTH} to {INPUT_WIDTH + MAX_CONTEXT}, out] (the {INPUT_WIDTH} inputs of layout "
                f"{LAYOUT_VERSION}, then up to {MAX_CONTEXT} of task context)"
                if index == 0
                else f"[{width}, out] (W{index - 1}'s outputs)"
            )
            raise FastRiskError(f"W{index} has shape {list(weight.shape)}; expected {expected}")
        out = weight.shape[1]
        if last and out != 1:
            raise FastRiskError(f"W{index} has {out} outputs; the last layer gives one logit")
        if not 1 <= out <= MAX_WIDTH:
            raise FastRiskError(f"W{index} has {out} outputs; expected 1 to {MAX_WIDTH}")
        if bias.shape != (out,):
            raise FastRiskError(f"b{index} has shape {list(bias.shape)}; expected [{out}] (W{index}'s outputs)")
        parameters += weight.size + bias.size
        if parameters > MAX_PARAMETERS:
            raise FastRiskError(f"more than {MAX_PARAMETERS} parameters: too large for the fast loop")
        if not (np.isfinite(weight).all() and np.isfinite(bias).all()):
            raise FastRiskError(f"W{index} or b{index} has non-finite values")
        width = out


# ----------------------------------------------------------------------------- settings
@yaml_defaults("settings/safety.yaml", "safety.fast_critic", frozen=True)
class FastCriticSettings:
    """``safety.fast_critic`` of the config: the safety node's learned fast-loop filter."""

    enabled: bool
    weights: str | None  # .npz of the starting model; None: hard layer only until the weights topic brings one
    threshold_on: float  # engage above this risk of the commanded delta ...
    threshold_off: float  # ... release after ``dwell`` s below this one
    dwell: float  # s
    scales: tuple[float, ...]  # line search over the delta's translation and rotation
    escape_step: float  # m: steps along +-x, +-y, +-z as recovery candidates too (0: none)
    retreat_distance: float  # m along the measured external force
    deadline_us: float  # us of the tick thread's CPU time in the model; slower: bypassed
    report_period: float  # s between the node's count reports
    sim_rate_hz: float | None  # Hz of the tick in a MuJoCo task's control substeps (robot-rl train)
    learn: bool  # the learner fits the model online to the ticks the sim's fast loop records (fast_fit.*)
    learn_every: int  # online steps between two fits
    learn_updates: int  # gradient steps per fit
    pretrain_store: str | None  # with learn: episode store whose ticks the online learner starts from and keeps
    probe: float  # sim: share of policy steps whose ticks send a random candidate command instead of the policy's
    record_ticks: bool  # the node graph: the safety node publishes its ticks and the actor sends them with its steps

    def __post_init__(self) -> None:
        checks = {
            "enabled": (isinstance(self.enabled, bool), "true or false"),
            "weights": (
                self.weights is None or (isinstance(self.weights, str) and self.weights.strip() != ""),
                "null or the path of an .npz file (robot_rl.safety.fast_risk.FastRiskModel.save)",
            ),
            "dwell": (is_number(self.dwell) and self.dwell >= 0, "seconds >= 0"),
            "escape_step": (is_number(self.escape_step) and 0 <= self.escape_step <= 0.1, "metres in [0, 0.1]"),
            "retreat_distance": (
                is_number(self.retreat_distance) and 0 <= self.retreat_distance <= 0.1,
                "metres in [0, 0.1]",
            ),
            "deadline_us": (
                is_number(self.deadline_us) and 0 < self.deadline_us <= 100_000,
                "microseconds in (0, 1e5]",
            ),
            "report_period": (is_number(self.report_period) and self.report_period > 0, "a positive number of seconds"),
            "learn": (isinstance(self.learn, bool), "true or false"),
            "record_ticks": (isinstance(self.record_ticks, bool), "true or false"),
            "learn_every": (is_integer(self.learn_every) and self.learn_every >= 1, "an integer >= 1 (online steps)"),
            "learn_updates": (is_integer(self.learn_updates) and self.learn_updates >= 1, "an integer >= 1"),
            "pretrain_store": (
                self.pretrain_store is None
                or (isinstance(self.pretrain_store, str) and self.pretrain_store.strip() != "" and self.learn),
                "null, or with learn=true the path of an episode store with fast-loop ticks",
            ),
            "probe": (is_number(self.probe) and 0 <= self.probe <= 1, "a share of policy steps in [0, 1]"),
            "sim_rate_hz": (
                self.sim_rate_hz is None or (is_number(self.sim_rate_hz) and self.sim_rate_hz > 0),
                "null or a positive rate in Hz (a multiple of the task's control rate dividing its physics rate)",
            ),
            "threshold_on": (is_number(self.threshold_on), "a probability in (0, 1]"),
            "threshold_off": (is_number(self.threshold_off), "a probability <= threshold_on"),
            "scales": (
                isinstance(self.scales, tuple) and all(is_number(s) for s in self.scales),
                "a list of factors in [0, 1], the first 1.0",
            ),
        }
        require_all("safety.fast_critic", self, checks)
        self.filter_settings(1000.0)  # thresholds and scales: named as safety.fast_critic.<key> when wrong

    @property
    def records_ticks(self) -> bool:
        """In the node graph the safety node publishes its ticks and the actor sends them with its transitions:
        asked for (``record_ticks``), or needed by the learner (``learn``)."""
        return self.record_ticks or self.learn

    def filter_settings(self, rate_hz: float) -> FilterSettings:
        """The :class:`FilterSettings` of a loop ticking at ``rate_hz`` (``dwell`` s in ticks, the deadline in s)."""
        renamed = {"dwell_steps": "dwell", "deadline_s": "deadline_us"}
        try:
            return FilterSettings(
                threshold_on=self.threshold_on,
                threshold_off=self.threshold_off,
                dwell_steps=math.ceil(self.dwell * rate_hz),
                scales=tuple(self.scales),
                escape_step=self.escape_step,
                deadline_s=self.deadline_us * 1e-6,
                gripper_last=True,
            )
        except ConfigError as error:
            key = renamed.get(error.key.rpartition(".")[2], error.key.rpartition(".")[2])
            raise ConfigError(f"safety.fast_critic.{key}", getattr(self, key), error.expected) from None


def fast_critic_settings(values: Mapping[str, Any] | None) -> FastCriticSettings:
    """``safety.fast_critic`` (a mapping, or None for the defaults) as checked settings; an unknown key or a bad
    value raises :class:`ConfigError` naming ``safety.fast_critic.<key>``."""
    values = dict(values or {})
    if isinstance(values.get("scales"), list):
        values["scales"] = tuple(values["scales"])
    return settings_of("safety.fast_critic", FastCriticSettings, values)


def fast_critic_config(cfg) -> FastCriticSettings:
    """``safety.fast_critic`` of a whole config (an OmegaConf DictConfig; absent: the defaults) as checked
    settings."""
    block = OmegaConf.select(cfg, "safety.fast_critic")
    if block is not None and not OmegaConf.is_dict(block):
        raise ConfigError("safety.fast_critic", block, "a mapping of the fast critic's settings")
    return fast_critic_settings(None if block is None else OmegaConf.to_container(block, resolve=True))


def load_fast_model(settings: FastCriticSettings) -> tuple[FastRiskModel | None, int]:
    """(model, version) of ``settings.weights`` (None, 0 without a file); an unreadable or malformed file raises
    :class:`ConfigError` naming ``safety.fast_critic.weights``."""
    if settings.weights is None:
        return None, 0
    try:
        return FastRiskModel.load(Path(settings.weights).expanduser())
    except FastRiskError as error:
        raise ConfigError("safety.fast_critic.weights", settings.weights, f"a fast-loop risk model ({error})") from None


def fast_risk_filter(settings: FastCriticSettings, rate_hz: float, state_timeout: float) -> FastRiskFilter | None:
    """The fast-loop filter of ``settings`` ticking at ``rate_hz`` with its starting model (None when disabled; no
    ``weights`` file: no model, bypassed); a weights file that is missing or malformed raises :class:`ConfigError`.
    ``state_timeout``: s after which the arm state is stale (the hard layer's)."""
    if not settings.enabled:
        return None
    model, version = load_fast_model(settings)
    return FastRiskFilter(settings, rate_hz, state_timeout, model, version)


# ----------------------------------------------------------------------------- the decision
@dataclass
class FastDecision:
    """What the fast filter made of one tick's command."""

    command: Command  # to pass to the hard layer: the one given, or the scaled-down or recovery one
    risk: float  # of the commanded delta, in [0, 1]; NaN when bypassed
    filtered: bool  # the command was changed
    bypass: str | None  # why the model was not used: one of BYPASS_REASONS; None when it was
    seconds: float  # CPU time in the model (s)


BYPASS_REASONS = ("no_model", "stale_state", "no_context", "deadline", "error")
NO_CONTEXT = np.zeros(0, np.float32)  # the task context a model without context inputs is given
FAST_RISK_KEY = "safety.fast_risk_model"  # in published weights (in-process): (FastRiskModel, version)


def decision_flags(decision: FastDecision) -> Violation:
    """The tick's risk flags of a decision: ``RISK_FILTERED`` when it changed the command, ``RISK_BYPASSED`` when
    the model was not used (the hard layer alone applies)."""
    if decision.bypass is not None:
        return Violation.RISK_BYPASSED
    return Violation.RISK_FILTERED if decision.filtered else Violation.NONE


class FastRiskFilter:
    """The fast loop's learned filter: :class:`FastRiskModel` + :class:`~robot_rl.safety.filter.SafetyFilter` on the
    commanded delta, with the recovery candidates hold, retreat along the force and (``escape_step``) escapes.

    :attr:`current` is ``(model, version)`` or None; :meth:`swap` replaces it with one assignment, so a model swapped
    in between ticks is used whole from the next tick on. ``clock`` times the model (default: CPU time of the
    calling thread, so being preempted does not count against the model's deadline)."""

    def __init__(
        self,
        settings: FastCriticSettings,
        rate_hz: float,
        state_timeout: float,
        model: FastRiskModel | None = None,
        version: int = 0,
        clock=time.thread_time,
    ):
        self.settings, self.state_timeout = settings, state_timeout
        self.current: tuple[FastRiskModel, int] | None = None if model is None else (model, version)
        self.motion = TcpMotion()
        self.context = np.zeros(0, np.float32)  # the task context of the last policy step (see set_context)
        self._row = np.zeros(INPUT_WIDTH, np.float32)  # the model's input of the tick's command (_native_step)
        filter_settings = settings.filter_settings(rate_hz)
        self.filter = SafetyFilter(_no_model, filter_settings, recoveries=self._recoveries, clock=clock)
        escape = settings.escape_step
        self._recovery_rows = np.zeros((2 + (6 if escape else 0), DELTA_WIDTH), np.float32)  # hold, retreat, escapes
        for axis in range(3 if escape else 0):
            self._recovery_rows[2 + 2 * axis : 4 + 2 * axis, axis] = (escape, -escape)

    @property
    def candidate_count(self) -> int:
        """Candidates scored when engaged: the scaled commands, hold, retreat and the escapes."""
        return len(self.filter.settings.scales) + len(self._recovery_rows)

    def swap(self, model: FastRiskModel, version: int) -> None:
        self.current = (model, version)

    def set_context(self, context: np.ndarray) -> None:
        """The task context (C,) the model reads after the arm's state from now on (one assignment); a model that
        reads context of another width is bypassed (``no_context``), one that reads none ignores it."""
        self.context = np.asarray(context, np.float32).reshape(-1)

    def _recoveries(self, state: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """The recovery candidates of a tick's fast ``state`` and commanded ``delta`` (:meth:`_recovery_rows_of`)."""
        return self._recovery_rows_of(state[FORCE].tolist(), delta[-1])

    def _recovery_rows_of(self, force: Sequence[float], gripper_delta: float) -> np.ndarray:
        """Hold the measured pose, retreat ``retreat_distance`` m along the measured ``force`` (N, base frame; hold
        when there is none), the escape steps; each with the commanded ``gripper_delta``: (R, 7) float32."""
        rows = self._recovery_rows.copy()
        rows[:, -1] = gripper_delta
        fx, fy, fz = force
        norm = math.sqrt(fx * fx + fy * fy + fz * fz)
        if norm > 1e-6:
            scale = self.settings.retreat_distance / norm
            rows[1, 0:3] = (fx * scale, fy * scale, fz * scale)
        return rows

    def step(self, arm: ArmState, command: Command, gripper: float, now: float) -> FastDecision:
        """Score ``command`` (base frame) against the measured ``arm`` and decide what goes on to the hard layer.
        ``gripper``: the gripper command last sent; ``now``: s on the clock of ``arm.stamp``. The motion features
        are those of the last :meth:`TcpMotion.update` on :attr:`motion`."""
        current = self.current
        if current is None:
            return FastDecision(command, math.nan, False, "no_model", 0.0)
        if not now - arm.stamp <= self.state_timeout:
            return FastDecision(command, math.nan, False, "stale_state", 0.0)
        context, width = self.context, getattr(current[0], "context_width", 0)  # (any (state, deltas) -> risks runs)
        if width and width != context.size:
            return FastDecision(command, math.nan, False, "no_context", 0.0)
        model = current[0]
        if getattr(model, "native", False):
            decision = self._native_step(model, arm, command, gripper, context if width else NO_CONTEXT)
            if decision is not None:
                return decision
        # a model without context inputs runs on the arm's state alone, whatever the task gives
        state = fast_state(self.motion.features, arm.force, arm.torque, gripper, context if width else ())
        self.filter.risk = model
        return self._decision(arm, command, self.filter(state, command_delta(arm, command, gripper)))

    def _native_step(
        self, model: FastRiskModel, arm: ArmState, command: Command, gripper: float, context: np.ndarray
    ) -> FastDecision | None:
        """The tick in C, the choice in :class:`SafetyFilter`: the command alone is scored, which decides most
        ticks (:meth:`SafetyFilter.passes_alone`), then, when it does not (a risky command, NaN, late), every
        candidate (:meth:`SafetyFilter.decide`). The decisions of the Python path, in one or two calls into C
        instead of some forty numpy calls; None for a command half a turn from the measured orientation, which the
        Python path decides."""
        clock, row = self.filter.clock, self._row
        if row.size != INPUT_WIDTH + context.size:
            row = self._row = np.zeros(INPUT_WIDTH + context.size, np.float32)
        started = clock()
        risk = model.score_command(self.motion.features, arm, command, gripper, context, row)
        seconds = clock() - started
        if risk is None:
            return None
        if self.filter.passes_alone(risk, seconds):
            return FastDecision(command, risk, False, None, seconds)
        values = row.tolist()
        recoveries = self._recovery_rows_of(values[FORCE], values[-1])
        factors = self.filter.line_search_factors(DELTA_WIDTH)
        candidates = np.empty((len(factors) + len(recoveries), DELTA_WIDTH), np.float32)
        risks = np.empty(len(candidates), np.float32)
        started = clock()
        model.score_candidates(row, factors, recoveries, candidates, risks)
        seconds += clock() - started
        return self._decision(arm, command, self.filter.decide(candidates[0], candidates, risks.tolist(), seconds))

    def _decision(self, arm: ArmState, command: Command, result: FilterResult) -> FastDecision:
        """What goes on to the hard layer after the filter's ``result`` for ``command``."""
        if result.bypassed:
            reason = "deadline" if result.seconds > self.filter.settings.deadline_s else "error"
            return FastDecision(command, math.nan, False, reason, result.seconds)
        if not result.intervened:
            return FastDecision(command, result.risk, False, None, result.seconds)
        chosen = command_from_delta(arm, result.action, command.gripper, command.stamp)
        return FastDecision(chosen, result.risk, True, None, result.seconds)


def _no_model(state: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    raise RuntimeError("no fast risk model")  # replaced by the current model before every call
