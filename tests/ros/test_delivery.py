"""Delivery while a node is down (robot_rl/ros/plumbing/delivery.py, robot_rl/data/delivery_ledger.py), without DDS:
the actor's outbox keeps what the learner has not checkpointed and what the recorder has not confirmed; the
learner's ledger takes every transition exactly once however resends interleave."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_rl.data import EpisodeRecorder
from robot_rl.data.delivery_ledger import DeliveryLedger, Numbered
from robot_rl.data.transition import Provenance, Transition, stored_transitions
from robot_rl.ros.plumbing.delivery import (
    MAX_CONTROL_CHARS,
    Outbox,
    cut_message,
    numbered,
    parse_ack,
    parse_control,
    parse_cut,
)
from robot_rl.ros.plumbing.guard import MessageError


def episode(uid: str, length: int, state_dim: int = 3) -> list[Transition]:
    rng = np.random.default_rng(abs(hash(uid)) % 2**32)
    states = rng.random((length + 1, state_dim), dtype=np.float32)
    return [
        Transition(
            obs={"state": states[t]},
            next_obs={"state": states[t + 1]},
            action=rng.random(2, np.float32),
            policy_action=np.zeros(2, np.float32),
            reward=float(t),
            terminated=t == length - 1,
            truncated=False,
            intervened=False,
            demo=False,
            first=t == 0,
            filtered=False,
            success=False,
            violation=0,
            origin=Provenance(episode=uid, step=t),
        )
        for t in range(length)
    ]


def learner_ack(session: str, received: int, durable: int, actor: str = "a") -> dict:
    return parse_ack(
        f'{{"node": "learner", "session": "{session}", "actors": '
        f'{{"{actor}": {{"received": {received}, "durable": {durable}}}}}}}'
    )


def test_a_restarted_learner_gets_everything_after_its_checkpoint_and_nothing_is_kept_twice():
    spilled = []
    outbox = Outbox("a", memory_limit=10**9, record_timeout=5.0, spill=spilled.append)
    for t in episode("e1", 4) + episode("e2", 3):
        outbox.stamp(t)
    assert outbox.seq == 7 and not outbox.on_ack(learner_ack("L1", 7, 0))  # first learner: nothing to resend
    assert outbox.resend() == ([], [])
    assert outbox.on_ack(learner_ack("L2", 2, 2))  # it crashed; its checkpoint holds seq 1..2
    _, pending = outbox.resend()
    assert [t.seq for t in pending] == [3, 4, 5, 6, 7]
    outbox.on_ack({"node": "recorder", "episodes": ["e1"]})
    outbox.on_ack(learner_ack("L2", 7, 4))  # checkpoint now holds e1 entirely: e1 leaves memory
    assert list(outbox.episodes) == ["e2"] and outbox.undelivered() == 0


def test_an_episode_the_recorder_never_confirms_is_recorded_by_the_actor():
    kept = []
    outbox = Outbox("a", memory_limit=10**9, record_timeout=0.0, spill=kept.append)
    for t in episode("e1", 3) + episode("e2", 2):
        outbox.stamp(t)
    outbox.on_ack({"node": "recorder", "episodes": ["e2"]})
    for uid in outbox.unrecorded_due():
        outbox.record_locally(uid)
    steps = [[n.transition.origin.step for n in ep] for ep in kept]
    assert steps == [[0, 1, 2]] and kept[0][0].transition.origin.episode == "e1"


def recorded_at_once(outbox: Outbox) -> list[str]:
    """The unconfirmed episodes the actor records in its own store now (its record_timeout far away)."""
    due = outbox.unrecorded_due()
    for uid in due:
        outbox.record_locally(uid)
    return due


def test_an_episode_that_ends_while_the_recorder_is_down_is_recorded_by_the_actor_at_once(monkeypatch):
    """benchmarks/cell_faults.py: an episode that ended while the recorder was restarting waited the 10 s
    record_timeout, and the actor was killed within them: no store held it. The recorder's acknowledgements are its
    heartbeat; silent for RECORDER_SILENCE s it is down, and a finished episode goes to the actor's store at once."""
    from robot_rl.ros.plumbing import delivery

    clock = [100.0]
    monkeypatch.setattr(delivery.time, "monotonic", lambda: clock[0])
    kept = []
    outbox = Outbox("a", memory_limit=10**9, record_timeout=600.0, spill=kept.append)
    outbox.on_ack(parse_ack('{"node": "recorder", "session": "r1", "episodes": []}'))
    for t in episode("e1", 3):
        outbox.stamp(t)
    clock[0] += 1.0
    assert recorded_at_once(outbox) == []  # the recorder is up: it has the episode's time to confirm it
    clock[0] += delivery.RECORDER_SILENCE  # no heartbeat since: the recorder is down
    assert recorded_at_once(outbox) == ["e1"]  # old code: only once record_timeout passed
    for t in episode("e2", 2):
        outbox.stamp(t)
    assert recorded_at_once(outbox) == ["e2"] and len(kept) == 2  # still down: at its end


