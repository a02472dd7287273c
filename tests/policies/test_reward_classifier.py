"""The reward classifier learns success from sim-rendered frames recorded through the episode store."""

import numpy as np
import pytest
import torch

from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.data.augment import photometric_jitter
from robot_rl.policies.reward_classifier import (
    RewardClassifier,
    RewardClassifierConfig,
    SustainedSuccess,
    cross_validated_promise,
    episode_maxima,
    error_rates,
    frames_from_store,
    pick_episode_threshold,
    pick_threshold,
    probabilities,
    refusal,
    sustained,
    train_reward_classifier,
    upper_bound,
)
from robot_rl.runtime.collect import collect
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
@pytest.mark.parametrize("encoder", ["cnn", "pretrained"])
def test_held_out_accuracy_is_at_least_95_percent(pick_cube_frames, tmp_path, encoder):
    images, labels, groups = pick_cube_frames
    assert 0.1 < labels.mean() < 0.9  # both classes are there
    # 250 updates, not the default 1,500: held-out accuracy 0.996, 0.991 and 0.991 with seeds 0, 1 and 2 (one thread,
    # 2026-12-01; 1.00 at 400 and 500 updates, 0.996 at 700, seed 0); 250 updates cost ~17 s of CPU here, and the
    # test took ~290 s with 1,500. pretrained (the frozen EfficientNet-Lite0's features of each training frame, 8
    # blocks): 0.883 at 250 updates and lr 3e-4, 0.983 at lr 1e-3, 0.987 at the default 1,500 updates (seed 0, 2026-12-07)
    config = RewardClassifierConfig(updates=250, camera_encoder=encoder, lr=3e-4 if encoder == "cnn" else 1e-3)
    model, report = train_reward_classifier(images, labels, groups, config, seed=0)
    print(report)
    assert report["held_out_accuracy"] >= 0.95, report
    assert report["held_out_positive"] > 0 and report["held_out_frames"] > report["held_out_positive"]

    path = tmp_path / "classifier.pt"
    model.save(path)
    loaded = RewardClassifier.load(path)
    frame = {"front": images["front"][int(np.flatnonzero(labels)[0])]}
    assert loaded.probability(frame) == pytest.approx(model.probability(frame), abs=1e-6)


@pytest.mark.slow
def test_a_classifier_trained_under_drawn_light_holds_its_word_when_the_camera_darkens(pick_cube_frames):
    """Issue 72: every classifier of the cell rehearsals fired on 10-20% of its failure frames darkened by exp(-0.2),
    two stds of the emulated cell's auto-exposure drift: the false successes the cell counted. Trained under drawn
    exposure and white balance (``exposure_jitter``, ``white_balance_jitter``) it holds: here, without them, 68% of
    the failure frames darkened by exp(-0.3) fired and 0.2% with them (seed 0, 250 updates, 2026-12-08; in a CI run
    none fired and 32% of the successes were caught without them, 0% and 93% with them)."""
    images, labels, groups = pick_cube_frames
    darkened = {"front": (images["front"] * np.exp(-0.3)).astype(np.uint8)}
    fired = {}
    for jitter in (0.0, 0.3):
        config = RewardClassifierConfig(
            updates=250, exposure_jitter=jitter, white_balance_jitter=jitter / 5, consecutive_frames=1
        )  # a threshold for single frames: the claim is per frame
        model, _ = train_reward_classifier(images, labels, groups, config, seed=0)
        said = probabilities(model, darkened) > model.decision_threshold()[0]
        fired[jitter] = (float(said[~labels].mean()), float(said[labels].mean()))
    assert fired[0.3][0] <= 0.02 and fired[0.3][1] >= 0.9, fired  # failures stay failures, successes are caught
    # the old training: a darker camera changes its word on many frames, failures called successes (68% run here)
    # or successes missed (68% in a CI run of the same code, CI=true on a fresh clone)
    assert fired[0.0][0] + (1.0 - fired[0.0][1]) > 0.2, fired


