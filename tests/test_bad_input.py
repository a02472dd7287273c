"""Bad input on every verb: one line ``robot-rl: error: <key>=<value> ...``, exit code 2, no traceback, nothing
written; checkpoint files are read as tensors and plain values only, never as code."""

import os
from pathlib import Path

import pytest
import torch

from robot_rl.cli.main import main


@pytest.fixture
def read_only(tmp_path):
    """A folder this user cannot write to (root writes through mode bits, not into /proc/1)."""
    if os.geteuid() == 0:
        yield Path("/proc/1")
        return
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


def assert_one_line_error(capsys, code: int, key: str) -> str:
    captured = capsys.readouterr()
    err = captured.err
    assert code == 2, err
    assert err.startswith("robot-rl: error: ") and err.count("\n") == 1, err
    assert f"{key}=" in err and "Traceback" not in err + captured.out, err
    return err


CASES = [
    # non-finite anywhere in the config
    (["train", "agent.lr=inf"], "agent.lr"),
    (["train", "agent.camera_feature_dim=0"], "agent.camera_feature_dim"),
    (["train", "agent=cqn", "agent.image_pad=-1"], "agent.image_pad"),
    (["train", "safety.critic.lr=abc"], "safety.critic.lr"),
    (["train", "train.run_dir=/proc/robot_rl_run"], "train.run_dir"),
    (["train", "agent.lr=nan"], "agent.lr"),
    (["train", "agent=cqn", "agent.v_min=-inf"], "agent.v_min"),
    (["train", "safety.critic.lr=inf"], "safety.critic.lr"),
    (["collect", "task.pos_step=nan"], "task.pos_step"),
    (["config", "reset.speed=inf"], "reset.speed"),
    (["config", "ros.state_rate_hz=inf"], "ros.state_rate_hz"),
    (["launch", "sim_train", "agent.tau=nan"], "agent.tau"),
    (["classifier", "classifier.threshold=nan"], "classifier.threshold"),
    (["data", "info", "seed=inf"], "seed"),
    # not positive, not an integer, not a number
    (["train", "agent.lr=0"], "agent.lr"),
    (["train", "agent.lr=-0.001"], "agent.lr"),
    (["train", "agent.lr=fast"], "agent.lr"),
    (["train", "agent.utd=0"], "agent.utd"),
    (["train", "agent.utd=1.5"], "agent.utd"),
    (["train", "agent.hidden=[256,0]"], "agent.hidden"),
    (["train", "agent=cqn", "agent.lr=0"], "agent.lr"),
    (["train", "train.batch_size=0"], "train.batch_size"),
    (["train", "train.num_envs=0"], "train.num_envs"),
    (["train", "train.vectorization=threads"], "train.vectorization"),
    (["train", "train.update_every=0"], "train.update_every"),
    (["train", "fleet=ray", "train.num_envs=2"], "train.num_envs"),
    (["train", "train.demo_fraction=half"], "train.demo_fraction"),
    (["train", "train.stop_at_success=1.5"], "train.stop_at_success"),
    (["train", "train.stop_at_success=all"], "train.stop_at_success"),
    (["train", "safety.critic.lr=0"], "safety.critic.lr"),
    (["train", "safety.pretrain_updates=0"], "safety.pretrain_updates"),
    (["train", "human.stall_steps=0"], "human.stall_steps"),
    (["train", "human.min_progress=-1"], "human.min_progress"),
    (["train", "+human.patience=3"], "human.patience"),
    (["train", "task.control_rate_hz=0"], "task.control_rate_hz"),
    (["train", "seed=abc"], "seed"),
    (["collect", "seed=1.5"], "seed"),
    (["eval", "seed=abc"], "seed"),
    (["eval", "eval.seed=abc"], "eval.seed"),
    (["eval", "eval.grid_points=0"], "eval.grid_points"),
    (["launch", "sim_train", "seed=abc"], "seed"),
    (["classifier", "seed=abc"], "seed"),
    # robot-rl config checks what train checks (old code: printed the config, exit 0)
    (["config", "train.env_steps=abc"], "train.env_steps"),
    (["config", "agent.lr=fast"], "agent.lr"),
    (["config", "fleet.actors=0"], "fleet.actors"),
    (["config", "human.stall_steps=0"], "human.stall_steps"),
    (["config", "safety.critic.lr=0"], "safety.critic.lr"),
]


