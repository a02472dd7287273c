"""The fast-loop risk model: feature layout, the numpy MLP, its loaders' refusals, and the decision per tick."""

import io
import math
import threading

import numpy as np
import pytest

from robot_rl.core.config import ConfigError
from robot_rl.core.geometry import matrix_from_rotvec, rotvec_from_matrix
from robot_rl.safety import ArmState, Command
from robot_rl.safety.fast_critic import (
    DELTA_FEATURES,
    DELTA_WIDTH,
    FORCE,
    INPUT_WIDTH,
    MAX_BYTES,
    STATE_FEATURES,
    STATE_WIDTH,
    FastCriticError,
    FastCriticFilter,
    FastCriticModel,
    TcpMotion,
    command_delta,
    command_from_delta,
    fast_critic_settings,
    fast_state,
    feature_slices,
    load_fast_model,
    turn_between,
)

DOWN = np.diag([1.0, -1.0, -1.0])  # tool pointing down
HOME = np.array([0.45, 0.0, 0.2])


def tiny_layers(activation_scale: float = 1.0) -> list[tuple[np.ndarray, np.ndarray]]:
    """26 -> 2 -> 1 with a few non-zero weights, easy to follow by hand."""
    w0 = np.zeros((INPUT_WIDTH, 2), np.float32)
    w0[0, 0], w0[12, 0], w0[19, 0] = 2.0, 0.1, 10.0  # x, force x, delta x
    w0[18, 1], w0[25, 1] = -1.0, 0.5  # gripper, delta gripper
    b0 = np.array([-1.0, 0.25], np.float32)
    w1 = np.array([[1.5], [-2.0]], np.float32) * activation_scale
    b1 = np.array([0.1], np.float32)
    return [(w0, b0), (w1, b1)]


def arrays(layers=None, **changes) -> dict[str, np.ndarray]:
    """A valid weights dict of ``layers`` (default :func:`tiny_layers`) with ``changes`` applied (None removes)."""
    values = FastCriticModel(layers or tiny_layers()).to_arrays(version=1)
    for key, value in changes.items():
        if value is None:
            values.pop(key)
        else:
            values[key] = value
    return values


def test_the_feature_layout_has_the_documented_widths_and_order():
    assert (STATE_WIDTH, DELTA_WIDTH, INPUT_WIDTH) == (19, 7, 26)
    state = feature_slices(STATE_FEATURES)
    assert [state[name] for name in ("tcp_position", "tcp_rotvec", "tcp_linear", "tcp_angular")] == [
        slice(0, 3),
        slice(3, 6),
        slice(6, 9),
        slice(9, 12),
    ]
    assert state["force"] == FORCE and state["torque"] == slice(15, 18) and state["gripper"] == slice(18, 19)
    assert feature_slices(DELTA_FEATURES) == {
        "delta_position": slice(0, 3),
        "delta_rotvec": slice(3, 6),
        "delta_gripper": slice(6, 7),
    }
    motion = TcpMotion()
    motion.update(HOME, DOWN, 0.0)
    features = fast_state(motion.features, np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0, 6.0]), 0.5)
    assert features.dtype == np.float32 and features.shape == (STATE_WIDTH,)
    np.testing.assert_allclose(features[state["tcp_position"]], HOME, atol=1e-7)
    np.testing.assert_allclose(np.abs(features[state["tcp_rotvec"]]), [math.pi, 0.0, 0.0], atol=1e-6)
    np.testing.assert_array_equal(features[6:12], 0.0)  # one pose: no twist yet
    np.testing.assert_array_equal(features[12:], [1, 2, 3, 4, 5, 6, 0.5])


