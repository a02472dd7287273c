"""Transitions and policy weights as bytes for ``std_msgs/UInt8MultiArray`` messages, and their checks.

The payload is an uncompressed ``.npz`` archive (numpy arrays only, loaded with
``allow_pickle=False``, so a message can never execute code) plus a JSON header under the key
``__meta__`` (``kind``, ``codec`` = :data:`CODEC_VERSION`, ...). A batch of transitions is stored
column-wise: ``obs/<key>`` and ``next_obs/<key>`` stacked per observation key, scalars as 1-D arrays.

Anyone on the DDS domain can publish on our topics, so decoding is also validation: the payload
size, the archive's declared sizes (no zip bombs), the header, every column's name, dtype and shape
against the receiver's :class:`TransitionSchema` (or the actor's own weight shapes), and finite
values. Anything else raises :class:`MessageError` and the message is dropped.

Every transition travels in its delivery envelope (a :class:`~robot_rl.data.delivery_ledger.Numbered`) with where it
comes from (its :class:`~robot_rl.data.transition.Provenance`): ``actor`` (the sending actor's session id), ``seq``
(its position in that actor's stream, from 1), ``floor`` (the lowest ``seq`` the actor still holds), ``episode`` (the
episode's uid), ``step`` (its index in the episode) and ``stamp``. The learner uses them to drop duplicates of a
resend and to acknowledge delivery. A transition sent without a number travels as ``seq`` 0. A step's ``cost`` is
not sent: the receiver derives it from ``violation``.

A transition's streams (samples at their own rate during the step: the safety node's ticks, ``fast_features``,
``fast_risk``, ``fast_flags``, ``fast_violation``) travel as ``streams/<name>/values`` and ``streams/<name>/time``,
the batch's rows one after another, and ``streams/<name>/count``, each transition's rows; only the names of
:data:`STREAMS` are taken, with their dtype and width, times that never go back within a step, finite values (a
risk may be NaN: no critic).
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..safety.fast_critic import INPUT_WIDTH, MAX_CONTEXT
from ..safety.risk_model import RiskModel
from .delivery_ledger import Numbered
from .transition import Provenance, Transition

if TYPE_CHECKING:  # imported where weights are coded: the safety, sim and teleop nodes code transitions only
    import torch

CODEC_VERSION = 5  # 5: no cost column (derived from violation)
MAX_TRANSITIONS_BYTES = 64 * 2**20  # a batch of camera transitions is a few MB
MAX_WEIGHTS_BYTES = 256 * 2**20  # a pixel policy is a few MB (a frozen pretrained backbone is never sent)
MAX_BATCH = 10_000  # transitions per message
MAX_HEADER_BYTES = 64 * 2**10
UID_CHARS = 32

STEP = {  # the step's scalars (Transition's fields)
    "reward": np.float32,
    "terminated": np.bool_,
    "truncated": np.bool_,
    "intervened": np.bool_,
    "demo": np.bool_,
    "first": np.bool_,
    "filtered": np.bool_,
    "success": np.bool_,
    "violation": np.uint32,
}
NUMBERS = {"seq": np.int64, "floor": np.int64}  # the delivery envelope's (Numbered)
ORIGIN = {"step": np.int64, "stamp": np.float64}  # the provenance's scalars
SCALARS = {**STEP, **NUMBERS, **ORIGIN}
VECTORS = ("action", "policy_action")
IDS = ("actor", "episode")  # strings of the provenance: sender session id, episode uid
# the streams a transition may carry: name -> (dtype, None for one value per sample or (min, max) columns)
STREAMS = {
    "fast_features": (np.float32, (INPUT_WIDTH, INPUT_WIDTH + MAX_CONTEXT)),
    "fast_risk": (np.float32, None),
    "fast_flags": (np.uint32, None),
    "fast_violation": (np.uint32, None),
}
STREAM_PREFIX = "streams/"


class MessageError(ValueError):
    """A received message is malformed or not allowed; the text says what was expected."""


def bounded(name: str, size: int, limit: int) -> None:
    """Raise when a payload of ``size`` bytes (or items) is over ``limit``."""
    if size > limit:
        raise MessageError(f"{name} has {size} bytes, more than the limit of {limit}")


@dataclass(frozen=True)
class TransitionSchema:
    """What the receiver's agent and store take: observation shapes (images uint8 HxWxC, the rest
    float32) and the action size. Transitions of any other layout are refused."""

    observation_shapes: dict[str, tuple[int, ...]]
    action_dim: int

    def obs_dtype(self, key: str) -> np.dtype:
        return np.dtype(np.uint8 if len(self.observation_shapes[key]) == 3 else np.float32)


# ----------------------------------------------------------------------------- archive
def pack(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    header = np.frombuffer(json.dumps({**meta, "codec": CODEC_VERSION}).encode(), dtype=np.uint8)
    np.savez(buffer, __meta__=header, **arrays)
    return buffer.getvalue()


def unpack(data: bytes | bytearray | memoryview, limit: int) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Arrays and header of a payload of at most ``limit`` bytes (also after decompression)."""
    bounded("payload", len(data), limit)
    try:
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
            declared = sum(info.file_size for info in archive.infolist())
        bounded("payload (unpacked)", declared, limit)
        with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except MessageError:
        raise
    except Exception as error:  # noqa: BLE001 - not a zip, not .npy members, object arrays (pickle), truncated
        raise MessageError(f"payload is not an npz archive of plain arrays ({type(error).__name__}: {error})") from None
    header = arrays.pop("__meta__", None)
    if header is None or header.dtype != np.uint8 or header.ndim != 1 or header.size > MAX_HEADER_BYTES:
        raise MessageError("payload has no valid __meta__ header")
    try:
        meta = json.loads(header.tobytes().decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MessageError(f"payload header is not JSON ({error})") from None
    if not isinstance(meta, dict):
        raise MessageError("payload header is not a JSON object")
    if meta.get("codec") != CODEC_VERSION:
        raise MessageError(f"payload codec={meta.get('codec')!r}; this robot_rl reads codec version {CODEC_VERSION}")
    return arrays, meta


def _check_kind(meta: dict[str, Any], kind: str) -> None:
    if meta.get("kind") != kind:
        raise MessageError(f"expected a {kind} message, got kind={meta.get('kind')!r}")


def _check_column(name: str, array: np.ndarray, dtype: Any, shape: tuple[int, ...]) -> None:
    if array.dtype != np.dtype(dtype) or array.shape != shape:
        raise MessageError(
            f"column {name} is {array.dtype}{list(array.shape)}; expected {np.dtype(dtype)}{list(shape)}"
        )
    if array.dtype.kind == "f" and not np.all(np.isfinite(array)):
        raise MessageError(f"column {name} has non-finite values")


# ----------------------------------------------------------------------------- transitions
def encode_transitions(delivered: list[Numbered], meta: dict[str, Any] | None = None) -> bytes:
    transitions = [n.transition for n in delivered]
    arrays: dict[str, np.ndarray] = {}
    for part in ("obs", "next_obs"):
        for key in getattr(transitions[0], part):
            arrays[f"{part}/{key}"] = np.stack([getattr(t, part)[key] for t in transitions])
    for key in VECTORS:
        arrays[key] = np.stack([np.asarray(getattr(t, key), np.float32) for t in transitions])
    for key, dtype in STEP.items():
        arrays[key] = np.array([getattr(t, key) for t in transitions], dtype=dtype)
    for key, dtype in NUMBERS.items():
        arrays[key] = np.array([getattr(n, key) for n in delivered], dtype=dtype)
    for key, dtype in ORIGIN.items():  # an unknown step index travels as 0
        arrays[key] = np.array([getattr(t.origin, key) or 0 for t in transitions], dtype=dtype)
    for key in IDS:
        arrays[key] = np.array([getattr(t.origin, key)[:UID_CHARS] for t in transitions], dtype=f"<U{UID_CHARS}")
    arrays.update(_encode_streams(transitions))
    return pack(arrays, {"kind": "transitions", "count": len(transitions), **(meta or {})})


def _encode_streams(transitions: list[Transition]) -> dict[str, np.ndarray]:
    names = sorted({name for t in transitions for name in (t.streams or {})})
    arrays = {}
    for name in names:
        parts = [(t.streams or {}).get(name) for t in transitions]
        present = [part for part in parts if part is not None]
        arrays[f"{STREAM_PREFIX}{name}/values"] = np.concatenate([np.asarray(values) for values, _ in present])
        arrays[f"{STREAM_PREFIX}{name}/time"] = np.concatenate([np.asarray(t, np.float64) for _, t in present])
        arrays[f"{STREAM_PREFIX}{name}/count"] = np.array([0 if p is None else len(p[1]) for p in parts], np.int64)
    return arrays


def _decode_streams(arrays: dict[str, np.ndarray], count: int) -> list[dict[str, tuple[np.ndarray, np.ndarray]] | None]:
    """Each transition's streams (None: none) from the ``streams/...`` columns, which are taken out of ``arrays``;
    checked against :data:`STREAMS`."""
    keys = [key for key in arrays if key.startswith(STREAM_PREFIX)]
    columns = {key[len(STREAM_PREFIX) :]: arrays.pop(key) for key in keys}
    names = sorted({key.rpartition("/")[0] for key in columns})
    per_transition: list[dict[str, tuple[np.ndarray, np.ndarray]]] = [{} for _ in range(count)]
    for name in names:
        if name not in STREAMS:
            raise MessageError(f"stream {name[:40]!r} is not one of {sorted(STREAMS)}")
        parts = {part: columns.get(f"{name}/{part}") for part in ("values", "time", "count")}
        if any(part is None for part in parts.values()):
            raise MessageError(f"stream {name} needs values, time and count")
        values, times, counts = parts["values"], parts["time"], parts["count"]
        dtype, widths = STREAMS[name]
        if counts.dtype != np.int64 or counts.shape != (count,) or np.any(counts < 0):
            raise MessageError(
                f"stream {name}: count is {counts.dtype}{list(counts.shape)}; expected {count} rows >= 0"
            )
        rows = int(counts.sum())
        if times.dtype != np.float64 or times.shape != (rows,) or not np.all(np.isfinite(times)):
            raise MessageError(f"stream {name}: time is {times.dtype}{list(times.shape)}; expected {rows} finite s")
        shaped = values.ndim == 1 if widths is None else values.ndim == 2 and widths[0] <= values.shape[1] <= widths[1]
        if values.dtype != np.dtype(dtype) or len(values) != rows or not shaped:
            raise MessageError(
                f"stream {name}: values are {values.dtype}{list(values.shape)}; expected {np.dtype(dtype)} with "
                f"{rows} rows{'' if widths is None else f' of {widths[0]}..{widths[1]} columns'}"
            )
        if values.dtype.kind == "f":
            finite = np.isfinite(values) | (np.isnan(values) if name == "fast_risk" else False)
            if not finite.all() or (name == "fast_risk" and np.any((values < 0) | (values > 1))):
                raise MessageError(f"stream {name} has values out of range (non-finite, or a risk outside [0, 1])")
        ends = np.cumsum(counts)
        for index, (start, end) in enumerate(zip(ends - counts, ends)):
            if end > start:
                if np.any(np.diff(times[start:end]) < 0):
                    raise MessageError(f"stream {name}: times go back within a step")
                per_transition[index][name] = (values[start:end], times[start:end])
    return [streams or None for streams in per_transition]


def decode_transitions(data: bytes, schema: TransitionSchema | None) -> tuple[list[Numbered], dict[str, Any]]:
    """Transitions of a payload, checked against ``schema`` (column set, dtypes, shapes, finite
    values); ``schema=None`` checks the framing only (for tools that read foreign recordings)."""
    arrays, meta = unpack(data, MAX_TRANSITIONS_BYTES)
    _check_kind(meta, "transitions")
    count = meta.get("count")
    if not isinstance(count, int) or isinstance(count, bool) or not 0 < count <= MAX_BATCH:
        raise MessageError(f"transitions count={count!r}; expected an integer in 1..{MAX_BATCH}")
    streams = _decode_streams(arrays, count)
    if schema is not None:
        expected = {
            f"{part}/{key}": (schema.obs_dtype(key), (count, *shape))
            for part in ("obs", "next_obs")
            for key, shape in schema.observation_shapes.items()
        }
        expected.update({key: (np.float32, (count, schema.action_dim)) for key in VECTORS})
        expected.update({key: (dtype, (count,)) for key, dtype in SCALARS.items()})
        expected.update({key: (np.dtype(f"<U{UID_CHARS}"), (count,)) for key in IDS})
        if set(arrays) != set(expected):
            missing, extra = sorted(set(expected) - set(arrays)), sorted(set(arrays) - set(expected))
            raise MessageError(f"transitions columns differ from this run's: missing {missing}, unexpected {extra}")
        for name, (dtype, shape) in expected.items():
            _check_column(name, arrays[name], dtype, shape)
    for key, column in arrays.items():
        if column.ndim == 0 or len(column) != count:
            raise MessageError(f"column {key} has shape {list(column.shape)}; expected {count} rows")
        if (key in SCALARS or key in IDS) and column.ndim != 1:
            raise MessageError(f"column {key} has shape {list(column.shape)}; expected one value a row")
    fields = {key.partition("/")[0] for key in arrays}
    if fields != {*VECTORS, *SCALARS, *IDS, "obs", "next_obs"}:  # without a schema: the framing only, but whole
        raise MessageError(f"transitions columns {sorted(fields)} are not those of a transition")
    # each column's rows once (arrays for observations and vectors, Python scalars otherwise), then one dict a row
    columns = []  # (part, name within obs/next_obs or "", rows)
    for key, column in arrays.items():
        part, _, name = key.partition("/")
        columns.append((part, name, list(column) if name or key in VECTORS else column.tolist()))
    transitions = []
    for i in range(count):
        t: dict[str, Any] = {"obs": {}, "next_obs": {}}
        for part, name, rows in columns:
            if name:
                t[part][name] = rows[i]
            else:
                t[part] = rows[i]
        numbers = {key: t.pop(key) for key in NUMBERS}
        origin = Provenance(**{key: t.pop(key) for key in (*ORIGIN, *IDS)})
        transitions.append(Numbered(Transition(**t, origin=origin, streams=streams[i]), **numbers))
    return transitions, meta


# ----------------------------------------------------------------------------- weights
def encode_weights(weights: dict[str, Any], meta: dict[str, Any]) -> bytes:
    """Policy weights (``OffPolicyAgent.policy_state()`` tensors) and risk models (``to_arrays()``)."""
    import torch

    arrays, risk_models = {}, []
    for key, value in weights.items():
        if torch.is_tensor(value):
            arrays[key] = value.detach().cpu().numpy()
        else:
            risk_models.append(key)
            arrays.update({f"{key}//{name}": array for name, array in value.to_arrays().items()})
    return pack(arrays, {"kind": "weights", "risk_models": risk_models, **meta})


def decode_weights(
    data: bytes, expected: dict[str, tuple[tuple[int, ...], np.dtype]], risk_input: tuple[int, int] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Weights of a payload that has exactly the tensors of ``expected`` ({name: (shape, dtype)},
    from the receiving agent's own ``policy_state()``), all finite. Risk models are rebuilt and
    must map a ``risk_input`` = (state_dim, action_dim) input to one finite risk; without
    ``risk_input`` a payload that carries one is refused."""
    import torch

    arrays, meta = unpack(data, MAX_WEIGHTS_BYTES)
    _check_kind(meta, "weights")
    names = meta.get("risk_models", [])
    if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
        raise MessageError(f"weights risk_models={names!r}; expected a list of names")
    tensors = {key: value for key, value in arrays.items() if "//" not in key}
    if set(tensors) != set(expected):
        missing, extra = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
        raise MessageError(f"weights differ from this agent's: missing {missing[:5]}, unexpected {extra[:5]}")
    for key, (shape, dtype) in expected.items():
        _check_column(key, tensors[key], dtype, tuple(shape))
    weights: dict[str, Any] = {key: torch.from_numpy(value) for key, value in tensors.items()}
    for key in names:
        if risk_input is None:
            raise MessageError(f"weights carry a risk model {key!r} this actor does not use")
        prefix = key + "//"
        parts = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
        weights[key] = _checked_risk_model(RiskModel, key, parts, *risk_input)
    if set(arrays) - set(tensors) - {k for k in arrays for name in names if k.startswith(name + "//")}:
        raise MessageError("weights carry arrays of no listed risk model")
    return weights, meta


def _checked_risk_model(risk_model_class, key: str, parts: dict[str, np.ndarray], state_dim: int, action_dim: int):
    for name, value in parts.items():
        if value.dtype.kind not in "fiu" or (value.dtype.kind == "f" and not np.all(np.isfinite(value))):
            raise MessageError(f"risk model {key}: {name} is not a finite numeric array")
    try:
        model = risk_model_class.from_arrays(parts)
        risk = model(np.zeros(state_dim, np.float32), np.zeros((1, action_dim), np.float32))
    except Exception as error:  # noqa: BLE001 - wrong layer names, inconsistent shapes
        raise MessageError(f"risk model {key} is malformed ({type(error).__name__}: {error})") from None
    if model.state_dim != state_dim or np.shape(risk) != (1,) or not np.all(np.isfinite(risk)):
        raise MessageError(f"risk model {key} does not map a ({state_dim} + {action_dim}) input to one finite risk")
    return model


def weight_shapes(policy_state: dict[str, torch.Tensor]) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``expected`` for :func:`decode_weights` from an agent's own ``policy_state()``."""
    return {key: (tuple(value.shape), value.detach().cpu().numpy().dtype) for key, value in policy_state.items()}
