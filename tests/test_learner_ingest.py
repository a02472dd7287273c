"""How the learner files transitions: human takeovers as demo segments of their own, filtered steps relabelled."""

import numpy as np
import pytest

from robot_rl.core.transport import LocalTransport
from robot_rl.data.transition import Provenance, Transition
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.replay_router import SafetyRelabel
from robot_rl.runtime.safety_learning import SafetySettings
from robot_rl.runtime.train_settings import TrainSettings
from robot_rl.safety.fast_critic import FastCriticSettings


class _Agent:
    class config:
        discount = 0.9

    def observe(self, transition) -> None:  # the learner's hook for episode-wise agents (open_loop)
        pass

    def update(self, sample) -> dict:
        return {}

    def policy_state(self) -> dict:
        return {}


def learner(safety: SafetySettings | None = None, fast: FastCriticSettings | None = None) -> Learner:
    return Learner(
        _Agent(),
        TrainSettings(buffer_capacity=200),
        {"state": (3,)},
        2,
        LocalTransport(),
        seed=0,
        relabel=SafetyRelabel.of(safety, fast),
    )


def episode(length: int, human_steps: set[int], uid: str = "e0", filtered: set[int] = frozenset()) -> list[Transition]:
    """Step t: observation t, next observation t + 1, action (t, t), reward t; the human acts at ``human_steps``."""
    return [
        Transition(
            obs={"state": np.full(3, t, np.float32)},
            action=np.full(2, t, np.float32),
            policy_action=np.full(2, -t, np.float32),
            reward=float(t),
            next_obs={"state": np.full(3, t + 1, np.float32)},
            terminated=False,
            truncated=t == length - 1,
            intervened=t in human_steps,
            demo=False,
            first=t == 0,
            filtered=t in filtered,
            origin=Provenance(episode=uid, step=t),
        )
        for t in range(length)
    ]


def segments(buffer) -> list[list[float]]:
    """The first state value of every stored transition, grouped by stored episode."""
    valid = buffer.valid_indices()
    return [
        buffer.obs["state"][valid[buffer.episode[valid] == e], 0].tolist() for e in np.unique(buffer.episode[valid])
    ]


def slot_of_step(buffer, step: int) -> np.ndarray:
    valid = buffer.valid_indices()
    return valid[buffer.obs["state"][valid, 0] == step]


def test_intervention_segment_each_takeover_is_its_own_demo_episode():
    rl = learner()
    rl.ingest(episode(12, human_steps={2, 3, 7, 8, 9}))
    assert segments(rl.demo) == [[2, 3], [7, 8, 9]]  # the old code stored [2, 3, 4, 8, 9]: step 7 began at obs 4
    assert segments(rl.online) == [list(range(12))]
    assert rl.online_received == 12


def test_intervention_segment_n_step_returns_stop_at_the_end_of_a_takeover():
    rl = learner()
    rl.ingest(episode(12, human_steps={2, 3, 7, 8}))
    last_of_first = slot_of_step(rl.demo, 3)
    reward, steps, terminated = rl.demo.n_step_returns(last_of_first, 3, 1.0)
    assert (reward[0], steps[0], terminated[0]) == (3.0, 1, False)  # bootstraps from obs 4, never adds reward 7
    next_state = rl.demo.obs["state"][(last_of_first + steps) % rl.demo.capacity, 0]
    assert next_state[0] == 4


def test_intervention_segment_action_sequences_and_previous_action():
    rl = learner()
    rl.ingest(episode(12, human_steps={2, 3, 7, 8}))
    first_of_second = slot_of_step(rl.demo, 7)
    actions, mask = rl.demo.action_sequences(first_of_second, 4)
    assert mask[0].tolist() == [True, True, False, False]
    assert actions[0, :2, 0].tolist() == [7, 8]
    previous, has_previous = rl.demo.previous_actions(first_of_second)
    assert has_previous[0] and previous[0, 0] == 6  # the policy's command just before the takeover (gripper label)
    previous, has_previous = rl.demo.previous_actions(slot_of_step(rl.demo, 8))
    assert has_previous[0] and previous[0, 0] == 7


