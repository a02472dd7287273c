"""Property tests of the hard safety layer: whatever is proposed, what leaves is inside every limit."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from robot_rl.core.config import ConfigError
from robot_rl.core.geometry import matrix_from_rotvec, rotvec_from_matrix
from robot_rl.safety import ArmState, Command, EStopLatch, SafetyLimits, Violation, enforce, hold
from robot_rl.safety.hard_limits import tool_angle

LIMITS = SafetyLimits()
DOWN = np.diag([1.0, -1.0, -1.0])
HOLDS = Violation.ESTOP | Violation.NONFINITE | Violation.STALE_COMMAND | Violation.STALE_STATE

wild = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e6, 1e6), st.floats(-2, 2))
vec3 = st.lists(wild, min_size=3, max_size=3).map(np.array)
small3 = st.lists(st.floats(-1, 1), min_size=3, max_size=3).map(np.array)


def inside(point):
    return np.all(point >= np.array(LIMITS.workspace_low) - 1e-9) and np.all(
        point <= np.array(LIMITS.workspace_high) + 1e-9
    )


@st.composite
def scenario(draw):
    low, high = np.array(LIMITS.workspace_low), np.array(LIMITS.workspace_high)
    arm_pos = low + (high - low) * np.array(draw(st.lists(st.floats(0, 1), min_size=3, max_size=3)))
    arm_rot = matrix_from_rotvec(draw(small3) * 0.5) @ DOWN
    arm = ArmState(
        arm_pos,
        arm_rot,
        stamp=10.0 - draw(st.floats(0, 0.02)),
        force=draw(st.lists(st.floats(-100, 100), min_size=3, max_size=3).map(np.array)),
        torque=draw(st.lists(st.floats(-10, 10), min_size=3, max_size=3).map(np.array)),
    )
    previous = hold(arm, draw(st.floats(-1, 1)), 9.99)
    rot = draw(
        st.one_of(
            st.just(np.full((3, 3), np.nan)),
            small3.map(lambda v: matrix_from_rotvec(v * 3) @ DOWN),
            st.lists(wild, min_size=9, max_size=9).map(lambda v: np.array(v).reshape(3, 3)),
        )
    )
    command = Command(draw(vec3), rot, draw(wild), stamp=10.0 - draw(st.floats(0, 0.3)))
    return arm, previous, command


@settings(max_examples=600, deadline=None)
@given(scenario(), st.booleans())
def test_output_is_inside_every_limit_for_any_proposal(case, estop):
    arm, previous, command = case
    assume(tool_angle(arm.rot, np.array(LIMITS.cone_axis)) <= LIMITS.cone_half_angle)
    latch = EStopLatch(latched=estop)
    try:
        out, flags = enforce(LIMITS, latch, arm, command, previous, now=10.0)
    except np.linalg.LinAlgError:
        pytest.fail("a bad rotation matrix must not raise")
    assert np.all(np.isfinite(out.pos)) and np.all(np.isfinite(out.rot)) and np.isfinite(out.gripper)
    assert inside(out.pos)
    np.testing.assert_allclose(out.rot @ out.rot.T, np.eye(3), atol=1e-8)
    assert np.linalg.det(out.rot) > 0
    assert tool_angle(out.rot, np.array(LIMITS.cone_axis)) <= LIMITS.cone_half_angle + 1e-6
    assert -1.0 <= out.gripper <= 1.0
    if estop:
        assert flags == Violation.ESTOP
    if not flags & HOLDS:
        assert np.linalg.norm(out.pos - previous.pos) <= LIMITS.max_translation_step + 1e-9
        assert np.linalg.norm(rotvec_from_matrix(out.rot @ previous.rot.T)) <= LIMITS.max_rotation_step + 1e-6
        assert abs(out.gripper - previous.gripper) <= LIMITS.max_gripper_step + 1e-9
    if not command.is_finite() and not estop and arm.stamp >= 10.0 - LIMITS.state_timeout:
        assert flags & Violation.NONFINITE


def good_arm(now):
    return ArmState(np.array([0.5, 0.0, 0.2]), DOWN.copy(), stamp=now)


def test_changes_are_flagged():
    arm = good_arm(0.0)
    previous = hold(arm, 0.0, 0.0)
    far = Command(np.array([2.0, 0.0, 0.2]), DOWN, 1.0, stamp=0.0)
    out, flags = enforce(LIMITS, EStopLatch(), arm, far, previous, now=0.0)
    assert flags == Violation.WORKSPACE | Violation.TRANSLATION_STEP | Violation.GRIPPER_STEP
    assert out.pos[0] == pytest.approx(0.5 + LIMITS.max_translation_step)
    tilted = Command(arm.pos, matrix_from_rotvec(np.array([1.2, 0, 0])) @ DOWN, 0.0, stamp=0.0)
    out, flags = enforce(LIMITS, EStopLatch(), arm, tilted, previous, now=0.0)
    assert flags & Violation.ORIENTATION and flags & Violation.ROTATION_STEP
    within = Command(arm.pos + [0.001, 0, 0], DOWN, 0.1, stamp=0.0)
    assert enforce(LIMITS, EStopLatch(), arm, within, previous, now=0.0)[1] == Violation.NONE


def test_force_above_the_limit_stops_and_retreats_along_the_push():
    arm = good_arm(0.0)
    arm.force = np.array([0.0, 0.0, 60.0])  # the table pushes the tool up
    previous = hold(arm, 0.0, 0.0)
    down = Command(arm.pos - [0, 0, 0.05], DOWN, 0.0, stamp=0.0)
    out, flags = enforce(LIMITS, EStopLatch(), arm, down, previous, now=0.0)
    assert flags & Violation.FORCE
    assert out.pos[2] > arm.pos[2]  # retreats upward instead of pushing down


@settings(max_examples=300, deadline=None)
@given(scenario(), st.floats(0.01, 0.05))
def test_with_max_lead_the_target_stays_that_close_to_the_arm(case, lead):
    """An impedance controller keeps its last target when this layer dies: with ``max_lead`` the arm then goes at
    most that far (``benchmarks/cell_faults.py``: 27 mm without a bound)."""
    arm, previous, command = case
    assume(tool_angle(arm.rot, np.array(LIMITS.cone_axis)) <= LIMITS.cone_half_angle)
    limits = SafetyLimits(max_lead=lead)
    try:
        out, flags = enforce(limits, EStopLatch(), arm, command, previous, now=10.0)
    except np.linalg.LinAlgError:
        return
    if not flags & HOLDS:
        assert np.linalg.norm(out.pos - arm.pos) <= lead + 1e-9


def test_a_target_far_ahead_of_the_arm_is_pulled_back_and_flagged():
    arm = ArmState(np.array([0.45, 0.0, 0.2]), DOWN, stamp=10.0)
    previous = Command(np.array([0.47, 0.0, 0.2]), DOWN, -1.0, 9.99)  # 2 cm ahead already: the arm lags
    command = Command(np.array([0.48, 0.0, 0.2]), DOWN, -1.0, 10.0)
    free, free_flags = enforce(LIMITS, EStopLatch(), arm, command, previous, now=10.0)
    assert not free_flags & Violation.LEAD and free.pos[0] == pytest.approx(0.472)  # one 2 mm step on
    bounded, flags = enforce(SafetyLimits(max_lead=0.01), EStopLatch(), arm, command, previous, now=10.0)
    assert flags & Violation.LEAD and bounded.pos == pytest.approx([0.46, 0.0, 0.2])
    with pytest.raises(ConfigError, match="max_lead"):
        SafetyLimits(max_lead=0.0)


def test_watchdogs_with_a_fake_clock():
    clock = 100.0
    arm = good_arm(clock)
    previous = hold(arm, 0.0, clock)
    command = Command(arm.pos + [0.001, 0, 0], DOWN, 0.0, stamp=clock)
    assert enforce(LIMITS, EStopLatch(), arm, command, previous, now=clock + 0.005)[1] == Violation.NONE
    # stale state: 10 ms default
    out, flags = enforce(LIMITS, EStopLatch(), arm, command, previous, now=clock + 0.011)
    assert flags == Violation.STALE_STATE and np.allclose(out.pos, previous.pos)
    # stale command: 100 ms default, while the state is fresh
    arm.stamp = clock + 0.101
    out, flags = enforce(LIMITS, EStopLatch(), arm, command, previous, now=clock + 0.101)
    assert flags == Violation.STALE_COMMAND and np.allclose(out.pos, arm.pos)
    command.stamp = clock + 0.101
    assert enforce(LIMITS, EStopLatch(), arm, command, previous, now=clock + 0.101)[1] == Violation.NONE


def test_estop_latches_until_reset():
    arm = good_arm(0.0)
    previous = hold(arm, 0.0, 0.0)
    command = Command(arm.pos + [0.001, 0, 0], DOWN, 0.0, stamp=0.0)
    latch = EStopLatch()
    latch.trigger()
    for tick in range(3):  # stays latched, whatever comes in
        out, flags = enforce(LIMITS, latch, arm, command, previous, now=0.0)
        assert flags == Violation.ESTOP and np.allclose(out.pos, arm.pos)
    latch.reset()
    assert enforce(LIMITS, latch, arm, command, previous, now=0.0)[1] == Violation.NONE


@pytest.mark.parametrize(
    "field, value",
    [
        ("workspace_low", (1.0, 0.0, 0.0)),
        ("cone_half_angle", 2.0),
        ("max_translation_step", 0.0),
        ("command_timeout", float("nan")),
    ],
)
def test_bad_limits_name_the_key(field, value):
    with pytest.raises(ConfigError, match=f"safety.{field}"):
        SafetyLimits(**{field: value})
