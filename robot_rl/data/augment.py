"""Image augmentation on sampled batches (DrQ-v2 random shift, a camera's exposure and white-balance drift)."""

from __future__ import annotations

import torch


def random_shift(images: torch.Tensor, pad: int = 4, generator: torch.Generator | None = None) -> torch.Tensor:
    """Shift each image by an integer offset in [-pad, pad] pixels per axis, edges replicated.

    ``images`` is (B, C, H, W), any dtype and memory layout; the result has the same shape, dtype and device
    (laid out channels-last). Equivalent to DrQ-v2's replicate-pad-then-random-crop with integer shifts: the
    offsets are drawn from ``generator`` on the images' device, rows first, then columns.
    """
    if images.ndim != 4:
        raise ValueError(f"random_shift expects (B, C, H, W) images, got shape {tuple(images.shape)}")
    if pad == 0:
        return images
    batch, channels, height, width = images.shape
    device = images.device
    shift_y = torch.randint(0, 2 * pad + 1, (batch,), device=device, generator=generator)
    shift_x = torch.randint(0, 2 * pad + 1, (batch,), device=device, generator=generator)
    # replicate-pad channels-last (B, H + 2 pad, W + 2 pad, C): a crop is then H runs of W * C contiguous values
    pixels = images.permute(0, 2, 3, 1)
    padded = images.new_empty((batch, height + 2 * pad, width + 2 * pad, channels))
    padded[:, pad : pad + height, pad : pad + width] = pixels
    padded[:, pad : pad + height, :pad] = pixels[:, :, :1]
    padded[:, pad : pad + height, pad + width :] = pixels[:, :, -1:]
    padded[:, :pad] = padded[:, pad : pad + 1]
    padded[:, pad + height :] = padded[:, pad + height - 1 : pad + height]
    # every crop as a view that starts at a pixel of the flat padded batch: picking one per image copies whole
    # rows (many times faster on a CPU than gathering single values)
    row = (width + 2 * pad) * channels
    crops = padded.as_strided(
        (padded.numel() - (height - 1) * row - width * channels + 1, height, width * channels), (1, row, 1)
    )
    start = torch.arange(batch, device=device) * padded[0].numel() + shift_y * row + shift_x * channels
    return crops.index_select(0, start).view(batch, height, width, channels).permute(0, 3, 1, 2)


def photometric_jitter(
    images: torch.Tensor, exposure: float, white_balance: float, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Each RGB image (B, 3, H, W, values 0-255) as a camera's auto exposure and white balance might show it: scaled
    by a gain exp(N(0, exposure^2)) and each colour channel by exp(N(0, white_balance^2)) (stds of the log gains,
    drawn from ``generator`` on the CPU), clipped to 0-255; float32 on the images' device. Zero stds: the images
    as float32."""
    batch = images.shape[0]
    exposure_log = torch.randn((batch, 1, 1, 1), generator=generator) * exposure
    balance_log = torch.randn((batch, images.shape[1], 1, 1), generator=generator) * white_balance
    gains = (exposure_log + balance_log).exp().to(images.device)
    return (images.float() * gains).clamp(0.0, 255.0)
