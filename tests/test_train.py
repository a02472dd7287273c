"""robot-rl train / eval: buffers, interventions, resume, learning, bad input."""

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from robot_rl.cli.main import main
from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.core.transport import LocalTransport, updates_due
from robot_rl.data.transition import Transition
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.train import train
from robot_rl.runtime.train_settings import TrainSettings
from tests.conftest import LEARNING_REACH


def transition(marker: float, intervened: bool, demo: bool, done: bool = False, first: bool = False):
    return Transition(
        obs={"state": np.full(3, marker, np.float32)},
        action=np.zeros(2, np.float32),
        reward=marker,
        next_obs={"state": np.full(3, marker + 0.5, np.float32)},
        terminated=done,
        truncated=False,
        intervened=intervened,
        demo=demo,
        first=first,
    )


class _Agent:
    class config:
        discount = 0.9

    def observe(self, transition) -> None:  # the learner's hook for episode-wise agents (open_loop)
        pass


def test_interventions_go_to_both_buffers_policy_steps_only_online():
    learner = Learner(_Agent(), TrainSettings(buffer_capacity=100), {"state": (3,)}, 2, LocalTransport(), seed=0)
    learner.ingest([transition(1, intervened=True, demo=True, first=True), transition(2, True, True, done=True)])
    learner.ingest(
        [
            transition(10, intervened=False, demo=False, first=True),
            transition(11, intervened=True, demo=False),
            transition(12, intervened=False, demo=False, done=True),
        ]
    )
    online_rewards = learner.online.reward[learner.online.valid_indices()]
    demo_rewards = learner.demo.reward[learner.demo.valid_indices()]
    assert sorted(online_rewards) == [10, 11, 12]
    assert sorted(demo_rewards) == [1, 2, 11]
    assert learner.online_received == 3


def test_an_episode_cut_short_does_not_run_into_the_next():
    learner = Learner(_Agent(), TrainSettings(buffer_capacity=100), {"state": (3,)}, 2, LocalTransport(), seed=0)
    learner.ingest([transition(1, False, False, first=True), transition(2, False, False)])  # never ended
    learner.ingest([transition(10, False, False, first=True), transition(11, False, False, done=True)])
    buffer = learner.online
    assert buffer.episode[buffer.valid_indices()].tolist() == [0, 0, 1, 1]
    assert buffer.obs["state"][:6, 0].tolist() == [1, 1.5, 2.5, 10, 10.5, 11.5]  # the reset obs 10 is stored
    ret, steps, _ = buffer.n_step_returns(np.array([1]), 3, 1.0)
    assert ret[0] == 2 and steps[0] == 1  # stops at the cut, never reaches reward 10


def small_run(tmp_path, *overrides, name="run"):
    return load_config(
        [
            "task=reach",
            f"train.run_dir={tmp_path / name}",
            "train.env_steps=300",
            "train.demo_episodes=3",
            "train.eval_every=300",
            "train.eval_episodes=5",
            "train.final_eval_episodes=5",
            "train.batch_size=64",
            "train.start_training=50",
            "train.checkpoint_every=100",
            *overrides,
        ]
    )


