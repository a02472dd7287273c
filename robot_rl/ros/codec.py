"""Transitions and policy weights as bytes for ``std_msgs/UInt8MultiArray`` messages.

The payload is an uncompressed ``.npz`` archive (numpy arrays only, loaded with
``allow_pickle=False``, so a message can never execute code) plus a JSON header under the key
``__meta__``. A batch of transitions is stored column-wise: ``obs/<key>`` and ``next_obs/<key>``
stacked per observation key, scalars as 1-D arrays.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import torch

SCALARS = {"reward": np.float32, "terminated": bool, "truncated": bool, "intervened": bool, "demo": bool,
           "first": bool, "cost": np.float32, "filtered": bool, "success": bool, "violation": np.uint32}
VECTORS = ("action", "policy_action")


def pack(arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    header = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(buffer, __meta__=header, **arrays)
    return buffer.getvalue()


def unpack(data: bytes | bytearray | memoryview) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    with np.load(io.BytesIO(bytes(data)), allow_pickle=False) as archive:
        arrays = {key: archive[key] for key in archive.files}
    meta = json.loads(arrays.pop("__meta__").tobytes().decode())
    return arrays, meta


def encode_transitions(transitions: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> bytes:
    arrays: dict[str, np.ndarray] = {}
    for part in ("obs", "next_obs"):
        for key in transitions[0][part]:
            arrays[f"{part}/{key}"] = np.stack([t[part][key] for t in transitions])
    for key in VECTORS:
        arrays[key] = np.stack([np.asarray(t.get(key, t["action"]), np.float32) for t in transitions])
    for key, dtype in SCALARS.items():
        arrays[key] = np.array([t.get(key, 0) for t in transitions], dtype=dtype)
    return pack(arrays, {"kind": "transitions", "count": len(transitions), **(meta or {})})


def decode_transitions(data: bytes) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    arrays, meta = unpack(data)
    if meta.get("kind") != "transitions":
        raise ValueError(f"expected a transitions message, got {meta.get('kind')!r}")
    transitions = []
    for i in range(meta["count"]):
        t: dict[str, Any] = {"obs": {}, "next_obs": {}}
        for key, column in arrays.items():
            part, _, name = key.partition("/")
            if name:
                t[part][name] = column[i]
            else:
                t[key] = column[i] if key in VECTORS else column[i].item()
        transitions.append(t)
    return transitions, meta


def encode_weights(weights: dict[str, Any], meta: dict[str, Any]) -> bytes:
    """Policy weights (``OffPolicyAgent.policy_state()`` tensors) and risk models (``to_arrays()``)."""
    arrays, risk_models = {}, []
    for key, value in weights.items():
        if torch.is_tensor(value):
            arrays[key] = value.detach().cpu().numpy()
        else:
            risk_models.append(key)
            arrays.update({f"{key}//{name}": array for name, array in value.to_arrays().items()})
    return pack(arrays, {"kind": "weights", "risk_models": risk_models, **meta})


def decode_weights(data: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    from policies.safety_critic import RiskModel

    arrays, meta = unpack(data)
    if meta.get("kind") != "weights":
        raise ValueError(f"expected a weights message, got {meta.get('kind')!r}")
    weights: dict[str, Any] = {key: torch.from_numpy(value) for key, value in arrays.items() if "//" not in key}
    for key in meta["risk_models"]:
        prefix = key + "//"
        weights[key] = RiskModel.from_arrays({k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)})
    return weights, meta
