"""Learning batches made by hand: the fields a test names, the rest as a replay buffer fills them for transitions
with no episode around them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from robot_rl.data.batches import Batch


def batch_of(arrays: Mapping[str, Any], device: str | torch.device = "cpu") -> Batch:
    """A :class:`Batch` on ``device`` of ``arrays`` (numpy arrays or tensors by field name; ``obs`` and
    ``next_obs`` dicts of them; at least ``obs``, ``next_obs``, ``action``, ``reward`` and ``discount``). Left out:
    the executed action is the learned one, no cost, terminated where the discount is 0, no take-over, slots
    0..B-1, no previous action."""

    def tensor(value: Any) -> torch.Tensor:
        return torch.as_tensor(value, device=device)

    given = {
        key: {name: tensor(part) for name, part in value.items()} if isinstance(value, Mapping) else tensor(value)
        for key, value in arrays.items()
    }
    action, discount = given["action"], given["discount"]
    rows = len(discount)
    filled = {
        "executed_action": action,
        "cost": torch.zeros(rows, device=device),
        "terminated": discount == 0,
        "intervened": torch.zeros(rows, dtype=torch.bool, device=device),
        "index": torch.arange(rows, device=device),
        "previous_action": torch.zeros_like(action),
        "has_previous": torch.zeros(rows, dtype=torch.bool, device=device),
    }
    return Batch(**{**filled, **given})