def test_the_twist_is_the_finite_difference_of_the_measured_poses():
    motion = TcpMotion()
    motion.update(HOME, DOWN, 10.0)
    turned = matrix_from_rotvec([0.0, 0.0, 0.01]) @ DOWN  # 0.01 rad about the base z axis
    motion.update(HOME + [0.01, 0.0, -0.005], turned, 10.01)  # 10 ms later
    np.testing.assert_allclose(motion.features[6:9], [1.0, 0.0, -0.5], atol=1e-9)  # m/s
    np.testing.assert_allclose(motion.features[9:12], [0.0, 0.0, 1.0], atol=1e-6)  # rad/s
    motion.update(HOME + [0.0101, 0.0, -0.005], turned, 10.0101)  # 0.1 ms later (one burst): the twist is kept
    np.testing.assert_allclose(motion.features[6:9], [1.0, 0.0, -0.5], atol=1e-9)
    np.testing.assert_allclose(motion.features[0:3], HOME + [0.0101, 0.0, -0.005])
    motion.update(HOME + [0.012, 0.0, -0.005], turned, 10.02)  # differenced from the pose at 10.01 s
    np.testing.assert_allclose(motion.features[6:9], [0.2, 0.0, 0.0], atol=1e-9)
    motion.update(HOME, DOWN, 1.0)  # a clock that went back (a restarted sim): no twist
    np.testing.assert_array_equal(motion.features[6:12], 0.0)


def test_a_command_delta_and_the_command_it_stands_for_agree():
    arm = ArmState(HOME.copy(), DOWN, 0.0)
    target = Command(HOME + [0.01, -0.02, 0.005], matrix_from_rotvec([0.0, 0.0, 0.1]) @ DOWN, 1.0, 3.0)
    delta = command_delta(arm, target, gripper=-1.0)
    np.testing.assert_allclose(delta, [0.01, -0.02, 0.005, 0.0, 0.0, 0.1, 2.0], atol=1e-12)
    back = command_from_delta(arm, delta, target.gripper, target.stamp)
    np.testing.assert_allclose(back.pos, target.pos, atol=1e-12)
    np.testing.assert_allclose(back.rot, target.rot, atol=1e-12)
    assert (back.gripper, back.stamp) == (1.0, 3.0)
    rng = np.random.default_rng(0)  # any two orientations, a half turn apart too: what geometry's inverse gives
    for rotvec in [*rng.normal(0.0, 1.0, (20, 3)), [math.pi - 1e-6, 0.0, 0.0], [0.0, 1e-8, 0.0]]:
        measured = matrix_from_rotvec(rng.normal(0.0, 1.0, 3))
        target = matrix_from_rotvec(rotvec) @ measured
        np.testing.assert_allclose(turn_between(target, measured), rotvec_from_matrix(target @ measured.T), atol=1e-9)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_the_mlp_matches_a_hand_computation(activation):
    model = FastCriticModel(tiny_layers(), activation)
    state = np.zeros(STATE_WIDTH, np.float32)
    state[0], state[12], state[18] = 0.5, 20.0, -1.0  # x, force x, gripper
    deltas = np.array([[0.1, 0, 0, 0, 0, 0, 2.0], [-0.2, 0, 0, 0, 0, 0, 0.0]], np.float32)
    act = (lambda v: max(v, 0.0)) if activation == "relu" else math.tanh
    expected = []
    for dx, dg in ((0.1, 2.0), (-0.2, 0.0)):
        h0 = act(2.0 * 0.5 + 0.1 * 20.0 + 10.0 * dx - 1.0)  # 2 + 10 dx
        h1 = act(-1.0 * -1.0 + 0.5 * dg + 0.25)  # 1.25 + 0.5 dg
        logit = 1.5 * h0 - 2.0 * h1 + 0.1
        expected.append(1.0 / (1.0 + math.exp(-logit)))
    risks = model(state, deltas)
    assert risks.shape == (2,) and risks.dtype == np.float32
    np.testing.assert_allclose(risks, expected, rtol=1e-6)
    np.testing.assert_allclose(model(state, deltas[0]), expected[:1], rtol=1e-6)  # one candidate
    assert model.parameters == 26 * 2 + 2 + 2 + 1 and model.hidden == [2]