@pytest.mark.parametrize("argv, key", CASES, ids=[" ".join(argv) for argv, _ in CASES])
def test_a_bad_value_is_one_line_naming_its_key(argv, key, tmp_path, capsys):
    run = tmp_path / "run"
    paths = [
        f"train.run_dir={run}",
        f"collect.out={tmp_path / 'demos.zarr'}",
        f"eval.checkpoint={tmp_path / 'ckpt'}",
        f"classifier.store={tmp_path}",
        f"classifier.out={tmp_path / 'classifier.pt'}",
        "train.env_steps=10",
        "train.demo_episodes=1",
        "train.eval_every=10",
        "train.final_eval_episodes=1",
        "eval.episodes=1",
    ]
    overrides = argv[2:] if argv[0] in ("launch", "data") else argv[1:]
    verb = argv[:2] if argv[0] in ("launch", "data") else argv[:1]
    code = main([*verb, "task=reach", *paths, *overrides])
    assert_one_line_error(capsys, code, key)
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written


def path_cases(tmp_path: Path, read_only: Path) -> list[tuple[list[str], str, Path]]:
    """(argv, key, the path that must not appear)."""
    a_file = tmp_path / "a_file"
    a_file.write_text("not ours")
    not_a_run = tmp_path / "notes"
    not_a_run.mkdir()
    (not_a_run / "todo.txt").write_text("not ours")
    checkpoint_only = tmp_path / "half_run" / "checkpoint"  # counters.json but no config.yaml: not a run folder
    checkpoint_only.mkdir(parents=True)
    (checkpoint_only / "counters.json").write_text("{}")
    return [
        (["train", f"train.run_dir={a_file}"], "train.run_dir", a_file / "config.yaml"),
        (["train", f"train.run_dir={a_file / 'run'}"], "train.run_dir", a_file.with_name("run")),
        (["train", f"train.run_dir={read_only / 'run'}"], "train.run_dir", read_only / "run"),
        (["train", "train.run_dir="], "train.run_dir", tmp_path / "config.yaml"),
        (["train", f"train.run_dir={not_a_run}", "train.resume=true"], "train.resume", not_a_run / "config.yaml"),
        (
            ["train", f"train.run_dir={not_a_run.parent / 'half_run'}", "train.resume=true"],
            "train.resume",
            not_a_run.parent / "half_run" / "config.yaml",
        ),
        (
            ["train", f"train.run_dir={tmp_path / 'missing_run'}", "train.resume=true"],
            "train.resume",
            tmp_path / "missing_run",
        ),
        (["collect", "collect.out="], "collect.out", tmp_path / ".zarr"),
        (["collect", f"collect.out={a_file}"], "collect.out", a_file.with_name("a_file.zarr")),
        (["collect", f"collect.out={read_only / 'demos.zarr'}"], "collect.out", read_only / "demos.zarr"),
        (["collect", f"collect.out={not_a_run}"], "collect.out", not_a_run / "zarr.json"),
        (["classifier", f"classifier.store={tmp_path}", "classifier.out="], "classifier.out", tmp_path / ".tmp"),
        (
            ["classifier", f"classifier.store={tmp_path}", f"classifier.out={read_only / 'c.pt'}"],
            "classifier.out",
            read_only / "c.pt",
        ),
        (
            ["classifier", f"classifier.store={tmp_path}", f"classifier.out={not_a_run}"],
            "classifier.out",
            not_a_run / "c.pt",
        ),
        (["eval", f"eval.checkpoint={tmp_path / 'missing'}"], "eval.checkpoint", tmp_path / "missing"),
        (
            ["eval", f"eval.checkpoint={not_a_run}", f"eval.video={read_only / 'eval.mp4'}"],
            "eval.video",
            read_only / "eval.mp4",
        ),
        (["data", "info", f"store={tmp_path / 'missing.zarr'}"], "", tmp_path / "missing.zarr"),
        # eval.video is checked before anything runs (old code: a missing folder exited 0 with no file, no message)
        (
            ["eval", f"eval.checkpoint={not_a_run}", f"eval.video={tmp_path / 'missing' / 'eval.mp4'}"],
            "eval.video",
            tmp_path / "missing",
        ),
        (["eval", f"eval.checkpoint={not_a_run}", f"eval.video={a_file}"], "eval.video", a_file.with_suffix(".mp4")),
        (
            ["eval", f"eval.checkpoint={not_a_run}", f"eval.video={tmp_path / 'eval.gif'}"],
            "eval.video",
            tmp_path / "eval.gif",
        ),
    ]


