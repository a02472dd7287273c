"""The pure parts of benchmarks/graph_learning.py: the control-period figures and the summary of the runs."""

import numpy as np

from benchmarks.graph_learning import percentiles_ms, summarize


def test_control_period_percentiles_come_from_the_steps_within_each_episode():
    stamps = [np.array([0.0, 0.1, 0.2, 0.35]), np.array([10.0, 10.1])]  # the gap between episodes is no period
    figures = percentiles_ms(stamps)
    assert figures["p50"] == 100.0 and figures["p99"] > 140.0 and set(figures) == {"p50", "p90", "p99"}
    assert percentiles_ms([np.array([1.0])]) is None


def test_the_summary_sets_the_graph_in_sim_time_beside_the_in_process_loop():
    runs = {"in_process": {"0": {"success": 1.0, "intervention_steps": 100, "env_steps_per_s": 20.0},
                           "1": {"success": 0.8, "intervention_steps": 200, "env_steps_per_s": 20.0}},
            "graph_sim_time": {"0": {"success": 0.9, "intervention_steps": 165, "env_steps_per_s": 10.0},
                               "1": {"error": "failed"}},
            "graph_real_time": {}}
    summary = summarize(runs)
    assert summary["in_process"] == {"success": 0.9, "intervention_steps": 150.0, "env_steps_per_s": 20.0}
    assert summary["graph_sim_time"]["success"] == 0.9  # the failed seed is left out, not counted as zero
    assert summary["graph_sim_time_vs_in_process"] == {"success_difference": 0.0, "intervention_steps_ratio": 1.1,
                                                       "env_steps_per_s_ratio": 0.5}
    assert summary["graph_real_time"]["success"] is None