def test_intervention_segment_opening_actions_survive_save_and_load(tmp_path):
    rl = learner()
    rl.ingest(episode(12, human_steps={2, 3, 7, 8}))
    rl.demo.save(tmp_path / "demo")
    loaded = type(rl.demo).load(tmp_path / "demo")
    previous, has_previous = loaded.previous_actions(slot_of_step(loaded, 7))
    assert has_previous[0] and previous[0, 0] == 6


def test_intervention_segment_a_new_episode_closes_the_last_takeover():
    rl = learner()
    rl.ingest(episode(5, human_steps={3, 4}, uid="a")[:4])  # cut short in a takeover (budget, crash)
    rl.ingest(episode(5, human_steps={0, 1}, uid="b"))
    assert segments(rl.demo) == [[3], [0, 1]]
    _, has_previous = rl.demo.previous_actions(slot_of_step(rl.demo, 0))
    assert not has_previous[0]  # the episode's first step has no command before it


@pytest.mark.parametrize("relabel", ["proposed", "executed"])
def test_a_filtered_step_is_learned_as_the_relabel_setting_says(relabel):
    rl = learner(SafetySettings(enabled=True, penalty=0.5, relabel=relabel))
    rl.ingest(episode(6, human_steps=set(), filtered={2}))
    slot = slot_of_step(rl.online, 2)
    assert rl.online.reward[slot][0] == pytest.approx(2 - 0.5)
    assert rl.online.action[slot][0, 0] == 2  # the executed action is kept (the safety critic learns from it)
    learned = rl.online.learned_action[slot][0, 0]
    assert learned == (-2 if relabel == "proposed" else 2)
    batch = rl.online.sample(64, np.random.default_rng(0))
    rows = batch.obs["state"][:, 0] == 2
    assert rows.any() and (batch.action[rows, 0] == learned).all() and (batch.executed_action[rows, 0] == 2).all()
    unfiltered = slot_of_step(rl.online, 3)
    assert rl.online.learned_action[unfiltered][0, 0] == rl.online.action[unfiltered][0, 0] == 3


@pytest.mark.parametrize("fast_enabled", [True, False])
def test_a_step_the_fast_loop_critic_changed_costs_the_penalty_without_the_policy_rate_filter(fast_enabled):
    """The sim's fast-loop critic flags the policy's steps it changed as filtered (robot_rl.runtime.actor): they cost
    ``safety.penalty`` with the fast critic on, also when the policy-rate filter (``safety.enabled``) is off."""
    rl = learner(SafetySettings(enabled=False, penalty=0.5), FastCriticSettings(enabled=fast_enabled))
    rl.ingest(episode(6, human_steps=set(), filtered={2}))
    slot = slot_of_step(rl.online, 2)
    assert rl.online.reward[slot][0] == pytest.approx(2 - 0.5 if fast_enabled else 2)
    assert (
        rl.online.learned_action[slot][0, 0] == 2
    )  # no relabelling: the fast loop changed the command, not the action


def test_the_backlog_never_reads_caught_up_while_a_step_is_half_ingested():
    """The actor reads the backlog from its own thread with no lock (train.sync, train.deterministic): a step
    counted as taken before its update is due made the backlog read 0 mid-ingest, so a deterministic run could
    take weights and act before the update that step made due (a flaky reproducibility test under load). The actor
    reads the progress the learner publishes between two ingests and after each update (``ActorLink.backlog``)."""
    transport = LocalTransport()
    rl = Learner(_Agent(), TrainSettings(buffer_capacity=200, start_training=0), {"state": (3,)}, 2, transport, seed=0)
    transitions = episode(5, human_steps=set())
    transport.send_transitions(transitions)
    seen = []
    add = rl.online.add

    def add_and_look(*args, **kwargs):
        seen.append(transport.backlog(start_training=0, update_every=1))  # what the actor thread would read now
        add(*args, **kwargs)

    rl.online.add = add_and_look
    for transition in transitions:  # as the learner's thread does
        rl.ingest([transition])
        rl.report_progress()
    assert seen == [5, 5, 5, 5, 5]  # at each: one step fewer to take in, one update more due
    assert transport.backlog(start_training=0, update_every=1) == 5 and rl.taken == 5 == rl.online_received
    rl.update_while_due()
    assert transport.backlog(start_training=0, update_every=1) == 0 and rl.update_calls == 5


