"""The actor plays its first online episode on the learner's weights, not on its own initialisation: a loaded run of
the sim_train graph (test_one_driver) recorded an online episode played before the learner's first weights arrived,
its weights version null."""

from __future__ import annotations

from types import SimpleNamespace

from tests.conftest import require

LEARNER_VERSION = 0  # the update count of the weights a learner publishes when it opens its session


def actor_loop(*, demos: int, weights_after: int | None, subscribers: list[str], startup_timeout: float = 30.0):
    """An ``ActorLoop`` over a session that plays ``demos`` demonstrations, then online episodes until 3 episodes are
    played; the learner's weights arrive at the ``weights_after``-th load (never when None). Returns each episode's
    kind (demo or online) with the weights version it was played with, and the warnings logged."""
    require("rclpy")
    from robot_rl.ros.nodes.actor_node import ActorLoop

    played: list[tuple[str, int | None]] = []
    loads = []

    class Session:
        ended, weights_version = False, None

        @property
        def demo_due(self) -> bool:
            return len(played) < demos

        @property
        def budget_spent(self) -> bool:
            return len(played) >= 3

        def play(self, *args):
            played.append(("demo" if self.demo_due else "online", self.weights_version))
            return {"demo": played[-1][0] == "demo", "length": 5}

    session = Session()

    def load_new_weights() -> None:
        loads.append(1)
        if weights_after is not None and len(loads) >= weights_after:
            session.weights_version = LEARNER_VERSION

    warnings: list[str] = []
    kept: list[int] = []  # the actor state kept at the start and after each finished episode (a restart, a resume)
    ros = SimpleNamespace(eval_only=False, demos_only=False, eval_every_episodes=0, startup_timeout=startup_timeout)
    loop = SimpleNamespace(
        cfg=SimpleNamespace(ros=ros),
        session=session,
        counters=SimpleNamespace(episodes=0),
        env=None,
        transport=None,
        between_steps=None,
        transition_subscribers=subscribers,
        waited_for_weights=False,
        load_new_weights=load_new_weights,
        log=SimpleNamespace(warning=warnings.append, info=lambda *a, **k: None),
        publish=lambda kind, stats: None,
        keep_state=lambda: kept.append(len(played)),
        announce_start=lambda: None,
    )
    loop.wait_for_learner_weights = lambda: ActorLoop.wait_for_learner_weights(loop)
    ActorLoop.run(loop)
    assert kept == list(range(len(played) + 1))  # at the start (once the cell answered), then after each episode
    return played, warnings


def test_the_first_online_episode_waits_for_the_learners_weights():
    played, warnings = actor_loop(demos=0, weights_after=4, subscribers=["robot_rl_learner", "robot_rl_recorder"])
    assert played == [("online", LEARNER_VERSION)] * 3  # old code: the first one played with weights None
    assert warnings == []


def test_demonstrations_do_not_wait_for_weights_and_the_online_episodes_after_them_do():
    played, _ = actor_loop(demos=2, weights_after=5, subscribers=["robot_rl_learner"])
    assert played == [("demo", None), ("demo", None), ("online", LEARNER_VERSION)]


def test_without_a_learner_the_actor_acts_on_its_own_weights_at_once():
    played, warnings = actor_loop(demos=0, weights_after=None, subscribers=["robot_rl_recorder"])
    assert played == [("online", None)] * 3 and warnings == []


def test_a_learner_that_never_publishes_costs_one_wait_and_a_warning():
    played, warnings = actor_loop(demos=0, weights_after=None, subscribers=["robot_rl_learner"], startup_timeout=0.2)
    assert played == [("online", None)] * 3
    assert len(warnings) == 1 and "no weights from robot_rl_learner within" in warnings[0]


def test_an_actor_that_waits_long_for_the_learner_says_what_the_learner_lacks(monkeypatch):
    """Sim time with train.sync: an actor kept waiting for a learner that answers but does not catch up said nothing
    (a loaded CI run: the right robot of test_robot_fleet stood still for 285 s with no line). Now a warning every
    LEARNER_WAIT_LOG s names what the learner ingested and owes; a learner that catches up ends the wait."""
    require("rclpy")
    import time

    from robot_rl.core.transport import LearnerProgress
    from robot_rl.ros.nodes import actor_node

    monkeypatch.setattr(actor_node, "LEARNER_WAIT_LOG", 0.05)
    caught_up_at = time.monotonic() + 0.3
    outbox = SimpleNamespace(actor_id="a1", seq=25)

    class Transport:
        outbox = None

        def learner_progress(self):  # a learner heard just now, which ingested 17 of the 25 until caught_up_at
            received = 25 if time.monotonic() >= caught_up_at else 17
            return LearnerProgress(19, 9, {"a1": received}, heard_at=time.monotonic())

        def backlog(self, start_training, update_every):
            return outbox.seq - self.learner_progress().received["a1"]

        def wait_for_learner(self, condition, timeout):  # no progress is posted here: the wait runs out
            time.sleep(min(timeout, 0.01))
            return condition()

        def service(self, read_spilled):  # the resends while it waits
            serviced.append(read_spilled)

    transport = Transport()
    transport.outbox = outbox
    warnings: list[str] = []
    serviced: list = []
    settings = SimpleNamespace(start_training=10, update_every=1, max_lag=2)
    loop = SimpleNamespace(
        settings=settings, transport=transport, log=SimpleNamespace(warning=warnings.append), read_local="read_local"
    )
    actor_node.ActorLoop.wait_for_learner(loop)
    assert time.monotonic() >= caught_up_at  # it waited until the learner caught up
    assert serviced and set(serviced) == {"read_local"}  # resending what the learner lacks meanwhile
    assert warnings, "no line while the actor waited"
    assert (
        "the learner: it ingested 17 of this actor's 25 transitions and made 9 updates of 19 online steps"
        in (warnings[0])
    )
