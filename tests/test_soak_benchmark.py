"""The soak benchmark's figures (benchmarks/soak.py) from samples and actor records made here."""

from benchmarks.soak import figures_of, node_name, sample_process, steps_per_s


def soak_samples(minutes: int, growth_mb_per_minute: dict[str, float]) -> list[dict]:
    start = 1_000_000.0
    return [
        {
            "minute": minute,
            "wall": start + 60 * minute,
            "nodes": {
                name: {"rss_mb": 100 + rate * minute, "open_files": 20, "threads": 10 + (minute > 5)}
                for name, rate in growth_mb_per_minute.items()
            },
        }
        for minute in range(minutes + 1)
    ]


def records(start: float, steps_per_s_by_minute) -> list[tuple[float, dict]]:
    out, steps = [], 0
    for minute, rate in enumerate(steps_per_s_by_minute):
        for second in range(0, 60, 10):
            steps += rate * 10
            out.append((start + 60 * minute + second, {"kind": "train", "env_steps": steps}))
    return out


def test_growth_after_the_replay_fills_and_the_speed_of_the_first_and_last_ten_minutes():
    samples = soak_samples(40, {"learner_node": 2.0, "actor_node": 0.0})  # 120 MB/h and flat
    rates = [20] * 20 + [17] * 20  # the last ten minutes at 0.85x
    figures = figures_of(samples, records(samples[0]["wall"], rates), capacity=20 * 60 * 5)
    assert abs(figures["replay_full_at_minutes"] - 5.0) < 0.25
    assert abs(figures["rss_growth_mb_per_hour"]["learner_node"] - 120.0) < 1e-6
    assert abs(figures["rss_growth_mb_per_hour"]["actor_node"]) < 1e-6
    assert figures["threads_growth"]["learner_node"] == 1  # from the first sample after the replay filled (min 5)
    assert abs(figures["steps_per_s_first_10min"] - 20.0) < 0.5
    assert abs(figures["last_over_first"] - 0.85) < 0.02
    assert figures["targets"] == {"rss_growth_mb_per_hour_max": 120.0, "rss_growth_met": False, "speed_met": False}
    assert steps_per_s([], 0.0, 1.0) is None


def test_this_process_is_sampled_and_only_robot_rl_nodes_are_named():
    import os

    figures = sample_process(os.getpid())
    assert figures["rss_mb"] > 10 and figures["open_files"] >= 3 and figures["threads"] >= 1
    assert node_name(os.getpid()) is None  # pytest, not a node
    assert sample_process(2**22 + 1) is None  # no such process
