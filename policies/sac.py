"""SAC in the RLPD / HIL-SERL style, for state and pixel observations.

- an ensemble of ``critic_ensemble`` LayerNorm critics; the target takes the minimum over a
  random subset of ``critic_subset`` target members, and the actor maximises the ensemble mean
- ``utd`` critic updates per :meth:`update` call (one minibatch each), then the actor and the
  temperature once every ``critic_actor_ratio`` critic updates, on the last minibatch
- temperature learned toward the target entropy -|A|/2; no entropy term in the backup unless
  ``backup_entropy``
- cameras: a CNN per camera trained by the critic loss (the actor sees detached features),
  DrQ random shift on sampled images
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from robot_rl.data.augment import random_shift

from .encoders import ObservationEncoder
from .networks import CriticEnsemble, TanhGaussianActor


@dataclass
class SACConfig:
    hidden: list[int] = field(default_factory=lambda: [256, 256])
    critic_ensemble: int = 2
    critic_subset: int = 2
    discount: float = 0.97
    lr: float = 3e-4
    tau: float = 0.005
    init_temperature: float = 0.01
    target_entropy: float | None = None  # default -|A| / 2
    backup_entropy: bool = False
    utd: int = 4
    critic_actor_ratio: int = 2
    camera_encoder: str = "cnn"  # cnn | resnet10
    camera_feature_dim: int = 50
    pretrained_weights: str | None = None
    image_pad: int = 4
    device: str = "auto"

    def validate(self) -> None:
        from robot_rl.config import ConfigError

        checks = {
            "critic_ensemble": self.critic_ensemble >= 1,
            "critic_subset": 1 <= self.critic_subset <= self.critic_ensemble,
            "utd": self.utd >= 1,
            "critic_actor_ratio": self.critic_actor_ratio >= 1,
            "discount": 0.0 < self.discount <= 1.0,
            "lr": self.lr > 0,
            "tau": 0.0 < self.tau <= 1.0,
            "init_temperature": self.init_temperature > 0,
        }
        for key, ok in checks.items():
            if not ok:
                expected = f"<= critic_ensemble={self.critic_ensemble} and >= 1" if key == "critic_subset" else "a valid value"
                raise ConfigError(f"agent.{key}", getattr(self, key), expected)


class SACAgent:
    """act(obs, explore) -> action; update(batch) -> metrics; weights and full state in/out."""

    name = "sac"

    def __init__(self, observation_shapes: dict[str, tuple[int, ...]], action_dim: int, config: SACConfig | None = None,
                 seed: int = 0):
        self.config = config or SACConfig()
        self.config.validate()
        cfg = self.config
        self.observation_shapes = {key: tuple(shape) for key, shape in observation_shapes.items()}
        self.action_dim = action_dim
        self.device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if cfg.device == "auto" else cfg.device)
        torch.manual_seed(seed)
        self.rng = np.random.default_rng(seed)

        self.encoder = ObservationEncoder(self.observation_shapes, cfg.camera_encoder, cfg.camera_feature_dim,
                                          cfg.pretrained_weights).to(self.device)
        features = self.encoder.output_dim
        self.critic = CriticEnsemble(features, action_dim, cfg.hidden, cfg.critic_ensemble).to(self.device)
        self.actor = TanhGaussianActor(features, action_dim, cfg.hidden).to(self.device)
        self.target_encoder = copy.deepcopy(self.encoder).requires_grad_(False)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(np.log(cfg.init_temperature), device=self.device, requires_grad=True)
        self.target_entropy = -action_dim / 2 if cfg.target_entropy is None else cfg.target_entropy

        trainable = [p for p in self.encoder.parameters() if p.requires_grad]
        self.critic_optimizer = torch.optim.Adam(list(self.critic.parameters()) + trainable, lr=cfg.lr)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=cfg.lr)
        self.updates = 0

    # ----------------------------------------------------------------- acting
    def _obs_tensors(self, obs: dict[str, np.ndarray], augment: bool = False) -> dict[str, torch.Tensor]:
        out = {}
        for key, value in obs.items():
            if key not in self.observation_shapes:
                continue
            tensor = torch.as_tensor(value, device=self.device)
            if len(self.observation_shapes[key]) == 3:
                tensor = tensor.permute(0, 3, 1, 2).float()
                if augment and self.config.image_pad:
                    tensor = random_shift(tensor, self.config.image_pad)
            out[key] = tensor
        return out

    @torch.no_grad()
    def act(self, obs: dict[str, np.ndarray], explore: bool = True) -> np.ndarray:
        """Action in [-1, 1]^A for one observation (sampled if ``explore``, else the mode)."""
        batch = self._obs_tensors({key: np.asarray(value)[None] for key, value in obs.items()})
        features = self.encoder(batch)
        action = self.actor.sample(features)[0] if explore else self.actor.mode(features)
        return action[0].cpu().numpy().astype(np.float32)

    # ----------------------------------------------------------------- learning
    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.exp()

    def update(self, sample_batch) -> dict[str, float]:
        """``utd`` critic steps on fresh minibatches from ``sample_batch()``, then actor/temperature."""
        metrics: dict[str, float] = {}
        for _ in range(self.config.utd):
            batch = sample_batch()
            metrics.update(self._update_critic(batch))
            self.updates += 1
            if self.updates % self.config.critic_actor_ratio == 0:
                metrics.update(self._update_actor(batch))
        return metrics

    def _update_critic(self, batch: dict[str, Any]) -> dict[str, float]:
        cfg = self.config
        obs = self._obs_tensors(batch["obs"], augment=True)
        next_obs = self._obs_tensors(batch["next_obs"], augment=True)
        action = torch.as_tensor(batch["action"], device=self.device)
        reward = torch.as_tensor(batch["reward"], device=self.device)
        discount = torch.as_tensor(batch["discount"], device=self.device)  # gamma^n, 0 after termination
        with torch.no_grad():
            next_features = self.encoder(next_obs)
            next_action, next_log_prob = self.actor.sample(next_features)
            subset = self.rng.choice(cfg.critic_ensemble, cfg.critic_subset, replace=False)
            target_q = self.target_critic(self.target_encoder(next_obs), next_action)[subset].min(0).values
            if cfg.backup_entropy:
                target_q = target_q - self.alpha * next_log_prob
            target = reward + discount * target_q
        q = self.critic(self.encoder(obs), action)
        loss = F.mse_loss(q, target.expand_as(q))
        self.critic_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.critic_optimizer.step()
        with torch.no_grad():
            for online, target_net in ((self.critic, self.target_critic), (self.encoder, self.target_encoder)):
                for p, tp in zip(online.parameters(), target_net.parameters()):
                    tp.lerp_(p, cfg.tau)
        return {"critic_loss": loss.item(), "q_mean": q.mean().item(), "target_mean": target.mean().item()}

    def _update_actor(self, batch: dict[str, Any]) -> dict[str, float]:
        obs = self._obs_tensors(batch["obs"], augment=True)
        with torch.no_grad():
            features = self.encoder(obs)
        action, log_prob = self.actor.sample(features)
        q = self.critic(features, action).mean(0)
        actor_loss = (self.alpha.detach() * log_prob - q).mean()
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_optimizer.step()
        alpha_loss = -(self.log_alpha * (log_prob.detach() + self.target_entropy)).mean()
        self.alpha_optimizer.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_optimizer.step()
        return {"actor_loss": actor_loss.item(), "alpha": self.alpha.item(), "entropy": -log_prob.mean().item()}

    # ----------------------------------------------------------------- weights and state
    def policy_state(self) -> dict[str, torch.Tensor]:
        """What an actor needs: encoder and actor weights (CPU tensors)."""
        return {**{f"encoder.{k}": v.cpu() for k, v in self.encoder.state_dict().items()},
                **{f"actor.{k}": v.cpu() for k, v in self.actor.state_dict().items()}}

    def load_policy_state(self, state: dict[str, torch.Tensor]) -> None:
        self.encoder.load_state_dict({k[8:]: v for k, v in state.items() if k.startswith("encoder.")})
        self.actor.load_state_dict({k[6:]: v for k, v in state.items() if k.startswith("actor.")})

    def identity(self) -> dict[str, Any]:
        """What a checkpoint must match to be loaded into this agent."""
        return {"agent": self.name, "observation_shapes": {k: list(v) for k, v in self.observation_shapes.items()},
                "action_dim": self.action_dim}

    def state_dict(self) -> dict[str, Any]:
        return {
            "identity": self.identity(),
            "config": asdict(self.config),
            "modules": {name: getattr(self, name).state_dict() for name in
                        ("encoder", "critic", "actor", "target_encoder", "target_critic")},
            "optimizers": {name: getattr(self, name).state_dict() for name in
                           ("critic_optimizer", "actor_optimizer", "alpha_optimizer")},
            "log_alpha": self.log_alpha.detach().cpu(),
            "updates": self.updates,
            "rng": self.rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        check_identity(state.get("identity", {}), self.identity())
        for name, module_state in state["modules"].items():
            getattr(self, name).load_state_dict(module_state)
        for name, optimizer_state in state["optimizers"].items():
            getattr(self, name).load_state_dict(optimizer_state)
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.updates = state["updates"]
        self.rng.bit_generator.state = state["rng"]


def check_identity(saved: dict[str, Any], current: dict[str, Any]) -> None:
    """Raise a ValueError naming every field where a checkpoint does not fit this agent."""
    diffs = [f"{key}: checkpoint {saved.get(key)!r}, this run {value!r}" for key, value in current.items()
             if saved.get(key) != value]
    if diffs:
        raise ValueError("checkpoint does not match this run: " + "; ".join(diffs))
