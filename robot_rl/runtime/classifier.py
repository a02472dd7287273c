"""``robot-rl classifier``: train the reward classifier on an episode store's labelled frames.

The classifier module comes from ``classifier.entry_point`` (``robot_rl.policies.reward_classifier``);
frames are every observation of the chosen cameras, labelled by the step's ``success`` flag (in
sim the task's check, on the robot the operator's key press during teleoperation), or by the operator's label of
the episode where it has one (``operator_label``, the console's success or failure: false, no frame of it is a
success; true, its last one is). The threshold
is calibrated on whole held-out episodes for ``classifier.target_false_success`` (episodes declared a success before
their task is done) and saved in the file with its promise, measured out of sample;
``classifier.threshold`` (null by default) overrides it where it is a number. A classifier that catches fewer than half
the held-out successes is refused: by ``robot-rl classifier`` (nothing is written) and by the reward node and
``robot-rl launch`` of a graph with it (:func:`load_classifier`).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from robot_rl.core.config import Config, ConfigError, integer, output_path


def classifier_module(cfg: Config):
    return importlib.import_module(cfg["classifier"]["entry_point"])


def train_classifier(cfg: Config) -> dict[str, Any]:
    module = classifier_module(cfg)
    settings = cfg["classifier"]
    store = settings["store"]
    if not store or not Path(str(store)).is_dir():
        raise ConfigError("classifier.store", store, "an episode store with labelled frames")
    out = output_path("classifier.out", settings["out"], folder=False)
    seed = integer("seed", cfg["seed"])
    config = module.RewardClassifierConfig(
        cameras=tuple(settings["cameras"]),
        **{
            key: settings[key]
            for key in (
                "camera_encoder",
                "pretrained_blocks",
                "pretrained_views",
                "updates",
                "exposure_jitter",
                "white_balance_jitter",
                "threshold",
                "consecutive_frames",
                "target_false_success",
            )
        },
    )
    images, labels, groups = module.frames_from_store(store, config.cameras)
    model, report = module.train_reward_classifier(images, labels, groups, config, seed=seed)
    refused = module.refusal(model.calibration)
    if refused is not None:
        raise ConfigError("classifier.store", str(store), refused)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    return {"store": str(store), "out": str(out), "positive_frames": int(labels.sum()), **report}


def load_classifier(cfg: Config):
    """(classifier at ``classifier.out``, threshold, where the threshold comes from): ``classifier.threshold`` when
    it is a number (a probability), else the one calibrated into the file, else 0.5 for a file saved before
    calibration. The reward node's rule."""
    settings = cfg["classifier"]
    module = classifier_module(cfg)
    model = module.RewardClassifier.load(settings["out"], threshold=settings["threshold"])
    refused = module.refusal(model.calibration) if settings["threshold"] is None else None
    if refused is not None:
        raise ConfigError("classifier.out", str(settings["out"]), refused)
    threshold, source = model.decision_threshold()
    return model, threshold, source
