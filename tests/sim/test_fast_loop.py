"""The safety node's tick inside the MuJoCo tasks' control substeps (robot_rl.sim.fast_critic_loop): every tick runs the
fast-loop critic and then the hard layer on the measured arm, as the safety node does, and the ticks come back in
``info["fast_loop"]``."""

import numpy as np
import pytest
import torch

from robot_rl.cli.main import load_config, main
from robot_rl.core.config import ConfigError
from robot_rl.core.transport import LocalTransport
from robot_rl.data import EpisodeStore
from robot_rl.runtime.actor import EpisodePlay
from robot_rl.runtime.envs import fast_loop_of, make_env
from robot_rl.runtime.safety_learning import SafetyActor, safety_settings
from robot_rl.runtime.session import online_fast_critic
from robot_rl.runtime.train import train
from robot_rl.safety import ArmState, Command, Violation
from robot_rl.safety.fast_critic import (
    STATE_WIDTH,
    FastCriticFilter,
    FastCriticModel,
    FastCriticSettings,
    command_delta,
    fast_critic_config,
)
from robot_rl.safety.robot_limits import safety_limits
from robot_rl.sim.fast_critic_loop import SimFastLoop, attach_fast_loop
from tests.ros.test_fast_critic import toward_x

RATE_HZ = 500.0  # pick_cube: physics 500 Hz, policy 10 Hz: 50 ticks of one physics step per policy step
FORWARD = np.array([1.0, 0.0, 0.0, -1.0])  # the largest step in +x the policy can ask for, gripper open


def config(*overrides: str):
    return load_config(["task=pick_cube", *overrides])


def pick_cube(loop: SimFastLoop | None):
    env = make_env(config().task)
    attach_fast_loop(env, loop)
    env.reset(seed=0)
    return env


def hard_layer(cfg, **limits) -> SimFastLoop:
    values = {**dict(cfg.robot.limits), **limits}
    return SimFastLoop(safety_limits(values, RATE_HZ), RATE_HZ)


def with_critic(cfg, limit: float) -> SimFastLoop:
    """The hard layer and a fast critic that flags commanded steps in +x longer than ``limit`` m."""
    loop = hard_layer(cfg)
    settings = FastCriticSettings(enabled=True, deadline_us=100_000)  # never missed on a loaded test machine
    loop.risk_filter = FastCriticFilter(settings, RATE_HZ, loop.limits.state_timeout, toward_x(limit), version=1)
    return loop


def x_after(env, steps: int) -> float:
    for _ in range(steps):
        env.step(FORWARD)
    return float(env.unwrapped.tcp_pos[0])


def test_every_policy_step_is_fifty_ticks_on_the_sim_clock_with_the_critics_inputs():
    cfg = config()
    env = pick_cube(hard_layer(cfg))
    start = env.unwrapped.tcp_pos.copy()
    _, _, _, _, info = env.step(FORWARD)
    stream = info["fast_loop"]
    assert stream.features.shape == (50, 26) and stream.flags.shape == stream.violation.shape == (50,)
    assert np.allclose(np.diff(stream.time), 1.0 / RATE_HZ)
    assert np.allclose(stream.features[0, :3], start, atol=1e-6)  # the measured TCP position at the first tick
    pos_step = env.unwrapped.pos_step
    delta_x = stream.features[:, STATE_WIDTH]  # the policy's target, as a delta from the measured position
    assert delta_x[0] == pytest.approx(pos_step, rel=1e-3)
    assert delta_x[-1] < delta_x[0]  # the arm moved towards it during the step
    assert np.isnan(stream.risk).all()  # no critic: the hard layer alone
    env.close()


def test_the_hard_layer_limits_the_commanded_speed_inside_a_policy_step():
    cfg = config()
    free, slow = pick_cube(None), pick_cube(hard_layer(cfg, max_speed=0.05))  # 5 cm/s: 5 mm per policy step
    start = free.unwrapped.tcp_pos[0]
    assert slow.unwrapped.tcp_pos[0] == start  # the same reset (seed 0)
    moved_free, moved_slow = x_after(free, 3) - start, x_after(slow, 3) - start
    assert moved_free > 0.02  # without the loop the arm follows the policy's steps
    assert 0.0 < moved_slow <= 3 * 0.005 + 1e-3  # with it, at most the limit's 5 mm per 0.1 s
    _, _, _, _, info = slow.step(FORWARD)
    assert info["fast_loop"].flags.any()  # the translation step limit is flagged on the ticks it clipped
    for env in (free, slow):
        env.close()