def test_batch_sizes_and_threads_do_not_share_the_forward_buffers():
    """The forward pass writes into buffers kept per batch size and per thread: alternating sizes, and two threads
    at once, give each call its own risks."""
    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(32, 16)), rng.normal(size=16)), (rng.normal(size=(16, 1)), rng.normal(size=1))]
    model = FastCriticModel(layers)  # 6 context columns
    states = rng.normal(size=(40, STATE_WIDTH + 6)).astype(np.float32)
    deltas = [rng.normal(size=(1 + i % 5, 7)).astype(np.float32) for i in range(40)]

    def reference(state, delta):
        x = np.maximum(
            np.concatenate(
                (
                    np.broadcast_to(state[:STATE_WIDTH], (len(delta), STATE_WIDTH)),
                    delta,
                    np.broadcast_to(state[STATE_WIDTH:], (len(delta), 6)),
                ),
                1,
            )
            @ layers[0][0]
            + layers[0][1],
            0.0,
        )
        return 1.0 / (1.0 + np.exp(-(x @ layers[1][0] + layers[1][1]).reshape(-1)))

    expected = [reference(state, delta) for state, delta in zip(states, deltas)]
    results: dict[int, list[np.ndarray]] = {}

    def run(worker: int) -> None:
        results[worker] = [model(state, delta) for _ in range(50) for state, delta in zip(states, deltas)][-40:]

    threads = [threading.Thread(target=run, args=(worker,)) for worker in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for worker in range(2):
        for got, want in zip(results[worker], expected):
            np.testing.assert_allclose(got, want, rtol=1e-4)
    with pytest.raises(ValueError):
        model(states[0][:STATE_WIDTH], deltas[0])  # a state without the model's context: the filter bypasses it


def test_the_risk_stays_in_0_1_for_huge_logits():
    layers = tiny_layers()
    layers[1] = (layers[1][0] * 1e6, layers[1][1])
    risks = FastCriticModel(layers)(
        np.zeros(STATE_WIDTH), np.array([[100.0, 0, 0, 0, 0, 0, 0], [-100.0, 0, 0, 0, 0, 0, 100]])
    )
    assert np.all(np.isfinite(risks)) and risks[0] == 1.0 and risks[1] == 0.0


def pickled_npz() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays(), extra=np.array([{"a": 1}], dtype=object))
    return buffer.getvalue()


def npz(values: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **values)
    return buffer.getvalue()


BAD_WEIGHTS = {
    "nan": (arrays(W1=np.array([[np.nan], [1.0]], np.float32)), "W1 or b1 has non-finite values"),
    "inf bias": (arrays(b0=np.array([np.inf, 0.0], np.float32)), "W0 or b0 has non-finite values"),
    "wrong input width": (
        arrays(W0=np.zeros((INPUT_WIDTH - 1, 2), np.float32)),
        r"W0 has shape \[25, 2\]; expected \[26 to 90, out\] \(the 26 inputs of layout 1, then up to 64 of task context\)",
    ),
    "shapes do not chain": (arrays(W1=np.zeros((3, 1), np.float32)), r"W1 has shape \[3, 1\]; expected \[2, out\]"),
    "bias of the wrong size": (arrays(b0=np.zeros(3, np.float32)), r"b0 has shape \[3\]; expected \[2\]"),
    "two outputs": (
        arrays(W1=np.zeros((2, 2), np.float32), b1=np.zeros(2, np.float32)),
        "the last layer gives one logit",
    ),
    "integer weights": (arrays(W0=np.zeros((INPUT_WIDTH, 2), np.int64)), "W0 is int64; expected float32 or float64"),
    "a missing bias": (arrays(b1=None), r"missing arrays \['b1'\]"),
    "an unknown array": (arrays(scale=np.ones(2, np.float32)), r"unexpected arrays \['scale'\]"),
    "no layout": (arrays(layout=None), r"missing arrays \['layout'\]"),
    "another layout": (arrays(layout=np.array(2)), "layout=2: a model for another feature layout"),
    "an unknown activation": (arrays(activation=np.array("gelu")), "activation=.*gelu"),
    "a negative version": (arrays(version=np.array(-1)), "version=.*expected an integer >= 0"),
    "too large": (
        {  # 26 x 1024 + 1024 x 1024 + ...: over a million parameters
            **arrays(),
            "W0": np.zeros((INPUT_WIDTH, 1024), np.float32),
            "b0": np.zeros(1024, np.float32),
            "W1": np.zeros((1024, 1024), np.float32),
            "b1": np.zeros(1024, np.float32),
            "W2": np.zeros((1024, 1), np.float32),
            "b2": np.zeros(1, np.float32),
        },
        "more than 250000 parameters",
    ),
}


