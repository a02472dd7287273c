"""Where each received transition goes: the online buffer, the demo buffer, or both, relabelled as the safety
filter asks.

Demo episodes go to the demo buffer, online steps to the online buffer, and every human takeover to the demo buffer
as well, each takeover as a segment of its own (it starts at the observation where the human took over, not where
the last takeover ended). A step the safety filter (or the sim's fast-loop critic) changed costs ``safety.penalty``
and, with ``safety.relabel=proposed``, is learned by the task policy as the action it proposed
(:class:`SafetyRelabel`, which offline data goes through too); the buffers keep the executed action too, for the
safety critic. Several actors may feed one learner: each actor's transitions are one stream (its episodes in
order), the buffers store every stream's episodes whole (:class:`~robot_rl.data.streams.StreamWriter`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robot_rl.data import MixedSampler, ReplayBuffer
from robot_rl.data.streams import StreamWriter
from robot_rl.data.transition import Transition
from robot_rl.policies.pretrained import FrozenFeatures
from robot_rl.runtime.safety_learning import SafetySettings
from robot_rl.safety.fast_critic import FastCriticSettings


@dataclass(frozen=True)
class SafetyRelabel:
    """What the task policy learns from a step the safety filter (or the sim's fast-loop critic) changed, online and
    offline alike: the reward minus ``penalty`` and, with ``proposed`` (``safety.relabel=proposed``), the action the
    policy proposed (Recovery RL: the filter is part of the environment) instead of the executed one."""

    penalty: float = 0.0
    proposed: bool = False

    @classmethod
    def of(cls, safety: SafetySettings | None, fast: FastCriticSettings | None = None) -> SafetyRelabel:
        """The relabelling of a run's ``safety.*``: the penalty when either critic is on (a step the fast-loop critic
        changed is flagged filtered too), the proposed action only with the learned filter on."""
        enabled = safety is not None and safety.enabled
        fast_enabled = fast is not None and fast.enabled
        penalty = safety.penalty if safety is not None and (enabled or fast_enabled) else 0.0
        return cls(penalty, enabled and safety.relabel == "proposed")

    def row(self, t: Transition) -> tuple:
        """``t`` as :meth:`ReplayBuffer.add <robot_rl.data.ReplayBuffer.add>`'s arguments, relabelled; the
        buffers keep the executed action too, for the safety critic. The last one is the action learned."""
        learned = t.policy_action if t.filtered and self.proposed else t.action
        reward = t.reward - self.penalty * t.filtered
        return t.obs, t.action, reward, t.next_obs, t.terminated, t.truncated, t.intervened, t.cost, learned


def replay_space(
    shapes: dict[str, tuple[int, ...]], frozen: FrozenFeatures | None = None
) -> dict[str, tuple[tuple[int, ...], Any]]:
    """What a replay buffer stores of observations of ``shapes``: images uint8 and vectors float32, or with a frozen
    camera backbone its float16 features in place of the images."""
    if frozen is not None:
        return frozen.space(shapes)
    return {key: (tuple(shape), np.uint8 if len(shape) == 3 else np.float32) for key, shape in shapes.items()}


class ReplayRouter:
    """The online and demo buffers (``capacity`` slots each, observations of ``shapes``: images uint8, vectors
    float32; on ``device``), the routing of transitions into them (module docstring) and the sampler of batches that
    mixes them (``demo_fraction`` of each batch from the demo buffer). With ``frozen``, the agent's frozen camera
    backbone (:class:`~robot_rl.policies.pretrained.FrozenFeatures`), the buffers store its features of each frame
    instead of the images."""

    def __init__(
        self,
        capacity: int,
        shapes: dict[str, tuple[int, ...]],
        action_dim: int,
        device,
        relabel: SafetyRelabel,
        demo_fraction: float,
        seed: int,
        frozen: FrozenFeatures | None = None,
    ):
        self.shapes = {key: tuple(shape) for key, shape in shapes.items()}  # the observations as they arrive
        self.encode = None if frozen is None else frozen.store
        space = replay_space(shapes, frozen)
        online, demo = (ReplayBuffer(capacity, space, action_dim, device, self.encode) for _ in range(2))
        self.sampler = MixedSampler(online, demo, demo_fraction, seed=seed)
        self.relabel = relabel
        self.last_step: dict[str, tuple[Any, Any, np.ndarray, bool]] = {}  # per stream: (episode, step, action, human)
        self.use(online, demo)

    def use(self, online: ReplayBuffer, demo: ReplayBuffer) -> None:
        """Write into and sample from these buffers (new ones, or a checkpoint's), written through one
        :class:`StreamWriter` each so several actors' interleaved transitions are stored as whole episodes."""
        self.online, self.demo = online, demo
        self.sampler.online, self.sampler.demo = online, demo
        self.online_streams, self.demo_streams = StreamWriter(online), StreamWriter(demo)

    def add(self, t: Transition) -> None:
        """Store ``t`` (the learner's delivery ledger has accepted it) where it belongs."""
        origin = t.origin
        stream = origin.actor  # one sequence of episodes per actor
        if t.first:  # a new episode, even if the last one never ended (budget, crash)
            self.online_streams.close(stream)
            self.demo_streams.close(stream)
        args = self.relabel.row(t)
        if t.demo:
            self.demo_streams.add(stream, *args)
            return
        self.online_streams.add(stream, *args)
        before = self.last_step.get(stream)
        follows = (
            before is not None
            and not t.first
            and before[0] == origin.episode
            and (origin.step is None or before[1] == origin.step - 1)
        )
        if t.intervened:
            if not (follows and before[3]):  # a new takeover: a segment of its own
                self.demo_streams.close(stream)
            self.demo_streams.add(stream, *args, opening_action=before[2] if follows else None)
        elif follows and before[3]:  # the takeover ended: its segment is complete
            self.demo_streams.close(stream)
        self.last_step[stream] = (origin.episode, origin.step, np.asarray(args[-1]), t.intervened)

    def flush(self) -> None:
        """Write the transitions of other actors' open episodes that wait for their turn (before a checkpoint)."""
        self.online_streams.flush()
        self.demo_streams.flush()

    def save(self, folder: Path) -> dict[str, Any]:
        """Both buffers, with every transition received, into ``folder`` (a checkpoint's, being made); the sampler's
        state for the checkpoint's ``counters.json``."""
        self.flush()
        self.online.save(folder / "online_buffer")
        self.demo.save(folder / "demo_buffer")
        return {"sampler_rng": self.sampler.rng.bit_generator.state}

    def load(self, folder: Path, state: dict[str, Any]) -> None:
        """The buffers :meth:`save` wrote into ``folder`` (on the devices of the present ones) and the state it
        returned."""
        self.use(
            ReplayBuffer.load(folder / "online_buffer", self.online.device, self.encode),
            ReplayBuffer.load(folder / "demo_buffer", self.demo.device, self.encode),
        )
        self.sampler.rng.bit_generator.state = state["sampler_rng"]
