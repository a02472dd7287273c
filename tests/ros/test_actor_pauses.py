"""The actor node's pause on a silent stream names the stream it waits for, also when that changes while it waits
(a reset that went unanswered, then a camera that stays silent: the run's log says camera)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.conftest import require

CAMERA = "/camera/front/color/image_raw"


def wait(paused_on: str, silent: list[str]) -> list[tuple[str, str]]:
    """``ActorLoop.wait_for_streams`` after a pause on ``paused_on``, with ``silent`` the streams found missing one
    wait after another (then all are back); the records it published, as (kind, topic)."""
    require("rclpy")
    from robot_rl.ros.links.topic_env import StreamStalled
    from robot_rl.ros.nodes.actor_node import ActorLoop

    missing = list(silent)

    def wait_for_streams(timeout: float) -> None:
        if missing:
            raise StreamStalled(missing.pop(0), timeout)

    published: list[tuple[str, str]] = []
    loop = SimpleNamespace(
        session=SimpleNamespace(ended=False),
        env=SimpleNamespace(wait_for_streams=wait_for_streams),
        log=SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None),
        publish=lambda kind, stats: published.append((kind, stats["topic"])),
    )
    ActorLoop.wait_for_streams(loop, paused_on)
    assert not missing  # it waited until every stream was back
    return published


def test_a_pause_that_turns_into_a_silent_camera_is_published_as_the_camera():
    assert wait("/rl/reset (no response)", [CAMERA, CAMERA, CAMERA]) == [("paused", CAMERA)]


def test_waiting_on_the_stream_the_pause_named_publishes_nothing_more():
    assert wait(CAMERA, [CAMERA, CAMERA]) == []
    assert wait(CAMERA, []) == []


def test_an_evaluation_on_the_cell_pauses_on_a_stalled_stream_and_plays_again_only_the_episode_it_cut(monkeypatch):
    """``ros.eval_only`` (and the periodic evaluation): a stream that stalls mid-evaluation pauses it, named; once
    the streams are back the interrupted episode is played again with its seed and the finished ones stand (before,
    the whole evaluation started again: on a loaded machine one evaluation took 49 restarts, each costing resets of
    the cell). Before that, ``ros.eval_only`` let the StreamStalled out: the actor died with a traceback."""
    require("rclpy")
    from robot_rl.ros.links.topic_env import StreamStalled
    from robot_rl.ros.nodes import actor_node
    from robot_rl.ros.nodes.actor_node import ActorLoop

    seeds: list[int] = []

    filter_of_its_own = object()

    def episode(agent, env, seed, safety):
        assert safety is filter_of_its_own  # the learned filter between the policy and the arm, as in training
        seeds.append(seed)
        if len(seeds) == 2:  # the second episode is cut by a stall
            raise StreamStalled("/joint_states", 1.0)
        return {
            "success": seed != 0,
            "length": 10 + seed,
            "return": 1.0,
            "continuity_cost": 0.5,
            "filter_interventions": seed,
        }

    monkeypatch.setattr(actor_node, "evaluation_episode", episode)
    published: list[tuple[str, dict]] = []
    waited: list[str] = []
    loop = SimpleNamespace(
        agent=None,
        env=None,
        session=SimpleNamespace(another_safety_actor=lambda: filter_of_its_own),
        cfg=SimpleNamespace(ros=SimpleNamespace(eval_episodes=3)),
        log=SimpleNamespace(warning=lambda *a, **k: None),
        publish=lambda kind, stats: published.append((kind, stats)),
        wait_for_streams=waited.append,
    )
    result = ActorLoop.evaluate_on_cell(loop)
    assert seeds == [0, 1, 1, 2] and waited == ["/joint_states"]
    assert [(kind, stats["topic"]) for kind, stats in published] == [("paused", "/joint_states")]
    ends = result.pop("episode_ends")
    assert len(ends) == 3 and ends == sorted(ends)
    assert result == {
        "episodes": 3,
        "success_rate": 2 / 3,
        "mean_length": 11.0,
        "mean_return": 1.0,
        "continuity_cost": 0.5,
        "filter_interventions": 3,
    }


def test_a_stall_names_the_stream_silent_the_longest_the_cause_not_what_follows_it():
    """A camera that stops also silences the reward node that reads it: the pause names the camera, whose last frame
    came first, not the reward, which comes earlier in the actor's list of streams (issue 48)."""
    require("rclpy")
    import time

    import pytest

    from robot_rl.ros.links.topic_env import Inbox, StreamStalled

    inbox = Inbox()
    inbox.put("camera/front/color/image_raw", "frame")
    time.sleep(0.01)
    inbox.put("rl/reward", 0.0)  # the reward of that last frame
    with pytest.raises(StreamStalled) as stall:
        inbox.wait_newer(["rl/reward", "camera/front/color/image_raw"], time.monotonic(), timeout=0.05)
    assert stall.value.topic == "camera/front/color/image_raw"


def test_an_online_episode_a_stall_cuts_counts_as_the_stores_count_it_and_an_abandoned_demonstration_does_not():
    """A loaded full run (test_node_restarts) stored 50 episodes while the actor said it played 49: an online
    episode a stalled stream cut short is recorded as it is (and a resumed actor counts it from the stores), but the
    live actor did not count it. A demonstration the stall abandons is played again: no store, no count."""
    require("rclpy")
    from robot_rl.ros.links.topic_env import StreamStalled
    from robot_rl.ros.links.transport import LeftEpisode
    from robot_rl.ros.nodes.actor_node import ActorLoop
    from robot_rl.runtime.session import Counters

    counters = Counters()
    left = iter([LeftEpisode("a" * 32, abandoned=False), LeftEpisode("b" * 32, abandoned=True)])
    stalls = [StreamStalled("/joint_states", 1.0), StreamStalled("/joint_states", 1.0)]

    finished = []

    def play(*args):
        if stalls:
            raise stalls.pop(0)
        counters.count_episode(demo=False)  # as ActorSession.play counts a finished episode
        finished.append(1)
        return {"demo": False, "length": 5}

    class Session:  # the budget: spent once an episode has finished, after both stalls
        ended, demo_due = False, False

        @property
        def budget_spent(self) -> bool:
            return bool(finished)

    session = Session()
    session.play = play
    warnings: list[str] = []
    loop = SimpleNamespace(
        cfg=SimpleNamespace(ros=SimpleNamespace(eval_only=False, demos_only=False, eval_every_episodes=0)),
        session=session,
        counters=counters,
        env=None,
        between_steps=None,
        transport=SimpleNamespace(leave_episode=lambda: next(left)),
        load_new_weights=lambda: None,
        wait_for_learner_weights=lambda: None,
        log=SimpleNamespace(warning=lambda text, **k: warnings.append(text), info=lambda *a, **k: None),
        publish=lambda kind, stats: None,
        wait_for_streams=lambda topic: None,
        keep_state=lambda **kept: None,
        announce_start=lambda: None,
    )
    ActorLoop.run(loop)
    assert counters.episodes == 2  # the cut one and the finished one, not the abandoned demonstration
    assert "episode " + "a" * 32 + " recorded as it is" in warnings[0]
    assert "demonstration " + "b" * 32 + " abandoned" in warnings[1]
