"""The fast-loop risk model's forward pass in C (robot_rl/safety/_mlp.c) against the numpy pass it replaces: the same
risks for any model the loaders accept, and a ValueError, never a crash, for arrays that do not chain."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_rl.safety.fast_risk import INPUT_WIDTH, STATE_WIDTH, FastRiskModel
from tests.conftest import require


@pytest.fixture(scope="module")
def native():
    return require("robot_rl.safety._mlp").forward  # built at install (a C compiler is part of the setup)


def random_model(rng: np.random.Generator, context: int, hidden: list[int], activation: str) -> FastRiskModel:
    widths = [INPUT_WIDTH + context, *hidden, 1]
    layers = [
        (rng.normal(0, 1 / np.sqrt(a), (a, b)).astype(np.float32), rng.normal(0, 0.5, b).astype(np.float32))
        for a, b in itertools.pairwise(widths)
    ]
    return FastRiskModel(layers, activation)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    context=st.sampled_from([0, 9, 64]),
    hidden=st.lists(st.integers(1, 160), min_size=0, max_size=3),
    activation=st.sampled_from(["relu", "tanh"]),
    candidates=st.integers(1, 16),
)
def test_the_c_pass_scores_every_candidate_as_the_numpy_pass_does(
    native, seed, context, hidden, activation, candidates
):
    rng = np.random.default_rng(seed)
    model = random_model(rng, context, hidden, activation)
    assert model.native  # built: the models use it
    state = rng.normal(0, 2, STATE_WIDTH + context).astype(np.float32)
    deltas = rng.normal(0, 0.05, (candidates, 7)).astype(np.float32)
    risks = model(state, deltas)
    model.native = False
    reference = model(state, deltas)
    assert risks.dtype == reference.dtype == np.float32 and risks.shape == (candidates,)
    np.testing.assert_allclose(risks, reference, rtol=1e-4, atol=1e-6)


def test_arrays_that_do_not_chain_raise_and_write_nothing(native):
    rng = np.random.default_rng(0)
    model = random_model(rng, 0, [8], "relu")
    weights = model._weights
    x, out = np.ones((2, INPUT_WIDTH + 1), np.float32), np.full(2, -1.0, np.float32)
    native(weights, x, out, False)
    assert np.all((out > 0) & (out < 1))
    out[:] = -1.0
    broken = [
        (weights[::-1], x, out),  # layers in the wrong order
        ((weights[0],), x, out),  # ends with 8 outputs, not 1
        (weights, x[:, :10], out),  # fewer inputs than the first layer takes
        (weights, x, np.empty(3, np.float32)),  # out of another length
        (weights, x.astype(np.float64), out),  # not float32
        ((weights[0].T, weights[1]), x, out),  # not C-contiguous
        ((), x, out),
    ]
    for layers, inputs, outputs in broken:
        with pytest.raises((ValueError, BufferError, TypeError)):
            native(layers, inputs, outputs, False)
    assert np.all(out == -1.0)
    read_only = np.zeros(2, np.float32)
    read_only.flags.writeable = False
    for outputs in (np.zeros(4, np.float32)[::2], read_only):  # strided, read-only
        with pytest.raises((ValueError, BufferError, TypeError)):
            native(weights, x, outputs, False)
