"""One forward pass for N envs (``act_batch``): row k acts for slot k, and each slot keeps its own episode's
exploration state (gSDE noise, the gripper command, CQN-AS's action chunks) that ``begin_episode(slot)`` resets
for that slot alone."""

import numpy as np
import pytest

from robot_rl.policies.cqn import CQNAgent, CQNConfig
from robot_rl.policies.cqn_as import CQNASAgent, CQNASConfig
from robot_rl.policies.sac import SACAgent, SACConfig

SHAPES = {"state": (6,)}
ACTION_DIM = 4


def observations(rng: np.random.Generator, count: int) -> dict[str, np.ndarray]:
    return {"state": rng.normal(size=(count, 6)).astype(np.float32)}


AGENTS = {
    "sac": lambda: SACAgent(SHAPES, ACTION_DIM, SACConfig(device="cpu"), seed=0),
    "sac_gsde_gripper": lambda: SACAgent(
        SHAPES, ACTION_DIM, SACConfig(device="cpu", exploration="gsde", gripper_critic=True), seed=0
    ),
    "cqn": lambda: CQNAgent(SHAPES, ACTION_DIM, CQNConfig(device="cpu"), seed=0),
    "cqn_as": lambda: CQNASAgent(SHAPES, ACTION_DIM, CQNASConfig(device="cpu"), seed=0),
}


@pytest.mark.parametrize("name", AGENTS)
def test_a_batch_gives_one_action_per_row_and_the_mode_of_a_row_is_its_own(name):
    agent, rng = AGENTS[name](), np.random.default_rng(0)
    for slot in range(3):
        agent.begin_episode(slot)
    obs = observations(rng, 3)
    actions = agent.act_batch(obs, explore=True)
    assert actions.shape == (3, ACTION_DIM) and actions.dtype == np.float32
    assert np.all(np.abs(actions) <= 1.0)
    if name.startswith("sac"):  # (CQN breaks ties between equal bins at random, from the agent's generator)
        modes = agent.act_batch(obs, explore=False)
        for row in range(3):
            single = agent.act({"state": obs["state"][row]}, explore=False)
            np.testing.assert_allclose(modes[row], single, atol=1e-6)


def test_cqn_as_slots_keep_their_own_chunks():
    """Each slot's temporal ensemble holds the chunks its own rows issued; a new episode on slot 1 clears slot 1's."""
    agent, rng = AGENTS["cqn_as"](), np.random.default_rng(1)
    agent.begin_episode(0), agent.begin_episode(1)
    for _ in range(3):
        agent.act_batch(observations(rng, 2))
    first, second = agent.ensembles(2)
    assert first.valid.sum() == second.valid.sum() > 0
    assert not np.allclose(first.predictions[0], second.predictions[0])  # chunks of two different observations
    kept = first.predictions.copy()
    agent.begin_episode(1)
    assert second.valid.sum() == 0 and first.valid.sum() > 0
    np.testing.assert_array_equal(first.predictions, kept)


def test_gsde_noise_is_drawn_per_slot_and_redrawn_only_for_the_slot_that_begins_an_episode():
    agent = SACAgent(
        SHAPES, ACTION_DIM, SACConfig(device="cpu", exploration="gsde", sde_sample_freq=-1, sde_log_std_init=0.0)
    )
    obs = {"state": np.repeat(observations(np.random.default_rng(2), 1)["state"], 2, axis=0)}  # the same row twice
    agent.begin_episode(0), agent.begin_episode(1)
    one, two = agent.act_batch(obs), agent.act_batch(obs)
    np.testing.assert_allclose(one, two, atol=1e-6)  # once per episode: the same noise at every step
    assert not np.allclose(one[0], one[1], atol=1e-3)  # each slot its own draw
    agent.begin_episode(1)
    three = agent.act_batch(obs)
    np.testing.assert_allclose(three[0], one[0], atol=1e-6)
    assert not np.allclose(three[1], one[1], atol=1e-3)


def test_the_gripper_command_is_held_per_slot():
    agent = AGENTS["sac_gsde_gripper"]()
    agent.begin_episode(0), agent.begin_episode(1)
    policies = agent.gripper_policies(2)
    policies[0].command, policies[1].command = 1.0, -1.0
    agent.begin_episode(0)  # back to the initial command (open) on slot 0 only
    assert (policies[0].command, policies[1].command) == (agent.config.gripper_initial_command, -1.0)


def test_the_gripper_command_follows_what_was_executed_on_each_slot():
    """A take-over's (or the safety filter's) gripper command on one slot is what that slot's "stay" holds next."""
    agent = AGENTS["sac_gsde_gripper"]()
    agent.begin_episode(0), agent.begin_episode(1)
    agent.executed(np.array([0.0, 0.0, 0.0, 1.0], np.float32), 1)
    policies = agent.gripper_policies(2)
    assert (policies[0].command, policies[1].command) == (agent.config.gripper_initial_command, 1.0)
