"""Learning steps replayed from CUDA graphs (``agent.cuda_graph``) compute what the eager steps compute.

The flag's checks and the batch plumbing run everywhere; the recordings themselves need a CUDA device (the GPU
machine: ``pytest tests/policies/test_cuda_graph.py`` there) and are skipped without one.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from robot_rl.core.config import ConfigError
from robot_rl.data import MixedSampler, ReplayBuffer
from robot_rl.data.batches import Batch
from robot_rl.policies.cqn import CQNAgent, CQNConfig
from robot_rl.policies.cuda_graph import copy_into, signature, static_copy
from robot_rl.policies.sac import SACAgent, SACConfig
from tests.policies.batches import batch_of

SHAPES = {"state": (5,), "front": (16, 16, 3)}
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")


def test_cuda_graph_true_on_a_cpu_is_a_config_error():
    with pytest.raises(ConfigError, match=r"agent.cuda_graph=True .*false or auto on a cpu device"):
        SACAgent({"state": (5,)}, 3, SACConfig(device="cpu", cuda_graph=True), seed=0)
    with pytest.raises(ConfigError, match="agent.cuda_graph"):
        SACConfig(cuda_graph="yes").validate()


def test_auto_records_nothing_on_a_cpu():
    agent = SACAgent({"state": (5,)}, 3, SACConfig(device="cpu", cuda_graph="auto"), seed=0)
    assert agent.graphed_steps is None
    assert agent.optimizer_options() == {"fused": True, "capturable": False}


def test_a_batch_is_copied_into_a_recordings_inputs_by_field():
    def batch(reward: torch.Tensor, state: float, front: int):
        obs = {"state": torch.full((4, 2), state), "front": torch.full((4, 3), front, dtype=torch.uint8)}
        return batch_of(
            {"obs": obs, "next_obs": obs, "action": torch.zeros(4, 3), "reward": reward, "discount": reward}
        )

    first = batch(torch.arange(4.0), 1.0, 0)
    inputs = static_copy(first)
    assert signature(inputs) == signature(first)
    assert inputs.obs["state"] is not first.obs["state"]
    fresh = batch(-torch.arange(4.0), 7.0, 1)
    copy_into(inputs, fresh)
    assert torch.equal(inputs.reward, fresh.reward) and torch.equal(inputs.obs["front"], fresh.obs["front"])
    assert signature(dataclasses.replace(first, reward=torch.arange(8.0))) != signature(first)  # another batch size
    assert signature(dataclasses.replace(first, is_demo=first.terminated)) != signature(first)  # another field


def batches(device: str, count: int, sequence_length: int = 1) -> list[Batch]:
    """``count`` pixel batches of 32 drawn once on ``device``, fed alike to an eager and a graphed agent."""
    space = {key: (shape, np.uint8 if len(shape) == 3 else np.float32) for key, shape in SHAPES.items()}
    rng = np.random.default_rng(0)
    buffers = [ReplayBuffer(300, space, 3, device=device) for _ in range(2)]
    for buffer in buffers:
        for step in range(120):
            obs = {
                key: rng.integers(0, 256, shape) if len(shape) == 3 else rng.normal(size=shape)
                for key, shape in SHAPES.items()
            }
            action = np.append(rng.uniform(-1, 1, 2), rng.choice([-1.0, 1.0]))
            buffer.add(obs, action, float(rng.normal()), obs, step % 10 == 9, False)
    sampler = MixedSampler(*buffers, demo_fraction=0.5, seed=0)
    return [sampler.sample(32, n_step=2, gamma=0.97, sequence_length=sequence_length) for _ in range(count)]


def assert_same_learning(eager, graphed, data: list[Batch], utd: int) -> None:
    """Both agents take ``data`` ``utd`` batches per update; their metrics (read after every update is done, so a
    metric overwritten by a later replay would show) and final weights agree."""
    metrics = {"eager": [], "graphed": []}
    # deterministic kernels (no atomics in the convolutions' backward pass or CQN's scatter_add_): the same sums in
    # both agents; with atomics two eager runs already differ by up to 4e-5 after 8 CQN updates (an H200)
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True):
            for name, agent in (("eager", eager), ("graphed", graphed)):
                stream = iter(data)
                for _ in range(len(data) // utd):
                    metrics[name].append(agent.update(stream.__next__))
    finally:
        torch.use_deterministic_algorithms(False)
    assert graphed.graphed_steps.failed is None
    assert graphed.graphed_steps.replays >= len(data) // 2  # most steps were replays, not warm-ups
    for step, (expected, got) in enumerate(zip(metrics["eager"], metrics["graphed"])):
        assert expected.keys() == got.keys()
        for key in expected:
            assert float(got[key]) == pytest.approx(float(expected[key]), rel=1e-4, abs=1e-5), (step, key)
    for key, value in eager.policy_state().items():
        torch.testing.assert_close(graphed.policy_state()[key], value, rtol=1e-4, atol=1e-5, msg=key)


@needs_cuda
@pytest.mark.parametrize("extras", [{}, {"gripper_critic": True, "exploration": "gsde"}], ids=["sac", "gripper_gsde"])
def test_sac_steps_replayed_from_graphs_learn_what_eager_steps_learn(extras):
    config = dict(utd=2, hidden=[32], camera_strides=[2], device="cuda", **extras)
    eager = SACAgent(SHAPES, 3, SACConfig(cuda_graph=False, **config), seed=0)
    graphed = SACAgent(SHAPES, 3, SACConfig(cuda_graph=True, **config), seed=0)
    assert_same_learning(eager, graphed, batches("cuda", 24), utd=2)


@needs_cuda
def test_cqn_steps_replayed_from_graphs_learn_what_eager_steps_learn():
    config = {"utd": 2, "hidden": 32, "camera_strides": [2], "device": "cuda"}
    eager = CQNAgent(SHAPES, 3, CQNConfig(cuda_graph=False, **config), seed=0)
    graphed = CQNAgent(SHAPES, 3, CQNConfig(cuda_graph=True, **config), seed=0)
    assert_same_learning(eager, graphed, batches("cuda", 16), utd=2)


@needs_cuda
def test_a_loaded_checkpoint_is_recorded_again(tmp_path):
    config = {"utd": 2, "hidden": [32], "camera_strides": [2], "device": "cuda"}
    data = batches("cuda", 24)
    source = SACAgent(SHAPES, 3, SACConfig(cuda_graph=False, **config), seed=1)
    stream = iter(data[:8])
    for _ in range(4):
        source.update(stream.__next__)
    torch.save(source.state_dict(), tmp_path / "agent.pt")
    agents = {}
    for flag in (False, True):
        agent = agents[flag] = SACAgent(SHAPES, 3, SACConfig(cuda_graph=flag, **config), seed=2)
        stream = iter(data[8:16])
        for _ in range(4):  # graphed: recorded against this agent's optimizer state before the load
            agent.update(stream.__next__)
        agent.load_state_dict(torch.load(tmp_path / "agent.pt", weights_only=True))
    assert agents[True].graphed_steps.recordings == {}
    assert_same_learning(agents[False], agents[True], data[8:], utd=2)


@needs_cuda
def test_an_anchored_warm_start_steps_eagerly_until_the_anchor_is_done():
    agent = SACAgent(SHAPES, 3, SACConfig(utd=2, hidden=[32], camera_strides=[2], device="cuda", cuda_graph=True))
    data = iter(batches("cuda", 24))
    agent.anchor_policy(weight=1.0, env_steps=4)  # 4 env steps x UTD 2 / ratio 2: 4 actor updates
    for _ in range(4):
        assert "anchor_weight" in agent.update(data.__next__)
    assert agent.anchor.done and agent.graphed_steps.eager_steps.total() == 0
    for _ in range(8):
        agent.update(data.__next__)
    assert agent.graphed_steps.replays > 0
