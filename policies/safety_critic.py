"""Learned safety critic (Recovery RL / SQRL / Bresa): the risk of a constraint violation.

Q_risk(s, a) is the discounted probability that a constraint is violated from state s after
action a: the target is y = c + (1 - c) (1 - terminated) gamma_risk max(Q1', Q2')(s', a') with
c = 1 on a violation, two heads and the pessimistic max in the target, a' the action taken next
in the data (an on-policy estimate that follows the behaviour as online data replaces old data).
It bootstraps through a time limit, as the task critic does: only termination ends the risk (a
violation-free episode cut by its time limit has not shown that nothing can go wrong after it).
Where no next action was taken (the last step of a truncated or closed episode), a' is the action
a itself: the behaviour at s' is unknown, and the action just taken is its best stand-in at 10 Hz.
Batches are class-balanced: ``violation_fraction`` of the rows are violations when the buffer has
any. Trained with binary cross-entropy on sigmoid outputs, offline from recorded episodes
(``safety_flags`` in the episode store) and online from new transitions.

The critic sees the ``state`` vector only (proprioception and object state), never images, so
that its inference fits a fast control loop: :meth:`SafetyCritic.risk_model` exports the weights
to :class:`RiskModel`, a numpy-only forward pass.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from robot_rl.config import is_integer, is_number, require_all, yaml_defaults
from robot_rl.policies.base import soft_update
from robot_rl.policies.networks import CriticEnsemble


@yaml_defaults("settings/safety.yaml", "safety.critic")
class SafetyCriticConfig:
    hidden: list[int]  # small: it runs in the 1 kHz filter loop
    discount: float  # gamma_risk: how far ahead a violation counts
    lr: float
    tau: float
    batch_size: int
    violation_fraction: float  # share of violations in each batch (when there are any)

    def validate(self) -> None:
        number = {key: is_number(getattr(self, key)) for key in ("discount", "lr", "tau", "violation_fraction")}
        checks = {
            "discount": (number["discount"] and 0.0 <= self.discount < 1.0, "a number in [0, 1)"),
            "lr": (number["lr"] and self.lr > 0, "a positive number"),
            "tau": (number["tau"] and 0.0 < self.tau <= 1.0, "a number in (0, 1]"),
            "batch_size": (is_integer(self.batch_size) and self.batch_size >= 2, "an integer >= 2"),
            "violation_fraction": (
                number["violation_fraction"] and 0.0 < self.violation_fraction < 1.0,
                "a number in (0, 1)",
            ),
        }
        require_all("safety.critic", self, checks)


class SafetyCritic:
    """Twin-head risk critic over (state, action)."""

    def __init__(self, state_dim: int, action_dim: int, config: SafetyCriticConfig | None = None, seed: int = 0):
        self.config = config or SafetyCriticConfig()
        self.config.validate()
        torch.manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.state_dim, self.action_dim = state_dim, action_dim
        self.critic = CriticEnsemble(state_dim, action_dim, self.config.hidden, members=2)
        self.target = copy.deepcopy(self.critic).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.critic.parameters(), lr=self.config.lr)
        self.updates = 0

    def risk(self, state: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Pessimistic (max over heads) risk in [0, 1], (B,)."""
        return torch.sigmoid(self.critic(state, action)).max(0).values

    def sample(self, buffer, size: int | None = None) -> dict[str, Any]:
        """A class-balanced batch (``size`` rows, default ``batch_size``) with the next action of
        each row, from ``buffer`` (a ReplayBuffer, whose tensors may live on a GPU): numpy arrays."""
        valid = buffer.valid_indices().cpu().numpy()
        if not len(valid):
            raise ValueError("the safety critic's buffer is empty")
        violating = valid[buffer.cost[valid].cpu().numpy() > 0]
        size = size or self.config.batch_size
        take = round(self.config.violation_fraction * size) if len(violating) else 0
        index = np.concatenate(
            [
                violating[self.rng.integers(0, len(violating), take)] if take else np.zeros(0, int),
                valid[self.rng.integers(0, len(valid), size - take)],
            ]
        )
        actions, mask = (tensor.cpu().numpy() for tensor in buffer.action_sequences(index, 2))
        action = buffer.action[index].cpu().numpy()
        next_index = (index + 1) % buffer.capacity  # every stored transition's next observation
        return {
            "state": buffer.obs["state"][index].cpu().numpy(),
            "action": action,
            "cost": buffer.cost[index].cpu().numpy(),
            "next_state": buffer.obs["state"][next_index].cpu().numpy(),
            "next_action": np.where(mask[:, 1:], actions[:, 1], action),  # no next step: the same action again
            "terminated": buffer.terminated[index].cpu().numpy(),
        }

    def targets(self, batch: dict[str, Any]) -> torch.Tensor:
        """y = c + (1 - c) (1 - terminated) gamma_risk max(Q1', Q2')(s', a'), (B,) in [0, 1]."""
        cost = torch.as_tensor(batch["cost"] > 0, dtype=torch.float32)
        with torch.no_grad():
            next_risk = (
                torch.sigmoid(self.target(torch.as_tensor(batch["next_state"]), torch.as_tensor(batch["next_action"])))
                .max(0)
                .values
            )
            continues = torch.as_tensor(~batch["terminated"], dtype=torch.float32)
            return cost + (1 - cost) * continues * self.config.discount * next_risk

    def update(self, batch: dict[str, Any]) -> dict[str, float]:
        state, action = torch.as_tensor(batch["state"]), torch.as_tensor(batch["action"])
        cost = torch.as_tensor(batch["cost"] > 0, dtype=torch.float32)
        target = self.targets(batch)
        logits = self.critic(state, action)
        loss = F.binary_cross_entropy_with_logits(logits, target.expand_as(logits))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        soft_update(self.critic, self.target, self.config.tau)
        self.updates += 1
        with torch.no_grad():
            risk = torch.sigmoid(logits).max(0).values
            violation = cost > 0
            gap = (risk[violation].mean() - risk[~violation].mean()).item() if violation.any() else float("nan")
        return {"safety_loss": loss.item(), "safety_risk_mean": risk.mean().item(), "safety_risk_gap": gap}

    def risk_model(self) -> RiskModel:
        return RiskModel.from_critic(self.critic, self.state_dim)

    def state_dict(self) -> dict[str, Any]:
        return {
            "critic": self.critic.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.updates,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.critic.load_state_dict(state["critic"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = state["updates"]
        self.rng.bit_generator.state = state["rng"]


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
    def from_critic(cls, critic: CriticEnsemble, state_dim: int) -> RiskModel:
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
