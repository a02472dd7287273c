"""Binary success classifier on camera images: the reward of on-robot training (HIL-SERL).

On a real robot nothing reports success, so a classifier trained on labelled frames from the
cameras does: positives are frames where the task is done, negatives everything else. Labels
come from the episode store's per-step ``success`` flag (in sim the task's own check; on the
robot the operator's key press during teleoperation, recorded like any success signal).

The network is the policy's camera encoder (the small CNN, or a ResNet-10 with weights from a
user-given file) per camera, then an MLP to one logit; training uses random-shift augmentation,
class-balanced batches and an episode-wise held-out split, and reports held-out accuracy.
``probability(obs)`` > ``threshold`` is the success signal.

Calibration: the 50/50 batches make P(success) = 0.5 the boundary between equal priors, while on a
cell positives are rare and a false positive rewards the policy for a failure. So after training
the threshold is picked on the held-out episodes' frames (:func:`pick_threshold`): a false-positive
rate (share of negative frames with P(success) > threshold) of at most ``target_fpr`` at the
largest true-positive rate that allows, placed midway between the classes' nearest frames. It is
saved in the classifier file with the held-out rates at it; ``classifier.threshold`` set to a
number overrides it, and a file saved before calibration existed uses 0.5. No temperature is
fitted: rescaling the logit reorders no frame, so the same frames would fall on each side of the
picked threshold; only the printed probabilities would change.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from robot_rl.core.checkpoint import load_tensors
from robot_rl.core.config import ConfigError, is_integer, is_number, require_all
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
    threshold: float | None = None  # P(success) above which a frame counts as success; None: the calibrated one
    target_fpr: float = 0.01  # held-out false-positive rate the calibrated threshold is picked for (share of frames)
    validation_fraction: float = 0.2  # share of episodes held out (they also calibrate the threshold)

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
                "threshold": (
                    self.threshold is None or (is_number(self.threshold) and 0.0 < self.threshold < 1.0),
                    "null (the calibrated threshold) or a probability in (0, 1)",
                ),
                "target_fpr": (is_number(self.target_fpr) and 0.0 <= self.target_fpr < 1.0, "a rate in [0, 1)"),
                "validation_fraction": (
                    is_number(self.validation_fraction) and 0.0 < self.validation_fraction < 1.0,
                    "a fraction in (0, 1)",
                ),
            },
        )


def _share(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.3f}"


UNCALIBRATED_THRESHOLD = 0.5  # P(success) of a file saved without a calibration (the balanced batches' boundary)
# what training records of its calibration; the rates are shares of the held-out frames (None where a class has none)
CALIBRATION_KEYS = (
    "threshold",
    "target_fpr",
    "false_positive_rate",
    "false_negative_rate",
    "held_out_frames",
    "held_out_negative",
)


class RewardClassifier(nn.Module):
    def __init__(self, image_shapes: dict[str, tuple[int, int, int]], config: RewardClassifierConfig):
        super().__init__()
        self.calibration: dict[str, Any] | None = None  # CALIBRATION_KEYS, set by training
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

    def decision_threshold(self) -> tuple[float, str]:
        """(P(success) above which a frame is a success, where it comes from): ``classifier.threshold`` when a
        number, else the threshold calibrated on held-out frames, else 0.5 (a file saved before calibration)."""
        if self.config.threshold is not None:
            return float(self.config.threshold), "classifier.threshold"
        if self.calibration is not None:
            c = self.calibration
            return float(c["threshold"]), (
                f"calibrated on {c['held_out_frames']} held-out frames for classifier.target_fpr={c['target_fpr']}"
                f" (held-out FPR {_share(c['false_positive_rate'])}, FNR {_share(c['false_negative_rate'])})"
            )
        return UNCALIBRATED_THRESHOLD, f"default {UNCALIBRATED_THRESHOLD}: the classifier file has no calibration"

    def is_success(self, obs: dict[str, np.ndarray]) -> bool:
        return self.probability(obs) > self.decision_threshold()[0]

    def save(self, path: str | Path) -> None:
        """Config, image shapes, weights and calibration (plain values and tensors), written beside ``path`` and
        renamed. ``config.threshold`` is not saved: the threshold is the user's run-time choice, else the calibrated
        one."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        config = {k: v for k, v in asdict(self.config).items() if k != "threshold"}
        saved = {"config": config, "image_shapes": self.image_shapes, "state_dict": self.state_dict()}
        if self.calibration is not None:
            saved["calibration"] = dict(self.calibration)
        torch.save(saved, tmp)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | Path, threshold: float | None = None) -> RewardClassifier:
        """A classifier written by :meth:`save`; tensors and plain values only are read (never code), anything
        else -> ConfigError naming ``classifier.out``. ``threshold`` (``classifier.threshold``): a probability
        that overrides the file's calibrated threshold, or None to use it (0.5 for a file without one)."""
        if not Path(path).is_file():
            raise FileNotFoundError(f"reward classifier not found: {path}")
        saved = load_tensors("classifier.out", Path(path))
        try:
            # files saved before calibration carry the then-default threshold 0.5 in their config: not an override
            config = {k: v for k, v in saved["config"].items() if k != "threshold"}
            model = cls(saved["image_shapes"], RewardClassifierConfig(**config, threshold=threshold))
            model.load_state_dict(saved["state_dict"])
            calibration = saved.get("calibration")
            if calibration is not None:
                if not (is_number(calibration["threshold"]) and 0.0 <= calibration["threshold"] <= 1.0):
                    raise TypeError("calibration threshold")
                model.calibration = {key: calibration[key] for key in CALIBRATION_KEYS}
        except (KeyError, TypeError, AttributeError, RuntimeError) as error:
            raise ConfigError(
                "classifier.out", str(path), f"a reward classifier saved by robot_rl ({type(error).__name__})"
            ) from None
        return model.eval()