@pytest.mark.parametrize("case", list(BAD_WEIGHTS))
def test_the_loaders_refuse_malformed_weights_naming_what_is_wrong(case, tmp_path):
    values, message = BAD_WEIGHTS[case]
    with pytest.raises(FastCriticError, match=message):
        FastCriticModel.from_arrays(values)
    with pytest.raises(FastCriticError, match=message):  # the same over a topic
        FastCriticModel.from_bytes(npz(values))
    path = tmp_path / "model.npz"
    path.write_bytes(npz(values))
    with pytest.raises(FastCriticError, match=str(path)):  # and from a file, named
        FastCriticModel.load(path)


def test_the_loaders_refuse_pickle_garbage_and_oversized_payloads(tmp_path):
    with pytest.raises(FastCriticError, match="not an npz archive of plain arrays.*allow_pickle"):
        FastCriticModel.from_bytes(pickled_npz())
    with pytest.raises(FastCriticError, match="not an npz archive"):
        FastCriticModel.from_bytes(b"not a zip file")
    with pytest.raises(FastCriticError, match="more than the limit"):
        FastCriticModel.from_bytes(bytes(MAX_BYTES + 1))
    with pytest.raises(FastCriticError, match="cannot be read"):
        FastCriticModel.load(tmp_path / "absent.npz")


def test_a_saved_model_loads_with_its_version_and_the_same_risks(tmp_path):
    model = FastCriticModel(tiny_layers(), "tanh")
    path = tmp_path / "fast_risk.npz"
    model.save(path, version=7)
    loaded, version = FastCriticModel.load(path)
    assert version == 7 and loaded.activation == "tanh"
    deltas = np.random.default_rng(0).normal(size=(5, DELTA_WIDTH))
    np.testing.assert_array_equal(loaded(np.ones(STATE_WIDTH), deltas), model(np.ones(STATE_WIDTH), deltas))
    settings = fast_critic_settings({"enabled": True, "weights": str(path)})
    assert load_fast_model(settings)[1] == 7
    assert load_fast_model(fast_critic_settings({"enabled": True})) == (None, 0)
    with pytest.raises(ConfigError) as error:
        load_fast_model(fast_critic_settings({"enabled": True, "weights": str(tmp_path / "absent.npz")}))
    assert error.value.key == "safety.fast_critic.weights" and "cannot be read" in str(error.value)


@pytest.mark.parametrize(
    "values, key",
    [
        ({"dwell": -1.0}, "safety.fast_critic.dwell"),
        ({"threshold_on": 0.2, "threshold_off": 0.3}, "safety.fast_critic.threshold_off"),
        ({"threshold_on": "high"}, "safety.fast_critic.threshold_on"),
        ({"scales": [0.5, 0.25]}, "safety.fast_critic.scales"),
        ({"deadline_us": 0}, "safety.fast_critic.deadline_us"),
        ({"retreat_distance": 0.5}, "safety.fast_critic.retreat_distance"),
        ({"weights": " "}, "safety.fast_critic.weights"),
        ({"enabled": "yes"}, "safety.fast_critic.enabled"),
        ({"deadline": 200}, "safety.fast_critic.deadline"),
    ],
)
def test_bad_fast_critic_settings_are_named(values, key):
    with pytest.raises(ConfigError) as error:
        fast_critic_settings(values)
    assert error.value.key == key


# ----------------------------------------------------------------------------- the decision
def toward_x(limit: float):
    """Risk 1 for a commanded step in +x longer than ``limit`` m, else 0."""
    return lambda state, deltas: (deltas[:, 0] > limit).astype(np.float32)


def fast_filter(model=None, **settings) -> tuple[FastCriticFilter, ArmState]:
    # a deadline a loaded test machine never misses (in stop 58's CI a Python model took 221 us of the default 200)
    values = {"scales": [1.0, 0.5, 0.25], "dwell": 0.0, "deadline_us": 100_000, **settings}
    fast = FastCriticFilter(fast_critic_settings(values), 1000.0, 0.01, model, version=3)
    arm = ArmState(HOME.copy(), DOWN, 5.0, np.array([0.0, 0.0, 8.0]), np.zeros(3))
    fast.motion.update(arm.pos, arm.rot, arm.stamp)
    return fast, arm


