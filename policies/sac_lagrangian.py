"""Constrained SAC with a Lagrange multiplier (``agent=sac_lagrangian``): the seed papers' constrained-RL baseline
beside the safety layers (hard limits, the policy-rate critic and filter, the fast-loop critic).

The task's violations (``info["violation"]``, stored as each transition's ``cost``) train a cost critic
Q_c(s, a) = c + gamma Q_c(s', a') (an ensemble like the reward critics; the target the maximum over its members: the
pessimistic side of a cost). The policy maximises Q - lambda Q_c (plus SAC's entropy term); the multiplier lambda >= 0
(learned in log space) rises while the policy's expected cost E[Q_c(s, pi(s))] is above the limit and falls below it
(Ha et al. 2020, "Learning to Walk in the Real World with Minimal Human Effort"; Stooke et al. 2020).

The limit is given per episode: ``cost_limit`` violating steps in ``episode_steps`` (the task's), spread evenly, have
the discounted value ``cost_limit / episode_steps * (1 - gamma^T) / (1 - gamma)``, the bound on Q_c.
Unlike the filter, nothing here stops a violation as it happens: the policy only learns to avoid them.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from robot_rl.core.config import is_integer, is_number, require_all, yaml_defaults
from robot_rl.data.batches import Batch
from robot_rl.policies.base import soft_update
from robot_rl.policies.networks import CriticEnsemble
from robot_rl.policies.sac import SACAgent, SACConfig


@yaml_defaults("agent/sac_lagrangian.yaml")
class SACLagrangianConfig(SACConfig):
    cost_limit: float  # violating steps per episode the policy may average
    episode_steps: int = 100  # the task's (the composed config passes task.episode_steps)
    init_multiplier: float = 1.0
    multiplier_lr: float = 3.0e-3

    def validate(self) -> None:
        super().validate()
        checks = {
            "cost_limit": (is_number(self.cost_limit) and self.cost_limit >= 0, "a number >= 0 (steps per episode)"),
            "episode_steps": (is_integer(self.episode_steps) and self.episode_steps >= 1, "an integer >= 1"),
            "init_multiplier": (is_number(self.init_multiplier) and self.init_multiplier > 0, "a number > 0"),
            "multiplier_lr": (is_number(self.multiplier_lr) and self.multiplier_lr > 0, "a number > 0"),
        }
        require_all("agent", self, checks)


def discounted_limit(cost_limit: float, episode_steps: int, discount: float) -> float:
    """The bound on Q_c of ``cost_limit`` violating steps spread evenly over an episode of ``episode_steps``."""
    rate = cost_limit / episode_steps
    return rate * episode_steps if discount == 1.0 else rate * (1 - discount**episode_steps) / (1 - discount)


class SACLagrangianAgent(SACAgent):
    """SAC whose actor also pays lambda Q_c(s, pi(s)), lambda learned against the cost limit."""

    name = "sac_lagrangian"
    optimizers = (*SACAgent.optimizers, "cost_optimizer", "multiplier_optimizer")

    config_class = SACLagrangianConfig

    def add_modules(self) -> None:
        """The cost critic, its target and optimizer, and the multiplier."""
        cfg = self.config
        self.cost_critic = CriticEnsemble(self.critic_inputs, self.continuous_dim, cfg.hidden, cfg.critic_ensemble).to(
            self.device
        )
        self.target_cost_critic = copy.deepcopy(self.cost_critic).requires_grad_(False)
        self.log_multiplier = torch.tensor(
            float(np.log(cfg.init_multiplier)), dtype=torch.float32, device=self.device, requires_grad=True
        )
        self.limit = discounted_limit(cfg.cost_limit, cfg.episode_steps, cfg.discount)
        options = self.optimizer_options()
        self.cost_optimizer = torch.optim.Adam(self.cost_critic.parameters(), lr=cfg.lr, **options)
        self.multiplier_optimizer = torch.optim.Adam([self.log_multiplier], lr=cfg.multiplier_lr, **options)
        self.modules += ("cost_critic", "target_cost_critic")
        self._cost_metrics: dict[str, torch.Tensor] = {}

    @property
    def multiplier(self) -> torch.Tensor:
        return self.log_multiplier.exp()

    @property
    def graphable(self) -> bool:
        """Not replayed from CUDA graphs: the multiplier's step and its metrics happen inside the actor's step."""
        return False

    def _critic_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        return {**super()._critic_step(batch), **self._update_cost_critic(batch)}

    def _critic_and_actor_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        cost = self._update_cost_critic(batch)
        return {**super()._critic_and_actor_step(batch), **cost, **self._cost_metrics}

    def _update_cost_critic(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One step of Q_c on the batch (its own encoding of it: the encoder learns from the reward critic only)."""
        cost, discount, action = batch.cost, batch.discount, batch.action[:, : self.continuous_dim]
        with torch.no_grad(), self.autocast():
            obs, next_obs, features, next_features = self.encode_batch(batch)
            next_action, _ = self.actor.sample(next_features, generator=self.generator)
            target_q = self.target_cost_critic(self.critic_input(next_features, next_obs), next_action).amax(0)
            target = cost + discount * target_q
        with self.autocast():
            q = self.cost_critic(self.critic_input(features.detach(), obs), action)
        loss = F.mse_loss(q, target.expand_as(q))
        self.cost_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.cost_optimizer.step()
        soft_update(self.cost_critic, self.target_cost_critic, self.config.tau)
        return {"cost_critic_loss": loss.detach(), "cost_q_mean": q.detach().mean()}

    def constraint_penalty(
        self, features: torch.Tensor, obs: dict[str, torch.Tensor], action: torch.Tensor
    ) -> torch.Tensor:
        """lambda Q_c(s, pi(s)) for the actor's loss; steps the multiplier on the same batch's expected cost."""
        cost_q = self.cost_critic(self.critic_input(features, obs), action).mean(0)
        self.step_multiplier(cost_q.detach().mean())
        return self.multiplier.detach() * cost_q.mean()

    def step_multiplier(self, expected_cost: torch.Tensor) -> None:
        """lambda up while ``expected_cost`` (the policy's mean Q_c) is above the limit, down while below it."""
        loss = -self.multiplier * (expected_cost - self.limit)
        self.multiplier_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.multiplier_optimizer.step()
        self._cost_metrics = {"multiplier": self.multiplier.detach(), "policy_cost_q": expected_cost}

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "cost_limit": self.config.cost_limit}

    def extra_state(self) -> dict[str, Any]:
        return {**super().extra_state(), "log_multiplier": self.log_multiplier.detach().cpu()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        super().load_extra_state(state)
        with torch.no_grad():
            self.log_multiplier.copy_(state["log_multiplier"])
