"""Agent updates on device-resident batches: nothing in the update-to-data loop reads a tensor back to the host
(metrics stay tensors until someone logs them), and the ``compile`` / ``autocast`` flags change how, not what,
an update computes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import robot_rl.data
import robot_rl.policies
from robot_rl.core.config import ConfigError
from robot_rl.data import MixedSampler, ReplayBuffer
from robot_rl.policies.base import bf16_helps
from robot_rl.policies.cqn import CQNAgent, CQNConfig
from robot_rl.policies.cqn_as import CQNASAgent, CQNASConfig
from robot_rl.policies.networks import EnsembleLayerNorm
from robot_rl.policies.sac import SACAgent, SACConfig

SHAPES = {"state": (5,), "front": (16, 16, 3)}
HOST_READS = ("item", "cpu", "numpy", "tolist", "__bool__", "__float__", "__int__")
OURS = tuple(str(Path(package.__file__).parent) + os.sep for package in (robot_rl.policies, robot_rl.data))


def sampler(shapes: dict[str, tuple[int, ...]], action_dim: int = 3) -> MixedSampler:
    """Online and demo buffers with a few short episodes each, with gripper-like last action dimensions."""
    space = {key: (shape, np.uint8 if len(shape) == 3 else np.float32) for key, shape in shapes.items()}
    rng = np.random.default_rng(0)
    buffers = [ReplayBuffer(200, space, action_dim), ReplayBuffer(200, space, action_dim)]
    for buffer in buffers:
        for step in range(60):
            obs = {
                key: rng.integers(0, 256, shape) if len(shape) == 3 else rng.normal(size=shape)
                for key, shape in shapes.items()
            }
            action = np.append(rng.uniform(-1, 1, action_dim - 1), rng.choice([-1.0, 1.0]))
            buffer.add(obs, action, float(rng.normal()), obs, step % 10 == 9, False)
    return MixedSampler(*buffers, demo_fraction=0.5, seed=0)


@pytest.fixture
def no_host_reads(monkeypatch):
    """Fail on any read of a tensor back to the host made by the agents' or the replay's own code."""

    def guarded(name):
        original = getattr(torch.Tensor, name)

        def read(self, *args, **kwargs):
            caller = sys._getframe(1).f_code.co_filename
            if caller.startswith(OURS):  # the agents' or the replay's code
                raise AssertionError(f"Tensor.{name} called from {caller}:{sys._getframe(1).f_lineno}")
            return original(self, *args, **kwargs)

        return read

    for name in HOST_READS:
        monkeypatch.setattr(torch.Tensor, name, guarded(name))


@pytest.mark.parametrize(
    "make",
    [
        lambda: SACAgent(SHAPES, 3, SACConfig(utd=3, critic_ensemble=3, hidden=[16], camera_strides=[2]), seed=0),
        lambda: SACAgent(
            SHAPES,
            3,
            SACConfig(utd=2, gripper_critic=True, exploration="gsde", hidden=[16], camera_strides=[2]),
            seed=0,
        ),
        lambda: CQNAgent(SHAPES, 3, CQNConfig(utd=2, hidden=16, camera_strides=[2]), seed=0),
        lambda: CQNASAgent(SHAPES, 3, CQNASConfig(utd=2, hidden=16, horizon=3, camera_strides=[2]), seed=0),
    ],
    ids=["sac_subset", "sac_gripper_gsde", "cqn", "cqn_as"],
)
def test_an_update_never_reads_a_tensor_back_and_returns_tensor_metrics(make, no_host_reads):
    agent = make()
    mixed = sampler(SHAPES)
    metrics = agent.update(lambda: mixed.sample(16, n_step=2, gamma=0.97, sequence_length=agent.sequence_length))
    assert metrics and all(isinstance(value, torch.Tensor) and value.ndim == 0 for value in metrics.values())
    # device types: an agent on torch.device('cuda') computes on cuda:0, which compares unequal
    assert all(value.device.type == agent.device.type and not value.requires_grad for value in metrics.values())


def test_metrics_are_read_once_when_logged():
    agent = SACAgent({"state": (5,)}, 3, SACConfig(utd=2, hidden=[16]), seed=0)
    mixed = sampler({"state": (5,)})
    metrics = agent.update(lambda: mixed.sample(16))
    assert np.isfinite([float(value) for value in metrics.values()]).all()  # the reading a logger makes


@pytest.mark.parametrize(
    "config, key",
    [
        (lambda: SACConfig(compile="yes"), "agent.compile"),
        (lambda: SACConfig(autocast="fp8"), "agent.autocast"),
        (lambda: CQNConfig(autocast="float16"), "agent.autocast"),
    ],
)
def test_the_speed_flags_are_validated(config, key):
    with pytest.raises(ConfigError, match=key):
        config().validate()


def test_bf16_autocast_learns_the_same_critic_on_a_fixed_batch():
    mixed = sampler({"state": (5,)})
    batch = mixed.sample(64, gamma=0.9)
    losses = {}
    for autocast in (None, "bf16"):
        agent = SACAgent({"state": (5,)}, 3, SACConfig(utd=1, hidden=[64], lr=1e-3, autocast=autocast), seed=0)
        losses[autocast] = [float(agent.update(lambda: batch)["critic_loss"]) for _ in range(100)]
    assert losses["bf16"][-1] < 0.5 * losses["bf16"][0]
    assert losses["bf16"][-1] == pytest.approx(losses[None][-1], rel=0.2)


@pytest.mark.parametrize("exploration", ["gaussian", "gsde"])
def test_layer_norms_keep_bf16_activations_in_bf16_under_autocast(exploration):
    """The critic ensemble's float32 scale and shift promoted its bf16 activations to float32, and the next layer
    cast them back down, forward and backward: every LayerNorm returns the dtype it was given."""
    config = SACConfig(utd=2, hidden=[32, 32], autocast="bf16", exploration=exploration)
    agent = SACAgent(SHAPES, 3, config, seed=0)
    seen: list[tuple[str, torch.dtype, torch.dtype]] = []

    def record(module, inputs, output):
        seen.append((type(module).__name__, inputs[0].dtype, output.dtype))

    for name in agent.modules:
        for module in getattr(agent, name).modules():
            if isinstance(module, (torch.nn.LayerNorm, EnsembleLayerNorm)):
                module.register_forward_hook(record)
    agent.update(lambda: sampler(SHAPES).sample(16, gamma=0.9))
    assert {kind for kind, dtype, _ in seen if dtype == torch.bfloat16} == {"LayerNorm", "EnsembleLayerNorm"}
    assert all(out == dtype for _, dtype, out in seen), seen


def test_the_ensemble_layer_norm_is_per_member_affine_layer_norm():
    norm = EnsembleLayerNorm(64, members=2)
    with torch.no_grad():
        norm.scale.uniform_(0.5, 1.5)
        norm.shift.normal_()
    x = torch.randn(2, 8, 64) * 3 + 1
    expected = torch.stack([F.layer_norm(x[e], (64,), norm.scale[e, 0], norm.shift[e, 0]) for e in range(2)])
    torch.testing.assert_close(norm(x), expected)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = norm(x.bfloat16())
    assert mixed.dtype == torch.bfloat16
    torch.testing.assert_close(mixed.float(), expected, atol=0.05, rtol=0.02)


@pytest.mark.parametrize("units", [True, False])
def test_auto_autocast_takes_bf16_only_on_a_cpu_with_bf16_units(monkeypatch, units):
    for probe in ("_is_avx512_bf16_supported", "_is_amx_tile_supported"):
        monkeypatch.setattr(torch.cpu, probe, lambda: units, raising=False)
    assert bf16_helps(torch.device("cpu")) is units
    assert not bf16_helps(torch.device("cuda"))  # launch-bound there: bf16 made the state update slower
    agents = {
        flag: SACAgent({"state": (5,)}, 3, SACConfig(autocast=flag, device="cpu"), seed=0)
        for flag in (None, "bf16", "auto")
    }
    assert {flag: agent.bf16 for flag, agent in agents.items()} == {None: False, "bf16": True, "auto": units}
    assert agents["auto"].autocast().fast_dtype == torch.bfloat16
    assert agents["auto"].autocast()._enabled is units


@pytest.mark.slow
def test_a_compiled_agent_computes_the_same_update_and_saves_the_same_keys():
    mixed = sampler({"state": (5,)})
    batch = mixed.sample(32, gamma=0.9)
    agents = [
        # float32: compiled kernels round bfloat16 differently from eager ones (agent.autocast=auto on a bf16 CPU)
        SACAgent({"state": (5,)}, 3, SACConfig(utd=2, hidden=[16], compile=flag, autocast=None), seed=0)
        for flag in (False, True)
    ]
    metrics = [agent.update(lambda: batch) for agent in agents]
    for name in metrics[0]:
        assert float(metrics[1][name]) == pytest.approx(float(metrics[0][name]), rel=1e-4, abs=1e-6), name
    assert agents[1].state_dict()["modules"].keys() == agents[0].state_dict()["modules"].keys()
    for name, module in agents[0].state_dict()["modules"].items():
        assert module.keys() == agents[1].state_dict()["modules"][name].keys()  # checkpoints load either way
