"""Binary success classifier on camera images: the reward of on-robot training (HIL-SERL).

On a real robot nothing reports success, so a classifier trained on labelled frames from the
cameras does: positives are frames where the task is done, negatives everything else. Labels
come from the episode store's per-step ``success`` flag (in sim the task's own check; on the
robot the operator's key press during teleoperation, recorded like any success signal).

The network is the policy's camera encoder (the small CNN, or a ResNet-10 with weights from a
user-given file) per camera, then an MLP to one logit; training uses random-shift augmentation,
class-balanced batches and an episode-wise held-out split, and reports held-out accuracy.
``probability(obs)`` > ``threshold`` is the success signal.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from robot_rl.checkpoint import load_tensors
from robot_rl.config import ConfigError, is_integer, is_number, require_all
from robot_rl.data.augment import random_shift
from robot_rl.policies.encoders import ObservationEncoder


@dataclass
class RewardClassifierConfig:
    cameras: tuple[str, ...] = ("front",)
    camera_encoder: str = "cnn"  # cnn | resnet10
    pretrained_weights: str | None = None  # ResNet-10 backbone weights (torch.save'd state_dict)
    feature_dim: int = 64
    hidden: int = 256
    lr: float = 3e-4
    batch_size: int = 64
    updates: int = 1500
    shift_pad: int = 4  # pixels of random-shift augmentation
    threshold: float = 0.5  # probability above which a frame counts as success
    validation_fraction: float = 0.2  # share of episodes held out

    def __post_init__(self) -> None:
        self.cameras = tuple(self.cameras)
        require_all(
            "classifier",
            self,
            {
                "cameras": (len(self.cameras) > 0, "at least one camera name"),
                "camera_encoder": (self.camera_encoder in ("cnn", "resnet10"), "cnn or resnet10"),
                "feature_dim": (is_integer(self.feature_dim) and self.feature_dim > 0, "a positive integer"),
                "hidden": (is_integer(self.hidden) and self.hidden > 0, "a positive integer"),
                "lr": (is_number(self.lr) and self.lr > 0, "a positive finite number"),
                "updates": (is_integer(self.updates) and self.updates > 0, "a positive integer"),
                "batch_size": (is_integer(self.batch_size) and self.batch_size > 1, "an integer > 1"),
                "shift_pad": (is_integer(self.shift_pad) and self.shift_pad >= 0, "an integer >= 0"),
                "threshold": (is_number(self.threshold) and 0.0 < self.threshold < 1.0, "a probability in (0, 1)"),
                "validation_fraction": (
                    is_number(self.validation_fraction) and 0.0 < self.validation_fraction < 1.0,
                    "a fraction in (0, 1)",
                ),
            },
        )


class RewardClassifier(nn.Module):
    def __init__(self, image_shapes: dict[str, tuple[int, int, int]], config: RewardClassifierConfig):
        super().__init__()
        missing = [c for c in config.cameras if c not in image_shapes]
        if missing:
            raise ConfigError("classifier.cameras", list(config.cameras), f"cameras among {sorted(image_shapes)}")
        self.config = config
        self.image_shapes = {c: tuple(image_shapes[c]) for c in config.cameras}
        self.encoder = ObservationEncoder(
            self.image_shapes, config.camera_encoder, config.feature_dim, config.pretrained_weights
        )
        self.head = nn.Sequential(
            nn.Linear(self.encoder.output_dim, config.hidden), nn.ReLU(), nn.Linear(config.hidden, 1)
        )

    def forward(self, images: dict[str, torch.Tensor]) -> torch.Tensor:
        """Success logits (B,) from uint8 (B, H, W, 3) images per camera."""
        return self.head(self.encoder({c: images[c].permute(0, 3, 1, 2).float() for c in self.config.cameras})).squeeze(
            -1
        )

    @torch.no_grad()
    def probability(self, obs: dict[str, np.ndarray]) -> float:
        """P(success) of one observation (uint8 HxWx3 per camera)."""
        self.eval()
        batch = {c: torch.as_tensor(np.asarray(obs[c]))[None] for c in self.config.cameras}
        return float(torch.sigmoid(self(batch))[0])

    def is_success(self, obs: dict[str, np.ndarray]) -> bool:
        return self.probability(obs) > self.config.threshold

    def save(self, path: str | Path) -> None:
        """Config, image shapes and weights (plain values and tensors), written beside ``path`` and renamed."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        torch.save(
            {"config": asdict(self.config), "image_shapes": self.image_shapes, "state_dict": self.state_dict()}, tmp
        )
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path) -> RewardClassifier:
        """A classifier written by :meth:`save`; tensors and plain values only are read (never code), anything
        else -> ConfigError naming ``classifier.out``."""
        if not Path(path).is_file():
            raise FileNotFoundError(f"reward classifier not found: {path}")
        saved = load_tensors("classifier.out", Path(path))
        try:
            model = cls(saved["image_shapes"], RewardClassifierConfig(**saved["config"]))
            model.load_state_dict(saved["state_dict"])
        except (KeyError, TypeError, RuntimeError) as error:
            raise ConfigError(
                "classifier.out", str(path), f"a reward classifier saved by robot_rl ({type(error).__name__})"
            ) from None
        return model.eval()