def test_the_fast_critic_scales_risky_commands_down_within_the_step_and_flags_them():
    cfg = config()
    plain, guarded = pick_cube(hard_layer(cfg)), pick_cube(with_critic(cfg, limit=0.01))
    start = plain.unwrapped.tcp_pos[0]
    moved_plain, moved_guarded = x_after(plain, 3) - start, x_after(guarded, 3) - start
    assert moved_guarded < 0.5 * moved_plain
    _, _, _, _, info = guarded.step(FORWARD)
    stream = info["fast_loop"]
    filtered = (stream.flags & int(Violation.RISK_FILTERED)) != 0
    assert filtered.any() and np.isfinite(stream.risk).all()
    assert stream.risk[filtered].min() > 0.25  # engaged only above threshold_on
    for env in (plain, guarded):
        env.close()


class _Sent(LocalTransport):
    """A transport that keeps what the learner would receive."""

    def __init__(self):
        super().__init__()
        self.transitions = []

    def send_transitions(self, transitions):
        self.transitions.extend(transitions)


class _Human:
    """Takes over on the steps in ``steps`` with the policy's own proposal."""

    def __init__(self, steps: set[int]):
        self.steps, self.step = steps, 0

    def begin_episode(self, demo: bool) -> None:
        self.step = 0

    def __call__(self, obs, policy_action):
        self.step += 1
        return (self.step - 1 in self.steps), policy_action

    def observe(self, progress: float) -> None:
        pass


def test_a_policy_step_the_fast_critic_changed_reaches_the_learner_as_filtered_and_is_counted():
    cfg = config()
    env = make_env(config().task)
    attach_fast_loop(env, with_critic(cfg, limit=0.01))
    sent, safety = _Sent(), SafetyActor(safety_settings(None))
    play = EpisodePlay(env, _Human({1}), safety, sent, None, demo=False, seed=0)
    for _ in range(4):
        play.step(FORWARD)
    policy_steps = [t for t in sent.transitions if not t.intervened]
    assert len(policy_steps) == 3 and all(t.filtered for t in policy_steps)  # 3 cm steps in +x: each one scaled
    assert not sent.transitions[1].filtered  # the human's step: theirs, never relabelled or penalised
    stats = play.stats()
    assert stats["uid"] == sent.transitions[0].origin.episode  # the record names the episode the stores keep
    assert stats["fast_filtered_steps"] == 4  # the fast loop acts on the human's command too, and it is counted
    ticks = sum(
        int(np.count_nonzero(t.streams["fast_flags"][0] & int(Violation.RISK_FILTERED))) for t in sent.transitions
    )
    assert stats["fast_filtered_ticks"] == ticks > 4 and stats["fast_bypassed_ticks"] == 0
    env.close()


def test_a_task_with_a_sliding_keep_out_zone_gives_the_critic_the_zone_and_its_velocity_as_task_context():
    cfg = load_config(["task=pick_cube_sudden"])
    env = make_env(cfg.task)
    loop = hard_layer(cfg)
    attach_fast_loop(env, loop)
    env.reset(seed=0)
    zones = []
    for _ in range(5):
        _, _, _, _, info = env.step(np.zeros(4))
        features = info["fast_loop"].features
        assert features.shape == (50, 26 + 9)  # the 26 inputs, then the zone's low and high corners and velocity
        assert (features[:, 26:] == features[0, 26:]).all()  # given once per policy step
        zones.append(features[0, 26:])
    zones = np.array(zones)
    low, high = np.array(cfg.task.constraints.keep_out)
    assert np.allclose(zones[0, 3:6] - zones[0, 0:3], high - low)  # the box keeps its size ...
    assert zones[-1, 0] > zones[0, 0] + 0.01 and np.allclose(np.diff(zones[:, 1:3], axis=0), 0)  # ... slides in x
    peak = np.array(cfg.task.constraints.keep_out_velocity)
    assert (zones[:, 6] > 0).all() and (zones[:, 6] <= peak[0] + 1e-6).all() and (zones[:, 7:9] == 0).all()
    # the velocity given is the one the corners move with: over the 0.4 s, their mean speed is within 5% of it
    assert abs((zones[-1, 0] - zones[0, 0]) / 0.4 - zones[:, 6].mean()) < 0.05 * zones[:, 6].mean()
    env.close()


