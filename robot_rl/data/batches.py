"""Replay batches: what a batch holds (:class:`Batch`), and batches moved to a device (the one rule for replay and
agents)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import torch


class Batch(TypedDict, total=False):
    """A batch of transitions as the replay buffers give it (:meth:`~robot_rl.data.ReplayBuffer.sample`), tensors on
    the learner's device; B rows, A action dimensions, K the action-sequence length.

    Always there: ``obs``, ``next_obs`` ({key: (B, *shape)} in the stored dtypes: uint8 images, float32 vectors;
    ``next_obs`` n steps on), ``action`` (the action learned, (B, A) float32), ``executed_action`` (the one the arm
    executed, (B, A)), ``reward`` (the n-step discounted sum, (B,) float32), ``cost`` (1 = a constraint violated,
    (B,)), ``discount`` (gamma^m, 0 where the episode terminated within the m <= n steps, (B,)), ``terminated``,
    ``intervened`` ((B,) bool), ``index`` (the slots, (B,) int64), ``previous_action`` ((B, A), the action one step
    earlier in the episode) with ``has_previous`` ((B,) bool). With K > 1: ``action_sequence`` ((B, K, A)) and
    ``sequence_mask`` ((B, K) bool, False past the episode's end). With returns-to-go: ``mc_return`` ((B,)). From the
    mixing samplers: ``is_demo`` ((B,) bool, the demo buffer's rows) or ``source`` ((B,) int64, the buffer's index).
    """

    obs: dict[str, torch.Tensor]
    next_obs: dict[str, torch.Tensor]
    action: torch.Tensor
    executed_action: torch.Tensor
    reward: torch.Tensor
    cost: torch.Tensor
    discount: torch.Tensor
    terminated: torch.Tensor
    intervened: torch.Tensor
    index: torch.Tensor
    previous_action: torch.Tensor
    has_previous: torch.Tensor
    action_sequence: torch.Tensor
    sequence_mask: torch.Tensor
    mc_return: torch.Tensor
    is_demo: torch.Tensor
    source: torch.Tensor


BatchSource = Callable[[], Batch]  # what an agent's update draws its batches from (the learner's sampler)


def batch_to(batch: Any, device: torch.device) -> Any:
    """``batch`` (arrays or tensors, nested dicts) as tensors on ``device``. A tensor already there is kept as it is;
    a copy from pinned host memory does not block the host (it is ordered on the current CUDA stream)."""
    if isinstance(batch, dict):
        return {key: batch_to(value, device) for key, value in batch.items()}
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    return torch.as_tensor(batch, device=device)