@pytest.mark.parametrize("index", range(20))
def test_a_bad_path_is_one_line_and_nothing_is_written(index, tmp_path, read_only, capsys):
    argv, key, absent = path_cases(tmp_path, read_only)[index]
    before = snapshot(tmp_path)
    code = main(
        [argv[0], *argv[1:2], "task=reach", *argv[2:]] if argv[0] == "data" else [argv[0], "task=reach", *argv[1:]]
    )
    err = assert_one_line_error(capsys, code, key) if key else capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert not absent.exists()
    assert snapshot(tmp_path) == before


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under ``folder`` with its modification time and contents."""
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


class _Payload:
    """Unpickling this calls ``open(marker, "w")``: the file appears only if the pickle's code runs."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def test_a_crafted_checkpoint_is_refused_and_its_code_never_runs(tmp_path, capsys):
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    marker = tmp_path / "payload_ran"
    torch.save({"identity": _Payload(marker), "modules": {}}, checkpoint / "agent.pt")
    code = main(["eval", "task=reach", f"eval.checkpoint={checkpoint}", "eval.episodes=1"])
    err = assert_one_line_error(capsys, code, "eval.checkpoint")
    assert str(checkpoint) in err
    assert not marker.exists()


def test_a_file_that_is_no_checkpoint_is_refused(tmp_path, capsys):
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "agent.pt").write_bytes(b"\x80\x04not a torch file")
    assert_one_line_error(capsys, main(["eval", "task=reach", f"eval.checkpoint={checkpoint}"]), "eval.checkpoint")


@pytest.mark.parametrize(
    "agent, config, overrides",
    [
        ("robot_rl.policies.sac:SACAgent", "robot_rl.policies.sac:SACConfig", {}),
        (
            "robot_rl.policies.sac:SACAgent",
            "robot_rl.policies.sac:SACConfig",
            {"exploration": "gsde", "gripper_critic": True},
        ),
        ("robot_rl.policies.cqn:CQNAgent", "robot_rl.policies.cqn:CQNConfig", {}),
        ("robot_rl.policies.cqn_as:CQNASAgent", "robot_rl.policies.cqn_as:CQNASConfig", {}),
    ],
)
def test_every_agent_checkpoint_is_tensors_and_plain_values(agent, config, overrides, tmp_path):
    import numpy as np

    from robot_rl.core.checkpoint import load_agent
    from robot_rl.data import ReplayBuffer
    from robot_rl.runtime.envs import load_entry_point

    cls, config_class = load_entry_point(agent), load_entry_point(config)
    trained = cls({"state": (5,)}, 3, config_class(**overrides), seed=0)
    rng = np.random.default_rng(0)
    buffer = ReplayBuffer(100, {"state": ((5,), np.float32)}, 3)
    for step in range(20):
        buffer.add(
            {"state": rng.normal(size=5)},
            rng.uniform(-1, 1, 3),
            float(rng.normal()),
            {"state": rng.normal(size=5)},
            step == 19,
            False,
        )
    trained.update(lambda: buffer.sample(8, rng, gamma=0.97, sequence_length=trained.sequence_length))
    torch.save(trained.state_dict(), tmp_path / "agent.pt")
    fresh = cls({"state": (5,)}, 3, config_class(**overrides), seed=1)
    load_agent("train.resume", fresh, tmp_path / "agent.pt")  # weights_only=True
    assert fresh.updates == trained.updates > 0
    for name in trained.modules:
        for key, value in getattr(trained, name).state_dict().items():
            assert torch.equal(getattr(fresh, name).state_dict()[key], value), (name, key)
