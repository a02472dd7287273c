"""WSRL end to end in a tiny budget: collect an offline store, pretrain (Cal-QL) to a checkpoint, warm-start
training from it (frozen warm-up, then fine-tuning without or with the offline data), and the one-line errors."""

import json

import numpy as np
import pytest
import torch

from robot_rl.cli.main import main
from robot_rl.core.composed_config import load_config
from robot_rl.runtime.collect import collect
from robot_rl.runtime.pretrain import pretrain
from robot_rl.runtime.train import train


def stored_episodes(store) -> list[dict]:
    from robot_rl.data import EpisodeStore

    opened = EpisodeStore.open(store)
    return [opened.episode_attrs(name) for name in opened.episode_names()]


TASK = ["task=reach", "task.episode_steps=10"]
TINY = ["agent.hidden=[32,32]", "agent.utd=1"]


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """A mixed-quality store (expert and noisy episodes) and a pretrained run folder on it."""
    root = tmp_path_factory.mktemp("wsrl")
    store = root / "offline.zarr"
    collect(load_config([*TASK, "collect.episodes=3", f"collect.out={store}"]))
    collect(load_config([*TASK, "collect.episodes=3", "collect.action_noise=0.8", f"collect.out={store}", "seed=5"]))
    out = root / "pretrained"
    summary = pretrain(
        load_config(
            [
                *TASK,
                *TINY,
                f"pretrain.store={store}",
                f"pretrain.out={out}",
                "pretrain.updates=12",
                "pretrain.batch_size=32",
                "pretrain.actions=2",
                "pretrain.eval_every=6",
                "pretrain.eval_episodes=1",
            ]
        )
    )
    return store, out, summary


def test_pretraining_writes_a_checkpoint_eval_and_train_can_read(offline, capsys):
    store, out, summary = offline
    steps = sum(ep["length"] for ep in stored_episodes(store))
    assert summary["updates"] == 12 and summary["transitions"] == [steps] and not summary["interrupted"]
    assert [h["updates"] for h in summary["eval_history"]] == [6, 12]
    assert sorted(p.name for p in (out / "checkpoint").iterdir()) == [
        "agent.pt",
        "pretrain.json",
        "task_definition.json",
    ]
    assert json.loads((out / "checkpoint" / "pretrain.json").read_text())["stores"] == [str(store)]
    assert any((out / "tb").iterdir())
    assert main(["eval", *TASK, *TINY, f"eval.checkpoint={out / 'checkpoint'}", "eval.episodes=1"]) == 0
    assert '"success_rate"' in capsys.readouterr().out


def warm_overrides(run_dir, out, *extra) -> list[str]:
    """A tiny warm-started run: 20 warm-up steps of the pretrained policy, then 10 of fine-tuning, no human."""
    return [
        *TASK,
        *TINY,
        f"train.run_dir={run_dir}",
        f"init.checkpoint={out}",
        "init.warmup_steps=20",
        "train.env_steps=30",
        "train.demo_episodes=0",
        "human.enabled=false",
        "train.batch_size=16",
        *extra,
    ]


def warm_run(tmp_path, out, *extra):
    run_dir = tmp_path / "run"
    extra = ("train.eval_every=1000", "train.final_eval_episodes=1", "train.deterministic=true", *extra)
    return run_dir, load_config(warm_overrides(run_dir, out, *extra))


def test_a_warm_start_acts_with_the_pretrained_policy_frozen_through_the_warm_up(offline, tmp_path, monkeypatch):
    _, out, _ = offline
    pretrained = torch.load(out / "checkpoint" / "agent.pt", weights_only=True)["modules"]["actor"]
    from robot_rl.runtime import session as session_module

    seen = []  # (online steps, learner update calls, actor weights equal to the pretrained ones) at each episode
    play = session_module.ActorSession.play

    def watched(self, *args, **kwargs):
        same = all(torch.equal(v, pretrained[k]) for k, v in self.agent.actor.state_dict().items())
        seen.append((self.counters.env_steps, same))
        return play(self, *args, **kwargs)

    monkeypatch.setattr(session_module.ActorSession, "play", watched)
    run_dir, cfg = warm_run(tmp_path, out)
    summary = train(cfg)
    assert summary["env_steps"] == 30
    assert summary["warm_start"]["anchor"] == {"weight": 100.0, "steps": 20_000, "tau": 0.001}  # the defaults
    warm_up = [same for steps, same in seen if steps < 20]
    assert seen[0] == (0, True) and len(warm_up) >= 2 and all(warm_up)  # the pretrained policy, frozen
    counters = json.loads((run_dir / "checkpoint" / "counters.json").read_text())
    assert counters["update_calls"] == 30 - 20  # the first update came after the warm-up
    demo_buffer = np.load(run_dir / "checkpoint" / "demo_buffer" / "has_transition.npy")
    assert not demo_buffer.any()  # WSRL: no offline data retained


