"""The seed-baselines benchmark's figures (issue 54): means over seeds, thresholds over the seeds that reach them,
and a runs folder that is never overwritten."""

import subprocess
import sys

from benchmarks.seed_baselines import SECTIONS, summarise


def run(success: float, to_90: int | None, jerk: float, violations: float) -> dict:
    return {
        "final_eval_success": success,
        "first_eval_success": 0.0,
        "best_eval_success": success,
        "first_eval_return": -90.0,
        "final_eval_return": -60.0,
        "steps_to_80": to_90,
        "steps_to_90": to_90,
        "jerk": jerk,
        "violations_per_100_episodes": violations,
        "filter_interventions_per_100_episodes": 0.0,
        "wall_seconds": 60.0,
    }


def test_means_over_seeds_and_thresholds_over_the_seeds_that_reach_them():
    figures = summarise({"bang_bang": {"seed0": run(1.0, 1000, 1.5, 0.0), "seed1": run(0.5, None, 1.7, 20.0)}})
    bang = figures["bang_bang"]
    assert (bang["final_eval_success"], bang["violations_per_100_episodes"], bang["seeds"]) == (0.75, 10.0, 2)
    assert abs(bang["jerk"] - 1.6) < 1e-9
    assert bang["steps_to_90"] == {"env_steps": 1000.0, "seeds_reached": 1}
    nan_jerk = summarise({"open_loop": {"seed0": run(0.0, None, float("nan"), 0.0)}})["open_loop"]
    assert nan_jerk["jerk"] is None and nan_jerk["steps_to_90"] == {"env_steps": None, "seeds_reached": 0}


def test_every_section_compares_variants_that_train_through_config_groups():
    assert set(SECTIONS) == {"lagrangian", "bang_bang", "open_loop", "ssl"}
    groups = {
        override.split("=")[0] for _, _, variants, _ in SECTIONS.values() for o in variants.values() for override in o
    }
    assert {"agent", "exploration", "ssl"} <= groups


def test_an_existing_runs_folder_is_refused_in_one_line(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "keep.txt").write_text("a user's file")
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.seed_baselines", "--section", "open_loop", "--runs", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"robot-rl: error: runs={tmp_path / 'runs'}; expected a new folder"]
    assert (tmp_path / "runs" / "keep.txt").read_text() == "a user's file"