def test_a_critic_fitted_to_ticks_with_task_context_reads_it_and_is_bypassed_without_it(tmp_path):
    from robot_rl.policies.fast_critic import FastCriticFitSettings, fit_fast_risk_model

    rng = np.random.default_rng(0)
    rows = rng.normal(size=(400, 26 + 6)).astype(np.float32)
    labels = (rows[:, 26] > 0).astype(np.float32)  # the risk is the context's alone
    model, report = fit_fast_risk_model(rows, labels, FastCriticFitSettings(updates=300, hidden=(16,)), seed=0)
    assert model.context_width == 6 and report["risky_recall"] > 0.9 and report["safe_recall"] > 0.9
    model.save(tmp_path / "context.npz")
    loaded, _ = FastCriticModel.load(tmp_path / "context.npz")
    state, deltas = rows[0, :19], np.zeros((1, 7), np.float32)
    for side in (1.0, -1.0):
        context = np.full(6, side, np.float32)
        assert (loaded(np.concatenate([state, context]), deltas)[0] > 0.5) == (side > 0)

    cfg = config()
    loop = hard_layer(cfg)
    settings = FastCriticSettings(enabled=True, deadline_us=100_000)
    loop.risk_filter = FastCriticFilter(settings, RATE_HZ, loop.limits.state_timeout, loaded, version=1)
    env = pick_cube(loop)  # pick_cube has no keep-out zone: no context for a model that reads one
    _, _, _, _, info = env.step(FORWARD)
    assert (info["fast_loop"].flags & int(Violation.RISK_BYPASSED)).all() and np.isnan(info["fast_loop"].risk).all()
    env.close()

    # a model without context inputs runs in a task that gives context (it reads the arm alone)
    loop = hard_layer(cfg)
    loop.risk_filter = FastCriticFilter(settings, RATE_HZ, loop.limits.state_timeout, toward_x(0.01), version=1)
    env = make_env(load_config(["task=pick_cube_sudden"]).task)
    attach_fast_loop(env, loop)
    env.reset(seed=0)
    _, _, _, _, info = env.step(FORWARD)
    assert info["fast_loop"].features.shape[1] == 26 + 9 and np.isfinite(info["fast_loop"].risk).all()
    assert (info["fast_loop"].flags & int(Violation.RISK_FILTERED)).any()
    env.close()


def test_the_config_switches_it_on_and_names_rates_that_do_not_fit():
    assert fast_loop_of(config()) is None  # sim_rate_hz: null by default
    loop = fast_loop_of(config("safety.fast_critic.sim_rate_hz=500"))
    assert loop.rate_hz == 500 and loop.risk_filter is None
    enabled = fast_loop_of(config("safety.fast_critic.sim_rate_hz=500", "safety.fast_critic.enabled=true"))
    assert enabled.risk_filter is not None and enabled.risk_filter.current is None  # no weights: bypassed
    env = make_env(config().task)
    with pytest.raises(ConfigError) as error:
        attach_fast_loop(env, fast_loop_of(config("safety.fast_critic.sim_rate_hz=300")))
    assert error.value.key == "safety.fast_critic.sim_rate_hz"
    with pytest.raises(ConfigError) as error:
        fast_loop_of(config("safety.fast_critic.sim_rate_hz=-5"))
    assert error.value.key == "safety.fast_critic.sim_rate_hz"
    env.close()


