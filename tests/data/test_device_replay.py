"""The torch replay buffer against the numpy one it replaced (tests/data/numpy_replay.py): the same transitions
written to both give the same columns, the same sampleable slots and, at the same slots, the same batches (n-step
returns, discounts, previous actions, action sequences and their masks, observations); each reads the other's
saves; the mixing sampler splits a batch as before."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from robot_rl.data import MixedSampler, ReplayBuffer
from robot_rl.data.batches import Batch
from tests.data import numpy_replay

SPACE = {"state": ((2,), np.float32), "front": ((4, 3, 3), np.uint8)}
COLUMNS = (
    "action",
    "learned_action",
    "opening_action",
    "has_opening_action",
    "reward",
    "cost",
    "terminated",
    "truncated",
    "intervened",
    "has_transition",
    "episode",
)
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def episodes(draw, capacity: int) -> list[dict]:
    """Episodes of random lengths that end by termination, by the time limit or by being closed unfinished,
    some opening as a segment (with the action before them), with random rewards, costs, takeovers and
    relabelled actions."""
    reals = st.floats(-4, 4, width=32, allow_nan=False)
    out = []
    for _ in range(draw(st.integers(1, 6))):
        length = draw(st.integers(1, capacity - 3))
        steps = [
            {
                "action": np.array(draw(st.lists(reals, min_size=2, max_size=2)), np.float32),
                "learned": draw(st.none() | st.lists(reals, min_size=2, max_size=2)),
                "reward": draw(reals),
                "cost": float(draw(st.booleans())),
                "intervened": draw(st.booleans()),
            }
            for _ in range(length)
        ]
        out.append(
            {
                "steps": steps,
                "end": draw(st.sampled_from(["terminated", "truncated", "closed"])),
                "opening": draw(st.none() | st.lists(reals, min_size=2, max_size=2)),
            }
        )
    return out


def observation(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"state": rng.normal(size=2).astype(np.float32), "front": rng.integers(0, 256, (4, 3, 3), dtype=np.uint8)}


def fill(buffers, plan: list[dict], seed: int) -> None:
    """Write ``plan`` into every buffer of ``buffers``, the same observations into each."""
    rng = np.random.default_rng(seed)
    for episode in plan:
        obs = observation(rng)
        for t, step in enumerate(episode["steps"]):
            last = t == len(episode["steps"]) - 1
            next_obs = observation(rng)
            for buffer in buffers:
                buffer.add(
                    obs,
                    step["action"],
                    step["reward"],
                    next_obs,
                    terminated=last and episode["end"] == "terminated",
                    truncated=last and episode["end"] == "truncated",
                    intervened=step["intervened"],
                    cost=step["cost"],
                    learned_action=None if step["learned"] is None else np.array(step["learned"], np.float32),
                    opening_action=None if t or episode["opening"] is None else np.array(episode["opening"]),
                )
            obs = next_obs
        for buffer in buffers:
            buffer.close_episode()  # a no-op after a terminal flag, a cut otherwise


def assert_same_columns(new: ReplayBuffer, old: numpy_replay.ReplayBuffer) -> None:
    for key in SPACE:
        np.testing.assert_array_equal(new.obs[key].numpy(), old.obs[key])
    for name in COLUMNS:
        np.testing.assert_array_equal(getattr(new, name).numpy(), getattr(old, name), err_msg=name)
    assert (new.cursor, new.filled, new.episodes_started, len(new)) == (
        old.cursor,
        old.filled,
        old.episodes_started,
        len(old),
    )
    np.testing.assert_array_equal(new.valid_indices().numpy(), old.valid_indices())


class Positions:
    """Stands in for the numpy generator of the old ``sample``: 'draws' the given positions among its valid slots."""

    def __init__(self, positions: np.ndarray):
        self.positions = positions

    def integers(self, low, high, size):
        return self.positions


def fields_of(batch: Batch) -> dict:
    """The fields ``batch`` holds, by name (absent ones left out): as the old implementation's dict."""
    return {
        field.name: getattr(batch, field.name)
        for field in dataclasses.fields(batch)
        if getattr(batch, field.name) is not None
    }


