"""Offline replay for pretraining: returns-to-go (Cal-QL's Monte-Carlo values) and sampling across stores."""

import numpy as np
import pytest

from robot_rl.data import ReplayBuffer
from robot_rl.data.samplers import WeightedSampler

SPACE = {"state": ((2,), np.float32)}


def fill(buffer: ReplayBuffer, rewards: list[float], terminated: bool, marker: float = 0.0) -> None:
    for t, reward in enumerate(rewards):
        last = t == len(rewards) - 1
        state = np.full(2, marker + t, np.float32)
        buffer.add(
            {"state": state}, np.zeros(1), reward, {"state": state + 1}, terminated and last, not terminated and last
        )


def test_returns_to_go_stop_at_each_episode_end_also_across_the_ring():
    buffer = ReplayBuffer(9, SPACE, 1)
    fill(buffer, [1.0, 0.0, 2.0], terminated=True)  # slots 0-2, end observation in 3
    fill(buffer, [1.0, 1.0], terminated=False)  # 4-5, end in 6
    fill(buffer, [4.0, 8.0], terminated=True)  # 7-8, wraps: end in 0 (the first episode's first slot is lost)
    buffer.set_returns_to_go(0.5)
    expected = {1: 0.0 + 0.5 * 2.0, 2: 2.0, 4: 1.0 + 0.5 * 1.0, 5: 1.0, 7: 4.0 + 0.5 * 8.0, 8: 8.0}
    index = np.array(sorted(expected))
    batch = buffer.batch(index)
    np.testing.assert_allclose(batch.mc_return.numpy(), [expected[i] for i in index])
    fresh = ReplayBuffer(9, SPACE, 1)
    fill(fresh, [1.0], terminated=True)
    assert fresh.batch(np.array([0])).mc_return is None  # only once asked for


def test_a_weighted_sampler_draws_each_store_in_proportion_and_never_one_weighted_zero():
    a, b, c = (ReplayBuffer(64, SPACE, 1) for _ in range(3))
    for buffer, marker in ((a, 0.0), (b, 100.0), (c, 200.0)):
        fill(buffer, [marker] * 10, terminated=True, marker=marker)
        buffer.set_returns_to_go(0.9)
    sampler = WeightedSampler([a, b, c], [1.0, 3.0, 0.0], seed=0)
    sources = np.concatenate([sampler.sample(256).source.numpy() for _ in range(20)])
    assert not (sources == 2).any()
    assert abs((sources == 1).mean() - 0.75) < 0.03
    batch = sampler.sample(64)
    rewards, states = batch.reward.numpy(), batch.obs["state"].numpy()[:, 0]
    np.testing.assert_array_equal(rewards, np.where(batch.source.numpy() == 0, 0.0, 100.0))
    assert np.all((states < 10) == (batch.source.numpy() == 0))  # each row's observation is its own store's
    assert batch.mc_return.shape == (64,)
    with pytest.raises(ValueError, match="weight"):
        WeightedSampler([a, b], [1.0])
    with pytest.raises(ValueError, match="empty"):
        WeightedSampler([ReplayBuffer(8, SPACE, 1)]).sample(4)
