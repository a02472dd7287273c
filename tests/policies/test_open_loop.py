"""The open-loop floor (issue 54 item 3): a blind action sequence found by the cross-entropy method."""

import numpy as np
import pytest

from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.data.transition import Provenance, Transition
from robot_rl.policies.open_loop import OpenLoopAgent, OpenLoopConfig

TARGET = np.array([[0.6, -0.4], [-0.8, 0.2], [0.3, 0.9]], np.float32)  # the best sequence: 3 segments of 2 actions


def play(agent: OpenLoopAgent, explore: bool, episode: str) -> float:
    """One 6-step episode on a toy task whose reward is minus the distance of each action to the target's; the
    transitions go to observe() as the learner hands them over. Returns the episode's return."""
    agent.begin_episode()
    total = 0.0
    obs = {"state": np.zeros(2, np.float32)}
    for step in range(6):
        action = agent.act(obs, explore=explore)
        reward = -float(np.abs(action - TARGET[step // 2]).sum())
        total += reward
        if explore:
            agent.observe(
                Transition(
                    obs,
                    action,
                    reward,
                    obs,
                    False,
                    step == 5,
                    first=step == 0,
                    origin=Provenance(episode=episode, step=step),
                )
            )
    return total


def test_the_search_improves_on_random_sequences():
    config = OpenLoopConfig(segments=3, episode_steps=6, population=16, init_std=0.5, device="cpu")
    agent = OpenLoopAgent({"state": (2,)}, 2, config, seed=0)
    rng_returns = [play(OpenLoopAgent({"state": (2,)}, 2, config, seed=s), True, "r") for s in range(20)]
    for generation in range(15):
        for k in range(config.population):
            play(agent, True, f"{generation}-{k}")
    assert agent.generation == 15
    learned = play(agent, False, "eval")
    assert learned > np.mean(rng_returns) + 2.0 and learned > -1.0, (learned, np.mean(rng_returns))
    np.testing.assert_allclose(agent.plan.mean.numpy(), TARGET, atol=0.15)
    assert float(agent.update(lambda: None)["plan_generation"]) == 15


def test_a_deterministic_episode_plays_the_mean_held_for_each_segment():
    config = OpenLoopConfig(segments=2, episode_steps=4, population=4, device="cpu")
    agent = OpenLoopAgent({"state": (2,)}, 2, config, seed=0)
    agent.plan.mean.copy_(agent.plan.mean.new_tensor([[0.5, -0.5], [-1.0, 1.0]]))
    agent.begin_episode()
    obs = {"state": np.zeros(2, np.float32)}
    actions = [agent.act(obs, explore=False) for _ in range(5)]
    assert [a.tolist() for a in actions] == [[0.5, -0.5]] * 2 + [[-1.0, 1.0]] * 3  # the last segment holds on
    clone = OpenLoopAgent({"state": (2,)}, 2, config, seed=1)
    clone.load_policy_state(agent.policy_state())
    clone.begin_episode()
    assert clone.act(obs, explore=False).tolist() == [0.5, -0.5]


def test_the_config_group_gives_the_tasks_episode_length_and_bad_values_are_refused():
    cfg = load_config(["agent=open_loop", "task=reach"])
    assert cfg.agent.episode_steps == cfg.task.episode_steps
    with pytest.raises(ConfigError, match="population"):
        OpenLoopAgent({"state": (2,)}, 2, OpenLoopConfig(population=1))


@pytest.mark.slow
def test_robot_rl_train_runs_the_search_through_its_loop(tmp_path):
    """agent=open_loop through robot-rl train: the learner hands it every online transition, generations advance,
    the plan is checkpointed. (On reach, whose goal changes every episode, no blind sequence does much better than
    standing still: the floor there is near 0 success, as it should be.)"""
    import torch

    from robot_rl.runtime.train import train
    from tests.test_train import small_run

    cfg = small_run(
        tmp_path,
        "agent=open_loop",
        "agent.population=8",
        "human.enabled=false",
        "train.demo_episodes=0",
        "train.start_training=0",
        "train.env_steps=1200",
        "train.eval_every=1200",
        "task.episode_steps=50",
    )
    summary = train(cfg)
    assert summary["env_steps"] == 1200 and 0.0 <= summary["final_eval_success"] <= 1.0
    state = torch.load(tmp_path / "run" / "checkpoint" / "agent.pt", weights_only=True)
    assert state["extra"]["generation"] >= 2  # 24 episodes of 50 steps: 3 generations of 8
    assert state["modules"]["plan"]["mean"].abs().sum() > 0  # the plan moved from its zero start
