"""The safety critic: numpy export, learning the risk of violations, pretraining from a store, constraints."""

import numpy as np
import pytest
import torch

from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.data import EpisodeStore, ReplayBuffer
from robot_rl.policies.safety_critic import SafetyCritic, SafetyCriticConfig
from robot_rl.runtime.envs import make_env, make_expert
from robot_rl.runtime.safety_learning import SafetySettings, make_safety_learner
from robot_rl.safety.risk_model import RiskModel
from robot_rl.sim.constraints import Constraint


@pytest.mark.parametrize("hidden", [[32], [32, 16], [16, 24, 8]])
def test_numpy_risk_model_matches_the_torch_critic(hidden):
    critic = SafetyCritic(5, 3, SafetyCriticConfig(hidden=hidden), seed=0)
    with torch.no_grad():  # LayerNorm scales and shifts away from their initial 1 and 0
        for parameter in critic.critic.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    state = np.random.default_rng(0).normal(size=5)
    actions = np.random.default_rng(1).uniform(-1, 1, (4, 3))
    with torch.no_grad():
        expected = critic.risk(
            torch.as_tensor(np.repeat(state[None], 4, 0), dtype=torch.float32),
            torch.as_tensor(actions, dtype=torch.float32),
        ).numpy()
    np.testing.assert_allclose(critic.risk_model()(state, actions), expected, atol=1e-5)
    np.testing.assert_allclose(critic.risk_model()(state, actions[0]), expected[:1], atol=1e-5)  # one action
    assert isinstance(critic.risk_model(), RiskModel)


def wall_episodes(buffer: ReplayBuffer, episodes: int, rng: np.random.Generator) -> None:
    """1-D world: x moves by the action; x > 1 is a violation (and ends the episode)."""
    for _ in range(episodes):
        x = rng.uniform(-1, 0.5)
        for t in range(20):
            action = rng.uniform(-0.3, 0.3, 1)
            nxt = x + action[0]
            violated = nxt > 1.0
            buffer.add(
                {"state": np.array([x], np.float32)},
                action,
                0.0,
                {"state": np.array([nxt], np.float32)},
                bool(violated),
                t == 19 and not violated,
                cost=float(violated),
            )
            x = nxt
            if violated:
                break


@pytest.mark.slow
def test_the_critic_learns_where_violations_are():
    rng = np.random.default_rng(0)
    buffer = ReplayBuffer(20_000, {"state": ((1,), np.float32)}, 1)
    wall_episodes(buffer, 600, rng)
    assert 0 < buffer.cost.sum() < 0.2 * len(buffer)  # violations are rare: class balancing matters
    critic = SafetyCritic(1, 1, SafetyCriticConfig(hidden=[64, 64], batch_size=128), seed=0)
    for _ in range(1000):
        critic.update(critic.sample(buffer))
    risk = critic.risk_model()
    at_wall = risk(np.array([0.95]), np.array([[0.25]]))[0]  # certain violation
    far = risk(np.array([-0.8]), np.array([[-0.2]]))[0]
    assert at_wall > 0.7 and far < 0.1, (at_wall, far)
    assert risk(np.array([0.95]), np.array([[-0.25]]))[0] < at_wall  # backing off is safer


def one_episode(steps: int, terminated: bool) -> ReplayBuffer:
    """A violation-free episode of ``steps`` steps, state t and action 0.1 t, ended by termination or the time limit."""
    buffer = ReplayBuffer(64, {"state": ((1,), np.float32)}, 1)
    for t in range(steps):
        last = t == steps - 1
        buffer.add(
            {"state": np.array([t], np.float32)},
            np.array([0.1 * t], np.float32),
            0.0,
            {"state": np.array([t + 1], np.float32)},
            last and terminated,
            last and not terminated,
        )
    return buffer


@pytest.mark.parametrize("terminated", [False, True])
def test_the_risk_target_bootstraps_through_the_time_limit_not_through_termination(terminated):
    critic = SafetyCritic(1, 1, SafetyCriticConfig(hidden=[16], batch_size=64), seed=0)
    with torch.no_grad():
        critic.target.net[-1].bias.fill_(6.0)  # the target critic sees a violation ahead everywhere: risk ~0.998
    batch = critic.sample(one_episode(5, terminated))
    last = batch.state[:, 0].numpy() == 4
    action, next_action, cost = batch.action.numpy(), batch.next_action.numpy(), batch.cost.numpy()
    assert last.any() and (~last).any()
    np.testing.assert_array_equal(next_action[last], action[last])  # no next step: the same action
    np.testing.assert_allclose(next_action[~last], action[~last] + np.float32(0.1), atol=1e-6)
    targets = critic.targets(batch).numpy()
    assert targets[~last] == pytest.approx(0.7 * 0.9975, abs=0.002)
    if terminated:  # nothing follows a termination: the target is the cost alone
        np.testing.assert_array_equal(targets[last], cost[last])
    else:  # cut by the time limit, the risk ahead still counts
        assert targets[last] == pytest.approx(0.7 * 0.9975, abs=0.002) and (targets[last] > cost[last]).all()
    assert np.isfinite(critic.update(batch)["safety_loss"])


