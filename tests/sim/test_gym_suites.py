"""Third-party gymnasium suites through task=gym (the ``suites`` extra): gymnasium-robotics FetchReach (MuJoCo) and
panda-gym PandaReach (PyBullet), loaded by the real config and env path and trained by ``robot-rl train``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from robot_rl.cli.main import main
from robot_rl.core.composed_config import load_config
from robot_rl.runtime.envs import make_env
from tests.conftest import require

# suite -> (package, task overrides: one with task.imports, one with gymnasium's module:EnvId form)
SUITES = {
    "fetch": ("gymnasium_robotics", ["task.id=FetchReach-v4", "task.imports=[gymnasium_robotics]"]),
    "panda": ("panda_gym", ["task.id=panda_gym:PandaReach-v3"]),
}
GOAL_KEYS = {"observation", "achieved_goal", "desired_goal"}


def reach_goal(obs: dict[str, np.ndarray], action_dim: int) -> np.ndarray:
    """A proportional reacher: both suites move the gripper by 5 cm per unit action along x, y, z."""
    action = np.zeros(action_dim, np.float32)
    action[:3] = np.clip((obs["desired_goal"] - obs["achieved_goal"]) / 0.05, -1.0, 1.0)
    return action


@pytest.mark.parametrize("suite", SUITES)
def test_a_suite_loads_and_its_success_flag_is_read(suite):
    package, overrides = SUITES[suite]
    require(package)
    env = make_env(load_config(["task=gym", *overrides]).task)
    assert set(env.observation_space.spaces) == GOAL_KEYS
    assert env.observation_space["achieved_goal"].shape == env.observation_space["desired_goal"].shape == (3,)
    obs, info = env.reset(seed=3)
    assert info["success"] is False
    for _ in range(10):
        obs, _, terminated, truncated, info = env.step(reach_goal(obs, env.action_space.shape[0]))
        assert info["success"] == bool(info["is_success"])  # the suite's own key
        if terminated or truncated:  # PandaReach ends the episode on success
            break
    assert info["success"] is True
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("suite, success_key", [("fetch", "task.success_key=is_success"), ("panda", None)])
def test_robot_rl_train_runs_on_a_suite_and_reports_success(suite, success_key, tmp_path, capsys):
    package, overrides = SUITES[suite]
    require(package)
    run = tmp_path / suite
    code = main(
        [
            "train",
            "task=gym",
            *overrides,
            *([success_key] if success_key else []),  # fetch names the key; panda finds it in the default list
            "train.demo_episodes=0",
            "human.enabled=false",
            f"train.run_dir={run}",
            "train.env_steps=300",
            "train.start_training=100",
            "train.batch_size=64",
            "train.eval_every=300",
            "train.final_eval_episodes=4",
            "agent.utd=1",
        ]
    )
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["env_steps"] == 300 and summary["episodes"] >= 6  # at most 50 steps an episode
    assert 0.0 <= summary["final_eval_success"] <= 1.0
    assert 0 < summary["final_eval_mean_length"] <= 50.0  # PandaReach ends an episode on success, FetchReach does not
    history = json.loads((run / "summary.json").read_text())["eval_history"]
    assert history[-1]["episodes"] == 4 and history[-1]["success_rate"] == summary["final_eval_success"]
    from robot_rl.data import EpisodeStore

    store = EpisodeStore.open(run / "episodes.zarr")
    assert set(store.observation_shapes) == GOAL_KEYS and len(store.episode_names()) == summary["episodes"]