def test_progress_published_in_the_middle_of_an_ingest_is_the_progress_before_it():
    """An ingest counts a step in several numbers one after the other (taken, the ledger's, online_received), while
    the learner's thread may publish its progress in the middle of it (``ingest_everything_sent`` ingests from the
    actor's thread at a checkpoint). Published there, a step counted by one number and not yet by another made the
    backlog read wrong, and it was right only as long as ``taken`` was counted last. What is published is the
    counters as they stood between two whole ingests, whatever the order of the statements that count a step."""
    transport = LocalTransport()
    rl = Learner(_Agent(), TrainSettings(buffer_capacity=200, start_training=0), {"state": (3,)}, 2, transport, seed=0)
    transitions = episode(4, human_steps=set())
    transport.send_transitions(transitions)
    seen = []

    def publishing_first(step):
        def hooked(*args, **kwargs):
            rl.report_progress()  # as the learner's thread would, here
            seen.append(transport.backlog(start_training=0, update_every=1))
            return step(*args, **kwargs)

        return hooked

    rl.router.add = publishing_first(rl.router.add)  # after the ledger took the step, before it is counted online
    rl.agent.observe = publishing_first(rl.agent.observe)  # after it is counted online
    for transition in transitions:
        rl.ingest([transition])
    assert seen == [4] * 8  # at each point: the steps not taken in plus the updates due, the step in hand never half
    rl.report_progress()
    progress = transport.learner_progress()
    assert (progress.taken, progress.online_received, transport.backlog(start_training=0, update_every=1)) == (4, 4, 4)


def test_a_wait_for_the_learner_wakes_at_its_progress_not_at_the_next_sleep():
    """The actor keeping pace and the driver waiting for the learner slept in turns of 0.5-1 ms and looked again
    (issue 77 item 3). They wait on the learner's progress board: the learner's post wakes them at once, a condition
    that never comes runs out at the timeout, and a condition already true returns without waiting."""
    import threading
    import time

    from robot_rl.core.transport import LearnerProgress

    transport = LocalTransport()
    woke: list[float] = []

    def wait() -> None:
        transport.wait_for_learner(lambda: transport.learner_progress().update_calls >= 3, timeout=60.0)
        woke.append(time.monotonic())

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    transport.publish_progress(10, 2, {}, 10)  # not yet
    time.sleep(0.2)
    assert not woke
    posted = time.monotonic()
    transport.publish_progress(11, 3, {}, 11)
    waiter.join(timeout=30.0)
    assert woke and woke[0] - posted < 30.0  # the post woke it (the timeout was 60 s)
    assert transport.learner_progress() == LearnerProgress(11, 3, {}, 11, transport.learner_progress().heard_at)
    started = time.monotonic()
    assert transport.wait_for_learner(lambda: False, timeout=0.1) is False
    assert time.monotonic() - started >= 0.1
    assert transport.wait_for_learner(lambda: True, timeout=60.0) is True


def test_what_the_actor_sends_waits_in_one_queue_that_the_learner_takes_from():
    """The learner took transitions through two queues in a row (the transport's, then its own ``pending``; over
    ROS 2 three, issue 77 item 3). Now a transport's arrivals are the learner's only queue: what is sent waits there,
    the learner takes it from there one step at a time, and its thread sleeping on an empty queue is woken by the
    next arrival (the waiter's timeout is 60 s)."""
    import threading

    from robot_rl.runtime.learner import in_process_transport

    transport = in_process_transport()
    rl = Learner(_Agent(), TrainSettings(buffer_capacity=200, start_training=0), {"state": (3,)}, 2, transport, seed=0)
    assert not hasattr(rl, "pending")
    transport.send_transitions(episode(3, human_steps=set()))
    assert len(transport.arrivals) == 3 and rl.taken == 0
    rl.ingest_next()
    assert len(transport.arrivals) == 2 and rl.taken == 1
    rl.ingest_everything_sent(transport)
    assert len(transport.arrivals) == 0 and rl.taken == 3 == rl.online_received
    woken = []
    waiter = threading.Thread(target=lambda: woken.append(transport.arrivals.wait(timeout=60.0)))
    waiter.start()
    transport.send_transitions(episode(1, human_steps=set(), uid="e1"))
    waiter.join(timeout=60.0)
    assert woken == [True]
    assert transport.arrivals.wait(timeout=0.0) is True and transport.arrivals.take() is not None
    assert transport.arrivals.take() is None and transport.arrivals.wait(timeout=0.01) is False
