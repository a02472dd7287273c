"""Batches (nested dicts of arrays or tensors) moved to a device: the one rule for replay and agents."""

from __future__ import annotations

from typing import Any

import torch


def batch_to(batch: Any, device: torch.device) -> Any:
    """``batch`` (arrays or tensors, nested dicts) as tensors on ``device``. A tensor already there is kept as it is;
    a copy from pinned host memory does not block the host (it is ordered on the current CUDA stream)."""
    if isinstance(batch, dict):
        return {key: batch_to(value, device) for key, value in batch.items()}
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    return torch.as_tensor(batch, device=device)