def frames_from_store(
    path: str | Path, cameras: tuple[str, ...]
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """(images per camera, success labels, episode index) of every observation in an episode store.

    The observation after step t carries step t's ``success`` flag; the reset observation is a negative. An episode
    the operator labelled (its ``operator_label`` attribute, the console's success or failure) has the operator's
    word instead: false, none of its frames is a success; true, its last frame is one too.
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
        success = np.array(episode["success"], bool)
        operator_label = episode["attrs"].get("operator_label")
        if operator_label is not None:
            success[:] = success & bool(operator_label)
            success[-1] |= bool(operator_label)
        labels.append(np.concatenate([[False], success]))
        groups.append(np.full(len(labels[-1]), index))
    return ({c: np.concatenate(v) for c, v in images.items()}, np.concatenate(labels), np.concatenate(groups))


def probabilities(model: RewardClassifier, images: dict[str, np.ndarray], batch: int = 256) -> np.ndarray:
    """P(success) (N,) of N frames (uint8 (N, H, W, 3) per camera), ``batch`` frames at a time."""
    model.eval()
    count = len(images[model.config.cameras[0]])
    out = []
    with torch.no_grad():
        for start in range(0, count, batch):
            chunk = {c: torch.as_tensor(images[c][start : start + batch]) for c in model.config.cameras}
            out.append(torch.sigmoid(model(chunk)).numpy())
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def pick_threshold(scores: np.ndarray, labels: np.ndarray, target_fpr: float) -> float:
    """The success threshold for a false-positive rate of at most ``target_fpr`` (the share of negative frames with
    score > threshold) at the largest true-positive rate that rate allows, with as few false positives as that
    true-positive rate needs. ``scores``: P(success) per frame; ``labels``: True for a success frame.

    With N negatives, floor(target_fpr * N) of them may score above the threshold; the lowest threshold that keeps
    to that is the score of the next negative down (a negative scoring exactly the threshold is not a false
    positive), and it catches the most successes. Every threshold up to the lowest positive score above it catches
    the same ones, so the threshold is raised to midway between that positive and the highest negative below it:
    the held-out false positives the target allows are only spent where they buy a success, and both classes keep a
    margin."""
    scores, labels = np.asarray(scores, np.float64), np.asarray(labels, bool)
    negatives = np.sort(scores[~labels])[::-1]
    if len(negatives) == 0:
        raise ValueError("calibration needs negative frames")
    allowed = int(np.floor(target_fpr * len(negatives) + 1e-9))  # + 1e-9: 0.29 * 100 is 28.999999999999996
    lowest = negatives[min(allowed, len(negatives) - 1)]
    caught = scores[labels & (scores > lowest)]
    if len(caught) == 0:  # no success scores above it: nothing to keep a margin to
        return float(lowest)
    first_positive = caught.min()
    last_negative = negatives[negatives < first_positive].max()  # lowest itself or a negative between the two
    threshold = (last_negative + first_positive) / 2
    return float(threshold if last_negative <= threshold < first_positive else last_negative)


def error_rates(scores: np.ndarray, labels: np.ndarray, threshold: float) -> dict[str, float | None]:
    """False-positive rate (share of negative frames with score > threshold) and false-negative rate (share of
    positive frames at or below it); None for a class with no frame."""
    scores, labels = np.asarray(scores), np.asarray(labels, bool)
    success = scores > threshold
    return {
        "false_positive_rate": float(success[~labels].mean()) if (~labels).any() else None,
        "false_negative_rate": float((~success[labels]).mean()) if labels.any() else None,
    }


def accuracy(scores: np.ndarray, labels: np.ndarray, threshold: float) -> float:
    """Share of frames whose score > threshold agrees with their label."""
    return float(((np.asarray(scores) > threshold) == np.asarray(labels, bool)).mean())


def train_reward_classifier(
    images: dict[str, np.ndarray], labels: np.ndarray, groups: np.ndarray, config: RewardClassifierConfig, seed: int = 0
) -> tuple[RewardClassifier, dict[str, Any]]:
    """Train on the episodes not held out, calibrate the threshold on the held-out ones (:func:`pick_threshold`,
    ``config.target_fpr``); returns the model (its ``calibration`` set) and a report: held-out accuracy at the
    threshold in use, the calibrated threshold and the held-out false-positive/negative rates at it and at 0.5."""
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
    held_scores = probabilities(model, {c: images[c][held_out] for c in config.cameras})
    train_scores = probabilities(model, {c: images[c][~held_out] for c in config.cameras})
    held_labels = labels[held_out]  # the reset frame of every episode is a negative: never empty
    calibrated = pick_threshold(held_scores, held_labels, config.target_fpr)
    if not held_labels.any():  # where successes score is unknown: never below the uncalibrated 0.5 (a threshold
        calibrated = max(calibrated, UNCALIBRATED_THRESHOLD)  # just above the failures calls everything a success)
    rates = error_rates(held_scores, held_labels, calibrated)
    model.calibration = {
        "threshold": calibrated,
        "target_fpr": float(config.target_fpr),
        **rates,
        "held_out_frames": int(held_out.sum()),
        "held_out_negative": int((~held_labels).sum()),
    }
    threshold, source = model.decision_threshold()
    at_half = error_rates(held_scores, held_labels, UNCALIBRATED_THRESHOLD)
    report = {
        "train_frames": int((~held_out).sum()),
        "held_out_frames": int(held_out.sum()),
        "held_out_positive": int(held_labels.sum()),
        "held_out_negative": int((~held_labels).sum()),
        "final_loss": loss.item(),
        "target_fpr": float(config.target_fpr),
        "calibrated_threshold": calibrated,
        "held_out_false_positive_rate": rates["false_positive_rate"],
        "held_out_false_negative_rate": rates["false_negative_rate"],
        "held_out_false_positive_rate_at_0.5": at_half["false_positive_rate"],
        "held_out_false_negative_rate_at_0.5": at_half["false_negative_rate"],
        "threshold": threshold,
        "threshold_source": source,
        "train_accuracy": accuracy(train_scores, labels[~held_out], threshold),
        "held_out_accuracy": accuracy(held_scores, held_labels, threshold),
    }
    if 0 < config.target_fpr * (~held_labels).sum() < 1:
        report["calibration_note"] = (
            f"{int((~held_labels).sum())} held-out negative frames cannot resolve a rate of {config.target_fpr}:"
            " the threshold keeps every held-out negative below it (collect more episodes to resolve the rate)"
        )
    if not held_labels.any():
        report["calibration_note"] = (
            "no success frame among the held-out episodes: the threshold stays at least 0.5; collect more episodes "
            "that succeed (the success button held while the task is done labels every success frame)"
        )
    if config.threshold is not None:  # an override: its held-out rates beside the calibrated ones
        override = error_rates(held_scores, held_labels, threshold)
        report["held_out_false_positive_rate_at_threshold"] = override["false_positive_rate"]
        report["held_out_false_negative_rate_at_threshold"] = override["false_negative_rate"]
    return model.eval(), report