def test_an_episode_begun_before_a_restarted_recorder_came_is_recorded_by_the_actor_at_once(monkeypatch):
    """A recorder that restarted in the middle of an episode drops it (it saw no start): the actor records it at its
    end, not record_timeout later. An episode begun under the new recorder waits for its confirmation."""
    from robot_rl.ros.plumbing import delivery

    clock = [100.0]
    monkeypatch.setattr(delivery.time, "monotonic", lambda: clock[0])
    outbox = Outbox("a", memory_limit=10**9, record_timeout=600.0, spill=lambda episode: None)
    outbox.on_ack(parse_ack('{"node": "recorder", "session": "r1", "episodes": []}'))
    first, second = episode("e1", 3), episode("e2", 2)
    outbox.stamp(first[0])
    clock[0] += 1.0
    outbox.on_ack(parse_ack('{"node": "recorder", "session": "r2", "episodes": []}'))  # another recorder answers
    for t in first[1:] + second:
        outbox.stamp(t)
    assert recorded_at_once(outbox) == ["e1"]
    outbox.on_ack(parse_ack('{"node": "recorder", "session": "r2", "episodes": ["e2"]}'))
    assert outbox.unconfirmed() == []
    with pytest.raises(MessageError):
        parse_ack('{"node": "recorder", "session": 7, "episodes": []}')


def test_over_the_memory_limit_finished_episodes_move_to_disk_and_come_back_for_a_new_learner():
    kept = []
    outbox = Outbox("a", memory_limit=1, record_timeout=100.0, spill=kept.append)
    for t in episode("e1", 3) + episode("e2", 2)[:1]:  # e2 still running
        outbox.stamp(t)
    outbox.enforce_memory_limit()
    assert list(outbox.episodes) == ["e2"] and [ep[0].transition.origin.episode for ep in kept] == ["e1"]
    assert outbox.on_ack(learner_ack("L1", 0, 0))
    spilled, pending = outbox.resend()
    assert spilled == [("e1", 1)] and [t.seq for t in pending] == [4]
    assert outbox.undelivered() == 4


def test_a_graph_without_learner_or_recorder_keeps_nothing_for_them():
    kept = []
    outbox = Outbox(
        "a", memory_limit=10**9, record_timeout=0.0, spill=kept.append, for_learner=False, for_recorder=False
    )
    for t in episode("e1", 3):
        outbox.stamp(t)
    assert not outbox.episodes and not outbox.unrecorded_due() and not kept


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(1, 6), min_size=1, max_size=6), data=st.data())
def test_any_pattern_of_resends_ingests_each_transition_exactly_once(lengths, data):
    steps = []
    for index, length in enumerate(lengths):
        steps += episode(f"e{index}", length)
    stream = numbered(steps, "a", 1)
    delivered, position = [], 0
    while position < len(stream):  # send a chunk, then maybe resend a suffix of what was sent (a new learner)
        end = data.draw(st.integers(position + 1, len(stream)))
        delivered += stream[position:end]
        if data.draw(st.booleans()):
            delivered += stream[data.draw(st.integers(0, end - 1)) : end]
        position = end
    ledger = DeliveryLedger()
    taken = [t.seq for t in delivered if ledger.accept(t)]
    assert taken == list(range(1, len(stream) + 1))
    assert ledger.ingested == len(stream) and ledger.gaps == 0


