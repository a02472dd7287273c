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
    batch, _, height, width = images.shape
    padded = F.pad(images.float(), (pad, pad, pad, pad), mode="replicate")
    device = images.device
    shift_y = torch.randint(0, 2 * pad + 1, (batch,), device=device, generator=generator)
    shift_x = torch.randint(0, 2 * pad + 1, (batch,), device=device, generator=generator)
    # every (H, W) window of the padded image as a view: (B, 2 pad + 1, 2 pad + 1, C, H, W); picking one per
    # image copies contiguous rows (5x faster on CPU than indexing each pixel)
    windows = padded.unfold(2, height, 1).unfold(3, width, 1).permute(0, 2, 3, 1, 4, 5)
    return windows[torch.arange(batch, device=device), shift_y, shift_x].to(images.dtype)
