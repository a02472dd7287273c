"""Conservative critic terms for offline pretraining: CQL and Cal-QL (calibrated CQL, as WSRL pretrains).

CQL (Kumar et al. 2020) adds to the critic loss ``alpha * (logsumexp_a Q(s, a) - Q(s, a_data))``: Q-values of
actions the data does not support are pushed down, those of the data's actions up. Cal-QL (Nakamoto et al. 2023)
pushes a Q-value of the learned policy's actions down only while it is above the Monte-Carlo return of the data
(the behaviour policy's value, ``mc_return``: the replay buffer's returns-to-go): the pretrained Q-function stays
on the scale of real returns, so fine-tuning does not first unlearn an underestimate (the dip WSRL's warm-up and
Cal-QL avoid).

- :func:`continuous_penalty` (SAC family): the logsumexp over ``actions`` uniform actions, ``actions`` actions of
  the policy at s and at s' (importance-weighted by their densities, CQL(H)), per critic ensemble member.
- :func:`discrete_penalty` (CQN family): the logsumexp over the bins of every level's discrete Q-values.

With ``algorithm: none`` nothing is added (plain off-policy RL on the offline data). ``bc_weight`` > 0 adds a
behaviour-cloning term to a SAC actor's loss (:func:`behaviour_cloning`, as TD3+BC does): the extracted policy stays
near the data's actions where the Q-function alone does not yet point it there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from robot_rl.core.config import choice, is_integer, is_number, require_all

ALGORITHMS = ("calql", "cql", "none")


@dataclass
class ConservativeConfig:
    algorithm: str = "calql"  # calql | cql | none
    alpha: float = 5.0  # weight of the conservative term in the critic loss
    actions: int = 4  # SAC family: sampled actions per state, of each kind (uniform, policy at s, policy at s')
    temperature: float = 1.0  # of the logsumexp
    bc_weight: float = 0.0  # SAC family: weight of a behaviour-cloning term in the actor loss (TD3+BC style)

    def validate(self) -> None:
        choice("pretrain.algorithm", self.algorithm, ALGORITHMS)
        require_all(
            "pretrain",
            self,
            {
                "alpha": (is_number(self.alpha) and self.alpha >= 0, "a number >= 0"),
                "actions": (is_integer(self.actions) and self.actions >= 1, "an integer >= 1"),
                "temperature": (is_number(self.temperature) and self.temperature > 0, "a positive number"),
                "bc_weight": (is_number(self.bc_weight) and self.bc_weight >= 0, "a number >= 0"),
            },
        )

    @property
    def calibrated(self) -> bool:
        return self.algorithm == "calql"


def continuous_penalty(
    config: ConservativeConfig,
    q_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    sample_actions: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
    rows: torch.Tensor,
    policy_rows: torch.Tensor,
    next_policy_rows: torch.Tensor,
    q_data: torch.Tensor,
    mc_return: torch.Tensor | None,
    generator: torch.Generator,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The conservative term of a continuous-action critic ensemble and its metrics.

    ``q_of(rows, actions) -> (E, R)``: the critics at R (state row, action) pairs; ``sample_actions(rows) ->
    (actions (R, A) in [-1, 1], log-densities (R,))``: the policy; ``rows`` (B, F): what the critics read of s (with
    gradients where the critic learns); ``policy_rows`` / ``next_policy_rows``: what the policy reads of s and s'
    (its actions at s' are valued at s, as CQL does); ``q_data`` (E, B): the critics at the data's actions;
    ``mc_return`` (B,): the returns-to-go (Cal-QL; None for CQL).
    """
    n, batch = config.actions, len(rows)
    with torch.no_grad():  # the policy's actions at s and at s' in one pass
        both = torch.cat([policy_rows, next_policy_rows]).detach().repeat_interleave(n, 0)
        sampled, log_prob = sample_actions(both)
    uniform = torch.rand(sampled[: batch * n].shape, generator=generator, device=generator.device)
    actions = torch.cat([uniform.to(sampled.device) * 2 - 1, sampled])  # uniform, policy at s, policy at s'
    q_uniform, q_policy, q_next = (
        q_of(rows.repeat_interleave(n, 0).repeat(3, 1), actions).view(-1, 3, batch, n).unbind(1)
    )
    policy_log_prob, next_log_prob = log_prob.view(2, batch, n).unbind(0)
    action_dim = actions.shape[-1]
    metrics = {}
    if config.calibrated:
        floor = _returns(mc_return, q_data).view(1, batch, 1)
        metrics["calql_bound_rate"] = ((q_policy < floor).float().mean() + (q_next < floor).float().mean()) / 2
        q_policy, q_next = torch.maximum(q_policy, floor), torch.maximum(q_next, floor)
    uniform_log_density = action_dim * math.log(0.5)
    candidates = torch.cat(  # importance-weighted by each sample's density (CQL(H))
        [q_uniform - uniform_log_density, q_policy - policy_log_prob, q_next - next_log_prob], dim=-1
    )
    pushed_down = torch.logsumexp(candidates / config.temperature, dim=-1) * config.temperature  # (E, B)
    gap = (pushed_down - q_data).mean()
    metrics.update(cql_gap=gap.detach(), cql_ood_q=q_uniform.detach().mean())
    return config.alpha * gap, metrics


def discrete_penalty(
    config: ConservativeConfig,
    q_bins: torch.Tensor,
    q_data: torch.Tensor,
    weight: torch.Tensor,
    mc_return: torch.Tensor | None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The conservative term of a discrete (per-bin) critic and its metrics.

    ``q_bins`` (B, ..., bins): the Q-value of every bin where the data chose one (e.g. (B, levels, action dims,
    bins)); ``q_data`` (B, ...): the data's bin; ``weight`` (B, ...): 1 where an entry counts (action-sequence
    masks); ``mc_return`` (B,) (Cal-QL: a bin's value is pushed down only while it is above it; None for CQL).
    """
    if config.calibrated:
        floor = _returns(mc_return, q_bins).view(-1, *([1] * (q_bins.dim() - 1)))
        q_bins = torch.maximum(q_bins, floor)
    pushed_down = torch.logsumexp(q_bins / config.temperature, dim=-1) * config.temperature
    gap = ((pushed_down - q_data) * weight).sum() / weight.sum().clamp_min(1.0)
    return config.alpha * gap, {"cql_gap": gap.detach()}


def behaviour_cloning(mode: torch.Tensor, data_action: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
    """Mean squared distance between the policy's mode and the data's actions, both in [-1, 1]^A, (B, A); over the
    rows a (B,) 0/1 mask ``rows`` marks when given (a mask, not an index: shapes stay fixed for CUDA graphs)."""
    squared = ((mode - data_action.to(mode.dtype)) ** 2).sum(-1)
    if rows is None:
        return squared.mean()
    return (squared.float() * rows).sum() / rows.sum().clamp(min=1.0)


def _returns(mc_return, like: torch.Tensor) -> torch.Tensor:
    """The batch's returns-to-go as a float tensor beside ``like``; Cal-QL cannot do without them."""
    if mc_return is None:
        raise ValueError("Cal-QL needs batches with mc_return (ReplayBuffer.set_returns_to_go on the offline data)")
    return mc_return.float()
