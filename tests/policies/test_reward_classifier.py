"""The reward classifier learns success from sim-rendered frames recorded through the episode store."""

import numpy as np
import pytest
import torch

from robot_rl.collect import collect
from robot_rl.composed_config import load_config
from robot_rl.config import ConfigError
from robot_rl.policies.reward_classifier import (
    RewardClassifier,
    RewardClassifierConfig,
    frames_from_store,
    train_reward_classifier,
)
from tests.conftest import missing_capability


@pytest.fixture(scope="module")
def pick_cube_frames(tmp_path_factory):
    """Scripted pick_cube episodes that keep going after success (the cube stays lifted), front camera 64x64."""
    store = tmp_path_factory.mktemp("classifier") / "frames.zarr"
    cfg = load_config(
        [
            "task=pick_cube",
            "task.cameras=[front]",
            "task.image_size=64",
            "task.terminate_on_success=false",
            "task.episode_steps=45",
            "collect.episodes=24",
            f"collect.out={store}",
            "seed=7",
        ]
    )
    try:
        collect(cfg)
    except Exception as error:  # noqa: BLE001 - no OpenGL context
        missing_capability("MuJoCo rendering", error)
    return frames_from_store(store, ("front",))


@pytest.mark.slow
def test_held_out_accuracy_is_at_least_95_percent(pick_cube_frames, tmp_path):
    images, labels, groups = pick_cube_frames
    assert 0.1 < labels.mean() < 0.9  # both classes are there
    model, report = train_reward_classifier(images, labels, groups, RewardClassifierConfig(updates=1500), seed=0)
    print(report)
    assert report["held_out_accuracy"] >= 0.95, report
    assert report["held_out_positive"] > 0 and report["held_out_frames"] > report["held_out_positive"]

    path = tmp_path / "classifier.pt"
    model.save(path)
    loaded = RewardClassifier.load(path)
    frame = {"front": images["front"][int(np.flatnonzero(labels)[0])]}
    assert loaded.probability(frame) == pytest.approx(model.probability(frame), abs=1e-6)


def test_a_pretrained_encoder_file_is_loaded_and_bad_input_is_named(tmp_path):
    from robot_rl.policies.encoders import ResNet10

    weights = tmp_path / "resnet10.pt"
    torch.save(ResNet10((32, 32, 3)).backbone_state_dict(), weights)
    config = RewardClassifierConfig(camera_encoder="resnet10", pretrained_weights=str(weights), updates=2)
    model = RewardClassifier({"front": (32, 32, 3)}, config)
    expected = torch.load(weights, weights_only=True)["stem.0.weight"]
    torch.testing.assert_close(model.encoder.camera_nets["front"].stem[0].weight, expected)

    with pytest.raises(ConfigError, match="classifier.cameras"):
        RewardClassifier({"wrist": (32, 32, 3)}, RewardClassifierConfig())
    with pytest.raises(ConfigError, match="classifier.threshold"):
        RewardClassifierConfig(threshold=1.5)
    images = {"front": np.zeros((10, 32, 32, 3), np.uint8)}
    with pytest.raises(ConfigError, match="both success and failure frames"):
        train_reward_classifier(images, np.zeros(10, bool), np.arange(10), RewardClassifierConfig(updates=1))
    with pytest.raises(FileNotFoundError, match="reward classifier not found"):
        RewardClassifier.load(tmp_path / "missing.pt")


def test_a_saved_classifier_round_trips_and_a_crafted_file_never_runs(tmp_path):
    from tests.test_bad_input import _Payload

    model = RewardClassifier({"front": (32, 32, 3)}, RewardClassifierConfig(cameras=("front",), threshold=0.7))
    model.save(tmp_path / "classifier.pt")
    loaded = RewardClassifier.load(tmp_path / "classifier.pt")  # tensors and plain values only
    assert loaded.config.threshold == 0.7 and loaded.image_shapes == {"front": (32, 32, 3)}
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    assert sorted(p.name for p in tmp_path.iterdir()) == ["classifier.pt"]  # written beside it, then renamed

    marker = tmp_path / "payload_ran"
    torch.save({"config": _Payload(marker), "image_shapes": {}, "state_dict": {}}, tmp_path / "crafted.pt")
    with pytest.raises(ConfigError, match="classifier.out"):
        RewardClassifier.load(tmp_path / "crafted.pt")
    assert not marker.exists()
