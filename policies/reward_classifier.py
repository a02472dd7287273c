"""Binary success classifier on camera images: the reward of on-robot training (HIL-SERL).

On a real robot nothing reports success, so a classifier trained on labelled frames from the
cameras does: positives are frames where the task is done, negatives everything else. Labels
come from the episode store's per-step ``success`` flag (in sim the task's own check; on the
robot the operator's key press during teleoperation, recorded like any success signal).

The network is the policy's camera encoder per camera (the small CNN, or with ``camera_encoder: pretrained`` the
agents' frozen EfficientNet-Lite0 backbone and a trained head, :mod:`robot_rl.policies.pretrained`: the backbone
runs once per training frame, on ``pretrained_views`` shifted views of it, and never enters the saved file), then an
MLP to one logit; training uses random-shift augmentation, class-balanced batches and an episode-wise held-out
split, and reports held-out accuracy.
``probability(obs)`` > ``threshold`` on ``consecutive_frames`` frames in a row (:class:`SustainedSuccess`) is the
success signal.

Calibration: the 50/50 batches make P(success) = 0.5 the boundary between equal priors, while on a
cell positives are rare and a false success rewards the policy for a failure and ends its episode. What matters is
per episode, not per frame: an episode's frames are not independent, and one frame above the threshold anywhere
before the task is done is enough (a per-frame rate of 0.011 gives 63% of 100-step failures a false success if the
frames were independent). So the threshold is picked on whole held-out episodes (:func:`pick_episode_threshold`):
each episode's highest score before its first success frame (all of a failed episode's frames) is a would-be
false success, each succeeded episode's highest success-frame score a success caught (with
``consecutive_frames`` k > 1 a frame's score is its lowest over the k frames ending with it: the rule the reward node
applies, :func:`sustained`, so a lone frame's spike is no false success); the threshold lets at most
``target_false_success`` of the episodes be declared a success before their task is done, at the most successes
caught. The promise is measured out of sample, cross-validated by episode (:func:`cross_validated_promise`: each
fold's threshold picked on the other folds' episodes), with a Clopper-Pearson upper bound that says how many
episodes it rests on. A classifier that catches fewer than half the held-out successes is refused
(:func:`refusal`): as a reward it would never reward. The threshold and the promise are saved in the classifier
file; ``classifier.threshold`` set to a number overrides the threshold, and a file saved before calibration existed
uses 0.5. No temperature is fitted: rescaling the logit reorders no frame, so the same frames would fall on each
side of the picked threshold; only the printed probabilities would change.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from robot_rl.core.checkpoint import load_tensors
from robot_rl.core.config import ConfigError, is_integer, is_number, require_all
from robot_rl.data.augment import photometric_jitter, random_shift
from robot_rl.policies.encoders import ObservationEncoder, encoder_checks
from robot_rl.policies.pretrained import FrozenFeatures


@dataclass
class RewardClassifierConfig:
    cameras: tuple[str, ...] = ("front",)
    camera_encoder: str = "cnn"  # cnn | pretrained (the agents' frozen EfficientNet-Lite0 and a trained head)
    # pretrained: EfficientNet-Lite0 blocks kept; 8 (80 channels, 4x4 at 64x64), not the agents' 11: on pick_cube's
    # lifted cube (64x64 front camera, seed 0) held-out accuracy 0.987 at 1,500 updates, 11 blocks 0.84 at 1,000
    pretrained_blocks: int = 8
    pretrained_views: int = 4  # pretrained: feature views per training frame (view 0 as seen, the others shifted)
    feature_dim: int = 64
    hidden: int = 256
    lr: float = 3e-4
    batch_size: int = 64
    updates: int = 1500
    shift_pad: int = 4  # pixels of random-shift augmentation
    # stds of log gains drawn per training frame (auto exposure, white balance): configs/settings/tools.yaml
    exposure_jitter: float = 0.3
    white_balance_jitter: float = 0.06
    threshold: float | None = None  # P(success) above which a frame counts as success; None: the calibrated one
    consecutive_frames: int = 3  # frames in a row above the threshold that make a success (calibrated with it)
    target_false_success: float = 0.05  # share of episodes declared a success before their task is done
    validation_fraction: float = 0.2  # share of episodes held out (they calibrate the threshold, cross-validated)

    def __post_init__(self) -> None:
        self.cameras = tuple(self.cameras)
        require_all(
            "classifier",
            self,
            {
                "cameras": (len(self.cameras) > 0, "at least one camera name"),
                **encoder_checks(self),
                "feature_dim": (is_integer(self.feature_dim) and self.feature_dim > 0, "a positive integer"),
                "hidden": (is_integer(self.hidden) and self.hidden > 0, "a positive integer"),
                "lr": (is_number(self.lr) and self.lr > 0, "a positive finite number"),
                "updates": (is_integer(self.updates) and self.updates > 0, "a positive integer"),
                "batch_size": (is_integer(self.batch_size) and self.batch_size > 1, "an integer > 1"),
                "shift_pad": (is_integer(self.shift_pad) and self.shift_pad >= 0, "an integer >= 0"),
                "exposure_jitter": (is_number(self.exposure_jitter) and self.exposure_jitter >= 0, "a std >= 0"),
                "white_balance_jitter": (
                    is_number(self.white_balance_jitter) and self.white_balance_jitter >= 0,
                    "a std >= 0",
                ),
                "threshold": (
                    self.threshold is None or (is_number(self.threshold) and 0.0 < self.threshold < 1.0),
                    "null (the calibrated threshold) or a probability in (0, 1)",
                ),
                "consecutive_frames": (
                    is_integer(self.consecutive_frames) and self.consecutive_frames >= 1,
                    "an integer >= 1",
                ),
                "target_false_success": (
                    is_number(self.target_false_success) and 0.0 <= self.target_false_success < 1.0,
                    "a rate per episode in [0, 1)",
                ),
                "validation_fraction": (
                    is_number(self.validation_fraction) and 0.0 < self.validation_fraction < 1.0,
                    "a fraction in (0, 1)",
                ),
            },
        )


def _share(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.3f}"


UNCALIBRATED_THRESHOLD = 0.5  # P(success) of a file saved without a calibration (the balanced batches' boundary)
# what training records of its calibration: the threshold, the per-episode promise (cross-validated on the held-out
# episodes: false successes among them, successes caught, the upper bound) and the held-out frames' rates at the
# threshold (None where a class has none). A file of an older robot_rl has the frame keys only.
CALIBRATION_KEYS = (
    "threshold",
    "consecutive_frames",
    "target_false_success",
    "episodes",
    "false_successes",
    "false_success_rate",
    "false_success_upper_95",
    "success_episodes",
    "successes_caught",
    "false_positive_rate",
    "false_negative_rate",
    "held_out_frames",
    "held_out_negative",
)
MIN_SUCCESSES_CAUGHT = 0.5  # share of held-out success episodes a classifier must catch to be a reward


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
            self.image_shapes, config.camera_encoder, config.feature_dim, pretrained_blocks=config.pretrained_blocks
        )
        self.head = nn.Sequential(
            nn.Linear(self.encoder.output_dim, config.hidden), nn.ReLU(), nn.Linear(config.hidden, 1)
        )
        self.frozen: FrozenFeatures | None = None  # a plain attribute: the backbone is in no state_dict
        if config.camera_encoder == "pretrained":
            self.frozen = FrozenFeatures(
                self.image_shapes,
                config.pretrained_blocks,
                config.pretrained_views,
                config.shift_pad,
                torch.device("cpu"),
                torch.Generator(),
                key="classifier.camera_encoder",
            )

    def camera_inputs(self, images: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """What the encoder reads of uint8 (B, H, W, 3) images per camera: the images (B, 3, H, W) float, or with a
        frozen backbone their features (B, C, h, w)."""
        cameras = self.config.cameras
        if self.frozen is not None:
            return {c: self.frozen.frames(c, images[c].permute(0, 3, 1, 2)) for c in cameras}
        return {c: images[c].permute(0, 3, 1, 2).float() for c in cameras}

    def logits(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Success logits (B,) from :meth:`camera_inputs`."""
        return self.head(self.encoder(inputs)).squeeze(-1)

    def forward(self, images: dict[str, torch.Tensor]) -> torch.Tensor:
        """Success logits (B,) from uint8 (B, H, W, 3) images per camera."""
        return self.logits(self.camera_inputs(images))

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
            if c.get("episodes") is None:
                return float(c["threshold"]), (
                    f"calibrated per frame on {c['held_out_frames']} held-out frames by an older robot_rl (no promise"
                    " per episode: train it again)"
                )
            return float(c["threshold"]), promise(c)
        return UNCALIBRATED_THRESHOLD, f"default {UNCALIBRATED_THRESHOLD}: the classifier file has no calibration"

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
            known = {f.name for f in fields(RewardClassifierConfig)} - {"threshold"}  # older files: target_fpr
            config = {"consecutive_frames": 1} | {k: v for k, v in saved["config"].items() if k in known}  # older
            # files: calibrated for one frame
            model = cls(saved["image_shapes"], RewardClassifierConfig(**config, threshold=threshold))
            model.load_state_dict(saved["state_dict"])
            calibration = saved.get("calibration")
            if calibration is not None:
                if not (is_number(calibration["threshold"]) and 0.0 <= calibration["threshold"] <= 1.0):
                    raise TypeError("calibration threshold")
                model.calibration = {key: calibration.get(key) for key in CALIBRATION_KEYS}
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


