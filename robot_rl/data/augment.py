"""Image augmentation on sampled batches (DrQ-v2 random shift), on the batch's device."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def random_shift(images: torch.Tensor, pad: int = 4, generator: torch.Generator | None = None) -> torch.Tensor:
    """Shift each image by an integer offset in [-pad, pad] pixels per axis, edges replicated.

    ``images`` is (B, C, H, W), any dtype; the result has the same shape, dtype and device.
    Equivalent to DrQ-v2's replicate-pad-then-random-crop with integer shifts.
    """
    if images.ndim != 4:
        raise ValueError(f"random_shift expects (B, C, H, W) images, got shape {tuple(images.shape)}")
    if pad == 0:
        return images
    batch, channels, height, width = images.shape
    padded = F.pad(images.float(), (pad, pad, pad, pad), mode="replicate")
    device = images.device
    shift_y = torch.randint(0, 2 * pad + 1, (batch,), device=device, generator=generator)
    shift_x = torch.randint(0, 2 * pad + 1, (batch,), device=device, generator=generator)
    rows = (shift_y[:, None] + torch.arange(height, device=device))[:, None, :, None]
    cols = (shift_x[:, None] + torch.arange(width, device=device))[:, None, None, :]
    batch_index = torch.arange(batch, device=device)[:, None, None, None]
    channel_index = torch.arange(channels, device=device)[None, :, None, None]
    return padded[batch_index, channel_index, rows, cols].to(images.dtype)


def default_device() -> torch.device:
    """The GPU when there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")