def frames_from_store(
    path: str | Path, cameras: tuple[str, ...]
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """(images per camera, success labels, episode index) of every observation in an episode store.

    The observation after step t carries step t's ``success`` flag; the reset observation is a negative.
    """
    from robot_rl.data import EpisodeStore

    store = EpisodeStore.open(path)
    images: dict[str, list[np.ndarray]] = {c: [] for c in cameras}
    labels, groups = [], []
    for index, name in enumerate(store.episode_names()):
        episode = store.read_episode(name, keys={"success", *(f"obs/{c}" for c in cameras)})
        missing = [c for c in cameras if c not in episode["obs"]]
        if missing:
            raise ConfigError(
                "classifier.cameras",
                list(cameras),
                f"cameras recorded in {path} (episode {name} has {sorted(episode['obs'])})",
            )
        for c in cameras:
            images[c].append(episode["obs"][c])
        labels.append(np.concatenate([[False], np.asarray(episode["success"], bool)]))
        groups.append(np.full(len(labels[-1]), index))
    return ({c: np.concatenate(v) for c, v in images.items()}, np.concatenate(labels), np.concatenate(groups))


def accuracy(model: RewardClassifier, images: dict[str, np.ndarray], labels: np.ndarray, batch: int = 256) -> float:
    model.eval()
    correct = 0
    with torch.no_grad():
        for start in range(0, len(labels), batch):
            chunk = {c: torch.as_tensor(images[c][start : start + batch]) for c in model.config.cameras}
            predicted = torch.sigmoid(model(chunk)).numpy() > model.config.threshold
            correct += int((predicted == labels[start : start + batch]).sum())
    return correct / len(labels)


def train_reward_classifier(
    images: dict[str, np.ndarray], labels: np.ndarray, groups: np.ndarray, config: RewardClassifierConfig, seed: int = 0
) -> tuple[RewardClassifier, dict[str, Any]]:
    """Train on the episodes not held out; returns the model and a report with held-out accuracy."""
    labels = np.asarray(labels, bool)
    if labels.all() or not labels.any():
        raise ConfigError(
            "classifier data", f"{int(labels.sum())} of {len(labels)} positive", "both success and failure frames"
        )
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    episodes = rng.permutation(np.unique(groups))
    held_out = np.isin(groups, episodes[: max(1, round(config.validation_fraction * len(episodes)))])
    train_index = {label: np.flatnonzero(~held_out & (labels == label)) for label in (False, True)}
    if any(len(v) == 0 for v in train_index.values()):
        raise ConfigError("classifier data", "a split without one class", "more episodes with successes and failures")
    model = RewardClassifier({c: images[c].shape[1:] for c in config.cameras}, config)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=config.lr)
    generator = torch.Generator().manual_seed(seed)
    half = config.batch_size // 2
    for _ in range(config.updates):
        model.train()
        index = np.concatenate([rng.choice(train_index[False], half), rng.choice(train_index[True], half)])
        batch = {
            c: random_shift(torch.as_tensor(images[c][index]).permute(0, 3, 1, 2), config.shift_pad, generator).permute(
                0, 2, 3, 1
            )
            for c in config.cameras
        }
        target = torch.as_tensor(labels[index], dtype=torch.float32)
        loss = nn.functional.binary_cross_entropy_with_logits(model(batch), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    held = {c: images[c][held_out] for c in config.cameras}
    train = {c: images[c][~held_out] for c in config.cameras}
    report = {
        "train_frames": int((~held_out).sum()),
        "held_out_frames": int(held_out.sum()),
        "held_out_positive": int(labels[held_out].sum()),
        "final_loss": loss.item(),
        "train_accuracy": accuracy(model, train, labels[~held_out]),
        "held_out_accuracy": accuracy(model, held, labels[held_out]),
    }
    return model.eval(), report
