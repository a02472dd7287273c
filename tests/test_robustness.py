"""Randomized training records its samples; `robot-rl eval randomization=<set>` sweeps perturbations."""

import csv
import json

import pytest

from robot_rl.cli.main import main
from robot_rl.data import EpisodeStore
from robot_rl.runtime.train import train
from tests.test_train import small_run


@pytest.mark.slow
def test_randomized_training_records_samples_and_eval_sweeps_a_set(tmp_path, capsys):
    train(
        small_run(
            tmp_path,
            "task=pick_cube",
            "randomization=dynamics",
            "train.env_steps=60",
            "train.eval_every=60",
            "train.final_eval_episodes=1",
            "train.demo_episodes=1",
        )
    )
    run = tmp_path / "run"
    store = EpisodeStore.open(run / "episodes.zarr")
    samples = [store.episode_attrs(name)["randomization"] for name in store.episode_names()]
    assert set(samples[0]) == {
        "object_mass",
        "object_friction",
        "table_friction",
        "joint_damping",
        "stiffness_pos",
        "damping_pos",
    }
    assert samples[0]["object_mass"]["cube"] != samples[1]["object_mass"]["cube"]  # a new sample per episode
    capsys.readouterr()
    assert (
        main(
            [
                "eval",
                "task=pick_cube",
                "randomization=heldout",
                f"eval.checkpoint={run / 'checkpoint'}",
                "eval.episodes=2",
                "eval.grid_points=2",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["randomization"] == "heldout"
    assert [row["entry"] for row in report["table"]] == ["nominal"] + [
        name for name in ("stiffness_pos", "state_noise", "action_delay", "object_mass") for _ in range(2)
    ]
    assert [row["value"] for row in report["table"][1:3]] == [0.1, 0.3]
    with open(report["files"]["csv"]) as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 9 and all(0.0 <= float(row["success_rate"]) <= 1.0 for row in rows)
    assert (run / "robustness_heldout" / "robustness.png").stat().st_size > 1000


def test_a_bad_randomization_key_is_named(tmp_path):
    import pytest

    from robot_rl.core.config import ConfigError

    with pytest.raises(ConfigError) as error:
        train(small_run(tmp_path, "task=pick_cube", "randomization=dynamics", "+randomization.speed=3"))
    assert error.value.key == "randomization.speed"
