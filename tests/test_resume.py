"""One resume rule (issue 50 item 1): a run folder is continued only with ``train.resume=true``, with its own
``config.yaml`` (a run-defining override refused, budget and evaluation keys recorded), by ``robot-rl train`` and
``robot-rl launch`` alike; and the launcher's signals, the fast critic's rate and the final evaluation's word."""

from __future__ import annotations

import shutil
import signal

import pytest
import yaml

from robot_rl.cli.main import main
from robot_rl.core.composed_config import load_config
from tests.test_bad_input import snapshot

TINY = [
    "task=reach",
    "train.env_steps=60",
    "train.demo_episodes=2",
    "train.eval_every=60",
    "train.final_eval_episodes=1",
    "train.batch_size=32",
    "train.start_training=20",
]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A finished 60-step reach run made with 2 demonstrations (the default is 20)."""
    run = tmp_path_factory.mktemp("resume") / "run"
    assert main(["train", *TINY, f"train.run_dir={run}"]) == 0
    return run


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("robot-rl: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_a_run_resumed_without_overrides_runs_its_own_config(tiny_run, tmp_path, capsys):
    """Before, the command line won: the default pick_cube task was refused by the checkpoint, and with task=reach
    the resumed run played 18 more demonstrations (train.demo_episodes' default, 20)."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    code = main(["train", f"train.run_dir={run}", "train.resume=true", "train.env_steps=80", "train.eval_every=80"])
    assert code == 0, capsys.readouterr().err
    summary = yaml.safe_load((run / "summary.json").read_text())
    config = (run / "config.yaml").read_text()
    saved = yaml.safe_load(config)
    assert summary["task"] == "reach" and summary["env_steps"] == 80
    assert summary["demo_episodes"] == saved["train"]["demo_episodes"] == 2  # no demonstration played again
    assert (
        saved["train"]["env_steps"] == 80 and saved["train"]["batch_size"] == 32
    )  # the budget recorded, the rest kept
    first = config.splitlines()[0]
    assert first.startswith("# resumed 20") and "train.env_steps 60 -> 80" in first and "eval_every 60 -> 80" in first
    assert not list(run.glob(".config.yaml.*"))  # written through a temporary sibling, renamed


@pytest.mark.parametrize(
    "override, key, given, saved",
    [
        ("train.demo_episodes=5", "train.demo_episodes", "5", "2"),
        ("train.demo_episodes=20", "train.demo_episodes", "20", "2"),  # the default, given: still the user's
        ("task=pick_cube", "task.name", "'pick_cube'", "'reach'"),
        ("exploration=gsde", "agent.exploration", "'gsde'", "'gaussian'"),
        ("seed=3", "seed", "3", "0"),
        ("human.stall_steps=4", "human.stall_steps", "4", "10"),
        # the reward's settings (issue 72 item 8): another reward under a buffer labelled with the run's
        ("classifier.threshold=0.9", "classifier.threshold", "0.9", "None"),
        ("classifier.target_false_success=0.1", "classifier.target_false_success", "0.1", "0.05"),
        ("classifier.out=other.pt", "classifier.out", "'other.pt'", "'${train.run_dir}/reward_classifier.pt'"),
    ],
)
def test_an_override_that_changes_what_the_run_is_is_refused(tiny_run, capsys, override, key, given, saved):
    before = snapshot(tiny_run)
    quick = ["train.env_steps=80", "train.final_eval_episodes=1"]  # the old code ran it: keep that short
    task = [] if override.startswith("task=") else ["task=reach"]  # so the old code's checkpoint check passes
    assert main(["train", *task, f"train.run_dir={tiny_run}", "train.resume=true", *quick, override]) == 2
    err = one_error_line(capsys)
    assert f"error: {key}={given} is not allowed: expected {saved} as the run was made" in err, err
    assert snapshot(tiny_run) == before  # nothing written, config.yaml included


class _Started(Exception):
    """Raised instead of starting a graph's nodes."""


@pytest.fixture
def no_nodes(monkeypatch):
    """``robot-rl launch`` with its Launcher stopped before the first node: the overrides every node would get."""
    from robot_rl.cli import graph

    given = []

    def run(self) -> int:
        given.append(list(self.overrides))
        given.append(signal.getsignal(signal.SIGINT))
        return 0

    monkeypatch.setattr(graph.Launcher, "run", run)
    return given


def test_launch_on_an_existing_run_folder_without_resume_refuses_before_any_node(tiny_run, no_nodes, capsys):
    before = snapshot(tiny_run)
    assert main(["launch", "sim_train", f"train.run_dir={tiny_run}"]) == 2
    err = one_error_line(capsys)
    assert f"train.run_dir='{tiny_run}'" in err and "train.resume=true" in err
    assert no_nodes == [] and snapshot(tiny_run) == before
    assert main(["launch", "sim_train", f"train.run_dir={tiny_run}", "train.resume=true", "seed=4"]) == 2
    assert "seed=4 is not allowed: expected 0 as the run was made" in one_error_line(capsys)
    assert no_nodes == []


def test_a_resumed_launch_gives_every_node_the_runs_config(tiny_run, no_nodes):
    assert main(["launch", "sim_train", f"train.run_dir={tiny_run}", "train.resume=true", "train.env_steps=100"]) == 0
    cfg = load_config(no_nodes[0])  # as each node composes its command line
    assert cfg.task.name == "reach" and cfg.train.demo_episodes == 2 and cfg.train.batch_size == 32
    assert cfg.train.env_steps == 100 and cfg.train.resume is True
    assert cfg.task.episode_steps == load_config(["task=reach"]).task.episode_steps


def test_launch_stops_on_sigint_even_when_started_with_it_ignored(tmp_path, no_nodes):
    """A shell script's background job starts with SIGINT ignored; only SIGTERM had a handler."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert main(["launch", "sim_train", f"train.run_dir={tmp_path / 'run'}"]) == 0
        assert no_nodes[1] is signal.default_int_handler  # Ctrl-C raises KeyboardInterrupt: the graph is stopped
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # and put back
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.parametrize("key", ["enabled", "learn"])
def test_a_fast_critic_without_a_sim_rate_is_refused_in_train(tmp_path, capsys, key):
    """Before, robot-rl train took it and ran without it (the sim runs it only at safety.fast_critic.sim_rate_hz)."""
    run = tmp_path / "run"
    assert main(["train", *TINY, f"train.run_dir={run}", f"safety.fast_critic.{key}=true"]) == 2
    err = one_error_line(capsys)
    assert "safety.fast_critic.sim_rate_hz=None" in err and f"safety.fast_critic.{key}" in err
    assert not run.exists()


def test_the_final_evaluation_says_it_runs(tmp_path):
    """The progress bar sat at 100% with no word for the final 50 episodes (~36 s)."""
    from types import SimpleNamespace

    from robot_rl.runtime.run_loop import Run
    from robot_rl.runtime.session import Counters
    from robot_rl.runtime.train_settings import TrainSettings

    shown = []

    class Bar:
        def set_postfix_str(self, text, refresh=True):
            shown.append(text)

        def set_postfix(self, refresh=True, **values):
            shown.append(values)

    class Board:
        def add_scalar(self, *args):
            pass

    result = {"success_rate": 1.0, "mean_length": 5.0, "mean_return": 1.0, "continuity_cost": 0.0}

    def evaluate(episodes):
        shown.append(("evaluating", episodes))
        return result

    settings = TrainSettings(final_eval_episodes=50, eval_episodes=20)
    learner = SimpleNamespace(metrics={}, update_calls=0, updates_per_second=0.0)  # no update made yet
    learning = SimpleNamespace(settings=settings, learner=learner, run_dir=tmp_path)
    run = Run(learning, Counters(), "reach", evaluate=evaluate, progress_bar=False)
    run.progress, run.tb = Bar(), Board()
    run.record_evaluation(finished=False)
    assert shown[0] == ("evaluating", 20)  # an evaluation during the run: as before
    shown.clear()
    run.record_evaluation(finished=True)
    assert shown[0] == "final evaluation: 50 episodes" and shown[1] == ("evaluating", 50)
    assert [entry["env_steps"] for entry in run.counters.history] == [0, 0]


def test_a_run_made_before_fast_fit_was_renamed_fast_critic_resumes_with_its_own_settings(tiny_run, tmp_path):
    """The fast critic's fit settings were the section ``fast_fit`` until issue 53 gave the fast critic one name: a
    run folder written before reads its ``fast_fit`` as ``fast_critic`` (before, its values were dropped for the
    defaults and the old section rode along unread)."""
    from robot_rl.runtime.run_folder import resumed_config

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    old = saved.pop("fast_critic")
    old["horizon"] = old["horizon"] + 7
    saved["fast_fit"] = old
    (run / "config.yaml").write_text(yaml.safe_dump(saved))
    cfg = resumed_config(load_config([*TINY, f"train.run_dir={run}", "train.resume=true"]), ["train.resume"])
    assert "fast_fit" not in cfg and cfg.fast_critic.horizon == old["horizon"]


def test_a_resumed_launch_hands_its_nodes_a_spec_of_its_own_not_the_last_launchs(tiny_run, tmp_path, monkeypatch):
    """``ros.task_spec`` says where a launch's nodes find the task spec (a file of that launch's own), not what the
    run is: a run folder recorded the file of its first launch, gone since; a resumed launch hands its own."""
    from robot_rl.cli import graph
    from robot_rl.data.task_spec import read_task_spec
    from robot_rl.runtime.envs import task_spec
    from robot_rl.runtime.run_folder import record_resume, resumed_config

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    saved = yaml.safe_load((run / "config.yaml").read_text())
    saved["ros"]["task_spec"] = "/tmp/robot_rl_launch_gone/task_spec.json"
    (run / "config.yaml").write_text(yaml.safe_dump(saved))
    handed = []

    def run_nodes(self) -> int:  # the spec as the nodes would read it, while the launch runs
        handed.append(read_task_spec(load_config(self.overrides).ros.task_spec))
        return 0

    monkeypatch.setattr(graph.Launcher, "run", run_nodes)
    assert main(["launch", "sim_train", f"train.run_dir={run}", "train.resume=true", "train.env_steps=100"]) == 0
    assert handed == [task_spec(load_config(["task=reach"]).task)]
    cfg = resumed_config(load_config([*TINY, f"train.run_dir={run}", "train.resume=true"]), ["train.resume"])
    assert cfg.ros.task_spec is None  # a node resumed by hand builds the spec, it does not read a file that is gone
    assert "task_spec" not in str(record_resume(run, cfg))


def test_eval_of_a_checkpoint_with_other_agent_settings_names_the_key_and_the_checkpoints_value(tiny_run, capsys):
    """Before, a checkpoint trained with other network sizes failed to load with torch's size-mismatch message."""
    checkpoint = f"eval.checkpoint={tiny_run / 'checkpoint'}"
    assert main(["eval", "task=reach", checkpoint, "eval.episodes=1", "agent.hidden=[64,64]"]) == 2
    err = one_error_line(capsys)
    assert "agent.hidden=[64, 64] is not allowed: expected [256, 256] as the checkpoint" in err, err
    assert main(["eval", "task=reach", checkpoint, "eval.episodes=1"]) == 0


def test_a_folder_that_holds_no_run_is_refused_without_offering_to_resume_it(tmp_path, capsys):
    """Issue 73 item 1: a classifier written into runs/pick made step 5's ``train.run_dir=runs/pick`` fail with "a new
    folder (or train.resume=true ...)", and the resume it offered failed in turn ("runs/pick is not one")."""
    folder = tmp_path / "pick"
    folder.mkdir()
    (folder / "reward_classifier.pt").write_bytes(b"weights")
    assert main(["train", "task=reach", f"train.run_dir={folder}"]) == 2
    err = one_error_line(capsys)
    assert f"train.run_dir='{folder}'" in err and "no robot_rl run" in err and "train.resume" not in err, err
    assert sorted(p.name for p in folder.iterdir()) == ["reward_classifier.pt"]