def assert_same_batch(batch: Batch, old: dict) -> None:
    new = fields_of(batch)
    assert set(new) == set(old)
    for key, value in old.items():
        if isinstance(value, dict):
            for name, array in value.items():
                np.testing.assert_array_equal(new[key][name].numpy(), array, err_msg=f"{key}.{name}")
        else:
            assert new[key].dtype == torch.from_numpy(np.asarray(value)).dtype, key
            np.testing.assert_array_equal(new[key].numpy(), value, err_msg=key)


@PROPERTY
@given(
    data=st.data(),
    capacity=st.integers(6, 30),
    n_step=st.integers(1, 4),
    sequence_length=st.integers(1, 4),
    gamma=st.sampled_from([1.0, 0.97, 0.5]),
)
def test_same_transitions_same_columns_and_same_batches_at_the_same_slots(
    data, capacity, n_step, sequence_length, gamma
):
    plan = data.draw(episodes(capacity))
    new, old = ReplayBuffer(capacity, SPACE, 2), numpy_replay.ReplayBuffer(capacity, SPACE, 2)
    fill([new, old], plan, seed=data.draw(st.integers(0, 1000)))  # wraps around when the plan outgrows capacity
    assert_same_columns(new, old)
    if not len(old):
        return
    positions = np.array(data.draw(st.lists(st.integers(0, len(old) - 1), min_size=1, max_size=24)))
    slots = old.valid_indices()[positions]
    expected = old.sample(len(positions), Positions(positions), n_step, gamma, sequence_length)
    assert_same_batch(new.batch(torch.from_numpy(slots), n_step, gamma, sequence_length), expected)


@PROPERTY
@given(data=st.data(), capacity=st.integers(6, 30))
def test_saves_of_the_old_implementation_load_and_it_refuses_the_new_format(tmp_path_factory, data, capacity):
    plan = data.draw(episodes(capacity))
    new, old = ReplayBuffer(capacity, SPACE, 2), numpy_replay.ReplayBuffer(capacity, SPACE, 2)
    fill([new, old], plan, seed=0)
    folder = tmp_path_factory.mktemp("saves")
    new.save(folder / "new")
    old.save(folder / "old")
    assert sorted(p.name for p in (folder / "new").iterdir()) == sorted(p.name for p in (folder / "old").iterdir())
    with pytest.raises(ValueError, match="not a robot_rl replay buffer"):  # new saves keep written rows only
        numpy_replay.ReplayBuffer.load(folder / "new")
    assert_same_columns(ReplayBuffer.load(folder / "old"), old)
    restored = ReplayBuffer.load(folder / "new")
    tail = data.draw(episodes(capacity))  # the open episode and the ring go on identically
    fill([restored, old], tail, seed=1)
    assert_same_columns(restored, old)


@PROPERTY
@given(
    data=st.data(),
    fraction=st.sampled_from([0.0, 0.3, 0.5, 1.0]),
    batch_size=st.integers(1, 40),
    seed=st.integers(0, 100),
)
def test_mixed_batches_split_as_before_and_each_row_is_its_buffers_batch(data, fraction, batch_size, seed):
    plans = [data.draw(episodes(24)), data.draw(episodes(24))]
    online, demo = ReplayBuffer(24, SPACE, 2), ReplayBuffer(24, SPACE, 2)
    old_online, old_demo = numpy_replay.ReplayBuffer(24, SPACE, 2), numpy_replay.ReplayBuffer(24, SPACE, 2)
    fill([online, old_online], plans[0], seed=2)
    fill([demo, old_demo], plans[1], seed=3)
    if not len(online) and not len(demo):
        return
    assume(len(demo) >= fraction * batch_size or not len(online))  # fewer demo rows than f B: a batch takes them all
    batch = MixedSampler(online, demo, fraction, seed=seed).sample(batch_size, n_step=2, gamma=0.9, sequence_length=3)
    before = numpy_replay.MixedSampler(old_online, old_demo, fraction, seed=seed).sample(
        batch_size, n_step=2, gamma=0.9, sequence_length=3
    )
    np.testing.assert_array_equal(batch.is_demo.numpy(), before["is_demo"])  # the same coin, the same split
    for buffer, rows in ((online, ~batch.is_demo), (demo, batch.is_demo)):
        if not rows.any():
            continue
        alone = buffer.batch(batch.index[rows], n_step=2, gamma=0.9, sequence_length=3)
        mixed = fields_of(batch)
        for key, value in fields_of(alone).items():
            if isinstance(value, dict):
                for name, tensor in value.items():
                    assert torch.equal(mixed[key][name][rows], tensor), (key, name)
            else:
                assert torch.equal(mixed[key][rows], value), key


