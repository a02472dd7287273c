"""The fast-loop risk model in C (robot_rl/safety/_mlp.c) against the Python it replaces: the forward pass gives the
numpy pass' risks for any model the loaders accept, one command scored from the arm's arrays gives the risk of its
Python features, the filter decides every tick as its Python path does, and arrays that do not fit raise a
ValueError, never crash."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_rl.core.geometry import matrix_from_rotvec
from robot_rl.safety import ArmState, Command
from robot_rl.safety.fast_critic import (
    INPUT_WIDTH,
    NO_CONTEXT,
    STATE_WIDTH,
    FastCriticFilter,
    FastCriticModel,
    command_delta,
    fast_critic_settings,
    fast_state,
)
from tests.conftest import require

SEEDS, CONTEXTS = st.integers(0, 2**31), st.sampled_from([0, 9, 64])
HIDDEN = st.lists(st.integers(1, 160), min_size=0, max_size=3)  # the widths of 0-3 hidden layers
ACTIVATIONS = st.sampled_from(["relu", "tanh"])
NEVER_MISSED_US = (
    100_000  # a model deadline a loaded test machine never misses (bypass on time: tests/safety/test_filter.py)
)


def for_random_models(**more):
    """Run a test on 60 hypothesis examples of a model (``seed``, ``context`` width, ``hidden`` widths,
    ``activation``) and of the ``more`` strategies."""
    strategies = {"seed": SEEDS, "context": CONTEXTS, "hidden": HIDDEN, "activation": ACTIVATIONS, **more}
    return lambda test: settings(max_examples=60, deadline=None)(given(**strategies)(test))


@pytest.fixture(scope="module")
def native():
    return require("robot_rl.safety._mlp").forward  # built at install (a C compiler is part of the setup)


def random_model(rng: np.random.Generator, context: int, hidden: list[int], activation: str) -> FastCriticModel:
    widths = [INPUT_WIDTH + context, *hidden, 1]
    layers = [
        (rng.normal(0, 1 / np.sqrt(a), (a, b)).astype(np.float32), rng.normal(0, 0.5, b).astype(np.float32))
        for a, b in itertools.pairwise(widths)
    ]
    return FastCriticModel(layers, activation)


@for_random_models(candidates=st.integers(1, 16))
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


def random_pose(rng: np.random.Generator, dtype) -> tuple[np.ndarray, np.ndarray]:
    """A position (m) near the workspace and a tool-down orientation turned by up to ~0.6 rad."""
    position = (np.array([0.45, 0.0, 0.2]) + rng.normal(0, 0.05, 3)).astype(dtype)
    rotation = matrix_from_rotvec(rng.normal(0, 0.3, 3)) @ np.diag([1.0, -1.0, -1.0])
    return position, rotation.astype(dtype)


@for_random_models(dtype=st.sampled_from([np.float64, np.float32]), same_orientation=st.booleans())
def test_scoring_one_command_in_c_gives_the_risk_of_its_python_features(
    native, seed, context, hidden, activation, dtype, same_orientation
):
    rng = np.random.default_rng(seed)
    model = random_model(rng, context, hidden, activation)
    arm_pos, arm_rot = random_pose(rng, dtype)
    target_pos, target_rot = random_pose(rng, dtype)
    if same_orientation:  # no turn: the rotation vector's small-angle branch
        target_rot = arm_rot.copy()
    arm = ArmState(arm_pos, arm_rot, 0.0, rng.normal(0, 5, 3).astype(dtype), rng.normal(0, 1, 3).astype(dtype))
    command = Command(target_pos, target_rot, float(rng.uniform(-1, 1)), 0.0)
    motion, gripper = rng.normal(0, 0.3, 12), float(rng.uniform(-1, 1))
    task = rng.normal(0, 1, context).astype(np.float32)
    row = np.full(INPUT_WIDTH + context, np.nan, np.float32)
    risk = model.score_command(motion, arm, command, gripper, task, row)
    state = fast_state(motion, arm.force, arm.torque, gripper, task)
    delta = command_delta(arm, command, gripper).astype(np.float32)
    np.testing.assert_array_equal(row, np.concatenate((state, delta)))  # the model's input, as Python builds it
    reference = model(state, delta[None])
    assert isinstance(risk, float)
    np.testing.assert_allclose(risk, reference[0], rtol=1e-5, atol=1e-7)


@settings(max_examples=40, deadline=None)
@given(
    seed=SEEDS,
    context=st.sampled_from([0, 9]),
    hidden=HIDDEN,
    escape=st.sampled_from([0.0, 0.01]),
)
def test_scoring_the_candidates_in_c_gives_the_filters_candidates_and_their_risks(
    native, seed, context, hidden, escape
):
    rng = np.random.default_rng(seed)
    model = random_model(rng, context, hidden, "relu")
    fast = FastCriticFilter(
        fast_critic_settings({"enabled": True, "escape_step": escape, "deadline_us": NEVER_MISSED_US}),
        1000.0,
        0.01,
        model,
    )
    arm_pos, arm_rot = random_pose(rng, np.float64)
    arm = ArmState(arm_pos, arm_rot, 0.0, rng.normal(0, 5, 3), rng.normal(0, 1, 3))
    command = Command(*random_pose(rng, np.float64), 1.0, 0.0)
    motion, task = rng.normal(0, 0.3, 12), rng.normal(0, 1, context).astype(np.float32)
    row = np.zeros(INPUT_WIDTH + context, np.float32)
    assert model.score_command(motion, arm, command, -1.0, task, row) is not None
    state, delta = fast_state(motion, arm.force, arm.torque, -1.0, task), command_delta(arm, command, -1.0)
    expected = fast.filter.candidates(delta, state)
    candidates, risks = np.full_like(expected, np.nan), np.full(len(expected), np.nan, np.float32)
    recoveries = expected[len(fast.filter.settings.scales) :]
    model.score_candidates(row, fast.filter.line_search_factors(7), recoveries, candidates, risks)
    np.testing.assert_array_equal(candidates, expected)
    np.testing.assert_allclose(risks, model(state, expected), rtol=1e-5, atol=1e-7)


def test_a_command_half_a_turn_away_is_not_scored_in_c_but_decided_in_python(native):
    model = random_model(np.random.default_rng(1), 0, [16], "relu")
    down = np.diag([1.0, -1.0, -1.0])
    arm = ArmState(np.zeros(3), down, 0.0)
    flipped = Command(np.zeros(3), matrix_from_rotvec(np.array([0.0, 0.0, math.pi - 1e-6])) @ down, 0.0, 0.0)
    row = np.full(INPUT_WIDTH, 7.0, np.float32)
    assert model.score_command(np.zeros(12), arm, flipped, 0.0, NO_CONTEXT, row) is None
    assert np.all(row == 7.0)
    fast = FastCriticFilter(
        fast_critic_settings({"enabled": True, "deadline_us": NEVER_MISSED_US}), 1000.0, 0.01, model
    )
    decision = fast.step(arm, flipped, 0.0, 0.0)
    assert decision.bypass is None and math.isfinite(decision.risk)  # the Python path scored it


def test_scoring_one_command_refuses_arrays_of_other_shapes_or_types(native):
    model = random_model(np.random.default_rng(2), 9, [8], "relu")
    arm = ArmState(np.zeros(3), np.eye(3), 0.0)
    command = Command(np.zeros(3), np.eye(3), 0.0, 0.0)
    good = {"motion": np.zeros(12), "arm": arm, "command": command, "gripper": 0.0}
    good.update(context=np.zeros(9, np.float32), row=np.zeros(INPUT_WIDTH + 9, np.float32))
    assert 0.0 < model.score_command(**good) < 1.0
    broken = [
        dict(good, row=np.zeros(INPUT_WIDTH, np.float32)),
        dict(good, row=np.zeros(INPUT_WIDTH + 9)),
        dict(good, motion=np.zeros(11)),
        dict(good, motion=np.zeros(12, np.int64)),
        dict(good, context=np.zeros(8, np.float32)),  # the model reads 9
        dict(good, context=np.zeros(9)),  # float64: the model's inputs are float32
        dict(good, arm=ArmState(np.zeros(3), np.eye(3)[:, :2].copy(), 0.0)),
        dict(good, command=Command(np.zeros(3), np.eye(3).T[:, ::-1], 0.0, 0.0)),  # not C-contiguous
        dict(good, arm=ArmState(np.zeros(3), np.eye(3), 0.0, force=np.zeros(4))),
    ]
    for arguments in broken:
        with pytest.raises((ValueError, BufferError, TypeError)):
            model.score_command(**arguments)
    row, factors, recoveries = good["row"], np.ones((3, 7), np.float32), np.zeros((2, 7), np.float32)
    candidates, risks = np.zeros((5, 7), np.float32), np.zeros(5, np.float32)
    model.score_candidates(row, factors, recoveries, candidates, risks)
    assert np.all((risks > 0) & (risks < 1))
    for arguments in [
        (row[:-1], factors, recoveries, candidates, risks),
        (row, factors[:, :6].copy(), recoveries, candidates, risks),
        (row, factors, recoveries, candidates[:4], risks),
        (row, factors, recoveries, candidates, risks[:4]),
        (row, factors, recoveries, candidates.astype(np.float64), risks),
        (row, np.ones((70, 7), np.float32), recoveries, np.zeros((72, 7), np.float32), np.zeros(72, np.float32)),
    ]:
        with pytest.raises((ValueError, BufferError, TypeError)):
            model.score_candidates(*arguments)


class PythonPath:
    """A model the filter scores in Python on every tick: the C forward, without :meth:`FastCriticModel.score_command`."""

    def __init__(self, model: FastCriticModel):
        self.model, self.context_width = model, model.context_width

    def __call__(self, state: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        return self.model(state, deltas)


def test_the_filter_decides_every_tick_as_its_python_path_does(native):
    """Released ticks scored in one call into C, the rest in Python: the same risks, the same commands, the same
    engagements as when every tick is scored in Python, on a stream that engages and releases the filter."""
    rng = np.random.default_rng(3)
    model = random_model(rng, 0, [32, 32], "relu")
    settings = fast_critic_settings({"enabled": True, "dwell": 0.003, "deadline_us": NEVER_MISSED_US})
    both = [FastCriticFilter(settings, 1000.0, 0.01, scorer) for scorer in (model, PythonPath(model))]
    risks, engaged, filtered = [], 0, 0
    for tick in range(400):
        now = tick * 1e-3
        arm_pos, arm_rot = random_pose(rng, np.float64)
        arm = ArmState(arm_pos, arm_rot, now, rng.normal(0, 5, 3), rng.normal(0, 1, 3))
        target_pos, target_rot = random_pose(rng, np.float64)
        command = Command(target_pos, target_rot, 1.0, now)
        decisions = []
        for fast in both:
            fast.motion.update(arm_pos, arm_rot, now)
            decisions.append(fast.step(arm, command, -1.0, now))
        fast_path, python_path = decisions
        assert fast_path.bypass is None and python_path.bypass is None
        assert fast_path.risk == python_path.risk and fast_path.filtered == python_path.filtered
        np.testing.assert_array_equal(fast_path.command.pos, python_path.command.pos)
        np.testing.assert_array_equal(fast_path.command.rot, python_path.command.rot)
        assert both[0].filter.engaged == both[1].filter.engaged
        risks.append(fast_path.risk)
        engaged += both[0].filter.engaged
        filtered += fast_path.filtered
    threshold = settings.threshold_on
    assert min(risks) < threshold < max(risks) and 0 < engaged < 400 and filtered > 0  # every branch was taken