@pytest.mark.slow
def test_a_short_run_writes_everything_and_eval_loads_it(tmp_path, capsys):
    summary = train(small_run(tmp_path))
    bar = capsys.readouterr().err  # the progress bar: the steps, then the learner's figures
    assert re.search(r"300/300 .*episodes=\d+, updates=[1-9]\d*, updates_per_step=\d\.\d\d, .*interventions=", bar), bar
    run = tmp_path / "run"
    for item in ("summary.json", "learning_curve.png", "config.yaml", "checkpoint/agent.pt", "episodes.zarr", "tb"):
        assert (run / item).exists(), item
    assert summary["env_steps"] == 300 and summary["demo_episodes"] == 3
    assert json.loads((run / "summary.json").read_text())["eval_history"][-1]["env_steps"] == 300
    from robot_rl.data import EpisodeStore

    store = EpisodeStore.open(run / "episodes.zarr")
    sources = [store.episode_attrs(n)["source"] for n in store.episode_names()]
    assert sources[:3] == ["demo"] * 3 and set(sources[3:]) == {"online"}
    video = tmp_path / "eval.mp4"
    assert (
        main(["eval", "task=reach", f"eval.checkpoint={run / 'checkpoint'}", "eval.episodes=3", f"eval.video={video}"])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["episodes"] == 3 and 0.0 <= report["success_rate"] <= 1.0 and report["mean_length"] > 0
    import cv2

    frames = int(cv2.VideoCapture(str(video)).get(cv2.CAP_PROP_FRAME_COUNT))
    assert frames == round(3 * report["mean_length"])  # one frame per evaluated step


@pytest.mark.slow
def test_the_actor_stays_within_max_lag_of_the_learner(tmp_path):
    """train.sync: every online step sent is ingested and learned from as it comes (update-to-data ratio 1 per
    step), the actor never more than max_lag steps ahead, counting what still waits in the transport."""
    train(small_run(tmp_path, "train.max_lag=5", "train.eval_every=1000"))
    state = json.loads((tmp_path / "run" / "checkpoint" / "counters.json").read_text())
    assert state["online_received"] >= 300 - 5, state["online_received"]
    assert state["update_calls"] >= state["online_received"] - 50 - 5, state["update_calls"]


@pytest.mark.slow
def test_update_every_makes_one_update_call_per_that_many_online_steps(tmp_path):
    """train.update_every=4 with 2 envs: one update call per 4 online steps after train.start_training (the old
    learner made one per step whatever the setting), the actor kept within max_lag of that schedule."""
    train(small_run(tmp_path, "train.update_every=4", "train.num_envs=2", "train.max_lag=5", "train.eval_every=1000"))
    state = json.loads((tmp_path / "run" / "checkpoint" / "counters.json").read_text())
    due = (state["online_received"] - 50) // 4
    assert state["online_received"] >= 300 - 5, state["online_received"]
    assert due - 5 <= state["update_calls"] <= due, (state["update_calls"], due)


def test_updates_due_counts_update_calls_per_update_every_steps():
    assert updates_due(250, 0, 50) == 200
    assert updates_due(250, 0, 50, update_every=4) == 50
    assert updates_due(253, 49, 50, update_every=4) == 1  # the 50th call is due at 50 + 4 * 50 = 250 steps
    assert updates_due(30, 0, 50, update_every=4) == 0  # none before start_training


@pytest.mark.slow
def test_training_is_reproducible_with_train_deterministic(tmp_path):
    """Two in-process runs with one seed: the actor and learner threads interleave differently, the weights do not."""
    from robot_rl.core.checkpoint import load_tensors

    def run(name: str, seed: int) -> dict:
        summary = train(
            small_run(
                tmp_path,
                f"seed={seed}",
                "train.deterministic=true",
                "train.env_steps=250",
                "train.demo_episodes=2",
                "train.start_training=30",
                "train.eval_every=250",
                "train.final_eval_episodes=3",
                "train.weights_every=5",
                "agent.hidden=[64,64]",  # determinism does not depend on the networks' size: small ones are cheaper
                name=name,
            )
        )
        return summary, load_tensors("test", tmp_path / name / "checkpoint" / "agent.pt")["modules"]

    (first, a), (second, b), (_, other) = run("a", 0), run("b", 0), run("c", 1)
    flat = {f"{m}.{k}": v for m, state in a.items() for k, v in state.items()}
    assert flat and all(torch.equal(v, b[m][k]) for m, state in a.items() for k, v in state.items())
    assert first["eval_history"][-1]["mean_return"] == second["eval_history"][-1]["mean_return"]
    assert not all(torch.equal(v, other[m][k]) for m, state in a.items() for k, v in state.items())  # seeds matter


@pytest.mark.slow
def test_learning_on_reach_with_a_tiny_budget_ends_at_the_evaluation_that_reaches_the_target(tmp_path):
    """LEARNING_REACH's budget (2,000 steps), with train.stop_at_success: evaluations every 250 steps, and the first
    that reaches 0.9 ends the run, its final evaluation made at once (0.95-1.0 at 520-780 steps in two seeds)."""
    cfg = small_run(
        tmp_path, *LEARNING_REACH, "train.eval_every=250", "train.eval_episodes=10", "train.stop_at_success=0.9"
    )
    summary = train(cfg)
    history = summary["eval_history"]
    assert summary["final_eval_success"] >= 0.7, history
    assert summary["stop_at_success_reached"] and summary["env_steps"] < 2000, history
    *before, reached, final = history
    assert reached["success_rate"] >= 0.9 and all(entry["success_rate"] < 0.9 for entry in before), history
    assert final["env_steps"] == reached["env_steps"] and final["episodes"] == 20  # the final evaluation, at once
    assert (tmp_path / "run" / "checkpoint" / "agent.pt").exists()


@pytest.mark.slow
def test_the_final_checkpoint_holds_every_step_the_actor_counted(tmp_path):
    """train.sync=false lets the actor run far ahead: what is still in the transport when the budget is
    spent goes into the buffers (its updates stay due for a resumed run), not lost with the thread."""
    from robot_rl.data import ReplayBuffer

    summary = train(
        small_run(
            tmp_path,
            "train.sync=false",
            "train.env_steps=400",
            "train.demo_episodes=1",
            "train.start_training=20",
            "train.eval_every=400",
            "train.final_eval_episodes=1",
        )
    )
    state = json.loads((tmp_path / "run" / "checkpoint" / "counters.json").read_text())
    assert summary["env_steps"] == state["online_received"] == 400
    assert len(ReplayBuffer.load(tmp_path / "run" / "checkpoint" / "online_buffer")) == 400


@pytest.mark.slow
def test_resume_after_sigkill_keeps_counters_and_buffers(tmp_path):
    run = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "robot_rl.cli.main",
        "train",
        "task=reach",
        f"train.run_dir={run}",
        "train.env_steps=5000",
        "train.demo_episodes=2",
        "train.checkpoint_every=150",
        "train.batch_size=32",
        "train.eval_every=5000",
        "train.final_eval_episodes=2",
        "train.start_training=20",
        "agent.hidden=[64,64]",  # what is kept across the kill does not depend on the networks' size
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    counters_file = run / "checkpoint" / "counters.json"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (
        counters_file.exists() and json.loads(counters_file.read_text())["counters"]["env_steps"] >= 300
    ):
        time.sleep(0.2)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    saved = json.loads(counters_file.read_text())
    steps_saved = saved["counters"]["env_steps"]
    assert steps_saved >= 300

    from robot_rl.data import ReplayBuffer

    online_saved = len(ReplayBuffer.load(run / "checkpoint" / "online_buffer"))
    assert online_saved == steps_saved  # the periodic checkpoint holds every step it counted
    cfg = load_config(
        [
            "task=reach",
            f"train.run_dir={run}",
            "train.resume=true",
            f"train.env_steps={steps_saved + 100}",
            "train.demo_episodes=2",
            "train.checkpoint_every=150",
            "train.batch_size=32",
            "train.eval_every=5000",
            "train.final_eval_episodes=2",
            "train.start_training=20",
            "agent.hidden=[64,64]",
        ]
    )
    summary = train(cfg)
    assert summary["env_steps"] == steps_saved + 100
    assert summary["demo_episodes"] == 2  # the demos were not collected again
    resumed = json.loads(counters_file.read_text())
    assert resumed["update_calls"] > saved["update_calls"]
    assert len(ReplayBuffer.load(run / "checkpoint" / "online_buffer")) == online_saved + 100


def process_group_alive(group: int, within: float) -> bool:
    """Whether a process of ``group`` still exists after ``within`` s (an exited one waits for init to reap it)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.1)
    return True


@pytest.mark.slow
@pytest.mark.parametrize("envs", ["one", "two_in_workers"])
def test_ctrl_c_stops_training_with_every_finished_episode_recorded_and_counted(tmp_path, envs):
    """Ctrl-C as a terminal sends it: to the whole process group, env worker processes included (they leave the stop
    to the driver and end with it)."""
    from robot_rl.data import EpisodeStore

    run = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "robot_rl.cli.main",
        "train",
        "task=reach",
        f"train.run_dir={run}",
        "train.env_steps=100000",
        "train.demo_episodes=2",
        "train.batch_size=32",
        "train.eval_every=100000",
        "train.start_training=20",
        "task.episode_steps=20",
        *(["train.num_envs=2", "train.vectorization=async"] if envs == "two_in_workers" else []),
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    episodes = run / "episodes.zarr" / "episodes"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (
        episodes.exists() and len([p for p in episodes.iterdir() if p.name.startswith("episode_")]) >= 6
    ):
        time.sleep(0.1)
    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]
    assert not process_group_alive(process.pid, within=15.0)  # nothing of the run is left: no worker outlives it
    summary = json.loads((run / "summary.json").read_text())
    assert summary["interrupted"] and summary["episodes"] >= 6
    assert len(EpisodeStore.open(run / "episodes.zarr")) == summary["episodes"]  # each finished one, no partial one
    saved = json.loads((run / "checkpoint" / "counters.json").read_text())["counters"]
    assert saved["env_steps"] == summary["env_steps"] and saved["episodes"] == summary["episodes"]


@pytest.mark.slow
def test_pixel_pipeline_runs_end_to_end(tmp_path):
    cfg = small_run(
        tmp_path,
        "task.cameras=[front,wrist]",
        "task.image_size=32",
        "task.object_state=false",
        "train.env_steps=80",
        "train.eval_every=80",
        "train.final_eval_episodes=2",
        "train.demo_episodes=1",
        "train.batch_size=16",
        "train.start_training=10",
    )
    summary = train(cfg)
    assert summary["env_steps"] == 80


@pytest.mark.slow
def test_pixel_critic_loss_falls_on_demo_data():
    from robot_rl.data import ReplayBuffer
    from robot_rl.policies.sac import SACAgent, SACConfig
    from robot_rl.runtime.envs import make_env, make_expert

    task = dict(load_config(["task=reach", "task.cameras=[front]", "task.image_size=32"]).task)
    env = make_env(task)
    expert = make_expert(task, env)
    shapes = {key: space.shape for key, space in env.observation_space.spaces.items()}
    buffer = ReplayBuffer(2000, {k: (s, np.uint8 if len(s) == 3 else np.float32) for k, s in shapes.items()}, 4)
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            action = expert.act(obs)
            next_obs, reward, terminated, truncated, _ = env.step(action)
            buffer.add(obs, action, reward, next_obs, terminated, truncated)
            obs, done = next_obs, terminated or truncated
    agent = SACAgent(shapes, 4, SACConfig(utd=1, critic_actor_ratio=1), seed=0)
    rng = np.random.default_rng(0)
    losses = [agent.update(lambda: buffer.sample(32, rng))["critic_loss"] for _ in range(150)]
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20])


@pytest.mark.slow
def test_any_gymnasium_env_trains(tmp_path):
    cfg = load_config(
        [
            "task=gym",
            "task.id=Pendulum-v1",
            "train.demo_episodes=0",
            "human.enabled=false",
            f"train.run_dir={tmp_path / 'pendulum'}",
            "train.env_steps=250",
            "train.eval_every=250",
            "train.final_eval_episodes=1",
            "train.batch_size=32",
            "train.start_training=50",
        ]
    )
    assert train(cfg)["env_steps"] == 250


@pytest.mark.parametrize(
    "overrides, key, expected",
    [
        (["task=gym", "task.id=NoSuchEnv-v9"], "task.id", "a registered gymnasium id"),
        (["task=gym", "task.id=CartPole-v1", "train.demo_episodes=0", "human.enabled=false"], "task.id", "Box actions"),
        (["task=gym", "task.id=Pendulum-v1"], "task.expert", "train.demo_episodes=0 human.enabled=false"),
        (["agent.critic_subset=5"], "agent.critic_subset", "<= critic_ensemble=2"),
        (["agent.learning_rate=1"], "agent.learning_rate", "an existing config key"),
        (["train.env_steps=0"], "train.env_steps", "a positive integer"),
        (["train.final_eval_episodes=-1"], "train.final_eval_episodes", "a positive integer"),
    ],
)
def test_bad_input_names_what_does_not_match(tmp_path, overrides, key, expected):
    with pytest.raises(ConfigError) as error:
        train(load_config([f"train.run_dir={tmp_path / 'r'}", *overrides]))
    assert error.value.key == key and expected in str(error.value)


def test_checkpoint_from_another_task_is_refused(tmp_path):
    train(small_run(tmp_path, "train.env_steps=60", "train.eval_every=60", "train.final_eval_episodes=1"))
    with pytest.raises(ConfigError, match="action_dim: checkpoint 4, this run 7"):
        from robot_rl.runtime.train import evaluate_checkpoint

        evaluate_checkpoint(
            load_config(["task=reach", "task.action_dim=7", f"eval.checkpoint={tmp_path / 'run' / 'checkpoint'}"])
        )
    with pytest.raises(ConfigError, match="observation_shapes"):
        evaluate_checkpoint(load_config(["task=pick_cube", f"eval.checkpoint={tmp_path / 'run' / 'checkpoint'}"]))


def test_existing_run_dir_needs_resume(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "something").write_text("x")  # no run: another name, not a resume (test_resume.py)
    with pytest.raises(ConfigError, match="holds files that are no robot_rl run"):
        train(load_config([f"train.run_dir={tmp_path / 'r'}"]))
    (tmp_path / "r" / "config.yaml").write_text("seed: 0\n")  # a run's folder: continue it with train.resume=true
    with pytest.raises(ConfigError, match="train.resume=true"):
        train(load_config([f"train.run_dir={tmp_path / 'r'}"]))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A finished 60-step reach run (default task definition: dense reward, 10 Hz, SAC with gaussian noise)."""
    folder = tmp_path_factory.mktemp("tiny")
    train(small_run(folder, "train.env_steps=60", "train.eval_every=60", "train.final_eval_episodes=1"))
    return folder / "run"


@pytest.mark.parametrize(
    "change, key, saved",
    [
        ("task.reward=sparse", "task.reward", "'dense'"),
        ("task.control_rate_hz=20", "task.control_rate_hz", "10"),
        ("task.episode_steps=50", "task.episode_steps", "100"),
        ("agent.hidden=[64,64]", "agent.hidden", "[256, 256]"),
        ("exploration=gsde", "agent.exploration", "'gaussian'"),
    ],
)
def test_resume_with_another_task_definition_is_refused_and_changes_nothing(tiny_run, change, key, saved, capsys):
    from tests.test_bad_input import snapshot

    assert json.loads((tiny_run / "checkpoint" / "task_definition.json").read_text())["task.reward"] == "dense"
    before = snapshot(tiny_run)
    code = main(["train", "task=reach", f"train.run_dir={tiny_run}", "train.resume=true", "train.env_steps=80", change])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("robot-rl: error: ") and err.count("\n") == 1, err
    assert f"{key}=" in err and f"expected {saved} as the run was made" in err and "Traceback" not in err, err
    assert snapshot(tiny_run) == before


def test_a_checkpoint_without_a_task_definition_still_resumes(tiny_run, tmp_path):
    import shutil

    shutil.copytree(tiny_run, tmp_path / "old")
    (tmp_path / "old" / "checkpoint" / "task_definition.json").unlink()  # written before definitions were recorded
    summary = train(
        small_run(
            tmp_path,
            "train.resume=true",
            "train.env_steps=80",
            "train.eval_every=80",
            "train.final_eval_episodes=1",
            name="old",
        )
    )
    assert summary["env_steps"] == 80
    assert (tmp_path / "old" / "checkpoint" / "task_definition.json").exists()  # recorded from now on


class _ShortEpisodes:
    """A 3-step env with a 6-number state, never a success: what an evaluation needs and no more."""

    def reset(self, seed=None):
        self.rng, self.steps = np.random.default_rng(seed), 0
        return {"state": self.rng.normal(size=6).astype(np.float32)}, {}

    def step(self, action):
        self.steps += 1
        obs = {"state": self.rng.normal(size=6).astype(np.float32)}
        return obs, -1.0, False, self.steps == 3, {"success": False}


def acting_state(agent) -> dict:
    """Every acting slot's state (gSDE noise, gripper command and its epsilon draws, CQN-AS chunks) and the
    generator's, as plain arrays and values."""

    def plain(value):
        if isinstance(value, torch.Tensor):
            return value.numpy().copy()
        if isinstance(value, np.random.Generator):
            return value.bit_generator.state
        return value.copy() if isinstance(value, np.ndarray) else value

    state = {"generator": agent.generator.get_state().numpy().copy()}
    for name in agent.acting_slots:
        for slot, entry in enumerate(getattr(agent, name)):
            state[f"{name}[{slot}]"] = {key: plain(value) for key, value in vars(entry).items()}
    return state


@pytest.mark.parametrize(
    "agent_class, config",
    [("sac", {"exploration": "gsde", "gripper_critic": True, "gripper_epsilon": 0.5}), ("cqn_as", {"horizon": 3})],
)
def test_an_evaluation_mid_episode_leaves_every_acting_slot_as_it_was(agent_class, config):
    """Issue 49 item 3: an evaluation between two steps of N envs' episodes acted on slot 0 (begin_episode and act):
    env 0's held gripper command, CQN-AS chunks and gSDE noise were overwritten mid-episode."""

    from robot_rl.policies.cqn_as import CQNASAgent, CQNASConfig
    from robot_rl.policies.sac import SACAgent, SACConfig
    from robot_rl.runtime.run_loop import policy_evaluation

    agent_type, config_type = {"sac": (SACAgent, SACConfig), "cqn_as": (CQNASAgent, CQNASConfig)}[agent_class]
    agent = agent_type({"state": (6,)}, 3, config_type(**config), seed=0)
    rng = np.random.default_rng(0)
    for slot in (0, 1):
        agent.begin_episode(slot)
    for _ in range(5):  # mid-episode on both slots: noise drawn, commands held, chunks stored
        agent.act_batch({"state": rng.normal(size=(2, 6)).astype(np.float32)}, explore=True)
    before = acting_state(agent)
    result = policy_evaluation(agent, _ShortEpisodes())(2)
    assert result["episodes"] == 2  # it evaluated
    np.testing.assert_equal(acting_state(agent), before)
