"""The learned safety filter: line search, recovery, hysteresis, bypass on deadline / NaN / errors."""

import numpy as np
import pytest

from robot_rl.core.config import ConfigError
from robot_rl.safety.filter import FilterSettings, SafetyFilter


def risk_of_speed(limit: float):
    """Risk 1 when the Cartesian step is longer than ``limit``, else 0 (a hand-made risk model)."""
    return lambda state, actions: (np.linalg.norm(actions[:, :-1], axis=1) > limit).astype(float)


def test_line_search_takes_the_largest_safe_scale_and_keeps_the_gripper():
    safety = SafetyFilter(risk_of_speed(0.6), FilterSettings(dwell_steps=0))
    result = safety(np.zeros(3), np.array([1.0, 0.0, 0.0, 0.7]))
    assert result.intervened and result.engaged
    np.testing.assert_allclose(result.action, [0.5, 0.0, 0.0, 0.7])  # scale 0.5: norm 0.5 < 0.6
    result = safety(np.zeros(3), np.array([0.0, 0.3, 0.0, -1.0]))  # safe: passes, released (dwell 0)
    np.testing.assert_allclose(result.action, [0.0, 0.3, 0.0, -1.0])
    assert not result.intervened and not result.engaged


def test_no_safe_scale_falls_back_to_holding():
    safety = SafetyFilter(risk_of_speed(0.1))
    result = safety(np.zeros(3), np.array([1.0, 1.0, 0.0, 1.0]))
    np.testing.assert_allclose(result.action, [0.0, 0.0, 0.0, 1.0])  # hold the pose, gripper unchanged
    assert result.intervened


def test_inside_a_hazard_the_least_risky_escape_beats_holding_still():
    def keep_out(state, actions):
        """Risk falls only for a step in +x (out of a zone the arm is in); holding keeps it at 0.9."""
        return np.where(actions[:, 0] > 0.1, 0.2 - 0.1 * actions[:, 0], 0.9)

    safety = SafetyFilter(keep_out, FilterSettings(scales=(1.0, 0.5), escape_step=0.5))
    result = safety(np.zeros(3), np.array([-1.0, 0.0, 0.0, -1.0]))  # heads deeper in
    np.testing.assert_allclose(result.action, [0.5, 0.0, 0.0, -1.0])  # the +x escape, gripper unchanged
    assert result.intervened and result.engaged
    holding = SafetyFilter(keep_out, FilterSettings(scales=(1.0, 0.5), escape_step=0.0))
    np.testing.assert_allclose(holding(np.zeros(3), np.array([-1.0, 0.0, 0.0, -1.0])).action, [0.0, 0.0, 0.0, -1.0])


def test_when_nothing_is_safe_a_proposed_action_that_leads_out_is_not_replaced_by_a_riskier_hold():
    def keep_out(state, actions):
        """Inside a zone: every candidate above threshold_off, the proposed step in +x (out) the least risky."""
        return np.where(actions[:, 0] > 0.75, 0.3, np.where(actions[:, 0] > 0.4, 0.5, 0.9))

    safety = SafetyFilter(keep_out, FilterSettings(scales=(1.0, 0.5), escape_step=0.0))
    result = safety(np.zeros(3), np.array([1.0, 0.0, 0.0, -1.0]))
    np.testing.assert_allclose(result.action, [1.0, 0.0, 0.0, -1.0])  # not the hold (0.9) nor half the step (0.5)
    assert result.engaged and not result.intervened


def test_hysteresis_releases_only_after_the_dwell_time_below_the_off_threshold():
    current = {}

    def risk(state, actions):  # the step's risk for every move, none for holding still
        return np.where(np.abs(actions[:, :3]).sum(axis=1) > 0, current["value"], 0.0)

    safety = SafetyFilter(risk, FilterSettings(threshold_on=0.25, threshold_off=0.1, dwell_steps=3))
    engaged = []
    for value in [0.3, 0.2, 0.05, 0.05, 0.2, 0.05, 0.05, 0.05, 0.05]:
        current["value"] = value
        engaged.append(safety(np.zeros(3), np.array([0.5, 0.0, 0.0, 0.0])).engaged)
    # on at 0.3; 0.2 is between the thresholds (stays on); two calm steps, then 0.2 resets the count;
    # released on the third calm step in a row
    assert engaged == [True, True, True, True, True, True, True, False, False]


