"""CQN: coarse-to-fine Q-network (Seo et al. 2024), value-based control of continuous actions.

Actions in [-1, 1]^D are chosen by zooming in: at each of ``levels`` levels every dimension's
current interval is split into ``bins`` bins and the bin with the highest Q value becomes the
next interval; the final action is the centre of the last interval (bins^levels cells per
dimension). One critic serves all levels: its input is the observation features, the previous
level's interval centres and a one-hot of the level.

- critic: Linear (no bias) + LayerNorm + SiLU, twice, then dueling C51 heads
  (value D x 1 x atoms, advantage D x bins x atoms, logits = V + A - mean_bins(A), zero-initialised)
- Q = sum_z softmax(logits) z over ``atoms`` atoms on [v_min, v_max]; ties (max - min < 1e-4 over
  the bins) pick a random bin, which matters at initialisation
- target: a* = coarse-to-fine argmax of the online critic at s' (double Q), distribution from the
  target critic, C51 projection of r + gamma^n z
- loss (the reference's, younggyoseo/CQN ``CQNAgent.update_critic``): ``critic_lambda`` x the C51
  cross-entropy, plus on demo rows (demos and human takeovers) ``bc_lambda`` x (a first-order
  stochastic dominance loss + a margin loss): the demo bin's return distribution must dominate
  every other bin's, and its Q must exceed every other bin's by ``bc_margin``. Every term is a
  mean over levels, action numbers and bins (demo rows only for the BC terms)
- acting uses the target critic; exploration adds N(0, ``explore_std``) and snaps to the grid
- batches are 50/50 demo/online (the learner's sampler); AdamW

Targets outside [v_min, v_max] are clipped: the ``target_clipped`` metric reports how often. An update never
waits on the device: metrics stay tensors, ties are broken without asking whether there are any, and the BC
losses weight the demo rows instead of picking them out.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from robot_rl.core.config import ConfigError, is_integer, is_number, require_all, yaml_defaults
from robot_rl.core.observation_keys import PRIVILEGED_KEY
from robot_rl.data.batches import Batch, BatchSource
from robot_rl.policies.base import AgentConfig, OffPolicyAgent, soft_update
from robot_rl.policies.conservative import discrete_penalty
from robot_rl.policies.networks import float32_head

TIE_TOLERANCE = 1e-4


# --------------------------------------------------------------------- grid math
def encode_action(action: torch.Tensor, levels: int, bins: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The bin of ``action`` (B, M) in [-1, 1] at every level.

    Returns (indices (B, levels, M) long, interval centres of the previous level (B, levels, M),
    zeros at level 0).
    """
    low, high = -torch.ones_like(action), torch.ones_like(action)
    indices, centres = [], []
    for _ in range(levels):
        centres.append((low + high) / 2)
        width = (high - low) / bins
        index = torch.floor((action - low) / width).clamp(0, bins - 1)
        low = low + width * index
        high = low + width
        indices.append(index.long())
    return torch.stack(indices, 1), torch.stack(centres, 1)


def snap_to_grid(action: torch.Tensor, levels: int, bins: int) -> torch.Tensor:
    """The centre of the finest cell that contains ``action``."""
    indices, _ = encode_action(action, levels, bins)
    return decode_indices(indices, bins)


def decode_indices(indices: torch.Tensor, bins: int) -> torch.Tensor:
    """Centre of the cell that the per-level bin ``indices`` (B, levels, M) select."""
    low = -torch.ones(indices.shape[0], indices.shape[2], device=indices.device)
    high = torch.ones_like(low)
    for level in range(indices.shape[1]):
        width = (high - low) / bins
        low = low + width * indices[:, level]
        high = low + width
    return (low + high) / 2