def test_the_photometric_jitter_draws_an_exposure_and_a_white_balance_per_image():
    images = torch.full((64, 3, 4, 4), 100.0)
    lit = photometric_jitter(images, exposure=0.3, white_balance=0.0, generator=torch.Generator().manual_seed(0))
    gains = lit[:, :, 0, 0] / 100.0
    assert torch.allclose(gains, gains[:, :1].expand(-1, 3))  # exposure alone: one gain per image, every channel
    assert 0.2 < gains[:, 0].log().std() < 0.4 and (lit <= 255.0).all()
    balanced = photometric_jitter(images, 0.0, 0.05, torch.Generator().manual_seed(0))[:, :, 0, 0]
    assert not torch.allclose(balanced[:, 0], balanced[:, 1])  # white balance: a gain per channel
    assert torch.equal(photometric_jitter(images.byte(), 0.0, 0.0), images)  # zero stds: the images as float
    assert photometric_jitter(torch.full((2, 3, 1, 1), 250.0), 2.0, 0.0).max() <= 255.0  # clipped


def test_bad_input_is_named(tmp_path):
    with pytest.raises(ConfigError, match="classifier.camera_encoder='resnet10' .* cnn or pretrained"):
        RewardClassifierConfig(camera_encoder="resnet10")  # the ResNet-10 from a weights file is gone
    with pytest.raises(ConfigError, match="classifier.cameras"):
        RewardClassifier({"wrist": (32, 32, 3)}, RewardClassifierConfig())
    with pytest.raises(ConfigError, match="classifier.threshold"):
        RewardClassifierConfig(threshold=1.5)
    with pytest.raises(ConfigError, match="classifier.target_false_success"):
        RewardClassifierConfig(target_false_success=1.0)
    with pytest.raises(ConfigError, match="classifier.consecutive_frames=0 .* an integer >= 1"):
        RewardClassifierConfig(consecutive_frames=0)
    with pytest.raises(ConfigError, match="classifier.exposure_jitter=-0.1 .* a std >= 0"):
        RewardClassifierConfig(exposure_jitter=-0.1)
    images = {"front": np.zeros((10, 32, 32, 3), np.uint8)}
    with pytest.raises(ConfigError, match="both success and failure frames"):
        train_reward_classifier(images, np.zeros(10, bool), np.arange(10), RewardClassifierConfig(updates=1))
    with pytest.raises(FileNotFoundError, match="reward classifier not found"):
        RewardClassifier.load(tmp_path / "missing.pt")


def test_a_saved_classifier_round_trips_and_a_crafted_file_never_runs(tmp_path):
    from tests.test_bad_input import _Payload

    config = RewardClassifierConfig(cameras=("front",), threshold=0.7, consecutive_frames=3)
    model = RewardClassifier({"front": (32, 32, 3)}, config)
    model.save(tmp_path / "classifier.pt")
    loaded = RewardClassifier.load(tmp_path / "classifier.pt")  # tensors and plain values only
    assert loaded.image_shapes == {"front": (32, 32, 3)}
    assert loaded.config.threshold is None  # an override is the run's choice, never saved into the file
    assert loaded.config.consecutive_frames == 3  # the rule its threshold was calibrated for travels with it
    saved = torch.load(tmp_path / "classifier.pt", weights_only=True)
    del saved["config"]["consecutive_frames"]  # a file of an older robot_rl: calibrated for one frame
    (tmp_path / "older").mkdir()
    torch.save(saved, tmp_path / "older" / "classifier.pt")
    assert RewardClassifier.load(tmp_path / "older" / "classifier.pt").config.consecutive_frames == 1
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    assert sorted(p.name for p in tmp_path.iterdir()) == ["classifier.pt", "older"]  # written beside, renamed

    marker = tmp_path / "payload_ran"
    torch.save({"config": _Payload(marker), "image_shapes": {}, "state_dict": {}}, tmp_path / "crafted.pt")
    with pytest.raises(ConfigError, match="classifier.out"):
        RewardClassifier.load(tmp_path / "crafted.pt")
    assert not marker.exists()