def test_hysteresis_holds_the_executed_action_below_the_off_threshold_while_engaged():
    """Risk 0.3 x the Cartesian step's length: between threshold_off=0.1 and threshold_on=0.25 the action
    passes when the filter is released, and is scaled down to below 0.1 while it is engaged."""
    safety = SafetyFilter(
        lambda state, actions: 0.3 * np.linalg.norm(actions[:, :-1], axis=1),
        FilterSettings(threshold_on=0.25, threshold_off=0.1, dwell_steps=2),
    )
    state, between = np.zeros(3), np.array([0.5, 0.0, 0.0, 1.0])  # risk 0.15
    engaging = safety(state, np.array([1.0, 0.0, 0.0, 1.0]))  # risk 0.3: engages
    np.testing.assert_allclose(engaging.action, [0.25, 0.0, 0.0, 1.0])  # scale 0.25: risk 0.075 < 0.1
    held = safety(state, between)
    assert held.engaged and held.intervened and held.risk == pytest.approx(0.15)
    np.testing.assert_allclose(held.action, [0.25, 0.0, 0.0, 1.0])  # scale 0.5: risk 0.075
    calm = np.array([0.2, 0.0, 0.0, 1.0])  # risk 0.06: passes unchanged, counts towards the release
    assert [not safety(state, calm).intervened for _ in range(2)] == [True, True] and not safety.engaged
    released = safety(state, between)
    assert not released.intervened and not released.engaged
    np.testing.assert_array_equal(released.action, between)
    assert safety.interventions == 2


def test_a_slow_or_broken_risk_model_is_bypassed():
    ticks = iter([0.0, 0.01])  # 10 ms > the 2 ms deadline
    slow = SafetyFilter(lambda s, a: np.zeros(len(a)), clock=lambda: next(ticks))
    result = slow(np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))
    assert result.bypassed and not result.intervened and np.isnan(result.risk)
    np.testing.assert_array_equal(result.action, [1.0, 0.0, 0.0, 0.0])
    nan = SafetyFilter(lambda s, a: np.full(len(a), np.nan))
    assert nan(np.zeros(3), np.ones(4)).bypassed

    def broken(state, actions):
        raise RuntimeError("model file truncated")

    failing = SafetyFilter(broken)
    assert failing(np.zeros(3), np.ones(4)).bypassed and failing.bypasses == 1


@pytest.mark.parametrize(
    "values, key",
    [
        ({"threshold_on": 0.2, "threshold_off": 0.3}, "safety.filter.threshold_off"),
        ({"threshold_on": 0.0}, "safety.filter.threshold_on"),
        ({"scales": (1.0, 2.0)}, "safety.filter.scales"),
        ({"scales": (0.5, 0.25)}, "safety.filter.scales"),  # the first row must be the proposed action itself
        ({"deadline_s": 0.0}, "safety.filter.deadline_s"),
    ],
)
def test_inconsistent_filter_settings_fail_at_start_up(values, key):
    with pytest.raises(ConfigError) as error:
        FilterSettings(**values)
    assert error.value.key == key


def test_a_recoveries_builder_replaces_hold_and_escapes_with_rows_made_from_the_state():
    """The safety node's fast loop builds its recovery rows from the measured state (a retreat along the force)."""

    def recoveries(state, action):
        return np.array([[0.0, 0.0, 0.0, action[-1]], [*state[:3], action[-1]]], np.float32)

    def only_the_retreat_is_safe(state, actions):
        return np.where(actions[:, 2] > 0.5, 0.0, 1.0)

    safety = SafetyFilter(only_the_retreat_is_safe, FilterSettings(scales=(1.0, 0.5)), recoveries=recoveries)
    state, action = np.array([0.0, 0.0, 0.8]), np.array([1.0, 0.0, 0.0, 0.3])
    np.testing.assert_allclose(
        safety.candidates(action, state),
        [[1.0, 0.0, 0.0, 0.3], [0.5, 0.0, 0.0, 0.3], [0.0, 0.0, 0.0, 0.3], [0.0, 0.0, 0.8, 0.3]],
    )
    result = safety(state, action)
    assert result.intervened
    np.testing.assert_allclose(result.action, [0.0, 0.0, 0.8, 0.3])


def test_a_released_filter_scores_the_proposed_action_alone_until_it_is_risky():
    """Most ticks pass a calm command: the model scores that one row; a risky one, or any while engaged, is scored
    with all its candidates."""
    calls = []
    limit = {"value": 2.0}

    def risk(state, actions):
        calls.append(len(actions))
        return (np.linalg.norm(actions[:, :-1], axis=1) > limit["value"]).astype(float)

    safety = SafetyFilter(risk, FilterSettings(dwell_steps=1, escape_step=0.0, scales=(1.0, 0.5, 0.25)))
    assert not safety(np.zeros(3), np.array([1.0, 0.0, 0.0, 1.0])).intervened
    assert calls == [1]
    limit["value"] = 0.6
    result = safety(np.zeros(3), np.array([1.0, 0.0, 0.0, 1.0]))
    np.testing.assert_allclose(result.action, [0.5, 0.0, 0.0, 1.0])  # the same choice as a full batch
    assert calls == [1, 1, 3]  # the proposed row, then the other two scales and the hold
    safety(np.zeros(3), np.array([0.1, 0.0, 0.0, 1.0]))  # engaged: every candidate, then released (dwell 1)
    safety(np.zeros(3), np.array([0.1, 0.0, 0.0, 1.0]))
    assert calls == [1, 1, 3, 4, 1]