def short_run(tmp_path, steps: int, *overrides: str) -> dict:
    """``robot-rl train`` on pick_cube for ``steps`` online steps after one demo, through the fast loop at 500 Hz."""
    settings = [f"train.env_steps={steps}", f"train.eval_every={steps}", "train.demo_episodes=1"]
    settings += ["train.eval_episodes=1", "train.final_eval_episodes=1", "train.start_training=30"]
    run = [f"train.run_dir={tmp_path / 'run'}", "train.batch_size=16", "safety.fast_critic.sim_rate_hz=500"]
    return train(load_config(["task=pick_cube", *settings, *run, *overrides]))


@pytest.mark.slow
def test_robot_rl_train_runs_its_envs_through_the_fast_loop_and_a_fast_critic_is_fitted_to_its_ticks(tmp_path, capsys):
    summary = short_run(tmp_path, 60)
    assert summary["env_steps"] == 60
    store = EpisodeStore.open(tmp_path / "run" / "episodes.zarr")
    for name in store.episode_names():  # every episode keeps its ticks, 50 per step, as streams at 500 Hz
        episode = store.read_episode(name)
        ticks = 50 * episode["attrs"]["length"]
        features = episode["streams"]["fast_features"]
        assert features["data"].shape == (ticks, 26) and episode["streams"]["fast_flags"]["data"].shape == (ticks,)
        assert np.allclose(np.diff(features["timestamp"]), 1.0 / RATE_HZ)
        assert np.isnan(episode["streams"]["fast_risk"]["data"]).all()  # the hard layer alone

    # robot-rl fast-critic fits a model to those ticks, writes a new file and never overwrites it
    out = tmp_path / "fast_risk.npz"
    fit = ["fast-critic", f"fast_critic.store={tmp_path / 'run' / 'episodes.zarr'}", f"fast_critic.out={out}"]
    assert main([*fit, "fast_critic.updates=20"]) == 0
    model, _ = FastCriticModel.load(out)
    assert model.hidden == [128, 128]
    before = out.read_bytes()
    assert main([*fit, "fast_critic.updates=20"]) == 2
    assert "fast_critic.out" in capsys.readouterr().err and out.read_bytes() == before


@pytest.mark.slow
def test_the_learner_fits_the_fast_critic_online_and_the_sim_loop_runs_it(tmp_path):
    summary = short_run(
        tmp_path,
        200,
        "safety.fast_critic.enabled=true",  # no starting weights: bypassed until the learner's first fit
        "safety.fast_critic.learn=true",
        "safety.fast_critic.learn_every=60",
        "safety.fast_critic.learn_updates=20",
        "fast_critic.hidden=[16]",
        "train.deterministic=true",  # the actor waits for the learner (and its fit) at each episode's end
        "safety.fast_critic.deadline_us=100000",  # never missed on a loaded test machine: a tick whose model ran
        # past its 200 us CPU deadline is bypassed and scores NaN (that is what failed in CI)
    )
    assert summary["env_steps"] == 200
    store = EpisodeStore.open(tmp_path / "run" / "episodes.zarr")
    risks = [store.read_episode(name)["streams"]["fast_risk"]["data"] for name in store.episode_names()]
    assert np.isnan(risks[0]).all()  # the demo, before any fit: the hard layer alone
    assert np.isfinite(risks[-1]).all()  # later episodes: every tick scored by a model the learner fitted


def test_collect_records_the_fast_loops_ticks(tmp_path):
    out = tmp_path / "probe.zarr"
    assert main(["collect", "task=pick_cube", "collect.episodes=1", f"collect.out={out}", f"seed={0}",
                 "safety.fast_critic.sim_rate_hz=500"]) == 0  # fmt: skip
    store = EpisodeStore.open(out)
    episode = store.read_episode(store.episode_names()[0])
    assert episode["streams"]["fast_violation"]["data"].shape == (50 * episode["attrs"]["length"],)


