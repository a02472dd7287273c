"""Batches drawn from several replay buffers at once: the demo/online mix of every online run (RLPD, HIL-SERL) and the
weighted mix of offline stores (``robot-rl pretrain``). Each part's rows come from :meth:`ReplayBuffer.sample`'s
machinery, gathered straight into the batch on the buffers' storage device."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .batches import Batch, joined
from .replay_buffer import ReplayBuffer


class MixedSampler:
    """Draws a fixed expected fraction of every batch from the demo buffer (RLPD / HIL-SERL).

    With ``demo_fraction`` f and batch size B, a batch takes floor(f B) demo rows plus one more
    with probability frac(f B), so the long-run fraction is exactly f; but never more rows than the demo buffer
    holds (N < f B: N rows), so a warm start without demos does not draw half of every batch from its first
    take-over's handful of rows. If one buffer is empty the whole batch comes from the other. ``is_demo`` ((B,) bool) marks the demo rows, which come last.
    Both buffers must hold the same observations on the same devices; the batch is the buffers'
    (:meth:`ReplayBuffer.sample`), each part's observations gathered straight into its rows.
    """

    def __init__(self, online: ReplayBuffer, demo: ReplayBuffer, demo_fraction: float = 0.5, seed: int | None = None):
        if not 0.0 <= demo_fraction <= 1.0:
            raise ValueError(f"demo_fraction={demo_fraction}; expected a number in [0, 1]")
        self.online, self.demo, self.demo_fraction = online, demo, demo_fraction
        self.rng = np.random.default_rng(seed)

    def sample(self, batch_size: int, n_step: int = 1, gamma: float = 0.99, sequence_length: int = 1) -> Batch:
        """A batch as :meth:`ReplayBuffer.sample` gives, plus ``is_demo``."""
        n_online, n_demo = len(self.online), len(self.demo)
        if not n_online and not n_demo:
            raise ValueError("both replay buffers are empty")
        exact = min(self.demo_fraction * batch_size, n_demo)
        take_demo = int(exact) + int(self.rng.random() < exact - int(exact))
        if not n_demo:
            take_demo = 0
        elif not n_online:
            take_demo = batch_size
        parts = [
            (buffer, rows) for buffer, rows in ((self.online, batch_size - take_demo), (self.demo, take_demo)) if rows
        ]
        batch = gather_parts(parts, self.rng, n_step, gamma, sequence_length)
        first = parts[0][0]
        is_demo = torch.arange(batch_size, device=first.storage_device) >= batch_size - take_demo
        return dataclasses.replace(batch, is_demo=is_demo).to(first.device)


class WeightedSampler:
    """Draws each batch from several buffers (offline stores) in expected proportion to their ``weights``.

    The rows per buffer are multinomial over the non-empty buffers; ``source`` ((B,) int64) names each row's buffer
    (its position in ``buffers``). Buffers with returns-to-go (:meth:`ReplayBuffer.set_returns_to_go`) give
    ``mc_return`` rows. All buffers must hold the same observations on the same devices.
    """

    def __init__(self, buffers: list[ReplayBuffer], weights: list[float] | None = None, seed: int | None = None):
        weights = [1.0] * len(buffers) if weights is None else [float(w) for w in weights]
        if not buffers or len(weights) != len(buffers) or any(not np.isfinite(w) or w < 0 for w in weights):
            raise ValueError(f"weights={weights}; expected one finite number >= 0 per buffer ({len(buffers)})")
        self.buffers, self.weights = buffers, np.asarray(weights, np.float64)
        self.rng = np.random.default_rng(seed)

    def sample(self, batch_size: int, n_step: int = 1, gamma: float = 0.99, sequence_length: int = 1) -> Batch:
        """A batch as :meth:`ReplayBuffer.sample` gives, plus ``source``."""
        weights = self.weights * np.array([len(buffer) > 0 for buffer in self.buffers])
        if weights.sum() <= 0:
            raise ValueError("every replay buffer with a weight > 0 is empty")
        rows = self.rng.multinomial(batch_size, weights / weights.sum())
        parts = [(buffer, int(n)) for buffer, n in zip(self.buffers, rows) if n]
        batch = gather_parts(parts, self.rng, n_step, gamma, sequence_length)
        first = parts[0][0]
        sources = [k for k, n in enumerate(rows) for _ in range(n)]
        source = torch.tensor(sources, dtype=torch.int64, device=first.storage_device)
        return dataclasses.replace(batch, source=source).to(first.device)


def gather_parts(
    parts: list[tuple[ReplayBuffer, int]], rng: np.random.Generator, n_step: int, gamma: float, sequence_length: int
) -> Batch:
    """One batch of ``rows`` drawn from each ``(buffer, rows)`` in turn, each part's observations gathered straight
    into its rows; on the buffers' storage device (which they must share, with their observations)."""
    first = parts[0][0]
    for buffer, _ in parts[1:]:
        if (buffer.observation_space, buffer.storage_device, buffer.device) != (
            first.observation_space,
            first.storage_device,
            first.device,
        ):
            raise ValueError("the replay buffers hold different observations or live on different devices")
    batch_size = sum(rows for _, rows in parts)
    indices = [buffer.draw(rows, rng) for buffer, rows in parts]
    obs, next_obs = first.empty_observations(batch_size), first.empty_observations(batch_size)
    pieces, start = [], 0
    for (buffer, rows), index in zip(parts, indices):
        rows_of = {key: value[start : start + rows] for key, value in obs.items()}
        next_rows_of = {key: value[start : start + rows] for key, value in next_obs.items()}
        pieces.append(buffer.gather(index, rows_of, next_rows_of, n_step, gamma, sequence_length))
        start += rows
    return joined(pieces, obs, next_obs)
