"""Several actors feeding one learner: interleaved streams are stored as whole episodes, out-of-order steps refused."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from robot_rl.core.transport import LocalTransport
from robot_rl.data.streams import stored_tuples
from robot_rl.data.transition import Provenance, Transition
from robot_rl.runtime.learner import Learner
from robot_rl.runtime.train_settings import TrainSettings


class _Agent:
    class config:
        discount = 0.9

    def observe(self, transition) -> None:  # the learner's hook for episode-wise agents (open_loop)
        pass


def learner() -> Learner:
    return Learner(_Agent(), TrainSettings(buffer_capacity=2_000), {"state": (2,)}, 2, LocalTransport(), seed=0)


def stream(actor: int, lengths: list[int], takeovers: set[int]) -> list[Transition]:
    """Actor ``actor``'s episodes; observation (actor, step count), reward a unique number; the human acts at
    the steps (within each episode) in ``takeovers``."""
    out, count = [], 0
    for number, length in enumerate(lengths):
        uid = f"a{actor}e{number}"
        for t in range(length):
            out.append(
                Transition(
                    obs={"state": np.array([actor, count], np.float32)},
                    action=np.array([actor, count], np.float32),
                    reward=float(1000 * actor + count),
                    next_obs={"state": np.array([actor, count + 1], np.float32)},
                    terminated=t == length - 1 and number % 2 == 0,
                    truncated=t == length - 1 and number % 2 == 1,
                    intervened=t in takeovers,
                    demo=False,
                    first=t == 0,
                    origin=Provenance(episode=uid, step=t, actor=f"actor{actor}"),
                )
            )
            count += 1
        count += 1  # the next episode starts from a fresh observation
    return out


@settings(max_examples=60, deadline=None)
@given(
    lengths=st.lists(st.lists(st.integers(1, 6), min_size=1, max_size=3), min_size=2, max_size=5),
    takeovers=st.sets(st.integers(0, 5), max_size=3),
    data=st.data(),
)
def test_any_interleaving_of_streams_stores_what_feeding_them_one_after_another_stores(lengths, takeovers, data):
    streams = [stream(actor, episodes, takeovers) for actor, episodes in enumerate(lengths)]
    one_after_another = learner()
    for transitions in streams:
        one_after_another.ingest(transitions)
    cursors, interleaved, order = [0] * len(streams), learner(), []
    while any(cursor < len(s) for cursor, s in zip(cursors, streams)):
        actor = data.draw(st.sampled_from([k for k, s in enumerate(streams) if cursors[k] < len(s)]))
        order.append(streams[actor][cursors[actor]])
        cursors[actor] += 1
    for position, transition in enumerate(order):
        interleaved.ingest([transition])
        if position == len(order) // 2:
            interleaved.router.flush()  # a checkpoint in the middle: waiting episodes are written as segments
    interleaved.router.flush()
    expected_online = stored_tuples(one_after_another.online)
    assert len(expected_online) == sum(map(len, streams))
    assert stored_tuples(interleaved.online) == expected_online
    assert stored_tuples(interleaved.demo) == stored_tuples(one_after_another.demo)  # the takeover segments too
    assert interleaved.online_received == len(order)


def test_steps_repeated_or_skipped_within_an_episode_are_refused_and_counted():
    learner_ = learner()
    steps = stream(0, [5], set())
    learner_.ingest([steps[0], steps[1], steps[1], steps[3], steps[2], steps[3], steps[4]])
    assert learner_.ledger.out_of_order == 2
    assert len(learner_.online) == 5
    assert stored_tuples(learner_.online) == stored_tuples(single(steps))


def single(transitions: list[Transition]):
    one = learner()
    one.ingest(transitions)
    return one.online
