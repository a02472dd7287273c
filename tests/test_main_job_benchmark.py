"""The main job benchmark's figures (issue 49): the first 90%, the worst fall after it, medians over seeds."""

from benchmarks.main_job import median_or_none, seed_record, worst_drop_after


def history(*successes: float) -> list[dict]:
    return [
        {
            "env_steps": 500 * (k + 1),
            "success_rate": s,
            "intervention_rate": 0.1,
            "wall_seconds": 20.0 * (k + 1),
            "alpha": 0.01,
            "entropy": -2.0,
            "episodes": 20,
        }
        for k, s in enumerate(successes)
    ]


def test_the_worst_drop_counts_only_from_the_first_ninety_percent_on():
    assert abs(worst_drop_after(history(0.0, 0.5, 0.95, 1.0, 0.7, 0.9)) - 0.3) < 1e-9
    assert worst_drop_after(history(0.9, 0.0, 0.0)) == 0.9  # the late collapse of issue 49
    assert worst_drop_after(history(0.2, 0.0, 0.5)) is None  # never reached 90%: no figure
    assert worst_drop_after(history(0.0, 0.9, 1.0, 1.0)) == 0.0


def test_a_seed_record_names_the_first_ninety_percent_and_the_end():
    record = seed_record(
        {
            "eval_history": history(0.1, 0.95, 1.0),
            "final_eval_success": 1.0,
            "final_eval_mean_length": 26.0,
            "env_steps": 1500,
            "intervention_steps": 40,
            "takeover_rate_last_2000": 0.02,
        },
        80.0,
    )
    assert (record["steps_to_90"], record["seconds_to_90"], record["worst_drop_after_90"]) == (1000, 40.0, 0.0)
    assert record["eval_history"][0] == (500, 0.1, 0.1, 20.0, 0.01, -2.0)
    assert record["takeover_rate_last_2000"] == 0.02


def test_a_seed_that_never_got_there_counts_as_late_in_the_median():
    assert median_or_none([1000, None, 3000]) == 3000
    assert median_or_none([1000, None, None]) is None
    assert median_or_none([1000, 2000, 3000, 4000]) == 2500
