"""Replay buffer and mixing sampler against hand-computed cases."""

import numpy as np
import pytest
import torch

from robot_rl.data import MixedSampler, ReplayBuffer
from robot_rl.data.augment import random_shift

SPACE = {"state": ((1,), np.float32)}


def fill(buffer, rewards, terminated_last, truncated_last, start_marker):
    """One episode; obs 'state' = slot marker so next_obs can be checked; action = [reward]."""
    for t, reward in enumerate(rewards):
        last = t == len(rewards) - 1
        buffer.add(
            {"state": [start_marker + t]},
            [reward],
            reward,
            {"state": [start_marker + t + 1]},
            terminated=last and terminated_last,
            truncated=last and truncated_last,
            intervened=t == 0,
        )


@pytest.fixture
def two_episodes():
    buffer = ReplayBuffer(20, SPACE, action_dim=1)
    fill(buffer, [1.0, 2.0, 3.0, 4.0], terminated_last=True, truncated_last=False, start_marker=0)  # slots 0-4
    fill(buffer, [10.0, 20.0, 30.0], terminated_last=False, truncated_last=True, start_marker=100)  # slots 5-8
    return buffer


def test_every_observation_is_stored_once(two_episodes):
    np.testing.assert_array_equal(two_episodes.obs["state"][:9, 0], [0, 1, 2, 3, 4, 100, 101, 102, 103])
    np.testing.assert_array_equal(two_episodes.valid_indices(), [0, 1, 2, 3, 5, 6, 7])
    assert len(two_episodes) == 7


@pytest.mark.parametrize(
    "index, reward, discount, next_marker",
    [
        (0, 1 + 0.5 * 2 + 0.25 * 3, 0.125, 3),  # three full steps
        (2, 3 + 0.5 * 4, 0.0, 4),  # terminates after two steps: no bootstrap
        (3, 4.0, 0.0, 4),
        (5, 10 + 0.5 * 20 + 0.25 * 30, 0.125, 103),
        (6, 20 + 0.5 * 30, 0.25, 103),  # truncated after two steps: bootstrap from the last obs
        (7, 30.0, 0.5, 103),
    ],
)
def test_n_step_returns_match_hand_computation(two_episodes, index, reward, discount, next_marker):
    ret, steps, terminated = two_episodes.n_step_returns(np.array([index]), n_step=3, gamma=0.5)
    assert ret[0] == pytest.approx(reward)
    assert (0.5 ** steps[0]) * (not terminated[0]) == pytest.approx(discount)
    next_slot = (index + steps[0]) % two_episodes.capacity
    assert two_episodes.obs["state"][next_slot, 0] == next_marker


def test_sampled_batches_carry_the_same_values(two_episodes):
    batch = two_episodes.sample(64, np.random.default_rng(0), n_step=3, gamma=0.5)
    for i, index in enumerate(batch.index):
        ret, steps, terminated = two_episodes.n_step_returns(np.array([index]), 3, 0.5)
        assert batch.reward[i] == pytest.approx(ret[0])
        assert batch.discount[i] == pytest.approx(0.0 if terminated[0] else 0.5 ** steps[0])
        assert batch.next_obs["state"][i, 0] == two_episodes.obs["state"][(index + steps[0]) % 20, 0]
        assert batch.intervened[i] == (index in (0, 5))


@pytest.mark.parametrize(
    "index, actions, mask",
    [
        (0, [1, 2, 3], [True, True, True]),
        (2, [3, 4, 0], [True, True, False]),
        (3, [4, 0, 0], [True, False, False]),
        (6, [20, 30, 0], [True, True, False]),
        (7, [30, 0, 0], [True, False, False]),
    ],
)
def test_action_sequences_are_masked_at_episode_ends(two_episodes, index, actions, mask):
    sequence, valid = two_episodes.action_sequences(np.array([index]), 3)
    np.testing.assert_array_equal(sequence[0, :, 0], actions)
    np.testing.assert_array_equal(valid[0], mask)


