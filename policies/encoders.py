"""Observation encoders: the state vector as is, then per camera a small CNN trained from scratch (``cnn``, on images
(B, C, H, W)) or a trained head on a frozen pretrained backbone's features (``pretrained``, on features (B, C, h, w):
the backbone itself, :mod:`robot_rl.policies.pretrained`, runs outside the encoder, once per frame)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from robot_rl.core.config import ConfigError, is_integer
from robot_rl.core.observation_keys import PRIVILEGED_KEY
from robot_rl.policies.pretrained import LITE0_BLOCKS, feature_shape

CAMERA_ENCODERS = ("cnn", "pretrained")


def encoder_checks(config) -> dict[str, tuple[bool, str]]:
    """``validate`` checks of the encoder choice an agent's and the reward classifier's configs carry
    (``camera_encoder``, ``pretrained_blocks``, ``pretrained_views``; ``require_all`` format)."""
    return {
        "camera_encoder": (config.camera_encoder in CAMERA_ENCODERS, " or ".join(CAMERA_ENCODERS)),
        "pretrained_blocks": (
            is_integer(config.pretrained_blocks) and 1 <= config.pretrained_blocks <= len(LITE0_BLOCKS),
            f"an integer in [1, {len(LITE0_BLOCKS)}] (EfficientNet-Lite0's blocks kept)",
        ),
        "pretrained_views": (
            is_integer(config.pretrained_views) and config.pretrained_views >= 1,
            "a positive integer (feature views stored per frame)",
        ),
    }


def camera_checks(config) -> dict[str, tuple[bool, str]]:
    """``validate`` checks of the camera settings every agent config carries (``require_all`` format)."""
    strides = config.camera_strides
    return {
        **encoder_checks(config),
        "camera_strides": (
            len(strides) >= 1 and all(is_integer(s) and s >= 1 for s in strides),
            "a non-empty list of positive integers",
        ),
        "camera_feature_dim": (
            is_integer(config.camera_feature_dim) and config.camera_feature_dim >= 1,
            "a positive integer",
        ),
        "image_pad": (is_integer(config.image_pad) and config.image_pad >= 0, "an integer >= 0"),
    }


class CameraCNN(nn.Module):
    """DrQ-v2 style: 3x3 conv layers of 32 channels, one per entry of ``strides`` (DrQ-v2: [2, 1, 1, 1]),
    then Linear -> LayerNorm -> tanh. Larger strides shrink the feature maps ([2, 2, 2, 1] made a pixel
    update ~4x cheaper on CPU at 64x64: benchmarks/pixel_learning.py)."""

    def __init__(self, image_shape: tuple[int, int, int], feature_dim: int = 50, strides: Sequence[int] = (2, 1, 1, 1)):
        super().__init__()
        height, width, channels = image_shape
        layers: list[nn.Module] = []
        for index, stride in enumerate(strides):
            layers += [nn.Conv2d(channels if index == 0 else 32, 32, 3, stride=stride), nn.ReLU()]
        self.convs = nn.Sequential(*layers, nn.Flatten())
        size = min(height, width)
        for stride in strides:
            size = (size - 3) // stride + 1
        if size < 1:
            raise ConfigError(
                "agent.camera_strides",
                list(strides),
                f"strides that keep a {height}x{width} image at least 1 pixel after every 3x3 convolution",
            )
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, channels, height, width)).shape[1]
        self.head = nn.Sequential(nn.Linear(flat, feature_dim), nn.LayerNorm(feature_dim), nn.Tanh())

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """``images``: float (B, C, H, W) in [0, 255]."""
        return self.head(self.convs(images / 255.0 - 0.5))


class FeatureHead(nn.Module):
    """The trained head on a frozen backbone's features (B, C, h, w), HIL-SERL's small head in a CPU-friendly form: a
    linear mix of the pretrained channels to ``channels`` with ReLU at every grid cell (a 1x1 convolution, as a
    matrix product on channels-last rows), then the grid flattened, cell by cell, into Linear -> LayerNorm -> tanh
    to ``feature_dim`` (as the CNN's head), so where a feature fires is kept: a learned embedding per cell, as
    HIL-SERL's spatial learned embeddings. Their per-channel form (an einsum over 112 channels) made a batch-256
    update about twice as slow on a CPU core."""

    def __init__(self, feature_shape: tuple[int, int, int], feature_dim: int = 50, channels: int = 16):
        super().__init__()
        in_channels, height, width = feature_shape
        self.mix = nn.Sequential(nn.Linear(in_channels, channels), nn.ReLU(), nn.Flatten())
        self.head = nn.Sequential(
            nn.Linear(channels * height * width, feature_dim), nn.LayerNorm(feature_dim), nn.Tanh()
        )

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """``features``: (B, C, h, w), any float dtype (the replay's float16)."""
        cells = features.permute(0, 2, 3, 1).to(self.head[0].weight.dtype)  # (B, h, w, C)
        return self.head(self.mix(cells))


class ObservationEncoder(nn.Module):
    """Concatenates the state vector with one feature vector per camera. ``privileged_state``
    (:class:`robot_rl.runtime.envs.PrivilegedState`) is left out: only a critic reads it, next to these features.
    With ``camera_encoder="pretrained"`` a camera's input is its frozen backbone's features (``pretrained_blocks``
    of EfficientNet-Lite0, :func:`~robot_rl.policies.pretrained.feature_shape`), not its image."""

    def __init__(
        self,
        observation_shapes: Mapping[str, tuple[int, ...]],
        camera_encoder: str = "cnn",
        feature_dim: int = 50,
        cnn_strides: Sequence[int] = (2, 1, 1, 1),
        pretrained_blocks: int = 11,
    ):
        super().__init__()
        self.cameras = sorted(key for key, shape in observation_shapes.items() if len(shape) == 3)
        self.vector_keys = sorted(
            key for key, shape in observation_shapes.items() if len(shape) == 1 and key != PRIVILEGED_KEY
        )
        self.state_dim = int(sum(observation_shapes[key][0] for key in self.vector_keys))
        nets = {}
        for key in self.cameras:
            shape = tuple(observation_shapes[key])
            if camera_encoder == "cnn":
                nets[key] = CameraCNN(shape, feature_dim, cnn_strides)
            elif camera_encoder == "pretrained":
                nets[key] = FeatureHead(feature_shape(shape, pretrained_blocks), feature_dim)
            else:
                raise ValueError(f"camera_encoder={camera_encoder!r}; expected {' or '.join(CAMERA_ENCODERS)}")
        self.camera_nets = nn.ModuleDict(nets)
        self.output_dim = self.state_dim + feature_dim * len(self.cameras)

    def forward(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        parts = [obs[key].float() for key in self.vector_keys]
        for key in self.cameras:
            parts.append(self.camera_nets[key](obs[key]))
        return torch.cat(parts, dim=-1)
