"""An actor's agent holds only what acts (``make_agent(..., acting=True)``: ``OffPolicyAgent.drop_learning``), and
acts exactly as the learner's agent whose weights it loads."""

import numpy as np
import pytest
import torch

from robot_rl.core.checkpoint import load_agent
from robot_rl.core.composed_config import load_config
from robot_rl.runtime.session import make_agent

SHAPES, ACTIONS = {"state": (10,)}, 4
SMALL_SAC = "agent.hidden=[32,32]"
AGENTS = {
    "sac": [SMALL_SAC],
    "sac_gsde": [SMALL_SAC, "exploration=gsde"],
    "sac_bang_bang": [SMALL_SAC, "exploration=bang_bang"],
    "sac_gripper_critic": [SMALL_SAC, "agent.gripper_critic=true"],
    "sac_lagrangian": ["agent=sac_lagrangian", SMALL_SAC],
    "cqn": ["agent=cqn", "agent.hidden=32"],
    "cqn_as": ["agent=cqn_as", "agent.hidden=32"],
}


def parameters(agent) -> int:
    return sum(p.numel() for name in agent.modules for p in getattr(agent, name).parameters())


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_an_acting_agent_drops_what_only_learns_and_acts_as_the_learner(name, tmp_path):
    cfg = load_config(AGENTS[name])
    learner = make_agent(cfg, SHAPES, ACTIONS, seed=3)
    actor = make_agent(cfg, SHAPES, ACTIONS, seed=3, acting=True)

    # what it holds: the policy modules only, no optimizer; the learner's initial policy weights
    learning_only = [n for n in (*learner.modules, *learner.optimizers) if n not in learner.policy_modules]
    assert learning_only and not any(hasattr(actor, n) for n in learning_only), learning_only
    assert actor.optimizers == () and set(actor.modules) == set(learner.policy_modules)
    assert parameters(actor) < parameters(learner)
    initial = learner.policy_state()
    assert all(torch.equal(initial[key], value) for key, value in actor.policy_state().items())

    # acting on the learner's (changed) weights: the same actions, deterministic and exploring
    with torch.no_grad():
        for module in learner.policy_modules:
            for parameter in getattr(learner, module).parameters():
                parameter.add_(0.05 * torch.randn_like(parameter))
    actor.load_policy_state(learner.policy_state())
    obs = {"state": np.random.default_rng(0).normal(size=(2, 10)).astype(np.float32)}
    for agent in (learner, actor):
        agent.load_acting_random_state({})  # both draw from the seed
        for slot in (0, 1):
            agent.begin_episode(slot)
    for explore in (False, True, True):
        np.testing.assert_array_equal(actor.act_batch(obs, explore=explore), learner.act_batch(obs, explore=explore))

    # a learner's checkpoint (robot-rl eval, the actor's eval_only) loads into it: its policy modules
    torch.save(learner.state_dict(), tmp_path / "agent.pt")
    evaluated = make_agent(cfg, SHAPES, ACTIONS, seed=9, acting=True)
    load_agent("eval.checkpoint", evaluated, tmp_path / "agent.pt")
    saved = learner.policy_state()
    assert all(torch.equal(saved[key], value) for key, value in evaluated.policy_state().items())
