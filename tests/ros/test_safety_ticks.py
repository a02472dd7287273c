"""The safety node's ticks as a stream (robot_rl.ros.safety.safety_ticks): rows completed with the constraint bits that follow
them, batched, every message checked on arrival, and each step given the ticks before its observation."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from tests.conftest import require

WIDTH = 26 + 9


@pytest.fixture(scope="module")
def ticks():
    require("rclpy")
    from robot_rl.ros.safety import safety_ticks

    return safety_ticks


def features(index: int) -> np.ndarray:
    return np.full(WIDTH, float(index), np.float32)


def logged(ticks, settle_on_tick: bool, batch: int = 4):
    sent = []
    return ticks.TickLog(sent.append, batch, settle_on_tick), sent


def test_real_time_ticks_take_the_constraint_bits_newest_at_the_next_tick_and_go_out_in_batches(ticks):
    log, sent = logged(ticks, settle_on_tick=True)
    for index in range(9):
        if index == 3:
            log.on_violation(2)  # came between tick 2 and tick 3: tick 2 violated after it, not tick 1
        log.add(0.001 * index, features(index), math.nan if index % 2 else 0.25, index)
    assert [len(ticks.checked_ticks(msg)[0]) for msg in sent] == [4, 4]  # the 9th waits for the bits after it
    time, rows, risk, flags, violation = (np.concatenate(c) for c in zip(*map(ticks.checked_ticks, sent)))
    np.testing.assert_allclose(time, 0.001 * np.arange(8))
    np.testing.assert_array_equal(rows[:, 0], np.arange(8))
    assert rows.shape == (8, WIDTH) and rows.dtype == np.float32
    assert np.isnan(risk[1::2]).all() and np.allclose(risk[0::2], 0.25)
    np.testing.assert_array_equal(flags, np.arange(8))
    np.testing.assert_array_equal(violation, [0, 0, 2, 2, 2, 2, 2, 2])
    assert log.sent == 8


def test_sim_time_ticks_wait_for_the_next_arm_states_bits_and_go_out_with_them(ticks):
    log, sent = logged(ticks, settle_on_tick=False, batch=100)
    for index in range(5):  # one arm state's five ticks
        log.add(1.0 + 0.002 * index, features(index), 0.5, 0)
    assert sent == []
    log.on_violation(8)  # the next arm state's bits: after these ticks
    log.add(1.01, features(5), 0.5, 0)
    log.on_violation(0)
    assert [ticks.checked_ticks(msg)[4].tolist() for msg in sent] == [[8] * 5, [0]]


@pytest.mark.parametrize(
    "breakage, message",
    [
        (lambda rows, dims: (rows, [("ticks", len(rows)), ("cols", rows.shape[1])]), "layout"),
        (lambda rows, dims: (rows[:, :20], [("ticks", len(rows)), ("columns", 20)]), "columns"),
        (lambda rows, dims: (rows[:-1], dims), "values for"),
        (lambda rows, dims: (set_at(rows, (1, 3), np.nan), dims), "non-finite"),
        (lambda rows, dims: (set_at(rows, (1, 0), -1.0), dims), "go back"),
        (lambda rows, dims: (set_at(rows, (1, WIDTH + 1), 1.5), dims), "risk outside"),
        (lambda rows, dims: (set_at(rows, (1, WIDTH + 1), np.inf), dims), "risk outside"),
        (lambda rows, dims: (set_at(rows, (1, WIDTH + 2), 0.5), dims), "not integers"),
        (lambda rows, dims: (set_at(rows, (1, WIDTH + 3), 2.0**40), dims), "not integers"),
    ],
)
def test_malformed_ticks_are_refused(ticks, breakage, message):
    from std_msgs.msg import Float64MultiArray, MultiArrayDimension

    from robot_rl.ros.plumbing.guard import MessageError

    rows = np.zeros((3, WIDTH + 4))
    rows[:, 0] = [0.0, 0.001, 0.002]
    rows, dims = breakage(rows, [("ticks", 3), ("columns", WIDTH + 4)])
    msg = Float64MultiArray(data=rows.ravel().tolist())
    msg.layout.dim = [MultiArrayDimension(label=label, size=size) for label, size in dims]
    with pytest.raises(MessageError, match=message):
        ticks.TickInbox().on_message(msg)


def set_at(rows: np.ndarray, index, value) -> np.ndarray:
    rows = rows.copy()
    rows[index] = value
    return rows


def test_each_step_takes_the_ticks_before_its_observation_and_a_reset_drops_the_episode_before(ticks):
    log, sent = logged(ticks, settle_on_tick=True, batch=3)
    inbox = ticks.TickInbox()
    for index in range(10):  # ticks at 0.00 .. 0.09 s
        log.add(0.01 * index, features(index), 0.1, 0)
    log.add(0.1, features(10), 0.1, 0)  # settles the tenth
    log.flush()
    for msg in sent:
        inbox.on_message(msg)
    assert inbox.wait_until(0.09, 0.0) and not inbox.wait_until(0.2, 0.01)
    first = inbox.take(0.045)  # a message split at the observation: its rest is the next step's
    assert first.features[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert inbox.take(0.045) is None
    second = inbox.take(0.075)
    assert second.time.tolist() == pytest.approx([0.05, 0.06, 0.07])
    inbox.drop_before(0.085)  # a reset: what is left of the episode before (0.08) is not the next episode's
    assert inbox.dropped == 1
    assert inbox.take(1.0).features[:, 0].tolist() == [9]
    with pytest.raises(Exception, match="older than the newest"):
        inbox.on_message(sent[0])  # the stream is in time order: a replayed message is refused


@pytest.mark.slow
def test_the_sim_train_graph_records_the_safety_nodes_ticks_and_the_learner_fits_the_fast_critic_on_them(tmp_path):
    """In the node graph (sim time) the safety node's ticks reach the recorder's episode store as each episode's
    streams, with the actor's steps, and the learner fits the fast critic on them (no other ticks exist here) and
    publishes it: the safety node takes the learner's model and scores the later ticks with it."""
    require("rclpy")
    from robot_rl.data import EpisodeStore
    from tests.ros.graph_helpers import launch

    run_dir = tmp_path / "run"
    result = launch(
        "sim_train",
        "task=pick_cube_sudden",
        "task.episode_steps=15",
        "train.demo_episodes=1",
        "train.env_steps=75",
        "train.start_training=15",
        "train.batch_size=16",
        "train.eval_every=100000",
        "train.final_eval_episodes=1",
        "train.checkpoint_every=100000",
        "ros.eval_every_episodes=0",
        "safety.fast_critic.enabled=true",  # no starting weights: the hard layer alone until the learner's first fit
        "safety.fast_critic.learn=true",
        "safety.fast_critic.learn_every=15",
        "safety.fast_critic.learn_updates=10",
        "safety.fast_critic.deadline_us=100000",  # a loaded test machine never bypasses the model on time
        "fast_critic.hidden=[16]",
        f"train.run_dir={run_dir}",
        timeout=500,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert re.search(r"fast critic: model version \d+ from /rl/fast_risk_weights", output), output[-3000:]

    store = EpisodeStore.open(run_dir / "episodes.zarr")
    episodes = [store.read_episode(name) for name in store.episode_names()]
    online = [e for e in episodes if e["attrs"]["source"] == "online"]
    assert sum(e["attrs"]["length"] for e in online) == 75
    for episode in episodes:
        streams, steps = episode["streams"], episode["attrs"]["length"]
        assert set(streams) == {"fast_features", "fast_risk", "fast_flags", "fast_violation"}
        times = streams["fast_features"]["timestamp"]
        assert streams["fast_features"]["data"].shape == (len(times), 26 + 9)  # the zone's corners and velocity
        # 500 Hz ticks over the 0.1 s steps: 50 per step, less the ticks that come with the next step's command
        assert 45 * steps <= len(times) <= 50 * steps, (len(times), steps)
        assert np.all(np.diff(times) > 0)
        assert len(streams["fast_violation"]["data"]) == len(times)
    # scored by the model the learner fitted from its arrival on: the learner fits beside the actor, so on loaded
    # cores the first model can come late in the run (run 59: 15% into the last episode), but every tick after the
    # first one it scored is scored too (NaN: the hard layer alone, no model yet or the model bypassed on time)
    online.sort(key=lambda e: e["streams"]["fast_risk"]["timestamp"][0])
    scored = np.isfinite(np.concatenate([e["streams"]["fast_risk"]["data"] for e in online]))
    assert scored.any(), "no tick of the run was scored by a fitted model"
    first = int(np.argmax(scored))
    assert scored[first:].all(), (first, len(scored), int((~scored[first:]).sum()))
    assert scored[first:].size >= 45, (first, len(scored))  # a step's ticks at least: the model came before the end