def test_the_offline_retained_baseline_keeps_the_pretraining_stores(offline, tmp_path):
    _, out, _ = offline
    run_dir, cfg = warm_run(tmp_path, out, "init.retain_offline=true", "train.env_steps=20")
    train(cfg)
    steps = sum(ep["length"] for ep in stored_episodes(offline[0]))
    assert np.load(run_dir / "checkpoint" / "demo_buffer" / "has_transition.npy").sum() == steps


def test_bad_warm_starts_and_pretraining_inputs_get_one_line(offline, tmp_path, capsys):
    store, out, _ = offline
    run_dir, new_out = tmp_path / "run", tmp_path / "new_pretraining"
    train_args = ["train", f"train.run_dir={run_dir}"]
    pretrain_args = ["pretrain", f"pretrain.store={store}"]
    cases = {
        "init.checkpoint": [*train_args, *TASK, f"init.checkpoint={tmp_path / 'nothing'}"],
        "task.episode_steps": [*train_args, "task=reach", *TINY, f"init.checkpoint={out}"],  # another definition
        "init.anchor_tau": [*train_args, *TASK, *TINY, f"init.checkpoint={out}", "init.anchor_tau=2"],
        "pretrain.store": ["pretrain", *TASK, f"pretrain.store={tmp_path / 'missing.zarr'}", f"pretrain.out={new_out}"],
        "pretrain.out": [*pretrain_args, *TASK, f"pretrain.out={out}"],  # a run folder is never overwritten
        "pretrain.weights": ["pretrain", *TASK, f"pretrain.store=[{store},{store}]", "pretrain.weights=[1]"],
        "pretrain.algorithm": [*pretrain_args, *TASK, "pretrain.algorithm=magic", f"pretrain.out={new_out}"],
        "pretrain.store=": [*pretrain_args, "task=pick_cube", f"pretrain.out={new_out}"],  # another task's store
    }
    for key, argv in cases.items():
        assert main(argv) == 2, key
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"robot-rl: error: {key}"), (key, err)
        assert not run_dir.exists() and not new_out.exists(), key


@pytest.mark.slow
def test_the_node_graph_warm_starts_from_the_pretrained_checkpoint(offline, tmp_path):
    """``robot-rl launch sim_train init.checkpoint=...``: the learner node loads the checkpoint, publishes it before
    the actor's first step and makes its first update after the warm-up."""
    import subprocess
    import sys

    from tests.conftest import require

    require("rclpy")
    _, out, _ = offline
    run_dir = tmp_path / "graph"
    overrides = warm_overrides(run_dir, out, "ros.eval_every_episodes=0")
    command = [sys.executable, "-m", "robot_rl.cli.main", "launch", "sim_train", *overrides]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert f"warm start from {out / 'checkpoint'}: the first 20 online steps" in output, output[-3000:]
    counters = json.loads((run_dir / "checkpoint" / "counters.json").read_text())
    assert counters["online_received"] == 30 and counters["update_calls"] == 30 - 20


@pytest.mark.parametrize(
    "variant",
    [
        ["agent=cqn_as", "agent.hidden=32"],
        ["task.cameras=[front]", "task.image_size=32", *TINY],
        ["task.cameras=[front]", "task.image_size=32", "agent.camera_encoder=pretrained", *TINY],
    ],
    ids=["cqn_as_state", "sac_pixels", "sac_pretrained_encoder"],
)
def test_pretraining_takes_the_cqn_family_and_camera_observations(tmp_path, variant):
    store, out = tmp_path / "store.zarr", tmp_path / "pretrained"
    collect(load_config([*TASK, *variant, "collect.episodes=2", f"collect.out={store}"]))
    overrides = [*TASK, *variant, f"pretrain.store={store}", f"pretrain.out={out}", "pretrain.batch_size=16"]
    summary = pretrain(load_config([*overrides, "pretrain.updates=4", "pretrain.eval_episodes=1"]))
    assert summary["updates"] >= 4 and summary["eval_history"] and (out / "checkpoint" / "agent.pt").is_file()
    _, cfg = warm_run(tmp_path, out, *variant, "train.env_steps=12", "init.warmup_steps=10")
    assert train(cfg)["warm_start"]["checkpoint"] == str(out / "checkpoint")


