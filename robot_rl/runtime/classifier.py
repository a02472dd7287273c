"""``robot-rl classifier``: train the reward classifier on an episode store's labelled frames.

The classifier module comes from ``classifier.entry_point`` (``robot_rl.policies.reward_classifier``);
frames are every observation of the chosen cameras, labelled by the step's ``success`` flag (in
sim the task's check, on the robot the operator's key press during teleoperation), or by the operator's label of
the episode where it has one (``operator_label``, the console's success or failure: false, no frame of it is a
success; true, its last one is). The threshold
is calibrated on the held-out episodes for ``classifier.target_fpr`` and saved in the file;
``classifier.threshold`` (null by default) overrides it where it is a number.
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
            key: settings[key] for key in ("camera_encoder", "pretrained_weights", "updates", "threshold", "target_fpr")
        },
    )
    images, labels, groups = module.frames_from_store(store, config.cameras)
    model, report = module.train_reward_classifier(images, labels, groups, config, seed=seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    return {"store": str(store), "out": str(out), "positive_frames": int(labels.sum()), **report}


def load_classifier(cfg: Config):
    """(classifier at ``classifier.out``, threshold, where the threshold comes from): ``classifier.threshold`` when
    it is a number (a probability), else the one calibrated into the file, else 0.5 for a file saved before
    calibration. The reward node's rule."""
    settings = cfg["classifier"]
    model = classifier_module(cfg).RewardClassifier.load(settings["out"], threshold=settings["threshold"])
    threshold, source = model.decision_threshold()
    return model, threshold, source
