"""On a CUDA device an agent acts on a stream of its own (``OffPolicyAgent.acting``): an actor's forward pass does
not queue behind a learner's updates, yet it always acts on the weights of the last update or load. Without CUDA
acting is the plain computation. The CUDA tests run on the GPU machine and skip elsewhere."""

from __future__ import annotations

import numpy as np
import torch

from robot_rl.policies.sac import SACAgent, SACConfig
from tests.policies.test_cuda_graph import SHAPES, batches, needs_cuda


def observation(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "state": rng.normal(size=SHAPES["state"]).astype(np.float32),
        "front": rng.integers(0, 256, SHAPES["front"], dtype=np.uint8),
    }


def test_without_cuda_acting_is_the_plain_computation():
    agent = SACAgent(SHAPES, 3, SACConfig(device="cpu", hidden=[16], camera_strides=[2]), seed=0)
    assert agent.acting_stream is None
    obs = observation(0)
    with torch.no_grad():
        features = agent.encoder(agent.obs_tensors({key: value[None] for key, value in obs.items()}))
        expected = agent.actor.mode(features)[0].numpy()
    np.testing.assert_array_equal(agent.act(obs, explore=False), expected)


def greedy_action(agent: SACAgent, obs: dict[str, np.ndarray]) -> np.ndarray:
    """The policy's mode computed on the current (default) stream once the device is idle: the reference."""
    torch.cuda.synchronize()
    with torch.no_grad():
        features = agent.encoder(agent.obs_tensors({key: value[None] for key, value in obs.items()}))
        return agent.actor.mode(features)[0].cpu().numpy()


@needs_cuda
def test_an_agent_acts_on_the_weights_of_its_last_update():
    """The learner's own agent acting right after each update (queued on the default stream, replayed from CUDA
    graphs after the warm-up): the acting stream waits for the update, so the action is the updated policy's."""
    agent = SACAgent(SHAPES, 3, SACConfig(utd=2, hidden=[32], camera_strides=[2], device="cuda"), seed=0)
    assert agent.acting_stream is not None
    data = iter(batches("cuda", 24))
    before = agent.act(observation(1), explore=False)
    for step in range(12):
        agent.update(data.__next__)
        obs = observation(step)
        acted = agent.act(obs, explore=False)
        np.testing.assert_allclose(acted, greedy_action(agent, obs), rtol=0, atol=1e-6, err_msg=f"update {step}")
    assert not np.allclose(agent.act(observation(1), explore=False), before)  # the policy did change


@needs_cuda
def test_an_actor_acts_on_the_weights_it_loaded_while_a_learner_updates():
    config = SACConfig(utd=2, hidden=[32], camera_strides=[2], device="cuda")
    learner, actor, reference = (SACAgent(SHAPES, 3, config, seed=seed) for seed in range(3))
    data = iter(batches("cuda", 24))
    for step in range(6):
        learner.update(data.__next__)
        weights = learner.policy_state()
        actor.load_policy_state(weights)
        learner.update(data.__next__)  # queued on the default stream while the actor acts
        obs = observation(step)
        acted = actor.act(obs, explore=False)
        torch.cuda.synchronize()
        reference.load_policy_state(weights)
        np.testing.assert_allclose(acted, reference.act(obs, explore=False), rtol=0, atol=1e-6, err_msg=str(step))