def test_wrap_around_never_mixes_episodes():
    buffer = ReplayBuffer(6, SPACE, action_dim=1)
    fill(buffer, [1.0, 2.0, 3.0], True, False, start_marker=0)  # slots 0-3
    fill(buffer, [10.0, 20.0, 30.0], True, False, start_marker=100)  # slots 4, 5, 0, 1
    np.testing.assert_array_equal(buffer.obs["state"][:, 0], [102, 103, 2, 3, 100, 101])
    np.testing.assert_array_equal(buffer.valid_indices(), [0, 2, 4, 5])
    ret, steps, terminated = buffer.n_step_returns(np.array([4, 5, 2]), 3, 1.0)
    np.testing.assert_array_equal(ret, [60.0, 50.0, 3.0])
    np.testing.assert_array_equal(steps, [3, 2, 1])
    assert terminated.all()
    sequence, mask = buffer.action_sequences(np.array([5]), 3)
    np.testing.assert_array_equal(sequence[0, :, 0], [20, 30, 0])
    np.testing.assert_array_equal(mask[0], [True, True, False])


def test_episode_longer_than_the_buffer_is_rejected():
    buffer = ReplayBuffer(5, SPACE, action_dim=1)
    with pytest.raises(ValueError, match="does not fit a buffer of 5 slots"):
        fill(buffer, [1.0] * 6, True, False, start_marker=0)


@pytest.mark.parametrize("fraction", [0.5, 0.3, 0.9])
def test_mixed_sampler_draws_the_configured_demo_fraction(two_episodes, fraction):
    demo = ReplayBuffer(300, SPACE, action_dim=1)
    fill(demo, [7.0] * 240, True, False, start_marker=500)
    sampler = MixedSampler(two_episodes, demo, demo_fraction=fraction, seed=1)
    singles = np.mean([sampler.sample(1).is_demo[0] for _ in range(10_000)])
    assert abs(singles - fraction) < 0.02
    batch = sampler.sample(256)
    demo_rows = batch.is_demo
    assert abs(demo_rows.sum() - fraction * 256) <= 1
    assert (batch.obs["state"][demo_rows, 0] >= 500).all() and (batch.obs["state"][~demo_rows, 0] < 500).all()


def test_a_demo_buffer_of_a_few_rows_gives_no_more_rows_per_batch_than_it_holds(two_episodes):
    """Issue 72 item 9: a warm start without demos; its first take-over's few rows in the demo buffer made half of
    every batch (64 of 128 rows drawn from 3). A batch takes at most as many demo rows as the buffer holds."""
    demo = ReplayBuffer(20, SPACE, action_dim=1)
    fill(demo, [7.0, 7.0, 7.0], True, False, start_marker=500)
    sampler = MixedSampler(two_episodes, demo, demo_fraction=0.5, seed=1)
    taken = [int(sampler.sample(128).is_demo.sum()) for _ in range(50)]
    assert max(taken) == len(demo) == 3, taken


def test_mixed_sampler_uses_the_other_buffer_when_one_is_empty(two_episodes):
    empty = ReplayBuffer(20, SPACE, action_dim=1)
    assert not MixedSampler(two_episodes, empty, 0.5, seed=0).sample(32).is_demo.any()
    assert MixedSampler(empty, two_episodes, 0.5, seed=0).sample(32).is_demo.all()


