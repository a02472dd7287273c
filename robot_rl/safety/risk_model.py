"""The safety filter's risk model as numpy: the learned safety critic's twin risk heads, exported from torch.

The filter (:mod:`robot_rl.safety.filter`) scores candidate actions with it at the actor's rate; the learner sends it
to the actor with the policy's weights (:mod:`robot_rl.data.wire`). No torch is needed to run it.
"""

from __future__ import annotations

import numpy as np


class RiskModel:
    """Numpy forward pass of the twin risk heads: Linear -> LayerNorm -> ReLU per layer, max of sigmoids.

    ``__call__(state (S,), actions (B, A))`` scores every candidate action at once (float32). The
    first layer of both heads is one matrix product, split into the state part (computed once)
    and the action part. A layer followed by a LayerNorm carries its ``scale`` and ``shift`` and
    has the norm's mean subtraction folded into its weight and bias (its outputs come out centred).
    ``layers`` holds these arrays as exported (``to_arrays``); the forward pass reads them through
    ``_plan``, built once: it runs in a 1 kHz filter loop, where each numpy call costs about a
    microsecond of Python, so it makes as few calls as it can.
    """

    def __init__(self, layers: list[dict[str, np.ndarray]], state_dim: int):
        self.layers, self.state_dim = layers, state_dim
        first = layers[0]
        self._members, _, self._width = first["weight"].shape
        self._state_weight, self._action_weight = first["state_weight"], first["action_weight"]
        self._first_bias = first["bias"].reshape(-1)  # (members * width,), the order of the stacked weights
        # per layer: (weight or None for the first, bias or None, 1/width column for the norm or None, scale, shift).
        # The first layer's output stays (B, members, width), contiguous, so its norm's scale and shift are (members,
        # width); later layers compute (members, B, width).
        self._plan = []
        for index, layer in enumerate(layers):
            weight, bias = (None, None) if index == 0 else (layer["weight"], layer["bias"])
            if "scale" in layer:
                width = layer["weight"].shape[-1]
                scale, shift = (
                    (layer["scale"], layer["shift"])
                    if index
                    else (layer["scale"].reshape(self._members, width), layer["shift"].reshape(self._members, width))
                )
                mean_column = np.full((width, 1), 1.0 / width, np.float32)
                self._plan.append((weight, bias, mean_column, scale, shift))
            else:
                self._plan.append((weight, bias, None, None, None))

    @classmethod
    def from_critic(cls, critic, state_dim: int) -> RiskModel:
        """The forward pass of a trained critic (:class:`~robot_rl.policies.networks.CriticEnsemble`: its ensemble
        linear layers, (members, in, out), each with the LayerNorm after it)."""
        layers, modules = [], list(critic.net)
        for index, module in enumerate(modules):
            if hasattr(module, "weight") and module.weight.dim() == 3:  # EnsembleLinear (members, in, out)
                layer = {
                    "weight": module.weight.detach().numpy().astype(np.float32),
                    "bias": module.bias.detach().numpy().astype(np.float32),
                }
                norm = modules[index + 1] if index + 1 < len(modules) else None
                if norm is not None and hasattr(norm, "scale"):
                    layer["scale"] = norm.scale.detach().numpy().astype(np.float32)
                    layer["shift"] = norm.shift.detach().numpy().astype(np.float32)
                    # LayerNorm's centring is linear: fold it into the layer (x W + b - mean = x W' + b')
                    layer["weight"] = layer["weight"] - layer["weight"].mean(-1, keepdims=True)
                    layer["bias"] = layer["bias"] - layer["bias"].mean(-1, keepdims=True)
                layers.append(layer)
        first = layers[0]
        members, _, width = first["weight"].shape
        stacked = first["weight"].transpose(1, 0, 2).reshape(-1, members * width)  # (in, members * width)
        first["state_weight"], first["action_weight"] = stacked[:state_dim], stacked[state_dim:]
        return cls(layers, state_dim)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Flat ``{"<layer>/<name>": array}`` (plus ``state_dim``), e.g. to send over a topic."""
        arrays = {f"{i}/{name}": value for i, layer in enumerate(self.layers) for name, value in layer.items()}
        return {**arrays, "state_dim": np.array(self.state_dim)}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> RiskModel:
        layers: list[dict[str, np.ndarray]] = []
        for key, value in arrays.items():
            if key == "state_dim":
                continue
            index, name = key.split("/")
            layers.extend({} for _ in range(int(index) + 1 - len(layers)))
            layers[int(index)][name] = value
        return cls(layers, int(arrays["state_dim"]))

    def __call__(self, state: np.ndarray, actions: np.ndarray) -> np.ndarray:
        actions = np.asarray(actions, np.float32)
        if actions.ndim == 1:
            actions = actions[None]
        x = actions @ self._action_weight  # (B, members * width)
        x += np.asarray(state, np.float32) @ self._state_weight + self._first_bias
        x = x.reshape(len(actions), self._members, self._width)  # (B, members, width)
        for index, (weight, bias, mean_column, scale, shift) in enumerate(self._plan):
            if weight is not None:
                x = np.matmul(x.transpose(1, 0, 2) if index == 1 else x, weight)  # (members, B, width)
                x += bias
            if mean_column is not None:
                _layer_norm_relu(x, mean_column, scale, shift)
        logits = np.maximum.reduce(x[..., 0], axis=0)  # the pessimistic head: the sigmoid is monotonic
        return 1.0 / (1.0 + np.exp(-logits))


def _layer_norm_relu(x: np.ndarray, mean_column: np.ndarray, scale: np.ndarray, shift: np.ndarray) -> None:
    """ReLU(LayerNorm(x)) over the last axis, in place, for an ``x`` that is already centred: the
    variance is one matrix product with the ``1/width`` column ``mean_column``."""
    deviation = np.matmul(x * x, mean_column)
    deviation += np.float32(1e-5)
    np.sqrt(deviation, out=deviation)
    x /= deviation
    x *= scale
    x += shift
    np.maximum(x, 0.0, out=x)