def _fpr(scores, labels, threshold):
    return error_rates(scores, labels, threshold)["false_positive_rate"]


@pytest.mark.parametrize("target", [0.0, 0.01, 0.05, 0.29])
def test_the_picked_threshold_keeps_the_false_positive_rate_at_the_largest_true_positive_rate(target):
    rng = np.random.default_rng(3)
    labels = np.arange(1100) < 100  # 100 positives among 1,000 negatives: rare, as on a cell
    scores = np.where(labels, rng.beta(5, 2, 1100), rng.beta(2, 5, 1100))
    scores[1000:1010] = scores[1010]  # ties among the negatives' top scores
    threshold = pick_threshold(scores, labels, target)
    assert _fpr(scores, labels, threshold) <= target
    # no threshold that keeps the rate catches more successes, and none that catches as many has fewer false positives
    candidates = [t for t in np.unique(scores) if _fpr(scores, labels, t) <= target]
    tpr = {t: 1.0 - error_rates(scores, labels, t)["false_negative_rate"] for t in candidates}
    assert 1.0 - error_rates(scores, labels, threshold)["false_negative_rate"] == max(tpr.values())
    assert _fpr(scores, labels, threshold) == min(_fpr(scores, labels, t) for t in tpr if tpr[t] == max(tpr.values()))
    # midway between the nearest frames of the two classes on either side of it
    below, above = scores[scores <= threshold].max(), scores[scores > threshold].min()
    assert not labels[scores == below].any() and labels[scores == above].all()
    assert threshold == pytest.approx((below + above) / 2)
    assert _fpr(scores, labels, 0.5) > 0.01  # 0.5 would not keep a 1% rate on these scores


def test_the_false_positives_the_target_allows_are_only_spent_where_they_catch_a_success():
    labels = np.array([False] * 5 + [True] * 3)
    scores = np.array([0.1, 0.2, 0.3, 0.45, 0.9, 0.6, 0.8, 0.95])  # one negative (0.9) above two positives
    assert pick_threshold(scores, labels, 0.0) == pytest.approx(0.925)  # no false positive: only 0.95 is caught
    assert pick_threshold(scores, labels, 0.2) == pytest.approx(0.525)  # one allowed, spent on 0.9: all three caught
    assert pick_threshold(scores, labels, 0.39) == pytest.approx(0.525)  # a second one would catch nothing more
    assert (
        pick_threshold(scores[labels == 0], labels[labels == 0], 0.2) == 0.45
    )  # no positive: the lowest that keeps it