def test_save_and_restore_round_trip_exactly(tmp_path):
    space = {"state": ((3,), np.float32), "front": ((8, 8, 3), np.uint8)}
    rng = np.random.default_rng(0)
    original = ReplayBuffer(30, space, action_dim=2)
    for episode in range(4):
        for t in range(5):
            obs = {"state": rng.normal(size=3), "front": rng.integers(0, 255, (8, 8, 3))}
            nxt = {"state": rng.normal(size=3), "front": rng.integers(0, 255, (8, 8, 3))}
            original.add(obs, rng.normal(size=2), rng.normal(), nxt, terminated=t == 4, truncated=False)
    original.add(
        {"state": np.ones(3), "front": np.ones((8, 8, 3))},
        [0.5, 0.5],
        1.0,
        {"state": np.zeros(3), "front": np.zeros((8, 8, 3))},
        False,
        False,
    )  # an open episode
    original.save(tmp_path / "buffer")
    restored = ReplayBuffer.load(tmp_path / "buffer")
    for key in space:
        np.testing.assert_array_equal(restored.obs[key], original.obs[key])
    for name in ("action", "reward", "terminated", "truncated", "intervened", "has_transition", "episode"):
        np.testing.assert_array_equal(getattr(restored, name), getattr(original, name))
    assert (restored.cursor, restored.filled, restored.episodes_started) == (
        original.cursor,
        original.filled,
        original.episodes_started,
    )
    a = original.sample(16, np.random.default_rng(5), n_step=3, sequence_length=2)
    b = restored.sample(16, np.random.default_rng(5), n_step=3, sequence_length=2)
    for key in ("action", "reward", "discount", "action_sequence", "sequence_mask", "index"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    # the open episode continues identically in both
    for buffer in (original, restored):
        buffer.add(
            {"state": np.zeros(3), "front": np.zeros((8, 8, 3))},
            [0.1, 0.1],
            2.0,
            {"state": np.full(3, 2.0), "front": np.zeros((8, 8, 3))},
            True,
            False,
        )
    np.testing.assert_array_equal(original.episode, restored.episode)
    original.save(tmp_path / "buffer")  # overwriting an existing save
    assert ReplayBuffer.load(tmp_path / "buffer").cursor == original.cursor


def test_a_save_writes_the_slots_written_so_far_not_the_whole_capacity(tmp_path):
    space = {"state": ((3,), np.float32), "front": ((32, 32, 3), np.uint8)}
    original = ReplayBuffer(10_000, space, action_dim=2)  # ~31 MB of frames at full capacity
    frame = np.full((32, 32, 3), 7, np.uint8)
    for t in range(3):
        original.add(
            {"state": [t, 0, 0], "front": frame},
            [0.1, 0.2],
            1.0,
            {"state": [t + 1, 0, 0], "front": frame},
            terminated=t == 2,
            truncated=False,
        )
    original.save(tmp_path / "buffer")
    assert np.load(tmp_path / "buffer" / "obs.front.npy").shape == (original.filled, 32, 32, 3) == (4, 32, 32, 3)
    assert sum(f.stat().st_size for f in (tmp_path / "buffer").iterdir()) < 100_000
    restored = ReplayBuffer.load(tmp_path / "buffer")
    assert restored.capacity == 10_000 and len(restored) == len(original) == 3
    for column in ("state", "front"):
        np.testing.assert_array_equal(restored.obs[column], original.obs[column])
    np.testing.assert_array_equal(restored.episode, original.episode)  # -1 in every slot not written
    np.testing.assert_array_equal(restored.valid_indices(), original.valid_indices())


def test_a_wrapped_buffer_and_a_buffer_saved_with_every_row_load_exactly(tmp_path):
    original = ReplayBuffer(6, SPACE, action_dim=1)
    fill(original, [1.0, 2.0, 3.0], True, False, start_marker=0)
    fill(original, [10.0, 20.0, 30.0], True, False, start_marker=100)  # wraps: every slot written
    original.save(tmp_path / "wrapped")
    restored = ReplayBuffer.load(tmp_path / "wrapped")
    np.testing.assert_array_equal(restored.obs["state"], original.obs["state"])
    np.testing.assert_array_equal(restored.valid_indices(), original.valid_indices())
    partial = ReplayBuffer(20, SPACE, action_dim=1)
    fill(partial, [1.0, 2.0], True, False, start_marker=0)
    partial.save(tmp_path / "old")
    for name in ("obs.state", "action", "reward", "episode", "has_transition"):  # as saves before this change wrote
        column = partial.obs["state"] if name == "obs.state" else getattr(partial, name)
        np.save(tmp_path / "old" / f"{name}.npy", column.numpy())
    old = ReplayBuffer.load(tmp_path / "old")
    np.testing.assert_array_equal(old.obs["state"], partial.obs["state"])
    np.testing.assert_array_equal(old.episode, partial.episode)
    np.save(tmp_path / "old" / "reward.npy", np.zeros(21, np.float32))  # more rows than the capacity
    with pytest.raises(ValueError, match="reward.npy"):
        ReplayBuffer.load(tmp_path / "old")
    np.save(tmp_path / "old" / "reward.npy", np.zeros(20, np.float64))  # another dtype
    with pytest.raises(ValueError, match="reward.npy"):
        ReplayBuffer.load(tmp_path / "old")


def test_random_shift_is_a_replicate_padded_integer_crop():
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 255, (16, 3, 12, 10), dtype=torch.uint8)
    shifted = random_shift(images, pad=4, generator=generator)
    assert shifted.shape == images.shape and shifted.dtype == torch.uint8
    padded = torch.nn.functional.pad(images.float(), (4, 4, 4, 4), mode="replicate")
    offsets = set()
    for b in range(16):
        matches = [
            (dy, dx)
            for dy in range(9)
            for dx in range(9)
            if torch.equal(padded[b, :, dy : dy + 12, dx : dx + 10].to(torch.uint8), shifted[b])
        ]
        assert matches, "every output is a crop of the padded input"
        offsets.add(matches[0])
    assert len(offsets) > 4  # offsets differ between samples
    assert torch.equal(random_shift(images, pad=0), images)


