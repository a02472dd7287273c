"""Fitting the fast-loop risk model: labels from the ticks that follow, a fit that separates risky from safe
commands, and an exported numpy model that scores like the fitted network (standardisation folded in)."""

import numpy as np
import pytest

from robot_rl.core.config import ConfigError
from robot_rl.policies.fast_critic import (
    FastCriticFitSettings,
    fit_fast_risk_model,
    horizon_labels,
    risks_of,
)
from robot_rl.safety.fast_critic import INPUT_WIDTH, STATE_WIDTH


def test_a_tick_is_risky_when_a_violation_follows_within_the_horizon():
    violation = np.array([0, 0, 0, 4, 0, 0, 0, 0, 1])
    assert horizon_labels(violation, 1).tolist() == [0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert horizon_labels(violation, 3).tolist() == [0, 1, 1, 1, 0, 0, 1, 1, 1]
    assert horizon_labels(np.zeros(4), 10).tolist() == [0, 0, 0, 0]


def test_graded_labels_rank_the_ways_out_of_a_violation():
    """Inside a violation every tick is 1 with ``any``; ``graded`` adds the share of the horizon spent violating, so
    the tick that leaves sooner is labelled lower, and a violation ahead still labels a tick above 0.5."""
    stays = np.array([0, 1, 1, 1, 1, 1, 1])
    leaves = np.array([0, 1, 1, 0, 0, 0, 0])
    assert horizon_labels(stays, 4)[1] == horizon_labels(leaves, 4)[1] == 1.0  # any: no difference
    assert horizon_labels(stays, 4, "graded")[1] == pytest.approx(1.0)
    assert horizon_labels(leaves, 4, "graded")[1] == pytest.approx(0.75)  # 2 of 4 ticks: 0.5 + 0.5 * 0.5
    assert horizon_labels(leaves, 4, "graded")[0] == pytest.approx(0.75)  # a violation ahead: above 0.5
    assert horizon_labels(np.zeros(3), 4, "graded").tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="labels='soft'"):
        horizon_labels(stays, 4, "soft")


def synthetic(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features on their physical scales; risky when the commanded step in x exceeds 1 cm (about 10% of rows)."""
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(rows, INPUT_WIDTH)).astype(np.float32)
    features[:, :3] = rng.uniform([0.3, -0.3, 0.0], [0.7, 0.3, 0.4], (rows, 3))  # m
    features[:, 12:15] *= 10.0  # N
    features[:, STATE_WIDTH] = rng.uniform(-0.02, 0.012, rows)  # delta x, m
    return features, (features[:, STATE_WIDTH] > 0.01).astype(np.float32)


def test_the_fit_separates_risky_from_safe_commands_and_the_exported_model_agrees_with_itself():
    features, labels = synthetic(20_000, seed=0)
    model, report = fit_fast_risk_model(features, labels, FastCriticFitSettings(updates=1500, hidden=(32, 32)), seed=0)
    assert 0.02 < report["positive_share"] < 0.2
    assert report["risky_recall"] > 0.9 and report["safe_recall"] > 0.9
    held_out, held_labels = synthetic(2_000, seed=1)
    risks = risks_of(model, held_out)
    assert ((risks > 0.5) == (held_labels > 0.5)).mean() > 0.95
    for row in held_out[:20]:  # the node's path: one state, candidate deltas in a batch
        assert model(row[:STATE_WIDTH], row[None, STATE_WIDTH:])[0] == pytest.approx(
            risks_of(model, row[None])[0], abs=1e-4
        )


def test_bad_fit_settings_are_named():
    features, labels = synthetic(100, seed=0)
    with pytest.raises(ConfigError) as error:
        fit_fast_risk_model(features, labels, FastCriticFitSettings(horizon=0))
    assert error.value.key == "fast_critic.horizon"
    with pytest.raises(ConfigError) as error:
        fit_fast_risk_model(features, labels, FastCriticFitSettings(labels="soft"))
    assert error.value.key == "fast_critic.labels"
    with pytest.raises(ValueError):
        fit_fast_risk_model(features[:, :10], labels, FastCriticFitSettings())


def test_the_online_learner_keeps_the_newest_rows_in_its_ring():
    from robot_rl.policies.fast_critic import FastCriticLearner

    learner = FastCriticLearner(FastCriticFitSettings(horizon=1), capacity=5)
    rows = np.arange(7 * INPUT_WIDTH, dtype=np.float32).reshape(7, INPUT_WIDTH)
    learner.add_episode(rows[:3], np.array([0, 1, 0]))
    assert learner.size == 3 and learner.labels[:3].tolist() == [0, 1, 0]
    learner.add_episode(rows[3:], np.array([0, 0, 0, 1]))  # 7 rows in a ring of 5: rows 2..6 stay
    assert learner.size == 5
    kept = sorted(learner.features[:, 0].tolist())
    assert kept == rows[2:, 0].tolist()
    assert learner.labels[learner.features[:, 0] == rows[6, 0]].tolist() == [1.0]


def test_the_online_learner_takes_the_width_of_its_first_rows_and_resumes_with_it():
    from robot_rl.policies.fast_critic import FastCriticLearner

    config = FastCriticFitSettings(horizon=2, hidden=(8,), batch_size=16)
    empty = FastCriticLearner(config).state_dict()  # a checkpoint before any ticks came
    fresh = FastCriticLearner(config)
    fresh.load_state_dict(empty)
    assert fresh.width is None

    learner = FastCriticLearner(config, capacity=100)
    rows = np.random.default_rng(0).normal(size=(40, INPUT_WIDTH + 6)).astype(np.float32)  # 6 of task context
    learner.add_episode(rows, (rows[:, INPUT_WIDTH] > 1).astype(np.uint32))
    learner.train(5)
    with pytest.raises(ValueError, match="rows of 26 columns; this learner holds rows of 32"):
        learner.add_rows(rows[:, :INPUT_WIDTH], np.zeros(40, np.float32))  # another task's ticks
    resumed = FastCriticLearner(config, capacity=100)
    resumed.load_state_dict(learner.state_dict())
    assert resumed.width == INPUT_WIDTH + 6 and resumed.size == 40
    assert resumed.model().context_width == 6
    np.testing.assert_allclose(risks_of(resumed.model(), rows), risks_of(learner.model(), rows), rtol=1e-6)