def test_a_backfilled_episode_is_not_taken_again_when_the_actor_resends_it():
    ledger = DeliveryLedger()
    backfilled = episode("e1", 3)
    assert all(ledger.accept(Numbered(t)) for t in backfilled)  # from the recorder's store: no actor numbering
    resent, live = numbered(episode("e1", 3), "a", 1), numbered(episode("e2", 2), "a", 4)
    assert [ledger.accept(t) for t in resent + live] == [False] * 3 + [True] * 2


def test_stored_episodes_come_back_as_the_transitions_that_were_sent(tmp_path):
    from robot_rl.data import EpisodeStore

    store = EpisodeStore.create(tmp_path / "actor.zarr", {"observation_shapes": {"state": [3]}, "action_dim": 2})
    sent = episode("0123456789abcdef0123456789abcdef", 4)
    name = EpisodeRecorder(store).record(sent)
    assert store.episode_attrs(name)["uid"] == sent[0].origin.episode
    back = numbered(stored_transitions(store.read_episode(name), sent[0].origin.episode), "a", 5)
    assert [n.seq for n in back] == [5, 6, 7, 8] and {n.transition.origin.actor for n in back} == {"a"}
    for before, after in zip(sent, (n.transition for n in back)):
        np.testing.assert_array_equal(before.obs["state"], after.obs["state"])
        np.testing.assert_array_equal(before.next_obs["state"], after.next_obs["state"])
        assert (before.reward, before.terminated, before.first) == (
            after.reward,
            after.terminated,
            after.first,
        )


def test_live_transitions_that_overtake_a_resend_wait_for_it():
    steps = episode("e1", 5) + episode("e2", 4)
    stream = [Numbered(t.by("a"), seq, floor=1) for seq, t in enumerate(steps, start=1)]
    ledger = DeliveryLedger()
    order = stream[:3] + stream[6:8] + stream[3:8] + stream[8:]  # 7, 8 arrive live before the resend of 4..8
    assert [t.seq for t in order if ledger.accept(t)] == list(range(1, 10))
    assert ledger.gaps == 2 and ledger.duplicates == 0


def test_a_fresh_learner_starts_at_the_actors_floor():
    steps = episode("e1", 3) + episode("e2", 3)
    # seq 1..10 are durable at an earlier learner
    stream = [Numbered(t.by("a"), seq, floor=11) for seq, t in enumerate(steps, start=11)]
    ledger = DeliveryLedger()
    assert all(ledger.accept(t) for t in stream) and ledger.received == {"a": 16}


def test_the_outbox_numbers_a_copy_and_leaves_the_step_as_it_was():
    outbox = Outbox("a", memory_limit=10**9, record_timeout=5.0, spill=lambda episode: None)
    steps = episode("e1", 2)
    sent = [outbox.stamp(t) for t in steps]
    assert [(n.transition.origin.actor, n.seq, n.floor) for n in sent] == [("a", 1, 1), ("a", 2, 1)]
    assert all(type(t) is Transition and t.origin.actor == "" for t in steps)  # the actor's own episode is not changed
    assert outbox.episodes["e1"] == sent and sent[1].transition.obs is steps[1].obs  # a shallow copy: no array copied


def test_a_learner_that_stops_acknowledging_progress_gets_the_rest_again():
    outbox = Outbox("a", memory_limit=10**9, record_timeout=5.0, spill=lambda episode: None)
    outbox.resend_after = 0.0
    for t in episode("e1", 4):
        outbox.stamp(t)
    assert not outbox.on_ack(learner_ack("L1", 4, 0)) and outbox.on_ack(learner_ack("L1", 4, 0)) is False
    outbox.stamp(episode("e2", 1)[0])
    assert outbox.on_ack(learner_ack("L1", 4, 0))  # seq 5 was lost: no progress while it lacks it
    assert [t.seq for t in outbox.resend()[1]] == [5]