def sustained(scores: np.ndarray, frames: int) -> np.ndarray:
    """Each frame's lowest score over the ``frames`` frames of one episode that end with it (0.0 for the first
    ``frames - 1``, where no run of that length has ended yet): above a threshold exactly where
    :class:`SustainedSuccess` says success, so the calibration judges the rule the reward node applies."""
    scores = np.asarray(scores, np.float64)
    held = scores.copy()
    for back in range(1, frames):
        held[back:] = np.minimum(held[back:], scores[:-back])
    held[: frames - 1] = 0.0
    return held


class SustainedSuccess:
    """The reward node's success rule over one episode's frames: P(success) above ``threshold`` on ``frames`` frames
    in a row (one: every frame on its own). :meth:`clear` when an episode ends."""

    def __init__(self, threshold: float, frames: int):
        self.threshold, self.frames, self.run = threshold, frames, 0

    def update(self, probability: float) -> bool:
        """The newest frame's P(success) in; whether the episode is a success by the rule now."""
        self.run = self.run + 1 if probability > self.threshold else 0
        return self.run >= self.frames

    def clear(self) -> None:
        self.run = 0


def episode_maxima(
    scores: np.ndarray, labels: np.ndarray, groups: np.ndarray, frames: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """(before (E,), caught (S,)): each episode's highest score before its first success frame (a would-be false
    success: all of a failed episode's frames; a recorded episode starts with a negative reset frame; one that starts
    on a success frame counts its other negative frames, where it has any), and each succeeded episode's highest
    success-frame score (a success caught when above the threshold), a frame's score being its lowest over the
    ``frames`` frames that end with it (:func:`sustained`). A success's frames count among themselves: a task done
    stays done on a cell while the reward node waits for its frames in a row, so a recording that ended at the
    first success frame (``task.terminate_on_success``), with fewer than ``frames`` of them, is judged by those it
    has. Episodes in order of ``groups``' first appearance; frames of an episode in order."""
    scores, labels, groups = np.asarray(scores, np.float64), np.asarray(labels, bool), np.asarray(groups)
    before, caught = [], []
    for episode in dict.fromkeys(groups.tolist()):
        mine = groups == episode
        episode_scores, episode_labels = scores[mine], labels[mine]
        held = sustained(episode_scores, frames)
        first = int(np.argmax(episode_labels)) if episode_labels.any() else len(episode_labels)
        negatives = held[:first] if first else held[~episode_labels]
        if len(negatives):
            before.append(negatives.max())
        if episode_labels.any():
            success_scores = episode_scores[episode_labels]
            caught.append(sustained(success_scores, min(frames, len(success_scores))).max())
    return np.asarray(before), np.asarray(caught)


def pick_episode_threshold(
    scores: np.ndarray, labels: np.ndarray, groups: np.ndarray, target: float, frames: int = 1
) -> float:
    """The success threshold for at most ``target`` of the episodes declared a success before their task is done,
    at the most success episodes caught, a success being ``frames`` frames in a row above it (:func:`pick_threshold`
    on the episodes' maxima, :func:`episode_maxima`)."""
    before, caught = episode_maxima(scores, labels, groups, frames)
    return pick_threshold(
        np.concatenate([before, caught]), np.r_[np.zeros(len(before), bool), np.ones(len(caught), bool)], target
    )


def upper_bound(failures: int, trials: int, confidence: float = 0.95) -> float:
    """Clopper-Pearson upper confidence bound of a rate seen ``failures`` times in ``trials`` (1.0 with no trial):
    the rate p at which P(Binomial(trials, p) <= failures) = 1 - confidence (bisection)."""
    if trials == 0 or failures >= trials:
        return 1.0

    def at_most(p: float) -> float:
        return sum(math.comb(trials, k) * p**k * (1 - p) ** (trials - k) for k in range(failures + 1))

    low, high = failures / trials, 1.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if at_most(middle) > 1 - confidence else (low, middle)
    return high


def cross_validated_promise(
    scores: np.ndarray, labels: np.ndarray, groups: np.ndarray, target: float, folds: int = 5, frames: int = 1
) -> dict[str, Any]:
    """What the threshold promises on new episodes, measured out of sample: the episodes split into ``folds`` folds
    (as many as episodes when fewer), each fold scored at the threshold picked on the others. Counts of false
    successes among the ``episodes`` (each one's frames before its first success) and of successes caught among the
    ``success_episodes``, their rates, and the false-success rate's 95% upper bound."""
    scores, labels, groups = np.asarray(scores, np.float64), np.asarray(labels, bool), np.asarray(groups)
    episodes = np.array(list(dict.fromkeys(groups.tolist())))
    split = np.array_split(episodes, min(folds, len(episodes)))
    false_successes = trials = caught = success_episodes = 0
    for fold in split:
        inside = np.isin(groups, fold)
        if inside.all():  # one episode: nothing to calibrate on apart from it
            break
        threshold = pick_episode_threshold(scores[~inside], labels[~inside], groups[~inside], target, frames)
        before, successes = episode_maxima(scores[inside], labels[inside], groups[inside], frames)
        false_successes += int((before > threshold).sum())
        trials += len(before)
        caught += int((successes > threshold).sum())
        success_episodes += len(successes)
    return {
        "episodes": trials,
        "false_successes": false_successes,
        "false_success_rate": false_successes / trials if trials else None,
        "false_success_upper_95": upper_bound(false_successes, trials),
        "success_episodes": success_episodes,
        "successes_caught": caught / success_episodes if success_episodes else None,
    }


def promise(calibration: dict[str, Any]) -> str:
    """The reward node's promise per episode, in words, from a calibration (:data:`CALIBRATION_KEYS`)."""
    c = calibration
    frames = c.get("consecutive_frames") or 1  # a file of an older robot_rl: one frame
    rule = "" if frames == 1 else f" (a success: {frames} frames in a row above the threshold)"
    return (
        f"calibrated for classifier.target_false_success={c['target_false_success']}{rule}: cross-validated on "
        f"{c['episodes']} held-out episodes, {c['false_successes']} declared a success before the task was done"
        f" ({_share(c['false_success_rate'])} per episode, at most {_share(c['false_success_upper_95'])} at 95%"
        f" confidence), {_share(c['successes_caught'])} of {c['success_episodes']} successes caught"
    )


def refusal(calibration: dict[str, Any] | None) -> str | None:
    """Why a calibrated classifier cannot be a reward (None: it can): it catches fewer than
    ``MIN_SUCCESSES_CAUGHT`` of the held-out success episodes (cross-validated). Without held-out successes there is
    nothing to tell by (the training report's ``calibration_note`` says to collect more)."""
    if calibration is None or calibration.get("episodes") is None:
        return None  # a file without a per-episode calibration: the user's threshold or an older file's
    caught, successes = calibration["successes_caught"], calibration["success_episodes"]
    if successes and caught < MIN_SUCCESSES_CAUGHT:
        return (
            f"a classifier that catches most held-out successes; it caught {caught:.2f} of {successes} at threshold "
            f"{calibration['threshold']:.3f} (a reward that never rewards): label more success episodes (the success "
            "button held for every frame of the task done), near-misses as failures, and train again"
        )
    return None


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


def training_inputs(
    model: RewardClassifier, images: dict[str, np.ndarray], train: np.ndarray, generator: torch.Generator
) -> Callable[[np.ndarray], dict[str, torch.Tensor]]:
    """``inputs(index)``: the encoder's inputs (:meth:`RewardClassifier.camera_inputs`) for the frames at ``index``
    (among those ``train`` marks), augmented: images randomly lit (:func:`photometric_jitter`) and shifted, or with a
    frozen backbone one of each frame's stored feature views, computed here once per training frame (not once per
    batch) from the frame lit by one draw."""
    config, cameras, frozen = model.config, model.config.cameras, model.frozen

    def lit(frames: np.ndarray) -> torch.Tensor:
        """uint8 (B, H, W, 3) frames -> (B, 3, H, W), each under a drawn exposure and white balance."""
        chw = torch.as_tensor(frames).permute(0, 3, 1, 2)
        return photometric_jitter(chw, config.exposure_jitter, config.white_balance_jitter, generator)

    if frozen is None:
        return lambda index: {c: random_shift(lit(images[c][index]), config.shift_pad, generator) for c in cameras}
    frozen.generator = generator
    frames = np.flatnonzero(train)
    position = np.full(len(train), -1)
    position[frames] = np.arange(len(frames))
    stored = {
        c: torch.stack(
            [frozen.views_of(c, lit(images[c][i : i + 1])[0].round().byte().permute(1, 2, 0)) for i in frames]
        )
        for c in cameras
    }
    return lambda index: {c: frozen.pick(stored[c][position[index]], augment=True) for c in cameras}


def train_reward_classifier(
    images: dict[str, np.ndarray], labels: np.ndarray, groups: np.ndarray, config: RewardClassifierConfig, seed: int = 0
) -> tuple[RewardClassifier, dict[str, Any]]:
    """Train on the episodes not held out, calibrate the threshold on the held-out ones per episode
    (:func:`pick_episode_threshold`, ``config.target_false_success``) and measure its promise out of sample
    (:func:`cross_validated_promise`); returns the model (its ``calibration`` set) and a report: the calibrated
    threshold and its promise per episode (``false_success_per_episode`` with its 95% upper bound, over
    ``held_out_episodes``; ``successes_caught``), held-out accuracy at the threshold in use and the held-out frames'
    false-positive/negative rates at it and at 0.5."""
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
    batch_inputs = training_inputs(model, images, ~held_out, generator)
    half = config.batch_size // 2
    for _ in range(config.updates):
        model.train()
        index = np.concatenate([rng.choice(train_index[False], half), rng.choice(train_index[True], half)])
        target = torch.as_tensor(labels[index], dtype=torch.float32)
        loss = nn.functional.binary_cross_entropy_with_logits(model.logits(batch_inputs(index)), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    held_scores = probabilities(model, {c: images[c][held_out] for c in config.cameras})
    train_scores = probabilities(model, {c: images[c][~held_out] for c in config.cameras})
    held_labels, held_groups = labels[held_out], groups[held_out]  # every episode's reset frame is a negative
    target, frames = config.target_false_success, config.consecutive_frames
    calibrated = pick_episode_threshold(held_scores, held_labels, held_groups, target, frames)
    if not held_labels.any():  # where successes score is unknown: never below the uncalibrated 0.5 (a threshold
        calibrated = max(calibrated, UNCALIBRATED_THRESHOLD)  # just above the failures calls everything a success)
    promised = cross_validated_promise(held_scores, held_labels, held_groups, target, frames=frames)
    rates = error_rates(held_scores, held_labels, calibrated)
    model.calibration = {
        "threshold": calibrated,
        "consecutive_frames": frames,
        "target_false_success": float(target),
        **promised,
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
        "target_false_success": float(target),
        "calibrated_threshold": calibrated,
        "held_out_episodes": promised["episodes"],
        "false_success_per_episode": promised["false_success_rate"],
        "false_success_per_episode_upper_95": promised["false_success_upper_95"],
        "held_out_success_episodes": promised["success_episodes"],
        "successes_caught": promised["successes_caught"],
        "promise": promise(model.calibration),
        "held_out_false_positive_rate": rates["false_positive_rate"],
        "held_out_false_negative_rate": rates["false_negative_rate"],
        "held_out_false_positive_rate_at_0.5": at_half["false_positive_rate"],
        "held_out_false_negative_rate_at_0.5": at_half["false_negative_rate"],
        "threshold": threshold,
        "threshold_source": source,
        "train_accuracy": accuracy(train_scores, labels[~held_out], threshold),
        "held_out_accuracy": accuracy(held_scores, held_labels, threshold),
    }
    if promised["episodes"] and target < promised["false_success_upper_95"]:
        report["calibration_note"] = (
            f"{promised['episodes']} held-out episodes bound the false-success rate only at "
            f"{promised['false_success_upper_95']:.2f} (95%): collect more episodes, failures and near-misses above "
            f"all, to resolve a target of {target}"
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
