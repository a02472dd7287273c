"""Replay batches: what a batch holds (:class:`Batch`, as Stable-Baselines3's ``ReplayBufferSamples``), the one type
the replay buffers and samplers give and every agent's learning step takes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence

import torch

OBSERVATIONS = ("obs", "next_obs")  # the fields that hold {key: tensor}


@dataclasses.dataclass(frozen=True)
class Batch:
    """A batch of transitions as the replay buffers give it (:meth:`~robot_rl.data.ReplayBuffer.sample`), tensors
    on one device (the learner's); B rows, A action dimensions, K the action-sequence length.

    Every batch has the fields without a default; the others are None where the sampling made none (K = 1, no
    returns-to-go, one buffer).
    """

    obs: dict[str, torch.Tensor]  # {key: (B, *shape)} in the stored dtypes: uint8 images, float32 vectors
    next_obs: dict[str, torch.Tensor]  # the same n steps on (the observation the n-step return bootstraps from)
    action: torch.Tensor  # (B, A) float32: the action learned (the policy's proposal where the filter relabelled)
    executed_action: torch.Tensor  # (B, A) float32: the one the arm executed
    reward: torch.Tensor  # (B,) float32: the n-step discounted sum of rewards
    cost: torch.Tensor  # (B,) float32: 1 where a constraint was violated
    discount: torch.Tensor  # (B,) float32: gamma^m, 0 where the episode terminated within the m <= n steps
    terminated: torch.Tensor  # (B,) bool: the episode terminated within the m steps
    intervened: torch.Tensor  # (B,) bool: a human's action
    index: torch.Tensor  # (B,) int64: the slots in the buffer drawn from
    previous_action: torch.Tensor  # (B, A) float32: the learned action one step earlier in the episode (zeros: none)
    has_previous: torch.Tensor  # (B,) bool: whether there was one
    action_sequence: torch.Tensor | None = None  # (B, K, A) float32 with K > 1: the next K learned actions
    sequence_mask: torch.Tensor | None = None  # (B, K) bool: False past the episode's end
    mc_return: torch.Tensor | None = None  # (B,) float32: the returns-to-go (offline buffers that have them)
    is_demo: torch.Tensor | None = None  # (B,) bool: the demo buffer's rows (MixedSampler)
    source: torch.Tensor | None = None  # (B,) int64: each row's buffer, its position (WeightedSampler)

    def __len__(self) -> int:
        """B, the rows."""
        return len(self.reward)

    def tensors(self) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, tensor) of every tensor it holds, in a fixed order: an observation as ``obs.<key>``; absent
        fields left out."""
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in OBSERVATIONS:
                yield from ((f"{field.name}.{key}", tensor) for key, tensor in value.items())
            elif value is not None:
                yield field.name, value

    def map(self, function: Callable[[torch.Tensor], torch.Tensor]) -> Batch:
        """A batch of ``function(tensor)`` for every tensor of this one (absent fields stay None)."""
        values = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in OBSERVATIONS:
                values[field.name] = {key: function(tensor) for key, tensor in value.items()}
            else:
                values[field.name] = None if value is None else function(value)
        return Batch(**values)

    def to(self, device: torch.device) -> Batch:
        """This batch on ``device``; a tensor already there is kept as it is, and a copy from pinned host memory does
        not block the host (it is ordered on the current CUDA stream)."""
        return self.map(lambda tensor: tensor.to(device, non_blocking=True))


def joined(parts: Sequence[Batch], obs: dict[str, torch.Tensor], next_obs: dict[str, torch.Tensor]) -> Batch:
    """The rows of ``parts`` one after the other, with the observations ``obs`` and ``next_obs`` (already holding
    every part's rows, in the same order); a field some part lacks is absent."""
    values = {}
    for field in dataclasses.fields(Batch):
        if field.name not in OBSERVATIONS:
            pieces = [getattr(part, field.name) for part in parts]
            values[field.name] = None if any(piece is None for piece in pieces) else torch.cat(pieces)
    return Batch(obs=obs, next_obs=next_obs, **values)


BatchSource = Callable[[], Batch]  # what an agent's update draws its batches from (the learner's sampler)