def test_probing_sends_a_random_candidate_of_the_critic_for_whole_policy_steps_and_flags_it():
    """Probe data: a policy step's ticks send one of the fast filter's candidates (never the policy's own command),
    recorded as the delta the hard layer was handed, and flagged as a changed command."""
    cfg = config()
    limits = hard_layer(cfg).limits
    candidates = FastCriticFilter(FastCriticSettings(enabled=True, escape_step=0.02), RATE_HZ, limits.state_timeout)
    loop = SimFastLoop(limits, RATE_HZ, probe=1.0, candidates=candidates)
    env = pick_cube(None)
    arm = env.unwrapped.arm_state()
    env.close()
    loop.reset(arm, -1.0)
    rng, chosen = np.random.default_rng(0), []
    for step in range(1, 31):
        loop.begin_step(rng)
        arm = ArmState(arm.pos, arm.rot, arm.stamp + 1.0 / RATE_HZ, np.array([0.0, 8.0, 0.0]), np.zeros(3))
        command = Command(arm.pos + [0.01, 0.0, 0.0], arm.rot, -1.0, arm.stamp)
        _, flags, features = loop.tick(arm, command)
        assert flags & Violation.RISK_FILTERED
        rows = candidates.filter.candidates(command_delta(arm, command, -1.0), features[:STATE_WIDTH])
        matches = [i for i, row in enumerate(rows) if np.allclose(row, features[STATE_WIDTH:26], atol=1e-6)]
        assert len(matches) == 1, (features[STATE_WIDTH:26], rows)
        chosen.append(matches[0])
    assert 0 not in chosen and len(set(chosen)) >= 6  # random rows of the 11 (3 scales, hold, retreat, 6 escapes)
    quiet = fast_loop_of(config("safety.fast_critic.sim_rate_hz=500"))
    assert quiet.probe == 0.0 and quiet.candidates is None
    loop = fast_loop_of(config("safety.fast_critic.sim_rate_hz=500", "safety.fast_critic.probe=0.5"))
    assert loop.risk_filter is None and loop.candidates is not None and loop.probe == 0.5
    env = pick_cube(loop)  # in the task: every policy step draws, about half of them probe
    probed = [bool(env.step(FORWARD)[4]["fast_loop"].filtered_ticks) for _ in range(20)]
    assert 3 <= sum(probed) <= 17
    env.close()
    for bad in ("safety.fast_critic.probe=1.5", "safety.fast_critic.pretrain_store=/tmp/store.zarr"):
        with pytest.raises(ConfigError) as error:  # a share outside [0, 1]; a store without learn=true
            fast_loop_of(config("safety.fast_critic.sim_rate_hz=500", bad))
        assert error.value.key == bad.split("=")[0]


def learned_online(cfg):
    return online_fast_critic(cfg, fast_critic_config(cfg), seed=0)


def test_the_online_fast_critic_learner_starts_from_a_stores_ticks_and_keeps_them(tmp_path):
    out = tmp_path / "probe.zarr"
    assert main(["collect", "task=pick_cube", "collect.episodes=1", f"collect.out={out}", "seed=0",
                 "safety.fast_critic.sim_rate_hz=500", "safety.fast_critic.probe=0.5"]) == 0  # fmt: skip
    store = EpisodeStore.open(out)
    ticks = store.read_episode(store.episode_names()[0])["streams"]["fast_violation"]["data"].shape[0]
    learning = ["safety.fast_critic.learn=true", "fast_critic.updates=5", "fast_critic.hidden=[16]"]
    torch.set_num_threads(2)
    learner = learned_online(config(*learning, f"safety.fast_critic.pretrain_store={out}"))
    assert learner.size == ticks and np.isfinite(learner.loss)  # fitted before the run: a network to go on from
    assert torch.get_num_threads() == 1  # train.torch_threads: two runs side by side on 2 cores do not oversubscribe
    assert learner.model().hidden == [16]
    fresh = learned_online(config(*learning))
    assert fresh.size == 0
    demos = tmp_path / "demos.zarr"  # an episode store without ticks
    assert main(["collect", "task=pick_cube", "collect.episodes=1", f"collect.out={demos}", "seed=0"]) == 0
    for store_path in (tmp_path / "absent.zarr", demos):
        with pytest.raises(ConfigError) as error:
            learned_online(config(*learning, f"safety.fast_critic.pretrain_store={store_path}"))
        assert error.value.key == "safety.fast_critic.pretrain_store"