def test_a_risky_command_is_scaled_down_and_a_safe_one_passes_unchanged():
    fast, arm = fast_filter(toward_x(0.006))
    risky = Command(HOME + [0.02, 0.0, 0.0], DOWN, 1.0, 4.99)
    decision = fast.step(arm, risky, gripper=-1.0, now=5.001)
    assert decision.filtered and decision.bypass is None and decision.risk == 1.0
    np.testing.assert_allclose(decision.command.pos, HOME + [0.005, 0.0, 0.0], atol=1e-9)  # the 0.25 scale
    assert decision.command.gripper == 1.0 and decision.command.stamp == 4.99  # a stale command would stay stale
    safe = Command(HOME + [0.0, 0.01, 0.0], DOWN, 1.0, 5.0)
    passed = fast.step(arm, safe, gripper=1.0, now=5.001)
    assert not passed.filtered and passed.command is safe and passed.risk == 0.0


def test_when_no_scale_is_safe_it_holds_and_when_holding_is_risky_it_retreats_along_the_force():
    fast, arm = fast_filter(toward_x(0.001))
    decision = fast.step(arm, Command(HOME + [0.02, 0.0, 0.0], DOWN, 0.5, 5.0), gripper=0.5, now=5.001)
    assert decision.filtered
    np.testing.assert_allclose(decision.command.pos, HOME, atol=1e-9)  # hold the measured pose
    np.testing.assert_allclose(decision.command.rot, DOWN, atol=1e-9)

    def only_up_is_safe(state, deltas):
        return np.where(deltas[:, 2] > 0.005, 0.05, 0.9).astype(np.float32)

    fast, arm = fast_filter(only_up_is_safe, retreat_distance=0.02)
    decision = fast.step(arm, Command(HOME + [0.02, 0.0, 0.0], DOWN, 0.5, 5.0), gripper=0.5, now=5.001)
    assert decision.filtered  # the measured force points up (+z): the retreat is 2 cm up
    np.testing.assert_allclose(decision.command.pos, HOME + [0.0, 0.0, 0.02], atol=1e-7)


def test_escape_steps_are_candidates_when_configured():
    def only_minus_y_is_safe(state, deltas):
        return np.where(deltas[:, 1] < -0.001, 0.0, 1.0).astype(np.float32)

    fast, arm = fast_filter(only_minus_y_is_safe, escape_step=0.003)
    decision = fast.step(arm, Command(HOME, DOWN, 0.5, 5.0), gripper=0.5, now=5.001)
    np.testing.assert_allclose(decision.command.pos, HOME + [0.0, -0.003, 0.0], atol=1e-7)


def test_hysteresis_holds_the_filter_engaged_for_the_dwell_time():
    fast, arm = fast_filter(toward_x(0.006), dwell=0.003)  # 3 ticks at 1 kHz
    risky, calm = Command(HOME + [0.02, 0, 0], DOWN, 1.0, 5.0), Command(HOME + [0.004, 0, 0], DOWN, 1.0, 5.0)
    assert fast.step(arm, risky, 1.0, 5.001).filtered
    engaged = []
    for _ in range(4):
        fast.step(arm, calm, 1.0, 5.001)
        engaged.append(fast.filter.engaged)
    assert engaged == [True, True, False, False]


def test_the_model_is_bypassed_when_missing_stale_failing_slow_or_nan():
    command = Command(HOME + [0.02, 0.0, 0.0], DOWN, 1.0, 5.0)
    fast, arm = fast_filter(None)
    missing = fast.step(arm, command, 1.0, 5.001)
    assert missing.bypass == "no_model" and missing.command is command and math.isnan(missing.risk)
    fast.swap(toward_x(0.006), version=4)
    assert fast.step(arm, command, 1.0, 5.001).filtered and fast.current[1] == 4
    assert fast.step(arm, command, 1.0, 5.02).bypass == "stale_state"  # 20 ms > the 10 ms state timeout

    def broken(state, deltas):
        raise RuntimeError("weights truncated")

    for model, reason in ((broken, "error"), (lambda s, d: np.full(len(d), np.nan), "error")):
        fast.swap(model, version=5)
        decision = fast.step(arm, command, 1.0, 5.001)
        assert decision.bypass == reason and decision.command is command and not decision.filtered
    ticks = iter([0.0, 0.001])  # 1 ms of CPU time > the 200 us deadline
    slow = FastCriticFilter(fast_critic_settings({}), 1000.0, 0.01, toward_x(0.006), clock=lambda: next(ticks))
    slow.motion.update(arm.pos, arm.rot, arm.stamp)
    assert slow.step(arm, command, 1.0, 5.001).bypass == "deadline"