def coarse_to_fine(
    q_values: Callable[[torch.Tensor, int], torch.Tensor],
    batch: int,
    dims: int,
    levels: int,
    bins: int,
    generator: torch.Generator | None = None,
    device=None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Greedy coarse-to-fine selection.

    ``q_values(centres (B, M), level)`` returns Q (B, M, bins) for the intervals around
    ``centres``. Returns (action (B, M), indices (B, levels, M), previous centres (B, levels, M)).
    """
    low = -torch.ones(batch, dims, device=device)
    high = torch.ones_like(low)
    indices, centres = [], []
    for level in range(levels):
        centre = (low + high) / 2
        q = q_values(centre, level)
        index = q.argmax(-1)
        tied = (q.max(-1).values - q.min(-1).values) < TIE_TOLERANCE
        random_index = torch.randint(0, bins, index.shape, generator=generator, device=index.device)
        index = torch.where(tied, random_index, index)
        width = (high - low) / bins
        low = low + width * index
        high = low + width
        indices.append(index)
        centres.append(centre)
    return (low + high) / 2, torch.stack(indices, 1), torch.stack(centres, 1)


def categorical_projection(
    probs: torch.Tensor, reward: torch.Tensor, discount: torch.Tensor, support: torch.Tensor
) -> torch.Tensor:
    """C51: project the distribution of r + discount * z (z on ``support``, probabilities
    ``probs`` (N, atoms)) back onto ``support``; values outside are clipped to its ends."""
    v_min, v_max = support[0], support[-1]
    delta = (v_max - v_min) / (len(support) - 1)
    shifted = (reward[:, None] + discount[:, None] * support[None]).clamp(v_min, v_max)
    # rounding can put v_max a hair past the last atom (36 / 0.72 on a GPU; 29.8 / 0.596 on a CPU): clamp the position
    position = ((shifted - v_min) / delta).clamp(0, len(support) - 1)
    lower, upper = position.floor().long(), position.ceil().long()
    exact = lower == upper
    projected = torch.zeros_like(probs)
    projected.scatter_add_(1, lower, probs * (upper.float() - position + exact.float()))
    projected.scatter_add_(1, upper, probs * (position - lower.float()))
    return projected


def margin_loss(q: torch.Tensor, demo_index: torch.Tensor, margin: float) -> torch.Tensor:
    """Mean over the bins b of max(0, margin - (Q(demo) - Q(b))) for Q (..., bins), the demo bin
    itself counting 0; (...).

    The reference averages over all bins, the demo bin included, which adds the constant
    margin / bins (no gradient); it is left out so that a satisfied margin reads 0.
    """
    demo_q = q.gather(-1, demo_index[..., None])
    violation = F.relu(margin - (demo_q - q))
    others = torch.ones_like(q).scatter_(-1, demo_index[..., None], 0.0)
    return (violation * others).mean(-1)


def fosd_loss(probs: torch.Tensor, demo_index: torch.Tensor) -> torch.Tensor:
    """First-order stochastic dominance of the demo bin's return distribution over every bin:
    mean over the bins b of sum_z max(0, CDF_demo(z) - CDF_b(z)), for probabilities
    (..., bins, atoms); (...). Zero when no bin's distribution puts more mass on higher returns."""
    cdf = probs.cumsum(-1)
    demo_cdf = cdf.gather(-2, demo_index[..., None, None].expand(*demo_index.shape, 1, cdf.shape[-1]))
    return F.relu(demo_cdf - cdf).sum(-1).mean(-1)


# --------------------------------------------------------------------- networks
class DuelingC51Head(nn.Module):
    """logits (..., M, bins, atoms) = V + A - mean_bins(A), both heads zero-initialised."""

    def __init__(self, hidden: int, dims: int, bins: int, atoms: int):
        super().__init__()
        self.dims, self.bins, self.atoms = dims, bins, atoms
        self.value = nn.Linear(hidden, dims * atoms)
        self.advantage = nn.Linear(hidden, dims * bins * atoms)
        for layer in (self.value, self.advantage):
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value = self.value(x).unflatten(-1, (self.dims, 1, self.atoms))
        advantage = self.advantage(x).unflatten(-1, (self.dims, self.bins, self.atoms))
        return value + advantage - advantage.mean(-2, keepdim=True)


def trunk(in_dim: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(in_dim, hidden, bias=False),
        nn.LayerNorm(hidden),
        nn.SiLU(),
        nn.Linear(hidden, hidden, bias=False),
        nn.LayerNorm(hidden),
        nn.SiLU(),
    )


class CoarseToFineCritic(nn.Module):
    """logits (B, D, bins, atoms) for features (B, F), previous centres (B, D) and a level; in float32
    (:func:`~robot_rl.policies.networks.float32_head`) under a bf16 autocast too."""

    def __init__(self, feature_dim: int, action_dim: int, levels: int, bins: int, atoms: int, hidden: int):
        super().__init__()
        self.levels = levels
        self.trunk = trunk(feature_dim + action_dim + levels, hidden)
        self.head = DuelingC51Head(hidden, action_dim, bins, atoms)

    def forward(self, features: torch.Tensor, centres: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
        onehot = F.one_hot(level, self.levels).float()
        return float32_head(self.head, self.trunk(torch.cat([features, centres, onehot], -1)))


# --------------------------------------------------------------------- agent
@yaml_defaults("agent/cqn.yaml")
class CQNConfig(AgentConfig):
    levels: int
    bins: int
    atoms: int
    v_min: float  # dense rewards in [-1, 0] with discount 0.97: returns >= -33.3
    v_max: float
    hidden: int
    discount: float
    lr: float
    weight_decay: float
    tau: float
    utd: int
    critic_lambda: float  # weight of the C51 cross-entropy
    bc_lambda: float  # weight of the demo losses (stochastic dominance + margin)
    bc_margin: float  # Q(demo bin) - Q(other bin) the margin loss asks for; 0 turns it off
    explore_std: float

    def validate(self) -> None:
        checks = {
            **self.shared_checks(),
            "levels": (is_integer(self.levels) and self.levels >= 2, "an integer >= 2"),
            "bins": (is_integer(self.bins) and self.bins >= 2, "an integer >= 2"),
            "atoms": (is_integer(self.atoms) and self.atoms >= 2, "an integer >= 2"),
            "v_min": (is_number(self.v_min), "a finite number"),
            "v_max": (is_number(self.v_max) and self.v_max > self.v_min, f"a finite number > v_min={self.v_min}"),
            "hidden": (is_integer(self.hidden) and self.hidden >= 1, "a positive integer"),
            "discount": (is_number(self.discount) and 0.0 < self.discount <= 1.0, "a number in (0, 1]"),
            "lr": (is_number(self.lr) and self.lr > 0, "a positive finite number"),
            "weight_decay": (is_number(self.weight_decay) and self.weight_decay >= 0, "a number >= 0"),
            "tau": (is_number(self.tau) and 0.0 < self.tau <= 1.0, "a number in (0, 1]"),
            "utd": (is_integer(self.utd) and self.utd >= 1, "an integer >= 1"),
            "critic_lambda": (is_number(self.critic_lambda) and self.critic_lambda >= 0, "a number >= 0"),
            "bc_lambda": (is_number(self.bc_lambda) and self.bc_lambda >= 0, "a number >= 0"),
            "bc_margin": (is_number(self.bc_margin) and self.bc_margin >= 0, "a number >= 0"),
            "explore_std": (is_number(self.explore_std) and self.explore_std >= 0, "a number >= 0"),
        }
        require_all("agent", self, checks)


class CQNAgent(OffPolicyAgent):
    """Coarse-to-fine distributional Q-learning over [-1, 1]^A (see the module docstring)."""

    name = "cqn"
    modules = ("encoder", "critic", "target_critic")
    policy_modules = ("encoder", "target_critic")
    optimizers = ("optimizer",)

    def __init__(
        self,
        observation_shapes: dict[str, tuple[int, ...]],
        action_dim: int,
        config: CQNConfig | None = None,
        seed: int = 0,
    ):
        super().__init__(observation_shapes, action_dim, config or CQNConfig(), seed)
        if PRIVILEGED_KEY in observation_shapes:
            raise ConfigError(
                "task.privileged_state",
                True,
                "false with a value-based agent: its critic is its "
                "policy, and a policy cannot read the simulator's state (use agent=sac)",
            )
        cfg = self.config
        self.encoder = self.make_encoder()
        self.critic = self.make_critic(self.encoder.output_dim).to(self.device)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.support = torch.linspace(cfg.v_min, cfg.v_max, cfg.atoms, device=self.device)
        parameters = list(self.critic.parameters()) + [p for p in self.encoder.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            parameters, lr=cfg.lr, weight_decay=cfg.weight_decay, **self.optimizer_options()
        )
        self.compile_networks(*self.modules)

    def make_critic(self, feature_dim: int) -> nn.Module:
        cfg = self.config
        return CoarseToFineCritic(feature_dim, self.action_dim, cfg.levels, cfg.bins, cfg.atoms, cfg.hidden)

    # ----------------------------------------------------------------- critic evaluation
    def logits(
        self, critic: nn.Module, features: torch.Tensor, centres: torch.Tensor, level: int | torch.Tensor
    ) -> torch.Tensor:
        """(B, M, bins, atoms) for flat centres (B, M), M = the controlled numbers per decision."""
        if isinstance(level, int):
            level = torch.full((features.shape[0],), level, dtype=torch.long, device=self.device)
        return critic(features, centres, level).flatten(1, -3)

    def q_from_logits(self, logits: torch.Tensor) -> torch.Tensor:
        return (logits.softmax(-1) * self.support).sum(-1)

    def greedy(self, critic: nn.Module, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Coarse-to-fine argmax of ``critic``: (flat action (B, M), indices, previous centres)."""
        dims = self.action_dim * self.sequence_length
        return coarse_to_fine(
            lambda centres, level: self.q_from_logits(self.logits(critic, features, centres, level)),
            features.shape[0],
            dims,
            self.config.levels,
            self.config.bins,
            self.generator,
            self.device,
        )

    def all_levels(self, critic: nn.Module, features: torch.Tensor, centres: torch.Tensor) -> torch.Tensor:
        """logits (B, levels, M, bins, atoms) for previous centres (B, levels, M), in one pass."""
        batch, levels = centres.shape[:2]
        level = torch.arange(levels, device=self.device).repeat(batch)
        logits = self.logits(critic, features.repeat_interleave(levels, 0), centres.flatten(0, 1), level)
        return logits.unflatten(0, (batch, levels))

    # ----------------------------------------------------------------- acting
    def explore_noise(self, action: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        noisy = (action + cfg.explore_std * self.normal_noise(action)).clamp(-1, 1)
        return snap_to_grid(noisy, cfg.levels, cfg.bins)

    @torch.no_grad()
    def _act_batch(self, obs: dict[str, np.ndarray], explore: bool) -> np.ndarray:
        features = self.encoder(self.obs_tensors(obs))
        action = self.greedy(self.target_critic, features)[0].cpu()
        if explore:
            action = self.explore_noise(action)
        return action.numpy().astype(np.float32)

    # ----------------------------------------------------------------- learning
    def update(self, sample_batch: BatchSource) -> dict[str, torch.Tensor]:
        """``utd`` critic steps on fresh minibatches from ``sample_batch()``; the last one's metrics, 0-d tensors
        on the agent's device."""
        metrics: dict[str, torch.Tensor] = {}
        for _ in range(self.config.utd):
            metrics = self.learning_step("critic", self._update_critic, sample_batch())
            self.updates += 1
        return metrics

    def executed_actions(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Flat actions (B, M) the critic scores and a mask (B, M) of the entries that count."""
        return batch.action, torch.ones_like(batch.action, dtype=torch.bool)

    def _update_critic(self, batch: Batch) -> dict[str, torch.Tensor]:
        cfg = self.config
        action, mask = self.executed_actions(batch)
        reward, discount = batch.reward, batch.discount
        indices, centres = encode_action(action, cfg.levels, cfg.bins)
        with self.autocast():
            _, _, features, next_features = self.encode_batch(batch)
            with torch.no_grad():
                _, next_indices, next_centres = self.greedy(self.critic, next_features)
                next_logits = self.all_levels(self.target_critic, next_features, next_centres)
            logits = self.all_levels(self.critic, features, centres)  # (B, L, M, bins, atoms), float32
        with torch.no_grad():
            next_probs = pick(next_logits, next_indices).softmax(-1)  # (B, L, M, atoms)
            entries = next_probs.shape[1] * next_probs.shape[2]
            target = categorical_projection(
                next_probs.flatten(0, 2),
                reward.repeat_interleave(entries),
                discount.repeat_interleave(entries),
                self.support,
            ).view_as(next_probs)
            expected = reward[:, None, None] + discount[:, None, None] * (next_probs * self.support).sum(-1)
            clipped = (expected < cfg.v_min) | (expected > cfg.v_max)
        log_probs = pick(logits, indices).log_softmax(-1)
        weight = mask[:, None].expand(-1, cfg.levels, -1).float()
        rl_loss = (-(target * log_probs).sum(-1) * weight).sum() / weight.sum()
        loss = cfg.critic_lambda * rl_loss
        metrics = {"critic_loss": rl_loss.detach()}
        if self.conservative is not None and self.conservative.algorithm != "none":
            q_bins = (logits.softmax(-1) * self.support).sum(-1)  # (B, L, M, bins)
            q_data = q_bins.gather(-1, indices[..., None]).squeeze(-1)
            penalty, conservative_metrics = discrete_penalty(self.conservative, q_bins, q_data, weight, batch.mc_return)
            loss = loss + penalty
            metrics.update(conservative_metrics)
        is_demo = batch.is_demo
        if is_demo is None:
            is_demo = torch.zeros(len(reward), dtype=torch.bool, device=self.device)
        if cfg.bc_lambda:
            demo_weight = weight * is_demo[:, None, None]
            for name, demo_loss in self.weighted_demo_losses(logits, indices, demo_weight).items():
                loss = loss + cfg.bc_lambda * demo_loss
                metrics[name] = demo_loss.detach()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        soft_update(self.critic, self.target_critic, cfg.tau)
        with torch.no_grad():
            q = (pick(logits, indices).softmax(-1) * self.support).sum(-1)
        metrics.update(q_mean=q.mean(), target_clipped=clipped.float().mean())
        return metrics

    def demo_losses(
        self, logits: torch.Tensor, indices: torch.Tensor, weight: torch.Tensor, is_demo: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """The BC losses on the demo rows, each a mean over the counted (row, level, number) entries.

        ``logits`` (B, L, M, bins, atoms) of the online critic along the executed action's zoom-in
        path, ``indices`` (B, L, M) its bins, ``weight`` (B, L, M) 1 where an entry counts, ``is_demo``
        (B,). Empty when ``bc_lambda`` is 0 or the batch holds no demo row.
        """
        if not self.config.bc_lambda or not is_demo.any():
            return {}
        return self.weighted_demo_losses(logits, indices, weight * is_demo[:, None, None])

    def weighted_demo_losses(
        self, logits: torch.Tensor, indices: torch.Tensor, demo_weight: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """:meth:`demo_losses` for entries weighted by ``demo_weight`` (B, L, M), 0 on the online rows: every
        row is computed and none picked out, so nothing waits on the device; 0 when no entry counts."""
        cfg = self.config
        probs = logits.softmax(-1)
        losses = {"bc_fosd_loss": fosd_loss(probs, indices)}
        if cfg.bc_margin:
            losses["margin_loss"] = margin_loss((probs * self.support).sum(-1), indices, cfg.bc_margin)
        counted = demo_weight.sum().clamp(min=1.0)
        return {name: (value * demo_weight).sum() / counted for name, value in losses.items()}

    def identity(self) -> dict[str, Any]:
        cfg = self.config
        return {**super().identity(), "levels": cfg.levels, "bins": cfg.bins, "atoms": cfg.atoms}


def pick(logits: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """logits (..., bins, atoms) at bin ``indices`` (...) -> (..., atoms)."""
    index = indices[..., None, None].expand(*indices.shape, 1, logits.shape[-1])
    return logits.gather(-2, index).squeeze(-2)
