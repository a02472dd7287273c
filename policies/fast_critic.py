"""Learning the fast-loop risk model from recorded ticks.

The safety node (and the sim's fast loop) scores commands with a
:class:`~robot_rl.safety.fast_critic.FastCriticModel`: a small MLP over the arm's own features and the commanded delta
(:data:`~robot_rl.safety.fast_critic.INPUT_WIDTH` = 26 columns, base frame, physical units, then the task context's C
columns when the task gives one). This module fits one to
the ticks an episode store keeps (``streams/fast_features`` and ``streams/fast_violation``, written when training ran
with ``safety.fast_critic.sim_rate_hz``):

- label of tick t: 1 when a constraint is violated at any of the ticks t .. t + ``horizon`` - 1 of its episode (the
  command handed to the hard layer at t leads to a violation within ``horizon`` ticks), else 0;
- loss: binary cross-entropy, the violating rows weighted up so both classes count the same (violations are rare);
- inputs standardised with the data's mean and spread, folded into the first layer on export, so the node computes
  on raw features.

``fit_fast_risk_model`` is torch on the CPU (a few thousand steps of a 2 x 128 MLP take seconds); the result is the
numpy model the node runs, saved as ``.npz`` by :meth:`FastCriticModel.save`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from robot_rl.core.config import is_integer, is_number, plain, require_all, settings_of, yaml_defaults
from robot_rl.safety.fast_critic import INPUT_WIDTH, MAX_CONTEXT, FastCriticModel


@yaml_defaults("settings/tools.yaml", "fast_critic", frozen=True)
class FastCriticFitSettings:
    """How to fit the fast-loop risk model (``fast_critic`` in the config)."""

    horizon: int  # ticks: a violation within this many ticks labels a tick risky (25 at 500 Hz: 50 ms)
    labels: str  # "any" | "graded" (horizon_labels)
    hidden: tuple[int, ...]
    updates: int
    batch_size: int
    lr: float
    activation: str

    def validate(self) -> None:
        checks = {
            "horizon": (is_integer(self.horizon) and self.horizon >= 1, "an integer >= 1 (ticks)"),
            "labels": (self.labels in LABELS, " or ".join(LABELS)),
            "hidden": (
                isinstance(self.hidden, tuple)
                and 1 <= len(self.hidden) <= 6
                and all(is_integer(width) and 1 <= width <= 1024 for width in self.hidden),
                "a list of 1 to 6 layer widths in [1, 1024]",
            ),
            "updates": (is_integer(self.updates) and self.updates >= 1, "an integer >= 1"),
            "batch_size": (is_integer(self.batch_size) and self.batch_size >= 1, "an integer >= 1"),
            "lr": (is_number(self.lr) and 0 < self.lr < 1, "a learning rate in (0, 1)"),
            "activation": (self.activation in ("relu", "tanh"), "relu or tanh"),
        }
        require_all("fast_critic", self, checks)


def fast_critic_fit_settings(block: Mapping[str, Any]) -> FastCriticFitSettings:
    """The checked :class:`FastCriticFitSettings` of the config's ``fast_critic`` block (its ``store`` and ``out`` aside;
    read as plain values, so a config's list of widths is a list)."""
    values = {key: value for key, value in plain(block).items() if key not in ("store", "out")}
    if isinstance(values.get("hidden"), (list, tuple)):
        values["hidden"] = tuple(values["hidden"])
    config = settings_of("fast_critic", FastCriticFitSettings, values)
    config.validate()
    return config


LABELS = ("any", "graded")


def horizon_labels(violation: np.ndarray, horizon: int, kind: str = "any") -> np.ndarray:
    """(T,) float32 labels of one episode's ticks from ``violation`` (T,) (non-zero = violated), looking ``horizon``
    ticks ahead (t .. t + horizon - 1; past the episode's end counts as safe):

    - ``any``: 1 where any of those ticks violates, else 0;
    - ``graded``: half that, plus half the share of those ticks that violate. Ticks with a violation ahead stay above
      0.5 and safe ones at 0, as with ``any``; but inside a violation, where every command is labelled 1 by ``any``,
      a command that leads out sooner is labelled lower, so a critic fitted to them ranks the ways out."""
    if kind not in LABELS:
        raise ValueError(f"labels={kind!r}; expected one of {', '.join(LABELS)}")
    violated = np.asarray(violation) != 0
    ahead = np.concatenate([violated, np.zeros(horizon - 1, bool)])
    windows = np.lib.stride_tricks.sliding_window_view(ahead, horizon)
    labels = windows.any(axis=1).astype(np.float32)
    if kind == "graded":
        labels = 0.5 * labels + 0.5 * windows.mean(axis=1, dtype=np.float32)
    return labels