def test_each_step_keeps_the_time_it_was_observed_however_late_it_is_recorded(tmp_path):
    """The recorder node takes steps in batches while it commits an episode; a step's ``timestamp`` is its
    observation's stamp on the actor's clock (sim time in a rehearsal), not when the recorder got it."""
    from robot_rl.data import EpisodeStore
    from robot_rl.data import wire as codec

    sent = episode("0123456789abcdef0123456789abcdef", 5)
    for t, transition in enumerate(sent):
        transition.origin = replace(transition.origin, stamp=12.0 + 0.1 * (t + 1))  # s of sim time, a period apart
    received, _ = codec.decode_transitions(codec.encode_transitions([Numbered(t) for t in sent]), None)
    store = EpisodeStore.create(tmp_path / "rec.zarr", {"observation_shapes": {"state": [3]}, "action_dim": 2})
    late = iter(range(100, 200))  # the recorder's clock at receipt: all at once, long after
    name = EpisodeRecorder(store, clock=lambda: float(next(late))).record([n.transition for n in received])
    np.testing.assert_allclose(store.read_episode(name)["timestamp"], [12.1, 12.2, 12.3, 12.4, 12.5])
    back = stored_transitions(store.read_episode(name), sent[0].origin.episode)
    assert [t.origin.stamp for t in back] == [t.origin.stamp for t in sent]
    unstamped = episode("fedcba9876543210fedcba9876543210", 2)  # a sender that does not know: stamped on receipt
    name = EpisodeRecorder(store, clock=lambda: 7.0).record(unstamped)
    np.testing.assert_array_equal(store.read_episode(name)["timestamp"], [7.0, 7.0])


def test_a_stored_episode_gives_each_step_back_the_ticks_it_was_sent_with(tmp_path):
    """A resend from the actor's store, or a learner's backfill from the recorder's, carries the safety node's ticks
    again, each with the step it came with (the ticks before the step's observation), as the learner collects them
    per episode for the fast critic."""
    from robot_rl.data import EpisodeStore

    sent, rng = episode("0123456789abcdef0123456789abcdef", 4), np.random.default_rng(0)
    for t, transition in enumerate(sent):
        transition.origin = replace(transition.origin, stamp=5.0 + 0.1 * (t + 1))
        times = 5.0 + 0.1 * t + 0.002 * np.arange(50)  # before the step's observation
        if t == 2:
            continue  # a step without ticks (none came in time)
        transition.streams = {
            "fast_features": (rng.normal(size=(50, 26)).astype(np.float32), times),
            "fast_violation": (rng.integers(0, 3, 50).astype(np.uint32), times),
        }
    store = EpisodeStore.create(tmp_path / "actor.zarr", {"observation_shapes": {"state": [3]}, "action_dim": 2})
    name = EpisodeRecorder(store).record(sent)
    back = stored_transitions(store.read_episode(name), sent[0].origin.episode)
    assert back[2].streams is None
    for before, after in zip(sent, back):
        for key, (values, times) in (before.streams or {}).items():
            np.testing.assert_array_equal(after.streams[key][0], values)
            np.testing.assert_array_equal(after.streams[key][1], times)


def test_control_messages_longer_than_the_limit_are_refused_before_parsing():
    padding = " " * MAX_CONTROL_CHARS
    with pytest.raises(MessageError, match="ack of"):
        parse_ack('{"node": "recorder", "episodes": []}' + padding)
    with pytest.raises(MessageError, match="learner progress of"):
        parse_control(padding + "{}", "learner progress")
    assert parse_control('{"online": 1}', "learner progress") == {"online": 1}