def plain_episodes(count: int, length: int, end: str) -> list[dict]:
    """``count`` episodes of ``length`` steps with action (1, 1) and reward 1, ended as ``end`` says."""
    step = {"action": np.ones(2, np.float32), "learned": None, "reward": 1.0, "cost": 0.0, "intervened": False}
    return [{"steps": [step] * length, "end": end, "opening": None}] * count


def test_sampling_draws_every_valid_slot_uniformly_and_replays_from_the_generator_state():
    buffer = ReplayBuffer(64, SPACE, 2)
    fill([buffer], plain_episodes(5, 9, "truncated"), seed=0)
    counts = torch.bincount(buffer.sample(45_000, np.random.default_rng(0)).index, minlength=64)
    valid = buffer.valid_indices()
    assert (counts[valid] > 0).all() and counts.sum() == counts[valid].sum()
    assert counts[valid].float().std() / counts[valid].float().mean() < 0.1  # 1000 expected per slot
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    assert torch.equal(buffer.sample(16, a).index, buffer.sample(16, b).index)


def test_a_batch_keeps_its_memory_while_it_is_used_and_gives_it_back_after():
    buffer = ReplayBuffer(64, SPACE, 2)
    fill([buffer], plain_episodes(5, 9, "truncated"), seed=0)
    rng = np.random.default_rng(0)
    kept = buffer.sample(32, rng)
    front = kept.obs["front"].clone()
    for _ in range(10):  # more draws than the buffer keeps blocks for, while the first batch is still held
        buffer.sample(32, rng)
    assert torch.equal(kept.obs["front"], front)
    address = kept.obs["front"].data_ptr()
    view = kept.next_obs["front"][:4]  # a view alone holds its block too
    del kept
    assert all(buffer.sample(32, rng).obs["front"].data_ptr() != view.data_ptr() for _ in range(3))
    del view
    assert address in {buffer.sample(32, rng).obs["front"].data_ptr() for _ in range(3)}  # the block again


def test_columns_are_tensors_on_the_storage_device_and_batches_on_the_learners():
    buffer = ReplayBuffer(10, SPACE, 2, device="cpu")
    assert buffer.storage_device == torch.device("cpu") and not buffer.pinned
    assert buffer.obs["front"].dtype == torch.uint8 and buffer.obs["state"].dtype == torch.float32
    fill([buffer], plain_episodes(1, 1, "terminated"), seed=0)
    batch = MixedSampler(buffer, buffer, 0.5, seed=0).sample(4)
    assert batch.obs["front"].shape == (4, 4, 3, 3) and batch.obs["front"].device == buffer.device
    assert batch.reward.dtype == torch.float32 and batch.is_demo.dtype == torch.bool


def test_a_buffer_goes_on_the_gpu_only_when_it_fits_a_quarter_of_it():
    from robot_rl.data.replay_buffer import storage_device

    assert storage_device(torch.device("cpu"), 10**12) == torch.device("cpu")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    total = torch.cuda.get_device_properties(0).total_memory
    assert storage_device(torch.device("cuda"), total // 8) == torch.device("cuda")
    assert storage_device(torch.device("cuda"), total // 2) == torch.device("cpu")