def test_offline_steps_the_filter_changed_are_relabelled_as_online_ones(tmp_path):
    """Issue 49 item 6: offline data (pretrain, WSRL, init.retain_offline) ignored the filtered and policy_action
    fields: a filtered step was learned with the executed action and without safety.penalty, unlike the same step
    online. Both now go through the learner's SafetyRelabel."""
    from robot_rl.core.transport import LocalTransport
    from robot_rl.data import EpisodeRecorder, EpisodeStore
    from robot_rl.data.transition import Provenance, Transition
    from robot_rl.runtime.learner import Learner
    from robot_rl.runtime.offline_data import add_offline, load_offline
    from robot_rl.runtime.replay_router import SafetyRelabel
    from robot_rl.runtime.safety_learning import safety_settings
    from robot_rl.runtime.train_settings import TrainSettings

    rng = np.random.default_rng(0)
    filtered = [False, True, True, False]

    def episode() -> list[Transition]:
        return [
            Transition(
                obs={"state": np.full(3, t, np.float32)},
                action=np.full(2, 0.1 * t, np.float32),
                policy_action=rng.uniform(-1, 1, 2).astype(np.float32) if filtered[t] else np.full(2, 0.1 * t),
                reward=-1.0,
                next_obs={"state": np.full(3, t + 1, np.float32)},
                terminated=False,
                truncated=t == 3,
                first=t == 0,
                filtered=filtered[t],
                origin=Provenance(episode="e0", step=t),
            )
            for t in range(4)
        ]

    steps = episode()
    store = tmp_path / "filtered.zarr"
    EpisodeRecorder(EpisodeStore.create(store, {"observation_shapes": {"state": [3]}, "action_dim": 2})).add(steps)
    cfg = load_config(["task=reach", "safety.enabled=true", "safety.relabel=proposed", "safety.penalty=0.25"])

    class Agent:
        class config:
            discount = 0.9

        def observe(self, transition) -> None:  # the learner's hook for episode-wise agents (open_loop)
            pass

    learner = Learner(
        Agent(),
        TrainSettings(buffer_capacity=20),
        {"state": (3,)},
        2,
        LocalTransport(),
        0,
        SafetyRelabel.of(safety_settings(cfg.safety)),
    )
    learner.ingest(steps)  # online
    assert add_offline("init.store", [store], learner.router) == 1  # WSRL's retained data
    (pretraining,) = load_offline(
        "pretrain.store", [store], {"state": (3,)}, 2, torch.device("cpu"), learner.router.relabel
    )

    def rows(buffer) -> tuple[np.ndarray, np.ndarray]:
        index = np.sort(np.asarray(buffer.valid_indices()))
        return np.asarray(buffer.learned_action[index]), np.asarray(buffer.reward[index])

    online_actions, online_rewards = rows(learner.online)
    np.testing.assert_allclose(online_actions, [s.policy_action if s.filtered else s.action for s in steps])
    np.testing.assert_allclose(online_rewards, [-1.25 if f else -1.0 for f in filtered])
    for buffer in (learner.demo, pretraining):
        actions, rewards = rows(buffer)
        np.testing.assert_array_equal(actions, online_actions)
        np.testing.assert_array_equal(rewards, online_rewards)


def test_a_warm_start_takes_no_demonstrations_unless_the_command_line_asks(tmp_path):
    """WSRL keeps no offline data: with ``init.checkpoint`` the default 20 scripted demos are not collected (they were
    mixed 50/50 into every batch); ``train.demo_episodes=N`` on the command line still gets N; from scratch, 20."""
    checkpoint = f"init.checkpoint={tmp_path / 'pretrained'}"
    assert load_config([]).train.demo_episodes == 20
    assert load_config([checkpoint]).train.demo_episodes == 0
    assert load_config([checkpoint, "train.demo_episodes=5"]).train.demo_episodes == 5
    assert load_config([checkpoint, "++train.demo_episodes=3"]).train.demo_episodes == 3


def test_a_run_takes_recorded_demonstrations_from_train_demo_store_and_asks_for_none_again(offline, tmp_path, capsys):
    """Issue 73 item 2: the documented on-robot session ignored the demonstrations step 3 had just recorded and asked
    the operator for 20 new ones. ``train.demo_store`` puts a store's episodes into the demo buffer at the run's start;
    ``train.demo_episodes=0`` asks for none. A store that is not one is refused in one line, no folder made."""
    store = offline[0]
    run_dir = tmp_path / "run"
    summary = train(
        load_config(
            [*TASK, *TINY, f"train.run_dir={run_dir}", f"train.demo_store={store}", "train.demo_episodes=0"]
            + ["train.env_steps=20", "train.start_training=10", "train.batch_size=16", "train.final_eval_episodes=1"]
        )
    )
    steps = sum(ep["length"] for ep in stored_episodes(store))
    assert np.load(run_dir / "checkpoint" / "demo_buffer" / "has_transition.npy").sum() == steps
    assert summary["demo_episodes"] == 0  # none played
    capsys.readouterr()
    missing = tmp_path / "missing.zarr"
    assert main(["train", *TASK, f"train.run_dir={tmp_path / 'other'}", f"train.demo_store={missing}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"robot-rl: error: train.demo_store='{missing}'"), err
    assert not (tmp_path / "other").exists()
