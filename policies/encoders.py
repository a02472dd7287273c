"""Observation encoders: the state vector as is, a small CNN per camera, or a ResNet-10 with
weights loaded from a user-given file. Images arrive as uint8 (B, H, W, 3)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from robot_rl.core.config import ConfigError, is_integer
from robot_rl.core.observation_keys import PRIVILEGED_KEY


def camera_checks(config) -> dict[str, tuple[bool, str]]:
    """``validate`` checks of the camera settings every agent config carries (``require_all`` format)."""
    strides = config.camera_strides
    return {
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


class _BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, 1, bias=False)
        self.bn1 = nn.GroupNorm(4, out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1, bias=False)
        self.bn2 = nn.GroupNorm(4, out_channels)
        self.down = None
        if stride != 1 or in_channels != out_channels:
            self.down = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False), nn.GroupNorm(4, out_channels)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + (x if self.down is None else self.down(x)))


class ResNet10(nn.Module):
    """ResNet-10 (one basic block per stage) with a spatial-softmax-free average pool.

    ``weights``: path to a ``state_dict`` saved with ``torch.save`` (e.g. ImageNet-pretrained,
    converted to these names); the encoder is then frozen unless ``finetune``.
    """

    def __init__(
        self,
        image_shape: tuple[int, int, int],
        feature_dim: int = 256,
        weights: str | os.PathLike | None = None,
        finetune: bool = False,
    ):
        super().__init__()
        channels = image_shape[2]
        self.stem = nn.Sequential(
            nn.Conv2d(channels, 64, 7, 2, 3, bias=False), nn.GroupNorm(4, 64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        self.stages = nn.Sequential(
            _BasicBlock(64, 64, 1), _BasicBlock(64, 128, 2), _BasicBlock(128, 256, 2), _BasicBlock(256, 512, 2)
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(512, feature_dim), nn.LayerNorm(feature_dim), nn.Tanh())
        if weights is not None:
            self.load_backbone(weights)
            if not finetune:
                for module in (self.stem, self.stages):
                    module.requires_grad_(False)

    def backbone_state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.state_dict().items() if k.startswith(("stem.", "stages."))}

    def load_backbone(self, path: str | os.PathLike) -> None:
        """Load stem + stage weights; a file that does not fit names the mismatching keys."""
        if not os.path.isfile(path):
            raise FileNotFoundError(f"pretrained encoder weights not found: {path}")
        state = torch.load(path, map_location="cpu", weights_only=True)
        expected = self.backbone_state_dict()
        missing = sorted(set(expected) - set(state))
        unexpected = sorted(set(state) - set(expected))
        wrong = sorted(k for k in set(expected) & set(state) if tuple(state[k].shape) != tuple(expected[k].shape))
        if missing or wrong:
            raise ValueError(
                f"{path}: not ResNet-10 weights for this encoder; missing {missing[:5]}, "
                f"wrong shapes {[(k, tuple(state[k].shape)) for k in wrong[:5]]}, unexpected {unexpected[:5]}"
            )
        self.load_state_dict({k: state[k] for k in expected}, strict=False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.stages(self.stem(images / 255.0 - 0.5))))


class ObservationEncoder(nn.Module):
    """Concatenates the state vector with one feature vector per camera. ``privileged_state``
    (:class:`robot_rl.runtime.envs.PrivilegedState`) is left out: only a critic reads it, next to these features."""

    def __init__(
        self,
        observation_shapes: Mapping[str, tuple[int, ...]],
        camera_encoder: str = "cnn",
        feature_dim: int = 50,
        pretrained_weights: str | None = None,
        cnn_strides: Sequence[int] = (2, 1, 1, 1),
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
            elif camera_encoder == "resnet10":
                nets[key] = ResNet10(shape, feature_dim, pretrained_weights)
            else:
                raise ValueError(f"camera_encoder={camera_encoder!r}; expected cnn or resnet10")
        self.camera_nets = nn.ModuleDict(nets)
        self.output_dim = self.state_dim + feature_dim * len(self.cameras)

    def forward(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        parts = [obs[key].float() for key in self.vector_keys]
        for key in self.cameras:
            parts.append(self.camera_nets[key](obs[key]))
        return torch.cat(parts, dim=-1)
