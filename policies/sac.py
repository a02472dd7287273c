"""SAC in the RLPD / HIL-SERL style, for state and pixel observations.

- an ensemble of ``critic_ensemble`` LayerNorm critics; the target takes the minimum over a
  random subset of ``critic_subset`` target members, and the actor maximises the ensemble mean
- ``utd`` critic updates per :meth:`update` call (one minibatch each), then the actor and the
  temperature once every ``critic_actor_ratio`` critic updates, on the last minibatch
- temperature learned toward the target entropy -|A|/2 of the exploration noise before the tanh
  (``actor.noise_entropy``: the squashed action's entropy has no floor as the demos pull the mean to +-1, and a
  temperature chasing it climbed for thousands of steps, noisier and noisier actions the operator paid for); no entropy
  term in the backup unless ``backup_entropy``
- cameras: a CNN per camera trained by the critic loss (the actor reuses the critic batch's
  features, detached), DrQ random shift on sampled images
- ``privileged_state`` in the observation (``task.privileged_state``, sim only): the critics also
  read the simulator's clean state (asymmetric actor-critic); the actor never does
- ``exploration: gsde``: state-dependent exploration (:mod:`robot_rl.policies.gsde`), noise held for
  ``sde_sample_freq`` steps (default 8; -1: one draw per episode), also during warm-up; the
  actor loss adds the gSDE mean penalty (|mu| beyond 2)
- ``exploration: bang_bang``: a Bernoulli policy over each dimension's extremes (:mod:`robot_rl.policies.bang_bang`),
  its target entropy a quarter of A ln 2 unless ``target_entropy`` says otherwise
- ``bc_weight``: the actor's loss also pulls the policy's mode towards the demo and intervention rows' actions
- ``ssl: latent``: a latent-prediction loss on the camera encoder (:mod:`robot_rl.policies.latent_prediction`)
- ``gripper_critic``: the last action dimension is chosen by a discrete DQN critic over
  {open, stay, close} with a grasp penalty (:mod:`robot_rl.policies.gripper`)

An update never waits on the device: metrics stay tensors and the target's critic subset is drawn on the device;
the actor's backward pass goes through the critic to the action without computing the critic's weight gradients.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from robot_rl.core.config import ConfigError, choice, is_integer, is_number, require_all, yaml_defaults
from robot_rl.core.observation_keys import PRIVILEGED_KEY
from robot_rl.data.batches import Batch, BatchSource
from robot_rl.policies.anchor import PolicyAnchor
from robot_rl.policies.bang_bang import BernoulliActor, default_target_entropy
from robot_rl.policies.base import AgentConfig, OffPolicyAgent, slot_states, soft_update
from robot_rl.policies.conservative import behaviour_cloning, continuous_penalty
from robot_rl.policies.gripper import GripperCritic, GripperPolicy, gripper_loss
from robot_rl.policies.gsde import GSDEActor, NoiseSchedule
from robot_rl.policies.latent_prediction import LatentPredictor, latent_prediction_loss
from robot_rl.policies.networks import CriticEnsemble, TanhGaussianActor


@yaml_defaults("agent/sac.yaml")
class SACConfig(AgentConfig):
    hidden: list[int]
    critic_ensemble: int
    critic_subset: int
    discount: float
    lr: float
    tau: float
    init_temperature: float
    target_entropy: float | None  # default -|A| / 2
    backup_entropy: bool
    utd: int
    critic_actor_ratio: int
    exploration: str  # gaussian | gsde | bang_bang
    sde_sample_freq: int  # gSDE: env steps per noise draw, -1 = once per episode
    sde_log_std_init: float  # gSDE: initial std of the action noise ~0.18 at 256 features
    sde_full_std: bool
    sde_use_expln: bool
    gripper_critic: bool
    grasp_penalty: float
    gripper_epsilon: float  # random gripper class while exploring
    gripper_initial_command: float  # the command an episode starts with (-1 open)
    bc_weight: float  # pull of the policy's mode towards the demo/intervention rows' actions, relative to |Q|
    ssl: str | None  # null | latent: a self-supervised loss on the camera encoder (policies/latent_prediction.py)
    ssl_weight: float

    def validate(self) -> None:
        choice("agent.exploration", self.exploration, ("gaussian", "gsde", "bang_bang"))
        if self.ssl is not None:
            choice("agent.ssl", self.ssl, ("latent",))
        checks = {
            **self.shared_checks(),
            "hidden": (
                isinstance(self.hidden, (list, tuple))
                and len(self.hidden) >= 1
                and all(is_integer(width) and width >= 1 for width in self.hidden),
                "a non-empty list of positive integers (layer widths)",
            ),
            "critic_ensemble": (is_integer(self.critic_ensemble) and self.critic_ensemble >= 1, "an integer >= 1"),
            "critic_subset": (
                is_integer(self.critic_subset) and 1 <= self.critic_subset <= self.critic_ensemble,
                f"<= critic_ensemble={self.critic_ensemble} and >= 1",
            ),
            "utd": (is_integer(self.utd) and self.utd >= 1, "an integer >= 1"),
            "critic_actor_ratio": (
                is_integer(self.critic_actor_ratio) and self.critic_actor_ratio >= 1,
                "an integer >= 1",
            ),
            "discount": (is_number(self.discount) and 0.0 < self.discount <= 1.0, "a number in (0, 1]"),
            "lr": (is_number(self.lr) and self.lr > 0, "a positive finite number"),
            "tau": (is_number(self.tau) and 0.0 < self.tau <= 1.0, "a number in (0, 1]"),
            "init_temperature": (
                is_number(self.init_temperature) and self.init_temperature > 0,
                "a positive finite number",
            ),
            "target_entropy": (
                self.target_entropy is None or is_number(self.target_entropy),
                "null (-|A| / 2) or a finite number",
            ),
            "sde_sample_freq": (
                is_integer(self.sde_sample_freq) and (self.sde_sample_freq == -1 or self.sde_sample_freq >= 1),
                "-1 (once per episode) or a positive number of steps",
            ),
            "sde_log_std_init": (is_number(self.sde_log_std_init), "a finite number (log sigma)"),
            "ssl_weight": (is_number(self.ssl_weight) and self.ssl_weight >= 0, "a number >= 0"),
            "bc_weight": (is_number(self.bc_weight) and self.bc_weight >= 0, "a number >= 0 (0: no behaviour cloning)"),
            "grasp_penalty": (is_number(self.grasp_penalty) and self.grasp_penalty >= 0, "a number >= 0"),
            "gripper_epsilon": (
                is_number(self.gripper_epsilon) and 0.0 <= self.gripper_epsilon <= 1.0,
                "a number in [0, 1]",
            ),
            "gripper_initial_command": (
                is_number(self.gripper_initial_command) and -1.0 <= self.gripper_initial_command <= 1.0,
                "a number in [-1, 1]",
            ),
        }
        require_all("agent", self, checks)


class SACAgent(OffPolicyAgent):
    """act(obs, explore) -> action; update(batch) -> metrics; weights and full state in/out."""

    name = "sac"
    config_class: type[SACConfig] = SACConfig  # the settings a config of None means
    optimizers = ("critic_optimizer", "actor_optimizer", "alpha_optimizer")
    acting_slots = ("_noise_schedules", "_gripper_policies")

    def __init__(
        self,
        observation_shapes: dict[str, tuple[int, ...]],
        action_dim: int,
        config: SACConfig | None = None,
        seed: int = 0,
    ):
        super().__init__(observation_shapes, action_dim, config or self.config_class(), seed)
        cfg = self.config
        if cfg.gripper_critic and action_dim < 2:
            raise ConfigError("agent.gripper_critic", True, "an action with arm dimensions before the gripper")
        self.continuous_dim = action_dim - 1 if cfg.gripper_critic else action_dim
        self.encoder = self.make_encoder()
        features = self.encoder.output_dim
        self.privileged = PRIVILEGED_KEY in self.observation_shapes
        # what the critics read (critic_input): the features and the privileged state when there is one
        self.critic_inputs = features + (self.observation_shapes[PRIVILEGED_KEY][0] if self.privileged else 0)
        self.critic = CriticEnsemble(self.critic_inputs, self.continuous_dim, cfg.hidden, cfg.critic_ensemble).to(
            self.device
        )
        if cfg.exploration == "gsde":
            self.actor = GSDEActor(
                features, self.continuous_dim, cfg.hidden, cfg.sde_log_std_init, cfg.sde_full_std, cfg.sde_use_expln
            ).to(self.device)
        elif cfg.exploration == "bang_bang":
            self.actor = BernoulliActor(features, self.continuous_dim, cfg.hidden).to(self.device)
        else:
            self.actor = TanhGaussianActor(features, self.continuous_dim, cfg.hidden).to(self.device)
        self._noise_schedules: list[NoiseSchedule] = []  # per acting slot (gsde)
        self._gripper_policies: list[GripperPolicy] = []  # per acting slot (gripper critic)
        self.target_encoder = copy.deepcopy(self.encoder).requires_grad_(False)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.log_alpha = torch.tensor(np.log(cfg.init_temperature), device=self.device, requires_grad=True)
        default_target = (
            default_target_entropy(self.continuous_dim) if cfg.exploration == "bang_bang" else -self.continuous_dim / 2
        )
        self.target_entropy = default_target if cfg.target_entropy is None else cfg.target_entropy

        critic_parameters = list(self.critic.parameters()) + [p for p in self.encoder.parameters() if p.requires_grad]
        self.modules = ("encoder", "critic", "actor", "target_encoder", "target_critic")
        self.policy_modules = ("encoder", "actor")
        if cfg.ssl is not None:
            if not self.encoder_trains:
                raise ConfigError("agent.ssl", cfg.ssl, "null without a camera (no encoder trains on state alone)")
            self.ssl_predictor = LatentPredictor(features, self.continuous_dim).to(self.device)
            critic_parameters += list(self.ssl_predictor.parameters())
            self.modules += ("ssl_predictor",)
        if cfg.gripper_critic:
            self.gripper_critic = GripperCritic(features, cfg.hidden).to(self.device)
            self.target_gripper_critic = copy.deepcopy(self.gripper_critic).requires_grad_(False)
            critic_parameters += list(self.gripper_critic.parameters())
            self.modules += ("gripper_critic", "target_gripper_critic")
            self.policy_modules += ("gripper_critic",)
        options = self.optimizer_options()
        self.critic_optimizer = torch.optim.Adam(critic_parameters, lr=cfg.lr, **options)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=cfg.lr, **options)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=cfg.lr, **options)
        self.anchor: PolicyAnchor | None = None  # a warm start's pull towards the pretrained policy
        self.add_modules()
        self.compile_networks(*self.modules)

    def anchor_policy(self, weight: float, env_steps: int, tau: float = 0.0) -> None:
        """Pull the policy towards its present self with ``weight``, decaying to 0 over the actor updates of
        ``env_steps`` online steps, the anchor following the policy by ``tau`` per update (a warm start,
        :mod:`robot_rl.policies.anchor`); weight 0: no anchor."""
        actor_updates = env_steps * self.config.utd // self.config.critic_actor_ratio
        self.anchor = PolicyAnchor(self.actor, weight, actor_updates, tau=tau) if weight > 0 and actor_updates else None

    # ----------------------------------------------------------------- acting
    def noise_schedules(self, count: int) -> list[NoiseSchedule]:
        """gSDE: when each of slots 0..count-1 draws its next exploration matrix."""
        return slot_states(self._noise_schedules, count, lambda slot: NoiseSchedule(self.config.sde_sample_freq))

    def gripper_policies(self, count: int) -> list[GripperPolicy]:
        """Gripper critic: the held command of each of slots 0..count-1 (slot k's epsilon draws from seed + k)."""
        cfg = self.config
        return slot_states(
            self._gripper_policies,
            count,
            lambda slot: GripperPolicy(cfg.gripper_initial_command, cfg.gripper_epsilon, self.seed + slot),
        )

    def begin_episode(self, slot: int = 0) -> None:
        if self.config.exploration == "gsde":
            self.noise_schedules(slot + 1)[slot].begin_episode()
        if self.config.gripper_critic:
            self.gripper_policies(slot + 1)[slot].begin_episode()

    def executed(self, action: np.ndarray, slot: int = 0) -> None:
        if self.config.gripper_critic:
            self.gripper_policies(slot + 1)[slot].follow(float(action[-1]))

    @torch.no_grad()
    def _act_batch(self, obs: dict[str, np.ndarray], explore: bool) -> np.ndarray:
        features = self.encoder(self.obs_tensors(obs))
        count = features.shape[0]
        if not explore:
            action = self.actor.mode(features)
        elif self.config.exploration == "gsde":
            matrices = [schedule.current(self.actor, self.generator) for schedule in self.noise_schedules(count)]
            action = self.actor.explore(features, matrices[0] if count == 1 else torch.stack(matrices))
        else:
            action = self.actor.sample(features, generator=self.generator)[0]
        action = action.cpu().numpy().astype(np.float32)
        if self.config.gripper_critic:
            q_values = self.gripper_critic(features)  # (E, N, 3)
            commands = [
                policy(q_values[:, k : k + 1], explore) for k, policy in enumerate(self.gripper_policies(count))
            ]
            action = np.concatenate([action, np.asarray(commands, np.float32)[:, None]], axis=1)
        return action

    def acting_random_state(self) -> dict[str, Any]:
        """The generator's state and each slot's gripper epsilon draws (numpy generator states)."""
        gripper = [policy.rng.bit_generator.state for policy in self._gripper_policies]
        return {**super().acting_random_state(), "gripper": gripper}

    def load_acting_random_state(self, state: dict[str, Any]) -> None:
        super().load_acting_random_state(state)
        gripper = state.get("gripper", [])
        for policy, saved in zip(self.gripper_policies(len(gripper)), gripper):
            policy.rng.bit_generator.state = saved

    # ----------------------------------------------------------------- learning
    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.exp()

    def critic_input(self, features: torch.Tensor, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """What the critics read: the policy's features, then the privileged state when there is one."""
        return torch.cat([features, obs[PRIVILEGED_KEY].float()], dim=-1) if self.privileged else features

    def update(self, sample_batch: BatchSource) -> dict[str, torch.Tensor]:
        """``utd`` critic steps on fresh minibatches from ``sample_batch()``, then actor/temperature; the last
        value of each metric, 0-d tensors on the agent's device."""
        metrics: dict[str, torch.Tensor] = {}
        for _ in range(self.config.utd):
            self.updates += 1
            if self.updates % self.config.critic_actor_ratio == 0:
                metrics.update(self.learning_step("critic_actor", self._critic_and_actor_step, sample_batch()))
            else:
                metrics.update(self.learning_step("critic", self._critic_step, sample_batch()))
        return metrics

    @property
    def graphable(self) -> bool:
        """Not while a warm start's anchor pulls the policy (its weight decays in Python, update by update)."""
        return super().graphable and (self.anchor is None or self.anchor.done)

    def _critic_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        return self._update_critic(batch)[0]

    def _critic_and_actor_step(self, batch: Batch) -> dict[str, torch.Tensor]:
        metrics, features, obs = self._update_critic(batch)
        return {**metrics, **self._update_actor(features, obs, batch.action, batch.is_demo)}

    def _update_critic(self, batch: Batch) -> tuple[dict[str, torch.Tensor], torch.Tensor, dict[str, torch.Tensor]]:
        """One critic step; returns its metrics, the batch's (augmented) features, detached for the
        actor, and the batch's observation tensors."""
        cfg = self.config
        action, reward, discount = batch.action, batch.reward, batch.discount  # discount: gamma^n, 0 after termination
        with self.autocast():
            obs, next_obs, features, next_features = self.encode_batch(batch)
            with torch.no_grad():
                next_action, next_log_prob = self.actor.sample(next_features, generator=self.generator)
                # a state-only target encoder has no weights: it is the encoder
                target_next_features = self.target_encoder(next_obs) if self.encoder_trains else next_features
                target_q = self.target_critic(self.critic_input(target_next_features, next_obs), next_action)
                if cfg.critic_subset < cfg.critic_ensemble:
                    members = torch.randperm(cfg.critic_ensemble, generator=self.generator, device=self.device)
                    target_q = target_q[members[: cfg.critic_subset]]
                target_q = target_q.amin(0)  # float32 (the critic's heads are), as are the target and the loss
                if cfg.backup_entropy:
                    target_q = target_q - self.alpha * next_log_prob.float()
                target = reward + discount * target_q
            q = self.critic(self.critic_input(features, obs), action[:, : self.continuous_dim])
        loss = F.mse_loss(q, target.expand_as(q))
        metrics = {"critic_loss": loss.detach(), "q_mean": q.detach().mean(), "target_mean": target.mean()}
        if self.conservative is not None and self.conservative.algorithm != "none":
            with self.autocast():
                penalty, conservative_metrics = continuous_penalty(
                    self.conservative,
                    self.critic,
                    lambda rows: self.actor.sample(rows, generator=self.generator),
                    self.critic_input(features, obs),
                    features,
                    next_features,
                    q,
                    batch.mc_return,
                    self.generator,
                )
            loss = loss + penalty
            metrics.update(conservative_metrics)
        if cfg.ssl is not None:
            with self.autocast():
                ssl_loss = latent_prediction_loss(
                    self.ssl_predictor, features, action[:, : self.continuous_dim], target_next_features
                )
            loss = loss + cfg.ssl_weight * ssl_loss
            metrics["ssl_loss"] = ssl_loss.detach()
        if cfg.gripper_critic:
            previous = torch.where(batch.has_previous, batch.previous_action[:, -1], cfg.gripper_initial_command)
            gripper, gripper_metrics = gripper_loss(
                self.gripper_critic,
                self.target_gripper_critic,
                features,
                target_next_features,
                action[:, -1],
                previous,
                reward,
                discount,
                cfg.grasp_penalty,
            )
            loss = loss + gripper
            metrics.update(gripper_metrics)
        self.critic_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.critic_optimizer.step()
        soft_update(self.critic, self.target_critic, cfg.tau)
        soft_update(self.encoder, self.target_encoder, cfg.tau)
        if cfg.gripper_critic:
            soft_update(self.gripper_critic, self.target_gripper_critic, cfg.tau)
        return metrics, features.detach(), obs

    def _update_actor(
        self,
        features: torch.Tensor,
        obs: dict[str, torch.Tensor],
        data_action: torch.Tensor | None = None,
        is_demo: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """One actor and temperature step on the critic's last batch (DrQ-v2: same view, encoder frozen); offline
        with ``conservative.bc_weight``, the policy's mode is also pulled towards the data's actions. Online with
        ``bc_weight``, the mode is pulled towards the actions of the batch's demo and intervention rows (``is_demo``),
        the pull scaled by the batch's mean |Q| (TD3+BC), so the weight does not depend on the reward's scale."""
        with self.autocast():
            action, log_prob = self.actor.sample(features, generator=self.generator)
            log_prob = log_prob.float()
            q = self.critic(self.critic_input(features, obs), action).mean(0)
            actor_loss = (self.alpha.detach() * log_prob - q).mean()
            if self.config.exploration == "gsde":
                actor_loss = actor_loss + self.actor.mean_penalty(features).float()
            if self.conservative is not None and self.conservative.bc_weight and data_action is not None:
                data = data_action[:, : self.continuous_dim]
                actor_loss = actor_loss + self.conservative.bc_weight * behaviour_cloning(
                    self.actor.mode(features), data
                )
            penalty = self.constraint_penalty(features, obs, action)
            if penalty is not None:
                actor_loss = actor_loss + penalty
            if self.config.bc_weight and data_action is not None and is_demo is not None:
                pull = behaviour_cloning(
                    self.actor.mode(features), data_action[:, : self.continuous_dim], rows=is_demo.float()
                )
                actor_loss = actor_loss + self.config.bc_weight * q.detach().abs().mean().float() * pull
            anchored = self.anchor is not None and not self.anchor.done
            if anchored:
                anchor_weight = self.anchor.current_weight
                actor_loss = actor_loss + self.anchor.loss(self.actor, features)
        with torch.no_grad(), self.autocast():  # of the policy that acted in the loss, before its step
            noise_entropy = self.actor.noise_entropy(features).float()
        self.actor_optimizer.zero_grad(set_to_none=True)
        # only the actor's gradients: through the critic to the action, never into the critic's weights
        actor_loss.backward(inputs=list(self.actor.parameters()))
        self.actor_optimizer.step()
        if anchored:
            self.anchor.follow(self.actor)
        alpha_loss = (self.log_alpha * (noise_entropy - self.target_entropy)).mean()
        self.alpha_optimizer.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_optimizer.step()
        metrics = {
            "actor_loss": actor_loss.detach(),
            "alpha": self.alpha.detach(),
            "entropy": noise_entropy.mean(),
            "squashed_entropy": -log_prob.detach().mean(),
        }
        if anchored:
            metrics["anchor_weight"] = torch.tensor(anchor_weight)
        return metrics

    def add_modules(self) -> None:
        """A subclass's own networks and optimizers, made at the end of ``__init__`` (listed in ``modules``)."""

    def constraint_penalty(
        self, features: torch.Tensor, obs: dict[str, torch.Tensor], action: torch.Tensor
    ) -> torch.Tensor | None:
        """A term added to the actor's loss for the policy's ``action`` (a constrained subclass's cost); None: none."""
        return None

    # ----------------------------------------------------------------- state
    def identity(self) -> dict[str, Any]:
        return {
            **super().identity(),
            "exploration": self.config.exploration,
            "gripper_critic": self.config.gripper_critic,
        }

    def extra_state(self) -> dict[str, Any]:
        extra = {"log_alpha": self.log_alpha.detach().cpu()}
        if self.anchor is not None and not self.anchor.done:
            extra["anchor"] = self.anchor.state()
        return extra

    def load_extra_state(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.anchor = PolicyAnchor.from_state(self.actor, state["anchor"]) if "anchor" in state else None