@pytest.mark.slow
def test_pretraining_from_an_episode_store(tmp_path):
    rng = np.random.default_rng(1)
    buffer = ReplayBuffer(20_000, {"state": ((1,), np.float32)}, 1)
    wall_episodes(buffer, 150, rng)
    store = EpisodeStore.create(
        tmp_path / "violations.zarr", {"task": "wall", "observation_shapes": {"state": [1]}, "action_dim": 1}
    )
    writer = store.writer()
    ends = np.flatnonzero(buffer.terminated | buffer.truncated)
    start = 0
    for end in ends:
        writer.start({"state": buffer.obs["state"][start]})
        for slot in range(start, end + 1):
            writer.add(
                {"state": buffer.obs["state"][slot + 1]},
                buffer.action[slot],
                0.0,
                bool(buffer.terminated[slot]),
                bool(buffer.truncated[slot]),
                safety_flags=int(buffer.cost[slot]) * int(Constraint.KEEP_OUT),
            )
        writer.commit("demo")
        start = end + 2
    settings = SafetySettings(
        enabled=True,
        pretrain_store=str(tmp_path / "violations.zarr"),
        pretrain_updates=800,
        critic={"hidden": [64, 64], "batch_size": 128},
    )
    learner = make_safety_learner(settings, {"state": (1,)}, 1, seed=0)
    risk = learner.critic.risk_model()
    assert risk(np.array([0.95]), np.array([[0.25]]))[0] > 0.6 > risk(np.array([-0.8]), np.array([[-0.2]]))[0]
    with pytest.raises(ConfigError, match="safety.pretrain_store"):
        make_safety_learner(
            SafetySettings(enabled=True, pretrain_store=str(tmp_path / "nowhere.zarr")), {"state": (1,)}, 1, seed=0
        )


def test_hazard_task_flags_table_pressing_and_the_keep_out_zone_and_the_expert_avoids_both():
    task = dict(load_config(["task=pick_cube_hazard"]).task)
    env = make_env(task)
    env.reset(seed=0)
    flags = 0
    for _ in range(20):  # +z in the TCP frame points down: press into the table
        flags |= env.step(np.array([0.0, 0.0, 1.0, -1.0], np.float32))[-1]["violation"]
    assert flags & Constraint.TABLE_FORCE
    env.reset(seed=0)
    flags = 0
    towards_base = env.unwrapped.tcp_rot.T @ np.array([-1.0, 0.0, 0.0])  # base -x in the TCP frame
    for _ in range(20):  # into the keep-out zone (x < 0.34 m)
        flags |= env.step(np.append(towards_base, -1.0).astype(np.float32))[-1]["violation"]
    assert flags & Constraint.KEEP_OUT
    expert = make_expert(task, env)
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        expert.reset()
        while True:
            obs, _, terminated, truncated, info = env.step(expert.act(obs))
            assert info["violation"] == 0
            if terminated or truncated:
                break
        assert info["success"]


def test_bad_constraints_are_named():
    task = dict(load_config(["task=pick_cube_hazard"]).task)
    with pytest.raises(ConfigError) as error:
        make_env({**task, "constraints": {"keep_out": [[0.3, 0, 0], [0.2, 1, 1]]}})
    assert error.value.key == "task.constraints.keep_out"
    with pytest.raises(ConfigError) as error:
        make_env({**task, "constraints": {"table_force": -1}})
    assert error.value.key == "task.constraints.table_force"


def test_once_pretrained_each_online_batch_draws_its_prior_fraction_from_the_pretraining_buffer():
    from robot_rl.runtime.safety_learning import SafetyLearner, safety_settings

    settings = safety_settings({"pretrain_updates": 1, "prior_fraction": 0.25, "critic": {"batch_size": 8}})
    learner = SafetyLearner(settings, 1, 1, seed=0)
    prior, online = one_episode(20, terminated=True), ReplayBuffer(16, {"state": ((1,), np.float32)}, 1)
    for t in range(3):  # online states 100-102, the prior's 0-19
        state, following = np.array([100 + t], np.float32), np.array([101 + t], np.float32)
        online.add({"state": state}, np.zeros(1, np.float32), 0.0, {"state": following}, False, t == 2)
    learner.pretrain(prior)
    batches = []
    update = learner.critic.update
    learner.critic.update = lambda batch: batches.append(batch) or update(batch)
    assert np.isfinite(learner.update(online)["safety_loss"])
    states = batches[0].state[:, 0]
    assert states.tolist()[:2] == [s for s in states.tolist() if s < 100] and len(states) == 8  # 0.25 of 8 first
    assert batches[0].action.shape == batches[0].next_action.shape == (8, 1)