class FastCriticLearner:
    """The fast-loop risk model learned from ticks as they come: episodes' ticks in a ring of ``capacity`` rows, a
    torch MLP trained on them, exported as the numpy :class:`FastCriticModel` the node runs.

    The inputs are standardised with the mean and spread of the rows held at the first :meth:`train` (kept after:
    the network's inputs keep their scale), folded into the first layer on :meth:`model`. The rows' width (26 plus
    the task context's C) is that of the first rows added, or ``context_width`` given up front; the network is
    built for it then."""

    def __init__(
        self, config: FastCriticFitSettings, capacity: int = 1_000_000, seed: int = 0, context_width: int | None = None
    ):
        config.validate()
        self.config, self.capacity, self.seed = config, int(capacity), seed
        self.features = np.zeros((self.capacity, 0), np.float32)
        self.labels = np.zeros(self.capacity, np.float32)
        self.size, self.cursor = 0, 0
        self.generator = torch.Generator().manual_seed(seed)
        self.net: nn.Sequential | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.mean: np.ndarray | None = None
        self.spread: np.ndarray | None = None
        self.loss = float("nan")
        if context_width is not None:
            self._build(INPUT_WIDTH + context_width)

    @property
    def width(self) -> int | None:
        """Columns of a row (26 + the task context's), None before the first rows."""
        return None if self.net is None else self.features.shape[1]

    def _build(self, width: int) -> None:
        if not INPUT_WIDTH <= width <= INPUT_WIDTH + MAX_CONTEXT:
            raise ValueError(f"rows of {width} columns; expected {INPUT_WIDTH} and up to {MAX_CONTEXT} of task context")
        self.features = np.zeros((self.capacity, width), np.float32)
        torch.manual_seed(self.seed)
        widths = [width, *self.config.hidden, 1]
        layers: list[nn.Module] = []
        for index, (inputs, outputs) in enumerate(itertools.pairwise(widths)):
            layers.append(nn.Linear(inputs, outputs))
            if index < len(widths) - 2:
                layers.append(nn.ReLU() if self.config.activation == "relu" else nn.Tanh())
        self.net = nn.Sequential(*layers)
        self.optimizer = torch.optim.Adam(self.net.parameters(), lr=self.config.lr)

    def add_episode(self, features: np.ndarray, violation: np.ndarray) -> None:
        """One episode's ticks: ``features`` (T, 26 + C) and ``violation`` (T,) (non-zero: violated), labelled with
        :func:`horizon_labels`."""
        self.add_rows(features, horizon_labels(violation, self.config.horizon, self.config.labels))

    def add_rows(self, features: np.ndarray, labels: np.ndarray) -> None:
        """Labelled rows, ``features`` (N, 26 + C) and ``labels`` (N,), into the ring (the oldest go when it is
        full); rows of another width than those held raise ValueError."""
        if self.net is None:
            self._build(features.shape[1])
        if features.shape[1] != self.width:
            raise ValueError(f"rows of {features.shape[1]} columns; this learner holds rows of {self.width}")
        features, labels = features[-self.capacity :], labels[-self.capacity :]  # more than fit: the newest
        slots = (self.cursor + np.arange(len(labels))) % self.capacity
        self.features[slots], self.labels[slots] = features, labels
        self.cursor = (self.cursor + len(labels)) % self.capacity
        self.size = min(self.size + len(labels), self.capacity)

    def train(self, updates: int) -> float:
        """``updates`` steps of class-balanced binary cross-entropy on the rows held; the last loss."""
        if not self.size:
            raise ValueError("no ticks to learn from")
        features, labels = self.features[: self.size], self.labels[: self.size]
        if self.mean is None:
            self.mean, self.spread = features.mean(0), np.maximum(features.std(0), 1e-6)
        positive = float(labels.mean())
        weight_of_positive = (1 - positive) / positive if 0 < positive < 1 else 1.0  # both classes count the same
        loss_fn = nn.BCEWithLogitsLoss(reduction="none")
        for _ in range(updates):
            rows = torch.randint(self.size, (self.config.batch_size,), generator=self.generator).numpy()
            x = torch.from_numpy((features[rows] - self.mean) / self.spread)
            target = torch.from_numpy(labels[rows])
            weights = 1.0 + (weight_of_positive - 1.0) * target
            loss = (loss_fn(self.net(x).squeeze(-1), target) * weights).mean()
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            self.loss = float(loss.detach())
        return self.loss

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed learner needs, as tensors and plain values (``torch.load(weights_only=True)``):
        the network, its optimizer, the standardisation and the rows held."""
        if self.net is None:
            return {"width": 0}
        return {
            "width": self.width,
            "net": self.net.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "standardisation": None if self.mean is None else torch.from_numpy(np.stack([self.mean, self.spread])),
            "features": torch.from_numpy(self.features[: self.size].copy()),
            "labels": torch.from_numpy(self.labels[: self.size].copy()),
            "cursor": self.cursor,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        width = int(state.get("width", INPUT_WIDTH))  # a checkpoint from before task context: 26 columns
        if not width:
            return  # saved before its first rows
        self._build(width)
        self.net.load_state_dict(state["net"])
        self.optimizer.load_state_dict(state["optimizer"])
        standardisation = state["standardisation"]
        self.mean, self.spread = (None, None) if standardisation is None else tuple(standardisation.numpy())
        rows = len(state["labels"])
        if rows > self.capacity:
            raise ValueError(f"{rows} rows do not fit a ring of {self.capacity}")
        self.features[:rows], self.labels[:rows] = state["features"].numpy(), state["labels"].numpy()
        self.size, self.cursor = rows, int(state["cursor"]) % self.capacity
        self.generator.set_state(state["generator"])

    def model(self) -> FastCriticModel:
        """The numpy model of the current network, standardisation folded into its first layer."""
        linear = [module for module in self.net if isinstance(module, nn.Linear)]
        arrays = [(module.weight.detach().numpy().T.copy(), module.bias.detach().numpy().copy()) for module in linear]
        first, first_bias = arrays[0]
        arrays[0] = (first / self.spread[:, None], first_bias - (self.mean / self.spread) @ first)
        return FastCriticModel(arrays, self.config.activation)


def fit_fast_risk_model(
    features: np.ndarray, labels: np.ndarray, config: FastCriticFitSettings, seed: int = 0
) -> tuple[FastCriticModel, dict[str, float]]:
    """Fit a :class:`FastCriticModel` to ``features`` (N, 26 + C) and ``labels`` (N,) in {0, 1} with ``config.updates``
    steps; returns it and a report (rows, positive share, final loss, recall of each class)."""
    config.validate()
    features = np.asarray(features, np.float32)
    labels = np.asarray(labels, np.float32)
    width_ok = features.ndim == 2 and INPUT_WIDTH <= features.shape[1] <= INPUT_WIDTH + MAX_CONTEXT
    if not width_ok or len(features) != len(labels) or not len(labels):
        raise ValueError(f"features {features.shape}, labels {labels.shape}: expected (N, {INPUT_WIDTH} + C) and (N,)")
    learner = FastCriticLearner(config, capacity=len(labels), seed=seed)
    learner.add_rows(features, labels)
    learner.train(config.updates)
    model = learner.model()
    report = {"rows": len(labels), "positive_share": float(labels.mean()), "final_loss": learner.loss}
    report.update(class_accuracy(model, features, labels))
    return model, report


def risks_of(model: FastCriticModel, features: np.ndarray) -> np.ndarray:
    """The model's risk of every row of ``features`` (N, 26 + C), in one batch (the node scores one state at a time with
    the same layers)."""
    x = np.asarray(features, np.float32)
    for index, (weight, bias) in enumerate(model.layers):
        x = x @ weight + bias
        if index < len(model.layers) - 1:
            x = np.maximum(x, 0.0) if model.activation == "relu" else np.tanh(x)
    return 0.5 + 0.5 * np.tanh(0.5 * x[:, 0])


def class_accuracy(model: FastCriticModel, features: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The share of risky rows (label 1) scored above 0.5 and of safe rows scored at most 0.5 (NaN for an empty
    class)."""
    risks = risks_of(model, features)
    risky, safe = labels > 0.5, labels <= 0.5
    return {
        "risky_recall": float((risks[risky] > 0.5).mean()) if risky.any() else float("nan"),
        "safe_recall": float((risks[safe] <= 0.5).mean()) if safe.any() else float("nan"),
    }


def ticks_from_store(store, horizon: int, kind: str = "any") -> tuple[np.ndarray, np.ndarray]:
    """(features (N, 26 + C), labels (N,)) of every episode of ``store`` (an :class:`~robot_rl.data.EpisodeStore`)
    that kept its fast-loop ticks, labelled per episode with :func:`horizon_labels` (``kind``); empty arrays when none
    did.
    Episodes whose rows differ in width (task context of another task) raise ValueError naming the episode."""
    features, labels = [], [np.zeros(0, np.float32)]
    for name in store.episode_names():
        streams = store.read_episode(name, keys={"streams"})["streams"]
        if "fast_features" not in streams or "fast_violation" not in streams:
            continue
        rows = np.asarray(streams["fast_features"]["data"], np.float32)
        if features and rows.shape[1] != features[0].shape[1]:
            raise ValueError(
                f"episode {name}: ticks of {rows.shape[1]} columns, others of {features[0].shape[1]} (another task)"
            )
        features.append(rows)
        labels.append(horizon_labels(streams["fast_violation"]["data"], horizon, kind))
    return np.concatenate(features or [np.zeros((0, INPUT_WIDTH), np.float32)]), np.concatenate(labels)
