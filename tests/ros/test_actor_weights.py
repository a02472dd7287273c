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
    from robot_rl.ros.actor_node import ActorLoop

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
    kept: list[int] = []  # the acting random state kept after each finished episode (for a resume)
    ros = SimpleNamespace(eval_only=False, demos_only=False, eval_every_episodes=0, startup_timeout=startup_timeout)
    loop = SimpleNamespace(
        cfg=SimpleNamespace(ros=ros),
        session=session,
        counters=None,
        env=None,
        transport=None,
        between_steps=None,
        transition_subscribers=subscribers,
        waited_for_weights=False,
        load_new_weights=load_new_weights,
        log=SimpleNamespace(warning=warnings.append, info=lambda *a, **k: None),
        publish=lambda kind, stats: None,
        keep_random_state=lambda: kept.append(len(played)),
    )
    loop.wait_for_learner_weights = lambda: ActorLoop.wait_for_learner_weights(loop)
    ActorLoop.run(loop)
    assert kept == list(range(1, len(played) + 1))
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
