"""CQN-AS: the coarse-to-fine critic over sequences of K actions (Seo et al. 2024).

The critic scores a chunk of K future actions. Per level and step t its input is
[features, previous centres of a_t, onehot(t), onehot(level)] through the CQN trunk, then a GRU
over t and a per-step dueling C51 head, so the Q of step t knows the steps before it. Coarse-to-
fine selection runs over all K x D numbers at once.

- training: a batch carries the executed actions a_{0:K} with a validity mask (False past the
  episode end); every (level, t, d) distribution regresses to the C51 target of
  r_0 + gamma^n Z_target(s_n, a*_{0:K}); on demo rows the CQN BC losses (stochastic dominance +
  margin, ``bc_lambda``) hold at every (level, t, d) too, as in the reference's CQN-AS; masked
  entries are excluded from every loss
- execution: a chunk is predicted every step and the executed action is the temporal ensemble
  of all chunks that cover the current step (:class:`TemporalEnsemble`), plus N(0, explore_std)
  while exploring
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from robot_rl.core.config import is_integer, is_number, require_all, yaml_defaults
from robot_rl.data.batches import Batch
from robot_rl.policies.base import slot_states
from robot_rl.policies.cqn import CQNAgent, CQNConfig, DuelingC51Head, trunk
from robot_rl.policies.networks import float32_head


class TemporalEnsemble:
    """Executes the weighted mean of every stored prediction for the current step.

    ``predictions[age, offset]`` is what the chunk issued ``age`` steps ago predicts for the step
    ``offset`` steps from now and ``valid[age, offset]`` says whether that entry exists (chunks from
    before the episode start, and steps beyond a chunk's horizon, do not). Weights are
    w_i = exp(-decay * i) with i = 0 the oldest chunk that covers the current step.
    """

    def __init__(self, horizon: int, action_dim: int, decay: float = 0.01):
        self.horizon, self.decay = horizon, decay
        self.predictions = np.zeros((horizon, horizon, action_dim), np.float32)
        self.valid = np.zeros((horizon, horizon), bool)

    def reset(self) -> None:
        self.valid[:] = False

    def __call__(self, chunk: np.ndarray) -> np.ndarray:
        """Store ``chunk`` (K, A) issued now and return the action to execute now."""
        self.predictions[1:, :-1] = self.predictions[:-1, 1:].copy()
        self.valid[1:, :-1] = self.valid[:-1, 1:].copy()
        self.valid[:, -1] = False
        self.predictions[0], self.valid[0] = chunk, True
        ages = np.flatnonzero(self.valid[:, 0])
        weights = np.exp(-self.decay * (ages.max() - ages))
        return (weights @ self.predictions[ages, 0] / weights.sum()).astype(np.float32)


class SequenceCritic(nn.Module):
    """logits (B, K, D, bins, atoms) for features (B, F), flat previous centres (B, K*D), a level."""

    def __init__(
        self, feature_dim: int, action_dim: int, horizon: int, levels: int, bins: int, atoms: int, hidden: int
    ):
        super().__init__()
        self.action_dim, self.horizon, self.levels = action_dim, horizon, levels
        self.trunk = trunk(feature_dim + action_dim + horizon + levels, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.head = DuelingC51Head(hidden, action_dim, bins, atoms)

    def forward(self, features: torch.Tensor, centres: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        batch, horizon = features.shape[0], self.horizon
        step = torch.eye(horizon, device=features.device).expand(batch, -1, -1)
        level = F.one_hot(level, self.levels).float()[:, None].expand(-1, horizon, -1)
        x = torch.cat(
            [features[:, None].expand(-1, horizon, -1), centres.view(batch, horizon, self.action_dim), step, level], -1
        )
        hidden, _ = self.gru(self.trunk(x))
        return float32_head(self.head, hidden)


@yaml_defaults("agent/cqn_as.yaml")
class CQNASConfig(CQNConfig):
    hidden: int  # trunk and GRU width, sized for a CPU learner (the paper: 512 on a GPU)
    utd: int  # critic updates per env step (one update costs ~K times a CQN update)
    horizon: int  # K actions per critic query
    ensemble_decay: float  # temporal ensembling: w_i = exp(-decay * i), i = 0 the oldest chunk

    def validate(self) -> None:
        super().validate()
        require_all(
            "agent",
            self,
            {
                "horizon": (is_integer(self.horizon) and self.horizon >= 1, "an integer K >= 1 (actions per sequence)"),
                "ensemble_decay": (is_number(self.ensemble_decay) and self.ensemble_decay >= 0, "a number >= 0"),
            },
        )


class CQNASAgent(CQNAgent):
    name = "cqn_as"
    acting_slots = ("_ensembles",)

    def __init__(
        self,
        observation_shapes: dict[str, tuple[int, ...]],
        action_dim: int,
        config: CQNASConfig | None = None,
        seed: int = 0,
    ):
        config = config or CQNASConfig()
        self.sequence_length = config.horizon
        super().__init__(observation_shapes, action_dim, config, seed)
        self._ensembles: list[TemporalEnsemble] = []  # per acting slot: the chunks its episode issued

    def make_critic(self, feature_dim: int) -> nn.Module:
        cfg = self.config
        return SequenceCritic(feature_dim, self.action_dim, cfg.horizon, cfg.levels, cfg.bins, cfg.atoms, cfg.hidden)

    def ensembles(self, count: int) -> list[TemporalEnsemble]:
        """The temporal ensemble of each of slots 0..count-1."""
        cfg = self.config
        return slot_states(
            self._ensembles, count, lambda slot: TemporalEnsemble(cfg.horizon, self.action_dim, cfg.ensemble_decay)
        )

    def begin_episode(self, slot: int = 0) -> None:
        self.ensembles(slot + 1)[slot].reset()

    @torch.no_grad()
    def _act_batch(self, obs: dict[str, np.ndarray], explore: bool) -> np.ndarray:
        features = self.encoder(self.obs_tensors(obs))
        chunks = self.greedy(self.target_critic, features)[0].view(-1, self.config.horizon, self.action_dim).cpu()
        ensembles = self.ensembles(len(chunks))
        action = torch.as_tensor(np.stack([ensemble(chunk) for ensemble, chunk in zip(ensembles, chunks.numpy())]))
        if explore:
            action = (action + self.config.explore_std * self.normal_noise(action)).clamp(-1, 1)
        return action.numpy().astype(np.float32)

    def executed_actions(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        sequence, mask = batch.action_sequence, batch.sequence_mask  # (B, K, D), (B, K)
        return sequence.flatten(1), mask[..., None].expand_as(sequence).flatten(1)

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "horizon": self.config.horizon}