@pytest.mark.parametrize("cut_first", [False, True], ids=["steps_then_cut", "cut_then_steps"])
def test_an_episode_the_budget_cut_short_is_committed_when_its_last_step_and_the_cut_are_in(tmp_path, cut_first):
    """In the node graph the actor's budget may end an episode with no terminated or truncated step; the recorder
    heard nothing of it and the episode went to the actor's store (the recorder's lacked it). The cut comes on its
    own topic, before or after the last steps."""
    from robot_rl.data import EpisodeStore

    store = EpisodeStore.create(tmp_path / "recorder.zarr", {"observation_shapes": {"state": [3]}, "action_dim": 2})
    acknowledged: list[str] = []
    recorder = EpisodeRecorder(store, acknowledge=acknowledged.extend)
    uid = "0123456789abcdef0123456789abcdef"
    sent = numbered(episode(uid, 10)[:6], "a", 1)  # cut after its 6th step
    cut = parse_cut(cut_message("a", uid, sent[-1].seq))
    assert cut == (uid, 6)
    if cut_first:
        assert recorder.cut(*cut) is None and recorder.add_numbered(sent[:5]) == []  # the last step is still on its way
        committed = recorder.add_numbered(sent[5:])
    else:
        assert recorder.add_numbered(sent) == []
        committed = [recorder.cut(*cut)]
    assert committed == store.episode_names() and acknowledged == [uid]
    assert store.episode_attrs(committed[0])["length"] == 6 and store.episode_attrs(committed[0])["uid"] == uid
    assert recorder.cut(*cut) is None and acknowledged == [uid, uid]  # a cut heard again is confirmed again
    assert len(store.episode_names()) == 1

    nxt = numbered(episode("f" * 32, 3), "a", 7)  # the next episode is not cut
    assert len(recorder.add_numbered(nxt)) == 1 and len(store.episode_names()) == 2


def test_an_online_episode_whose_actor_died_is_recorded_as_it_is_when_its_restarted_actor_begins(tmp_path):
    """Issue 71: an actor killed mid-episode (kill -9) left its episode open, and the recorder dropped it when the
    actor the launch started again (a new actor stream) began its first episode: the learner had its steps, no store
    had them. The gone actor's online episode is committed as it is; a demonstration is dropped (played again), and
    the same actor starting anew still drops its own unfinished episode (a demonstration a stall abandoned)."""
    from dataclasses import replace

    from robot_rl.data import EpisodeStore

    store = EpisodeStore.create(tmp_path / "recorder.zarr", {"observation_shapes": {"state": [3]}, "action_dim": 2})
    recorder = EpisodeRecorder(store)
    cut = numbered(episode("a" * 32, 10)[:4], "actor-1", 1)  # the actor dies after 4 steps
    assert recorder.add_numbered(cut) == []
    committed = recorder.add_numbered(numbered(episode("b" * 32, 3), "actor-2", 1))  # restarted: a stream of its own
    assert len(committed) == 2 and committed == store.episode_names()
    assert [store.episode_attrs(name)["length"] for name in committed] == [4, 3]
    assert store.episode_attrs(committed[0])["uid"] == "a" * 32

    demo = [replace(t, demo=True) for t in episode("c" * 32, 10)[:4]]
    assert recorder.add_numbered(numbered(demo, "actor-2", 4)) == []  # a demonstration, then its actor dies
    assert len(recorder.add_numbered(numbered(episode("e" * 32, 3), "actor-3", 1))) == 1
    assert (
        recorder.add_numbered(numbered(episode("g" * 32, 5)[:2], "actor-3", 4)) == []
    )  # left unfinished by its own actor
    assert len(recorder.add_numbered(numbered(episode("h" * 32, 3), "actor-3", 6))) == 1
    uids = [store.episode_attrs(name)["uid"] for name in store.episode_names()]
    assert uids == ["a" * 32, "b" * 32, "e" * 32, "h" * 32]


@pytest.mark.parametrize(
    "text",
    [
        '{"episode": "", "seq": 3}',
        '{"episode": "u", "seq": 0}',
        '{"episode": "u", "seq": true}',
        '["u", 3]',
        '{"episode": "u", "seq": 2.5}',
        '{"episode": "%s", "seq": 3}' % ("x" * 65),
    ],
)
def test_a_malformed_episode_cut_is_refused(text):
    with pytest.raises(MessageError, match="episode cut"):
        parse_cut(text)
