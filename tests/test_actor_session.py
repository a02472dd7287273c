"""ActorSession: an episode's stats name the weights it was played with, version and learner run read together at
the episode's start, even when a restarted learner's weights arrive during the episode."""

from robot_rl.cli import load_config
from robot_rl.envs import make_env, observation_shapes
from robot_rl.session import ActorSession
from robot_rl.teleop import NoHuman
from robot_rl.transport import LocalTransport


class SessionTransport(LocalTransport):
    """A transport whose weights come from named learner runs, as the graph's do."""

    def __init__(self):
        super().__init__()
        self.session: str | None = None

    def weights_session(self) -> str | None:
        return self.session


def test_an_episode_names_the_version_and_learner_run_it_started_with():
    cfg = load_config(["task=reach", "train.demo_episodes=0", "train.env_steps=1000", "task.episode_steps=5"])
    env = make_env(cfg.task)
    acting = ActorSession(cfg, observation_shapes(env), int(env.action_space.shape[0]), NoHuman())
    transport = SessionTransport()
    transport.session = "old"
    transport.publish_weights(5, acting.agent.policy_state())
    assert acting.take_weights(transport)

    def a_restarted_learner_publishes() -> None:  # during the episode, as the graph's executor thread does
        transport.session = "new"
        transport.publish_weights(6, acting.agent.policy_state())

    stats = acting.play(env, transport, None, seed=0, between_steps=a_restarted_learner_publishes)
    assert (stats["weights"], stats["learner_session"]) == (5, "old")
    assert acting.take_weights(transport)
    stats = acting.play(env, transport, None, seed=1)
    assert (stats["weights"], stats["learner_session"]) == (6, "new")
    env.close()
