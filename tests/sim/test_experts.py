"""Each scripted expert succeeds on at least 95% of 50 seeded episodes."""

import numpy as np
import pytest

from robot_rl.sim.experts import make_expert
from robot_rl.sim.tasks import PegInsertEnv, PickCubeEnv, ReachEnv


def success_rate(env, seeds) -> float:
    expert = make_expert(env)
    successes = []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        expert.reset()
        terminated = truncated = False
        while not (terminated or truncated):
            obs, _, terminated, truncated, info = env.step(expert.act(obs))
        successes.append(info["success"])
    return float(np.mean(successes))


@pytest.mark.parametrize(
    "env_class, kwargs",
    [
        (ReachEnv, {}),
        (PickCubeEnv, {}),
        (PegInsertEnv, {}),
        (PickCubeEnv, {"action_dim": 7, "cube_yaw_range": 0.7}),
        (PegInsertEnv, {"action_dim": 7}),
    ],
    ids=["reach", "pick_cube", "peg_insert", "pick_cube-7d-yaw", "peg_insert-7d"],
)
def test_expert_succeeds_on_95_percent_of_50_seeds(env_class, kwargs):
    assert success_rate(env_class(**kwargs), range(50)) >= 0.95


def test_pick_cube_expert_recovers_from_a_policy_that_grasped_nothing():
    """Interventions start from states the policy left behind: closed gripper, wrong place."""
    env = PickCubeEnv()
    expert = make_expert(env)
    successes = []
    for seed in range(10):
        obs, info = env.reset(seed=seed)
        for _ in range(8):  # a bad policy: close the gripper and wander sideways and down
            env.step(np.array([0.6, 0.8, 0.8, 1.0], dtype=np.float32))
        terminated = truncated = False
        while not (terminated or truncated):
            obs, _, terminated, truncated, info = env.step(expert.act(obs))
        successes.append(info["success"])
    assert np.mean(successes) >= 0.9


def test_make_expert_rejects_an_env_without_expert():
    import gymnasium as gym

    with pytest.raises(ValueError, match="no scripted expert for CartPoleEnv"):
        make_expert(gym.make("CartPole-v1"))
