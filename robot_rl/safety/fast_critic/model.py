"""The fast critic's model: a small torch-free MLP over (state, delta, task context) -> risk, its checks and its
``.npz`` files and messages (read without pickle)."""

from __future__ import annotations

import io
import math
import threading
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.core.folders import write_new_file

from ..hard_limits import ArmState, Command
from .features import (
    ACTIVATIONS,
    DELTA_WIDTH,
    INPUT_WIDTH,
    LAYOUT_VERSION,
    MAX_BYTES,
    MAX_CONTEXT,
    MAX_LAYERS,
    MAX_PARAMETERS,
    MAX_WIDTH,
    STATE_WIDTH,
)

try:  # the forward pass in C (robot_rl/safety/_mlp.c), built when robot_rl is installed with a C compiler
    from .._mlp import forward as native_forward
    from .._mlp import score_candidates as native_score_candidates
    from .._mlp import score_command as native_score_command
except ImportError:  # no compiler at install: the same pass in numpy
    native_forward = native_score_candidates = native_score_command = None

FORWARD = "c" if native_forward is not None else "numpy"  # how FastCriticModel computes, for logs and benchmarks


class FastCriticError(ValueError):
    """A fast-loop risk model (file, message or weights dict) is malformed; the text says what was expected."""


class FastCriticModel:
    """A small MLP over (state, delta, task context) -> risk in [0, 1], float32, torch-free.

    ``__call__(state (19 + C,), deltas (K, 7)) -> (K,)`` scores every candidate in one batch, the state followed by the
    :attr:`context_width` C context values. Every numpy call costs microseconds of Python, more than the
    arithmetic of a 128-wide layer (``benchmarks/safety_loop.py``), so the whole pass is one call into C (``robot_rl/safety/_mlp.c``, built at
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
    def from_arrays(cls, arrays: Mapping[str, Any], source: str = "weights") -> tuple[FastCriticModel, int]:
        """(model, version) from a weights dict (``to_arrays``' keys; ``version`` defaults to 0), checked: a bad one
        raises :class:`FastCriticError` naming ``source`` and what is wrong."""
        try:
            names = set(arrays)
            count = sum(1 for name in names if name.startswith("W"))
            layer_names = {f"{kind}{i}" for i in range(count) for kind in "Wb"}
            unexpected = sorted(names - layer_names - {"activation", "layout", "version"})
            if unexpected:
                raise FastCriticError(
                    f"unexpected arrays {unexpected[:5]}; expected W0, b0, W1, b1, ..., activation, layout "
                    "and optionally version"
                )
            missing = sorted((layer_names | {"W0", "b0", "layout"}) - names)
            if missing:
                raise FastCriticError(f"missing arrays {missing[:5]}")
            layout = _integer("layout", arrays["layout"])
            if layout != LAYOUT_VERSION:
                raise FastCriticError(
                    f"layout={layout}: a model for another feature layout; this robot_rl reads layout {LAYOUT_VERSION}"
                )
            version = _integer("version", arrays["version"]) if "version" in names else 0
            activation = np.asarray(arrays.get("activation", "relu"))
            if activation.dtype.kind != "U" or activation.shape != () or str(activation) not in ACTIVATIONS:
                raise FastCriticError(f"activation={activation!r}; expected one of {', '.join(ACTIVATIONS)}")
            layers = [(np.asarray(arrays[f"W{i}"]), np.asarray(arrays[f"b{i}"])) for i in range(count)]
            return cls(layers, str(activation)), version
        except FastCriticError as error:
            raise FastCriticError(f"{source}: {error}") from None

    @classmethod
    def load(cls, path: str | Path) -> tuple[FastCriticModel, int]:
        """(model, version) of an ``.npz`` file (:meth:`save`), checked."""
        path = Path(path)
        try:
            data = path.read_bytes() if path.stat().st_size <= MAX_BYTES else None
        except OSError as error:
            raise FastCriticError(f"{path}: cannot be read ({error.strerror or error})") from None
        if data is None:
            raise FastCriticError(f"{path}: larger than {MAX_BYTES} bytes")
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
    ) -> tuple[FastCriticModel, int]:
        """(model, version) of the bytes of an ``.npz`` (e.g. a ``std_msgs/UInt8MultiArray``'s data), checked."""
        return cls.from_arrays(read_npz(data, source), source)


def read_npz(data: bytes | bytearray | memoryview, source: str) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` of at most ``MAX_BYTES`` (also unpacked: no zip bombs), without pickle."""
    if len(data) > MAX_BYTES:
        raise FastCriticError(f"{source}: {len(data)} bytes, more than the limit of {MAX_BYTES}")
    try:
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
        if unpacked > MAX_BYTES:
            raise FastCriticError(f"{source}: {unpacked} bytes unpacked, more than the limit of {MAX_BYTES}")
        with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except FastCriticError:
        raise
    except Exception as error:  # noqa: BLE001 - not a zip, not .npy members, object arrays (pickle), truncated
        raise FastCriticError(
            f"{source}: not an npz archive of plain arrays ({type(error).__name__}: {error})"
        ) from None


def _integer(name: str, value: Any) -> int:
    array = np.asarray(value)
    if array.shape != () or array.dtype.kind not in "iu" or int(array) < 0:
        raise FastCriticError(f"{name}={value!r}; expected an integer >= 0")
    return int(array)


def check_layers(layers: Sequence[tuple[np.ndarray, np.ndarray]], activation: str) -> None:
    """Raise :class:`FastCriticError` unless ``layers`` is an MLP this module runs: 1..``MAX_LAYERS`` pairs of
    float32/float64 finite (W (in, out), b (out,)), the first taking ``INPUT_WIDTH`` inputs (plus up to
    ``MAX_CONTEXT`` context inputs), each the previous one's outputs, the last giving 1; widths up to ``MAX_WIDTH``,
    ``MAX_PARAMETERS`` in all."""
    if activation not in ACTIVATIONS:
        raise FastCriticError(f"activation={activation!r}; expected one of {', '.join(ACTIVATIONS)}")
    if not 1 <= len(layers) <= MAX_LAYERS:
        raise FastCriticError(f"{len(layers)} layers; expected 1 to {MAX_LAYERS}")
    width, parameters = INPUT_WIDTH, 0
    for index, (weight, bias) in enumerate(layers):
        last = index == len(layers) - 1
        for name, array in ((f"W{index}", weight), (f"b{index}", bias)):
            array = np.asarray(array)
            if array.dtype not in (np.float32, np.float64):
                raise FastCriticError(f"{name} is {array.dtype}; expected float32 or float64")
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
            raise FastCriticError(f"W{index} has shape {list(weight.shape)}; expected {expected}")
        out = weight.shape[1]
        if last and out != 1:
            raise FastCriticError(f"W{index} has {out} outputs; the last layer gives one logit")
        if not 1 <= out <= MAX_WIDTH:
            raise FastCriticError(f"W{index} has {out} outputs; expected 1 to {MAX_WIDTH}")
        if bias.shape != (out,):
            raise FastCriticError(f"b{index} has shape {list(bias.shape)}; expected [{out}] (W{index}'s outputs)")
        parameters += weight.size + bias.size
        if parameters > MAX_PARAMETERS:
            raise FastCriticError(f"more than {MAX_PARAMETERS} parameters: too large for the fast loop")
        if not (np.isfinite(weight).all() and np.isfinite(bias).all()):
            raise FastCriticError(f"W{index} or b{index} has non-finite values")
        width = out