def test_loading_from_an_episode_store(tmp_path):
    from robot_rl.data import EpisodeStore, load_episode_store
    from tests.data.test_episode_store import META, synthetic_episode, write_episode

    store = EpisodeStore.create(tmp_path / "s.zarr", META)
    episodes = [synthetic_episode(seed) for seed in range(3)]
    for seed, episode in enumerate(episodes):
        write_episode(store, episode, source="demo" if seed < 2 else "online")
    space = {"state": ((4,), np.float32), "front": ((16, 20, 3), np.uint8)}
    buffer = ReplayBuffer(100, space, action_dim=2)
    assert load_episode_store(store, buffer, sources=("demo",)) == 2
    assert len(buffer) == 12  # two demo episodes of 6 steps
    index = buffer.valid_indices()
    np.testing.assert_array_equal(buffer.reward[index], np.concatenate([e["reward"] for e in episodes[:2]]))
    np.testing.assert_array_equal(buffer.obs["front"][index[0] + 1], episodes[0]["obs"]["front"][1])
    _ret, steps, terminated = buffer.n_step_returns(index[5:6], 3, 0.9)  # last step of the first demo
    assert steps[0] == 1 and terminated[0]


def test_a_batch_holds_every_field_it_must_and_the_optional_ones_its_sampling_made(two_episodes):
    import dataclasses

    from robot_rl.data.batches import Batch

    other = ReplayBuffer(20, SPACE, action_dim=1)
    fill(other, [5.0, 6.0], terminated_last=True, truncated_last=False, start_marker=200)
    batch = MixedSampler(two_episodes, other, 0.5, seed=0).sample(8, n_step=2, sequence_length=3)
    assert isinstance(batch, Batch)
    required = [field.name for field in dataclasses.fields(Batch) if field.default is dataclasses.MISSING]
    assert all(getattr(batch, name) is not None for name in required)
    assert batch.is_demo is not None and batch.action_sequence is not None and batch.sequence_mask is not None
    assert batch.mc_return is None and batch.source is None  # no returns-to-go; a mix of two, not a weighted one
    assert len(batch) == 8 and all(len(tensor) == 8 for _, tensor in batch.tensors())
