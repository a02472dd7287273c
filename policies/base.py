"""What every robot_rl agent shares: observation tensors, weights for the actor, checkpoints.

An agent is built as ``Agent(observation_shapes, action_dim, config, seed)`` and offers

- ``act(obs, explore) -> action`` in [-1, 1]^A for one observation dict, and ``act_batch(obs, explore) -> (N, A)``
  for N of them (one per env an actor steps): row k acts for *slot* k, whose episode has its own exploration state,
- ``begin_episode(slot=0)`` before the first action of an episode on that slot (noise resampling, gripper command,
  action chunks), ``executed(action, slot=0)`` after each step with the action the env executed there (a human's
  in a take-over, the safety filter's), and ``evaluating()``: a context in which it acts with slots of its own (an evaluation between two
  steps of acting episodes leaves them as they were),
- ``update(sample_batch) -> metrics`` where ``sample_batch()`` draws one minibatch (a
  :class:`~robot_rl.data.batches.Batch` on the agent's device, as :class:`robot_rl.data.MixedSampler` gives them) and the metrics are 0-d tensors on the agent's device, read
  (and so waited for) only when someone logs them,
- ``policy_state()`` / ``load_policy_state()``: the weights an actor needs, ``acting_random_state()`` /
  ``load_acting_random_state()``: what its acting draws from (kept in a checkpoint),
- ``state_dict()`` / ``load_state_dict()``: everything a resumed learner needs,
- ``drop_learning()``: an acting-only agent, as an actor holds it (the policy apart from the algorithm, as LeRobot's
  policies are): the critics, their targets and the optimizers are let go,
- ``sequence_length``: the K of the action sequences its batches must carry (1 = none),
- ``conservative``: set by ``robot-rl pretrain`` (:mod:`robot_rl.policies.conservative`), the CQL / Cal-QL term its
  critic loss adds on offline data (batches then carry ``mc_return`` for Cal-QL); None while learning online.

Subclasses list their modules in ``modules`` / ``policy_modules`` and optimizers in
``optimizers``; :class:`OffPolicyAgent` does the rest. Subclasses run each learning step through
:meth:`OffPolicyAgent.learning_step` and build their optimizers with :meth:`OffPolicyAgent.optimizer_options`.
Three config flags every agent config carries change how, not what, it computes: ``compile`` (``torch.compile`` of
the networks' forward passes; state dicts are unchanged), ``autocast`` (``bf16``: forward passes in bfloat16 under
``torch.autocast``, the critics' heads (Q values, C51 logits), TD targets and losses in float32; ``auto``: bf16 on a CPU with bfloat16 units, float32 elsewhere,
:func:`bf16_helps`) and ``cuda_graph`` (learning steps replayed from CUDA graphs, :mod:`robot_rl.policies.cuda_graph`;
``auto``: on a CUDA device).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from robot_rl.core.config import ConfigError
from robot_rl.data.augment import random_shift
from robot_rl.data.batches import Batch
from robot_rl.policies.conservative import ConservativeConfig
from robot_rl.policies.cuda_graph import GraphedSteps, Step
from robot_rl.policies.encoders import ObservationEncoder, camera_checks
from robot_rl.policies.pretrained import FrozenFeatures


class OffPolicyAgent:
    name = "agent"
    modules: tuple[str, ...] = ()  # saved in checkpoints
    policy_modules: tuple[str, ...] = ()  # sent to the actor
    optimizers: tuple[str, ...] = ()
    acting_slots: tuple[str, ...] = ()  # attributes holding the per-slot acting state (lists, one entry per slot)
    sequence_length = 1
    acting_only = False  # drop_learning() made it an actor's agent
    frozen_features: FrozenFeatures | None = None  # camera_encoder: pretrained (make_encoder)

    def __init__(self, observation_shapes: dict[str, tuple[int, ...]], action_dim: int, config, seed: int = 0):
        config.validate()
        self.config = config
        self.observation_shapes = {key: tuple(shape) for key, shape in observation_shapes.items()}
        self.action_dim = int(action_dim)
        device = config.device
        self.device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)
        torch.manual_seed(seed)  # weight initialisation, on the thread that builds the agent
        # every draw while acting or learning comes from the agent's own generators, never from torch's global
        # one: the actor and learner threads of one run then draw the same numbers however they interleave
        self.generator = torch.Generator(self.device).manual_seed(seed)
        self.seed = seed
        self.updates = 0
        self.bf16 = config.autocast == "bf16" or (config.autocast == "auto" and bf16_helps(self.device))
        # offline pretraining (robot-rl pretrain): the critic loss's conservative term (CQL / Cal-QL); None online
        self.conservative: ConservativeConfig | None = None
        if config.cuda_graph is True and self.device.type != "cuda":
            raise ConfigError("agent.cuda_graph", True, f"false or auto on a {self.device.type} device (no CUDA)")
        graphed = config.cuda_graph is True or (config.cuda_graph == "auto" and self.device.type == "cuda")
        self.graphed_steps = GraphedSteps(self.device, self.generator) if graphed else None
        # acting on a CUDA device runs on a stream of the agent's own: an actor's forward pass does not queue behind
        # a learner's updates in the same process, and waits only for what last wrote this agent's weights
        self.acting_stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        self._weights_written: torch.cuda.Event | None = None

    def optimizer_options(self) -> dict[str, bool]:
        """How every optimizer of a learning step is built: fused (one kernel per step), and with its step count on
        the device when the steps are replayed from CUDA graphs (``capturable``)."""
        return {"fused": True, "capturable": self.graphed_steps is not None}

    def restore_optimizer_options(self, optimizer: torch.optim.Optimizer) -> None:
        """After ``optimizer.load_state_dict``: step as this run does (:meth:`optimizer_options`), not as the run
        that saved the state did (a checkpoint of an eager run holds ``capturable=False``), with the step counts
        where a fused step reads them (float32 on the parameters' device)."""
        for group in optimizer.param_groups:
            group.update(self.optimizer_options())
            for parameter in group["params"]:
                state = optimizer.state.get(parameter, {})
                if "step" in state:
                    state["step"] = torch.as_tensor(state["step"], dtype=torch.float32).to(parameter.device)

    @property
    def graphable(self) -> bool:
        """Whether a learning step may be replayed from a CUDA graph now: not while offline pretraining adds a
        conservative term (its settings are read in Python as it computes)."""
        return self.conservative is None or self.conservative.algorithm == "none"

    def learning_step(self, kind: str, step: Step, batch: Batch) -> dict[str, torch.Tensor]:
        """``step(batch)``'s metrics, where ``step`` is one learning step of ``kind`` (steps of one kind compute
        the same thing on different batches): eager, or replayed from its CUDA graph (``agent.cuda_graph``)."""
        if self.graphed_steps is None or not self.graphable:
            metrics = step(batch)
        else:
            metrics = self.graphed_steps(kind, step, batch)
        self.mark_weights_written()
        return metrics

    def mark_weights_written(self) -> None:
        """On a CUDA device: the weights were written on the current stream up to here (a learning step, a load);
        acting waits for that point, and for nothing else queued on that stream."""
        if self.acting_stream is not None:
            self._weights_written = torch.cuda.current_stream(self.device).record_event()

    @contextlib.contextmanager
    def acting(self) -> Iterator[None]:
        """The context of acting and of loading an actor's weights: on a CUDA device the agent's acting stream,
        after the last write of its weights (the first time: after whatever the current stream has queued, the
        weights' initialisation included); elsewhere nothing."""
        if self.acting_stream is None:
            yield
            return
        if self._weights_written is None:
            self.mark_weights_written()
        self.acting_stream.wait_event(self._weights_written)
        with torch.cuda.stream(self.acting_stream):
            yield

    @contextlib.contextmanager
    def evaluating(self) -> Iterator[None]:
        """Act with acting state of its own inside (an evaluation between two steps of acting episodes): every
        slot's state (gSDE noise, held gripper command, CQN-AS action chunks) and the generator's are set aside and
        put back after, so the episodes in progress go on as if nothing had acted in between."""
        slots = {name: getattr(self, name) for name in self.acting_slots}
        generator = self.generator.get_state()
        for name in slots:
            setattr(self, name, [])
        try:
            yield
        finally:
            for name, states in slots.items():
                setattr(self, name, states)
            self.generator.set_state(generator)

    def compile_networks(self, *names: str) -> None:
        """With ``config.compile``: compile the forward passes of the named modules in place (their state dicts,
        and so checkpoints, keep their keys)."""
        if self.config.compile:
            for name in names:
                getattr(self, name).compile()

    def autocast(self) -> torch.autocast:
        """The context of the learning forward passes: bfloat16 autocast when :attr:`bf16` (``config.autocast``
        ``bf16``, or ``auto`` where :func:`bf16_helps`)."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def make_encoder(self) -> ObservationEncoder:
        """The trained encoder; with ``camera_encoder: pretrained`` also :attr:`frozen_features`, the frozen
        backbone beside it (never among the saved or sent modules) and what the replay stores for the cameras."""
        cfg = self.config
        encoder = ObservationEncoder(
            self.observation_shapes,
            cfg.camera_encoder,
            cfg.camera_feature_dim,
            cfg.camera_strides,
            cfg.pretrained_blocks,
        ).to(self.device)
        if cfg.camera_encoder == "pretrained" and encoder.cameras:
            cameras = {key: self.observation_shapes[key] for key in encoder.cameras}
            self.frozen_features = FrozenFeatures(
                cameras, cfg.pretrained_blocks, cfg.pretrained_views, cfg.image_pad, self.device, self.generator
            )
        return encoder

    def begin_episode(self, slot: int = 0) -> None:
        """Called by the actor before the first action of every episode on ``slot`` (stateless agents: nothing)."""

    def executed(self, action: np.ndarray, slot: int = 0) -> None:
        """Called by the actor after every step on ``slot`` with the action the env executed (the human's in a
        take-over, the safety filter's, else its own): acting state that continues from the command in force (the
        gripper critic's held command) follows it (stateless agents: nothing)."""

    def observe(self, transition) -> None:
        """Called by the learner with every online transition it ingests, in order (agents that learn from whole
        episodes, as the open-loop search does; replay-based agents: nothing)."""

    def act(self, obs: dict[str, np.ndarray], explore: bool = True) -> np.ndarray:
        """Action in [-1, 1]^A for one observation (slot 0): sampled if ``explore``, else the policy's mode."""
        return self.act_batch({key: np.asarray(value)[None] for key, value in obs.items()}, explore)[0]

    def act_batch(self, obs: dict[str, np.ndarray], explore: bool = True) -> np.ndarray:
        """Actions (N, A) float32 in [-1, 1] for N observations (arrays with a leading N), in one forward pass; row
        k acts for slot k. On a CUDA device on the agent's acting stream (:meth:`acting`)."""
        with self.acting():
            return self._act_batch(obs, explore)

    def _act_batch(self, obs: dict[str, np.ndarray], explore: bool) -> np.ndarray:
        """:meth:`act_batch`'s computation, which each agent defines."""
        raise NotImplementedError

    def obs_tensors(self, obs: dict[str, np.ndarray | torch.Tensor], augment: bool = False) -> dict[str, torch.Tensor]:
        """Batched observations (arrays or tensors; images uint8 (B, H, W, C)) -> tensors on the agent's device;
        images to (B, C, H, W) float in [0, 255], DrQ-shifted (before the conversion) if ``augment``. With a frozen
        backbone (:attr:`frozen_features`) a camera's entry becomes its features (B, C, h, w): of the images, or of
        a replay batch's stored views (B, views, C, h, w), one view drawn per row if ``augment``, else view 0."""
        out = {}
        frozen = self.frozen_features
        for key, value in obs.items():
            if key not in self.observation_shapes:
                continue
            tensor = torch.as_tensor(value, device=self.device)
            if len(self.observation_shapes[key]) == 3:
                if frozen is not None:
                    stored = tensor.ndim == 5
                    out[key] = (
                        frozen.pick(tensor, augment) if stored else frozen.frames(key, tensor.permute(0, 3, 1, 2))
                    )
                    continue
                tensor = tensor.permute(0, 3, 1, 2)
                if augment and self.config.image_pad:
                    tensor = random_shift(tensor, self.config.image_pad, self.generator)
                tensor = tensor.float()
            out[key] = tensor
        return out

    def encode_batch(
        self, batch: Batch
    ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
        """(obs, next_obs, features, next_features) of a training batch of B rows: the observations as
        :meth:`obs_tensors` makes them (augmented; both halves in one pass, each image with its own shift) and
        their encoder features (B, F): with gradients for ``obs`` when the encoder trains, without for
        ``next_obs``. An encoder with nothing to train (state only) encodes both halves in one pass."""
        rows = len(batch)
        if self.frozen_features is None:
            both = self.obs_tensors(
                {
                    key: torch.cat([value, batch.next_obs[key]])
                    for key, value in batch.obs.items()
                    if key in self.observation_shapes
                },
                augment=True,
            )
        else:  # each half's feature views picked before the halves are joined: a batch holds every stored view
            obs, next_obs = (self.obs_tensors(half, augment=True) for half in (batch.obs, batch.next_obs))
            both = {key: torch.cat([obs[key], next_obs[key]]) for key in obs}
        obs = {key: value[:rows] for key, value in both.items()}
        next_obs = {key: value[rows:] for key, value in both.items()}
        if not self.encoder_trains:
            features, next_features = self.encoder(both).split(rows)
            return obs, next_obs, features, next_features
        features = self.encoder(obs)
        with torch.no_grad():
            next_features = self.encoder(next_obs)
        return obs, next_obs, features, next_features

    @property
    def encoder_trains(self) -> bool:
        """Whether the encoder has parameters to learn (cameras); a state-only encoder has none."""
        return any(parameter.requires_grad for parameter in self.encoder.parameters())

    def normal_noise(self, like: torch.Tensor) -> torch.Tensor:
        """Standard normal noise shaped and placed like ``like``, drawn from the agent's own generator."""
        noise = torch.randn(like.shape, generator=self.generator, device=self.generator.device, dtype=like.dtype)
        return noise.to(like.device)

    # ----------------------------------------------------------------- weights and state
    def policy_state(self) -> dict[str, torch.Tensor]:
        """What an actor needs (keys ``<module>.<parameter>``): CPU copies, never views of the live parameters,
        so weights published as version k stay version k while the learner goes on updating."""
        return {
            f"{name}.{key}": value.to("cpu", copy=True)
            for name in self.policy_modules
            for key, value in getattr(self, name).state_dict().items()
        }

    def load_policy_state(self, state: dict[str, torch.Tensor]) -> None:
        """Load the weights :meth:`policy_state` gave (an actor's), on the acting stream (:meth:`acting`)."""
        with self.acting():
            for name in self.policy_modules:
                prefix = name + "."
                module_state = {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
                getattr(self, name).load_state_dict(module_state)

    def identity(self) -> dict[str, Any]:
        """What a checkpoint must match to be loaded into this agent."""
        return {
            "agent": self.name,
            "observation_shapes": {k: list(v) for k, v in self.observation_shapes.items()},
            "action_dim": self.action_dim,
        }

    def acting_random_state(self) -> dict[str, Any]:
        """What acting draws from (exploration noise, CQN's tie-breaks), JSON-able: a checkpoint keeps it, so a resumed
        actor goes on drawing where it was instead of from the seed again."""
        return {"generator": base64.b64encode(self.generator.get_state().numpy().tobytes()).decode()}

    def load_acting_random_state(self, state: dict[str, Any]) -> None:
        """Draw on from :meth:`acting_random_state`'s ``state`` (an empty one, of a checkpoint without it: from the
        seed)."""
        if "generator" in state:
            self.generator.set_state(
                torch.frombuffer(bytearray(base64.b64decode(state["generator"])), dtype=torch.uint8)
            )

    def extra_state(self) -> dict[str, Any]:
        """Checkpointed state outside modules and optimizers (e.g. a temperature)."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        return {
            "identity": self.identity(),
            "config": asdict(self.config),
            "modules": {name: getattr(self, name).state_dict() for name in self.modules},
            "optimizers": {name: getattr(self, name).state_dict() for name in self.optimizers},
            "extra": self.extra_state(),
            "updates": self.updates,
            "generator": self.generator.get_state(),
        }

    def drop_learning(self) -> OffPolicyAgent:
        """Make this an acting-only agent, as an actor holds it (it loads :meth:`policy_state` weights and acts): the
        modules outside ``policy_modules`` (critics, their targets, auxiliary heads), the optimizers with their
        moments and any recorded learning steps are let go. They are built first and dropped after, so the policy's
        initial weights are the same as a learner's of the same seed. Acting, evaluating and :meth:`policy_state`
        are unchanged; :meth:`load_state_dict` then takes a checkpoint's policy modules only; learning is gone.
        Returns the agent."""
        for name in (*self.modules, *self.optimizers):
            if name not in self.policy_modules:
                delattr(self, name)
        self.modules, self.optimizers, self.graphed_steps = self.policy_modules, (), None
        self.acting_only = True
        return self

    def load_state_dict(self, state: dict[str, Any]) -> None:
        check_identity(state.get("identity", {}), self.identity())
        if self.graphed_steps is not None:  # the recordings read the optimizers' state tensors, replaced below
            self.graphed_steps.clear()
        for name, module_state in state["modules"].items():
            if not self.acting_only or name in self.policy_modules:
                getattr(self, name).load_state_dict(module_state)
        for name, optimizer_state in state["optimizers"].items():
            if self.acting_only:
                break
            optimizer = getattr(self, name)
            optimizer.load_state_dict(optimizer_state)
            self.restore_optimizer_options(optimizer)
        self.load_extra_state(state["extra"])
        self.updates = state["updates"]  # an "rng" saved before every draw came from the generator is not needed
        if "generator" in state:  # checkpoints before the agent had its own generator lack it
            self.generator.set_state(state["generator"].cpu())  # a ByteTensor in host memory, whatever map_location
        self.mark_weights_written()


@dataclass
class AgentConfig:
    """The settings every agent's config has (the defaults: ``configs/agent/<agent>.yaml``): its camera encoder and
    where and how it computes."""

    camera_encoder: str  # cnn (trained from scratch) | pretrained (frozen EfficientNet-Lite0, a trained head)
    camera_feature_dim: int
    camera_strides: list[int]  # cnn: one 3x3 conv per stride
    pretrained_blocks: int  # pretrained: EfficientNet-Lite0's MBConv blocks kept (1-16)
    pretrained_views: int  # pretrained: feature views stored per frame (view 0 unshifted, the others shifted)
    image_pad: int  # random-shift augmentation (pixels)
    device: str  # auto: cuda when available
    compile: bool  # torch.compile the networks' forward passes
    autocast: str | None  # bf16: forward passes in bfloat16; auto: bf16 where it helps (bf16_helps); null: float32
    cuda_graph: bool | str  # learning steps replayed from CUDA graphs; auto: on a CUDA device

    def shared_checks(self) -> dict[str, tuple[bool, str]]:
        """``validate`` checks (``require_all`` format) of these settings."""
        return {
            **camera_checks(self),
            "compile": (isinstance(self.compile, bool), "true or false"),
            "autocast": (self.autocast in (None, "bf16", "auto"), "null (float32), bf16 or auto"),
            "cuda_graph": (
                isinstance(self.cuda_graph, bool) or self.cuda_graph == "auto",
                "true, false or auto (true on a CUDA device)",
            ),
        }


def bf16_helps(device: torch.device) -> bool:
    """Whether ``autocast: auto`` computes in bfloat16 on ``device``: on a CPU with bfloat16 matrix units
    (AVX512-BF16 or AMX), where it made the state and the pixel updates faster than float32; not on a GPU, where the
    state update is bound by kernel launches and bf16 made it slower (``benchmarks/learner_speed.py``, its results in
    ``benchmarks/results/learner_speed_*.json``)."""
    if device.type != "cpu":
        return False
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")  # torch's own CPU checks (private: may go)
    return any(getattr(torch.cpu, probe, lambda: False)() for probe in probes)


def slot_states(states: list[Any], count: int, make: Callable[[int], Any]) -> list[Any]:
    """The acting state of slots 0..count-1: ``states`` grown in place with ``make(slot)`` as new slots appear."""
    while len(states) < count:
        states.append(make(len(states)))
    return states[:count]


def check_identity(saved: dict[str, Any], current: dict[str, Any]) -> None:
    """Raise a ValueError naming every field where a checkpoint does not fit this agent."""
    diffs = [
        f"{key}: checkpoint {saved.get(key)!r}, this run {value!r}"
        for key, value in current.items()
        if saved.get(key) != value
    ]
    if diffs:
        raise ValueError("checkpoint does not match this run: " + "; ".join(diffs))


def soft_update(online: torch.nn.Module, target: torch.nn.Module, tau: float) -> None:
    """target <- (1 - tau) target + tau online, for every parameter at once."""
    with torch.no_grad():
        targets = list(target.parameters())
        if targets:
            torch._foreach_lerp_(targets, list(online.parameters()), tau)
