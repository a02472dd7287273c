"""The pure parts of benchmarks/graph_learning.py: its command line, the figures it reads from a launch's output,
the control-period percentiles and the result file it assembles from run records (no training here)."""

import json

import numpy as np
import pytest

from benchmarks.graph_learning import (
    FULL_STEPS,
    KEYS,
    PATHS,
    QUICK_STEPS,
    assemble,
    earlier_runs,
    graph_figures,
    merge_runs,
    parse_args,
    percentiles_ms,
)


def test_the_command_line_defaults_to_three_seeds_and_quick_to_one_short_seed():
    full, quick = parse_args([]), parse_args(["--quick"])
    assert (full.env_steps, full.seeds, full.name, full.paths) == (FULL_STEPS, [0, 1, 2], "graph_learning", list(PATHS))
    assert (quick.env_steps, quick.seeds, quick.name) == (QUICK_STEPS, [0], "graph_learning_quick")
    chosen = parse_args(["--quick", "--env-steps", "300", "--seeds", "4", "5", "--paths", "graph_sim_time"])
    assert (chosen.env_steps, chosen.seeds, chosen.name, chosen.paths) == (
        300,
        [4, 5],
        "graph_learning_quick",
        ["graph_sim_time"],
    )


@pytest.mark.parametrize("argv", [["--env-steps", "0"], ["--env-steps", "-5"], ["--paths", "graph"]])
def test_a_bad_command_line_exits_2(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        parse_args(argv)
    assert stop.value.code == 2 and "error:" in capsys.readouterr().err


def actor_line(record: dict) -> str:
    return f"[actor] [INFO] [1795000000.123456789] [robot_rl_actor]: {json.dumps(record)}"


LAUNCH_OUTPUT = "\n".join(
    [
        "[launch] starting sim_robot, safety, learner, recorder, actor",
        actor_line({"kind": "demo", "episode": 1, "env_steps": 0, "interventions": 40, "success": True}),
        actor_line({"kind": "train", "episode": 2, "env_steps": 100, "interventions": 15, "success": False}),
        '[learner] [INFO] [1795000001.0] [robot_rl_learner]: {"kind": "update", "interventions": 99}',
        actor_line({"kind": "train", "episode": 3, "env_steps": 160, "interventions": 30, "success": True}),
        actor_line({"kind": "eval", "episode": 3, "env_steps": 160, "success_rate": 0.4, "mean_length": 70.0}),
        actor_line({"kind": "paused", "episode": 3, "env_steps": 160, "reason": "stalled", "topic": "/rl/state"}),
        actor_line({"kind": "train", "episode": 4, "env_steps": 250, "interventions": 0, "success": True}),
        actor_line({"kind": "eval", "episode": 4, "env_steps": 250, "success_rate": 0.8, "mean_length": 50.0}),
        (
            "[actor] [INFO] [1795000002.0] [robot_rl_actor]: actor done: 250 env steps, 4 episodes in 31 s; 290 transitions "
            "sent, 0 episodes recorded in the actor's store"
        ),
        "[launch] actor exited 0; stopping the graph",
    ]
)


def test_the_graph_figures_come_from_the_actor_records_of_training_episodes():
    figures = graph_figures(LAUNCH_OUTPUT)
    assert figures == {
        "success_at": {"160": 0.4, "250": 0.8},
        "intervention_steps": 45,  # demos, learner not counted
        "online_steps": 250,
        "wall_seconds": 31.0,
        "tracebacks": 0,
    }


def test_a_traceback_in_the_graph_output_is_an_error_and_a_missing_actor_end_fails():
    output = LAUNCH_OUTPUT + "\n[sim_robot] Traceback (most recent call last):\n[sim_robot] RuntimeError: boom\n"
    figures = graph_figures(output)
    assert figures["tracebacks"] == 1
    assert "1 traceback(s)" in figures["error"] and "RuntimeError: boom" in figures["error"]
    assert figures["intervention_steps"] == 45  # the measurements stay beside the error
    with pytest.raises(RuntimeError, match="actor done"):
        graph_figures(LAUNCH_OUTPUT.replace("actor done", "actor stopped"))


def test_control_period_percentiles_come_from_the_steps_within_each_episode():
    stamps = [np.array([0.0, 0.1, 0.2, 0.35]), np.array([10.0, 10.1])]  # the gap between episodes is no period
    figures = percentiles_ms(stamps)
    assert set(figures) == {"p50", "p90", "p99"} and figures["p50"] == 100.0 and 140.0 < figures["p99"] <= 150.0
    assert percentiles_ms([np.array([1.0])]) is None


def run(success, interventions, per_s, period=100.0):
    return {
        "success": success,
        "intervention_steps": interventions,
        "env_steps_per_s": per_s,
        "success_at": {"1000": success},
        "control_period_ms": {"p50": period, "p90": period, "p99": period},
        "wall_step_ms": round(1e3 / per_s, 1),
        "online_steps": 1200,
        "wall_seconds": 1200 / per_s,
    }


def test_the_result_keys_every_figure_by_path_and_seed_and_sets_each_graph_beside_the_in_process_loop():
    runs = {
        "in_process": {"0": run(1.0, 100, 20.0, 25.0), "1": run(0.8, 200, 20.0, 25.0)},
        "graph_sim_time": {"0": run(0.9, 165, 10.0), "1": {"error": "RuntimeError: robot-rl launch exited 1"}},
        "graph_real_time": {"0": run(0.5, 300, 5.0), "1": run(0.7, 300, 5.0)},
    }
    result = assemble(runs, 1200, [0, 1])
    assert (result["env_steps"], result["seeds"]) == (1200, [0, 1])
    for key in KEYS:
        assert set(result[key]) == set(PATHS) and all(set(by_seed) == {"0", "1"} for by_seed in result[key].values())
    assert result["success"]["graph_sim_time"] == {"0": 0.9, "1": None}  # the failed seed has no figure
    assert result["control_period_ms"]["in_process"]["1"]["p50"] == 25.0
    assert result["intervention_steps"]["graph_real_time"] == {"0": 300, "1": 300}
    summary = result["summary"]
    assert summary["in_process"] == {
        "success": 0.9,
        "success_median": 0.9,
        "intervention_steps": 150.0,
        "env_steps_per_s": 20.0,
    }
    assert summary["graph_sim_time"]["success"] == 0.9  # the failed seed is left out, not counted as zero
    assert summary["graph_sim_time_vs_in_process"] == {
        "success_difference": 0.0,
        "intervention_steps_ratio": 1.1,
        "env_steps_per_s_ratio": 0.5,
    }
    assert summary["graph_real_time_vs_in_process"] == {
        "success_difference": -0.3,
        "intervention_steps_ratio": 2.0,
        "env_steps_per_s_ratio": 0.25,
    }
    json.dumps(result)  # the result file is plain JSON


def test_a_path_without_any_finished_seed_has_no_ratio():
    summary = assemble(
        {"in_process": {"0": run(1.0, 100, 20.0)}, "graph_sim_time": {"0": {"error": "timed out"}}}, 1200, [0]
    )["summary"]
    assert summary["graph_sim_time"]["success"] is None and summary["graph_real_time"]["success"] is None
    assert "graph_sim_time_vs_in_process" not in summary and "graph_real_time_vs_in_process" not in summary


def test_merge_adds_seeds_run_in_another_sitting_and_a_rerun_replaces_its_record(tmp_path):
    earlier = {"in_process": {"0": {"success": 1.0}}, "graph_sim_time": {"0": {"success": 0.0}}}
    new = {"graph_sim_time": {"0": {"success": 0.9}, "1": {"success": 1.0}}, "in_process": {"1": {"success": 0.8}}}
    merged = merge_runs(earlier, new)
    assert merged == {
        "in_process": {"0": {"success": 1.0}, "1": {"success": 0.8}},
        "graph_sim_time": {"0": {"success": 0.9}, "1": {"success": 1.0}},
    }
    assert earlier["graph_sim_time"]["0"] == {"success": 0.0}  # the earlier runs are not changed in place
    result = tmp_path / "graph_learning.json"
    assert earlier_runs(result, 12_000) == ({}, [])  # nothing yet: nothing to merge
    result.write_text(
        json.dumps(
            {
                "env_steps": 12_000,
                "command": "python -m benchmarks.graph_learning --seeds 0",
                "figures": {"runs": earlier},
            }
        )
    )
    assert earlier_runs(result, 12_000) == (earlier, ["python -m benchmarks.graph_learning --seeds 0"])
    with pytest.raises(ValueError, match="env_steps=12000, expected 6000"):
        earlier_runs(result, 6_000)  # another budget: not comparable


def test_an_interrupted_benchmark_keeps_every_finished_run(tmp_path, monkeypatch):
    """The result file is written after every run: a benchmark stopped in its third run (Ctrl-C, a crash, the end
    of a session) keeps the two it finished. It was written once, at the end, so hours of runs were lost."""
    import benchmarks.common
    import benchmarks.graph_learning as benchmark

    monkeypatch.setattr(benchmark, "RESULTS", tmp_path)
    monkeypatch.setattr(benchmarks.common, "RESULTS", tmp_path)
    finished: list[tuple[str, int]] = []

    def run_path(path, folder, seed, steps, timeout):
        if len(finished) == 2:
            raise KeyboardInterrupt
        finished.append((path, seed))
        return {"success": 1.0, "success_at": {"1200": 1.0}, "intervention_steps": 10, "env_steps_per_s": 5.0}

    monkeypatch.setattr(benchmark, "run_path", run_path)
    with pytest.raises(KeyboardInterrupt):
        benchmark.main(["--paths", "in_process", "graph_sim_time", "--seeds", "0", "1", "--env-steps", "1200"])
    result = json.loads((tmp_path / "graph_learning.json").read_text())
    assert result["success"] == {"in_process": {"0": 1.0}, "graph_sim_time": {"0": 1.0}}
    assert result["summary"]["graph_sim_time_vs_in_process"]["success_difference"] == 0.0
    assert (tmp_path / "graph_learning.png").exists() and not list(tmp_path.glob(".*.partial"))