def test_the_threshold_is_calibrated_saved_and_an_uncalibrated_file_falls_back_to_one_half(tmp_path):
    from dataclasses import asdict

    rng = np.random.default_rng(0)  # success = a bright scene (1 frame in 5), failure = a dark one
    labels = np.arange(100) % 5 == 4
    frames = (np.where(labels[:, None, None, None], 170, 80) + rng.integers(-60, 60, (100, 16, 16, 3))).astype(np.uint8)
    config = RewardClassifierConfig(updates=40, batch_size=16, target_false_success=0.05, validation_fraction=0.5)
    model, report = train_reward_classifier({"front": frames}, labels, np.arange(100) // 10, config, seed=0)
    threshold = report["calibrated_threshold"]
    assert report["threshold"] == threshold and "calibrated" in report["threshold_source"]
    assert report["target_false_success"] == 0.05 and report["held_out_episodes"] == 5
    assert report["false_success_per_episode_upper_95"] >= report["false_success_per_episode"] >= 0.0
    assert "5 held-out episodes" in report["promise"] and report["promise"] in report["threshold_source"]
    for key in ("held_out_false_negative_rate", "held_out_false_positive_rate_at_0.5", "successes_caught"):
        assert 0.0 <= report[key] <= 1.0, key
    path = tmp_path / "classifier.pt"
    model.save(path)
    saved = torch.load(path, weights_only=True)  # plain values only
    assert saved["calibration"]["threshold"] == threshold
    assert saved["calibration"]["false_positive_rate"] == report["held_out_false_positive_rate"]
    assert saved["calibration"]["false_negative_rate"] == report["held_out_false_negative_rate"]
    assert saved["calibration"]["false_success_upper_95"] == report["false_success_per_episode_upper_95"]
    assert RewardClassifier.load(path).decision_threshold()[0] == threshold
    assert RewardClassifier.load(path, threshold=0.8).decision_threshold() == (0.8, "classifier.threshold")
    with pytest.raises(ConfigError, match="classifier.threshold"):
        RewardClassifier.load(path, threshold=float("nan"))

    # a file of the per-frame calibration: target_fpr in its config, the frame rates only; its threshold stands
    per_frame = {k: v for k, v in asdict(model.config).items() if k != "target_false_success"} | {"target_fpr": 0.01}
    frame_keys = ("threshold", "false_positive_rate", "false_negative_rate", "held_out_frames", "held_out_negative")
    calibration = {key: saved["calibration"][key] for key in frame_keys}
    torch.save(
        {
            "config": per_frame,
            "image_shapes": model.image_shapes,
            "state_dict": model.state_dict(),
            "calibration": calibration,
        },
        path,
    )
    value, source = RewardClassifier.load(path).decision_threshold()
    assert value == threshold and "per frame" in source and "train it again" in source
    # a file saved before calibration: the then-default threshold 0.5 in its config, no target_fpr, no calibration
    old = {k: v for k, v in asdict(model.config).items() if k != "target_false_success"} | {"threshold": 0.5}
    torch.save({"config": old, "image_shapes": model.image_shapes, "state_dict": model.state_dict()}, path)
    loaded = RewardClassifier.load(path)
    value, source = loaded.decision_threshold()
    assert value == 0.5 and "no calibration" in source and loaded.calibration is None


def test_without_held_out_successes_the_threshold_stays_at_least_one_half():
    """Held-out episodes with no success frame cannot say where successes score: a threshold just above the
    failures (2e-5 on a cell rehearsal's 3 episodes) called every live frame a success. It stays >= 0.5."""
    rng = np.random.default_rng(0)
    images = {"front": rng.integers(0, 255, (60, 16, 16, 3), dtype=np.uint8)}
    labels = np.zeros(60, bool)
    labels[5] = True  # one success frame, in a training episode
    groups = np.repeat(np.arange(6), 10)
    config = RewardClassifierConfig(cameras=("front",), updates=2, validation_fraction=0.5)
    for seed in range(4):
        held_out_has_it = False
        try:
            _, report = train_reward_classifier(images, labels, groups, config, seed=seed)
        except ConfigError:  # the split put the only success frame in the held-out episodes
            held_out_has_it = True
        if not held_out_has_it:
            assert report["held_out_positive"] == 0
            assert report["calibrated_threshold"] >= 0.5 and "no success frame" in report["calibration_note"]
            return
    raise AssertionError("no seed kept the success frame in training")


def test_the_operators_label_kept_by_the_recorder_overrides_the_success_flags_for_the_classifier(tmp_path):
    """Issue 51: the console's success / failure reaches the recorder (``EpisodeRecorder.label``) as the episode's
    ``operator_label``; ``frames_from_store`` trains on it: a failure label clears the episode's success frames, a
    success label makes its last frame one. An episode without a label keeps its flags; a label between episodes is
    not kept."""
    from robot_rl.data import EpisodeRecorder, EpisodeStore
    from robot_rl.data.transition import Provenance, Transition

    meta = {"task": "reach", "observation_shapes": {"front": [8, 8, 3]}, "action_dim": 2, "control_rate_hz": 10}
    store = EpisodeStore.create(tmp_path / "labels.zarr", meta)
    recorder = EpisodeRecorder(store)
    assert not recorder.label(True)  # no episode open
    frame = np.zeros((8, 8, 3), np.uint8)
    labels = {"none": None, "failure": False, "success": True}
    for name, label in labels.items():
        for t in range(3):  # the classifier said success at the last step of the first two episodes only
            if t == 1 and label is not None:
                assert recorder.label(not label) and recorder.label(label)  # the last label given counts
            last = t == 2
            success = last and name != "success"
            step = Transition({"front": frame}, np.zeros(2), float(success), {"front": frame}, success, last)
            step.first, step.success, step.origin = t == 0, success, Provenance(episode=name)
            recorder.add([step])
    names = store.episode_names()
    assert [store.episode_attrs(n).get("operator_label") for n in names] == [None, False, True]
    _, frame_labels, groups = frames_from_store(store.path, ("front",))
    per_episode = [frame_labels[groups == index].tolist() for index in range(3)]
    assert per_episode == [[False, False, False, True], [False] * 4, [False, False, False, True]]


def independent_frames(rng, episodes: int, steps: int, successes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores, labels and episode index of ``episodes`` episodes of ``steps`` frames: the first ``successes`` end
    with 10 success frames scoring Beta(8, 2); every other frame scores Beta(2, 8), independent of the rest."""
    scores = rng.beta(2, 8, (episodes, steps))
    labels = np.zeros((episodes, steps), bool)
    labels[:successes, -10:] = True
    scores[labels] = rng.beta(8, 2, labels.sum())
    return scores.ravel(), labels.ravel(), np.repeat(np.arange(episodes), steps)


def test_the_threshold_keeps_the_false_successes_per_episode_not_per_frame():
    """Issue 72 item 3: a per-frame false-positive rate of 0.011 lets most 100-step failed episodes score one frame
    above the threshold somewhere (63% with independent frames), and a false success ends a failed episode as a
    success. The threshold is chosen on each episode's highest score before the task is done."""
    rng = np.random.default_rng(0)
    scores, labels, groups = independent_frames(rng, 300, 100, 100)
    per_frame = pick_threshold(scores, labels, 0.011)
    before, caught = episode_maxima(scores, labels, groups)
    assert len(before) == 300 and len(caught) == 100
    assert (before > per_frame).mean() > 0.5  # the per-frame rule: most episodes get a false success
    threshold = pick_episode_threshold(scores, labels, groups, 0.05)
    assert (before > threshold).mean() <= 0.05 and (caught > threshold).mean() >= 0.8
    new_scores, new_labels, new_groups = independent_frames(rng, 400, 100, 0)  # new failed episodes
    assert (episode_maxima(new_scores, new_labels, new_groups)[0] > threshold).mean() < 0.1


def test_the_promise_is_measured_out_of_sample_with_a_bound_that_says_how_many_episodes_it_rests_on():
    """Calibrated and reported on the same few failure episodes, a rate read 0.006 where new episodes saw 0.091: the
    threshold had moved above exactly the frames it was then scored on. The promise is cross-validated by episode
    (each fold at the threshold the other folds chose): an episode unlike the others is a false success there, as it
    would be on the cell. Its upper bound (Clopper-Pearson, 95%) is wide on a handful of episodes."""
    rng = np.random.default_rng(1)
    scores, labels, groups = independent_frames(rng, 10, 50, 5)
    scores[(groups == 7) & (np.arange(len(groups)) % 50 == 20)] = 0.995  # one failed episode scores as a success
    in_sample = pick_episode_threshold(scores, labels, groups, 0.0)
    assert (episode_maxima(scores, labels, groups)[0] > in_sample).sum() == 0  # in sample: never a false success
    promised = cross_validated_promise(scores, labels, groups, 0.0)
    assert promised["episodes"] == 10 and promised["success_episodes"] == 5
    assert promised["false_successes"] >= 1, "the out-of-sample count is the in-sample zero"
    assert promised["false_success_upper_95"] > promised["false_success_rate"]
    assert upper_bound(0, 4) == pytest.approx(1 - 0.05 ** (1 / 4), abs=1e-6)  # 0 of 4: up to 0.53
    assert upper_bound(0, 300) < 0.01 and upper_bound(5, 100) == pytest.approx(0.1023, abs=1e-3)


def test_two_frames_in_a_row_ignore_a_lone_spike_and_the_calibration_judges_the_rule_the_node_applies():
    """Issue 72 item 3's k-consecutive-frames rule: failed episodes whose frames spike above every success now and
    then (a glint, an exposure step), successes held for their 10 frames. One frame is enough for a false success, so
    the one-frame threshold must clear the spikes and misses the successes; with two frames in a row the spikes are
    no false success and the successes are caught. The calibration's frame scores (:func:`sustained`) fire exactly
    where the reward node's rule (:class:`SustainedSuccess`) does."""
    rng = np.random.default_rng(3)
    scores, labels, groups = independent_frames(rng, 60, 60, 30)
    spikes = np.flatnonzero(~labels & (rng.random(len(labels)) < 0.02))
    scores[spikes] = rng.uniform(0.97, 1.0, len(spikes))  # lone frames above the successes' Beta(8, 2)
    one = cross_validated_promise(scores, labels, groups, 0.05)
    two = cross_validated_promise(scores, labels, groups, 0.05, frames=2)
    assert one["successes_caught"] < 0.5, one  # clearing the spikes misses the successes
    assert two["successes_caught"] >= 0.9 and two["false_success_rate"] <= 0.05, two
    threshold = pick_episode_threshold(scores, labels, groups, 0.05, frames=2)
    for episode in range(60):
        mine = scores[groups == episode]
        rule = SustainedSuccess(threshold, 2)
        assert [rule.update(p) for p in mine] == (sustained(mine, 2) > threshold).tolist()
    rule = SustainedSuccess(0.5, 3)
    assert [rule.update(p) for p in (0.9, 0.9, 0.2, 0.9, 0.9, 0.9, 0.9)] == [False] * 5 + [True, True]
    rule.clear()  # an episode ended: the next needs its own three
    assert [rule.update(p) for p in (0.9, 0.9, 0.9)] == [False, False, True]
    # a demonstration recorded up to its first success frame (task.terminate_on_success): caught by that frame, as
    # the task stays done on a cell while the node waits for its frames in a row; the frames before it are no success
    before, caught = episode_maxima(np.array([0.1, 0.6, 0.95]), np.array([False, False, True]), np.zeros(3), 3)
    assert before.tolist() == [0.0] and caught.tolist() == [0.95]  # no run of 3 before the success
    assert sustained(np.array([0.9, 0.1, 0.8, 0.7]), 1).tolist() == [0.9, 0.1, 0.8, 0.7]
    assert sustained(np.array([0.9, 0.1, 0.8, 0.7]), 2).tolist() == [0.0, 0.1, 0.1, 0.7]


def test_a_classifier_that_misses_most_held_out_successes_is_refused_with_what_to_label_next():
    """A classifier that caught no held-out success ("FPR 0.000, FNR 1.000") became a session's reward with one log
    line: a reward that never rewards. It is refused, saying what to label."""
    calibration = {"episodes": 8, "success_episodes": 4, "successes_caught": 0.25, "threshold": 0.97}
    assert "caught 0.25 of 4" in refusal(calibration) and "label more success episodes" in refusal(calibration)
    assert refusal(calibration | {"successes_caught": 0.75}) is None
    assert refusal(calibration | {"success_episodes": 0, "successes_caught": None}) is None  # nothing to tell by
    assert refusal(None) is None and refusal({"threshold": 0.5, "episodes": None}) is None  # older files
