"""ActorSession: an episode's stats name the weights it was played with, version and learner run read together at
the episode's start, even when a restarted learner's weights arrive during the episode."""

import numpy as np

from robot_rl.cli.main import load_config
from robot_rl.core.transport import LocalTransport
from robot_rl.runtime.envs import make_env, observation_shapes
from robot_rl.runtime.session import ActorSession
from robot_rl.runtime.teleop import NoHuman


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


def test_a_resumed_learner_keeps_the_fast_critic_it_learned_and_published(tmp_path):
    """safety.fast_critic.learn: the checkpoint holds the fast critic's learner (network, optimizer, rows) and the
    model it published, so a restarted learner publishes the same model and goes on fitting from where it was."""
    import numpy as np

    from robot_rl.core.composed_config import load_config
    from robot_rl.core.transport import LocalTransport
    from robot_rl.runtime.session import Counters, LearnerSession, restore, save_checkpoint
    from robot_rl.safety.fast_critic import INPUT_WIDTH

    overrides = ["task=reach", f"train.run_dir={tmp_path / 'run'}", "safety.fast_critic.learn=true"]
    cfg = load_config(overrides)
    session = LearnerSession(cfg, {"state": (3,)}, 2, LocalTransport())
    session.open(resume=False)
    learner = session.learner
    fast = learner.auxiliaries["fast_critic"]
    rng = np.random.default_rng(0)
    fast.learner.add_episode(rng.normal(size=(400, INPUT_WIDTH)).astype(np.float32), rng.random(400) < 0.1)
    assert fast.update(learner.online, cfg.safety.fast_critic.learn_every)  # fitted and published: version 1
    model, version = fast.published
    save_checkpoint(session.checkpoint_dir, learner, Counters(), session.definition)

    again = LearnerSession(load_config([*overrides, "train.resume=true"]), {"state": (3,)}, 2, LocalTransport())
    restore(again.checkpoint_dir, again.learner, again.cfg)
    again_fast = again.learner.auxiliaries["fast_critic"]
    restored, restored_version = again_fast.published
    assert restored_version == version
    for (w, b), (w2, b2) in zip(model.layers, restored.layers):
        np.testing.assert_array_equal(w, w2)
        np.testing.assert_array_equal(b, b2)
    assert again_fast.learner.size == 400 and again_fast.fitted_at == fast.fitted_at
    np.testing.assert_array_equal(again_fast.learner.model().layers[0][0], model.layers[0][0])


def fast_learning_learner(tmp_path):
    """The learner of a reach session that learns the fast critic online (``safety.fast_critic.learn``)."""
    from robot_rl.core.composed_config import load_config
    from robot_rl.core.transport import LocalTransport
    from robot_rl.runtime.session import LearnerSession

    cfg = load_config(["task=reach", f"train.run_dir={tmp_path / 'run'}", "safety.fast_critic.learn=true"])
    session = LearnerSession(cfg, {"state": (3,)}, 2, LocalTransport())
    session.open(resume=False)
    return session.learner


def ticked_episode(rng, actor: str, width: int, ticks: int, demo: bool = False) -> list:
    """Three steps of one episode of ``actor``, each carrying ``ticks`` fast-loop ticks of ``width`` features."""
    import numpy as np

    from robot_rl.data.transition import Provenance, Transition

    times = np.arange(ticks) * 0.002
    return [
        Transition(
            obs={"state": np.zeros(3, np.float32)},
            action=np.zeros(2, np.float32),
            reward=0.0,
            next_obs={"state": np.zeros(3, np.float32)},
            terminated=step == 2,
            truncated=False,
            demo=demo,
            first=step == 0,
            origin=Provenance(episode=f"{actor}-e", step=step, actor=actor),
            streams={
                "fast_features": (rng.normal(size=(ticks, width)).astype(np.float32), times + step * 0.1),
                "fast_violation": (np.zeros(ticks, np.uint32), times + step * 0.1),
            },
        )
        for step in range(3)
    ]


def test_the_learner_refuses_ticks_of_another_width_than_its_fast_critics_and_goes_on(tmp_path):
    """Two robots (or a changed task) send ticks with task contexts of different widths: the fast critic learns the
    width it started with, counts the other episode's ticks as refused, and the learner goes on (before, the critic's
    ValueError ended the learner's thread)."""
    import numpy as np

    from robot_rl.safety.fast_critic import INPUT_WIDTH

    learner, rng = fast_learning_learner(tmp_path), np.random.default_rng(0)
    learner.ingest(ticked_episode(rng, "left", INPUT_WIDTH + 9, ticks=5))
    learner.ingest(ticked_episode(rng, "right", INPUT_WIDTH, ticks=5))
    fast = learner.auxiliaries["fast_critic"]
    assert fast.learner.size == 15 and fast.refused_ticks == 15
    assert learner.online_received == 6  # both robots' steps learned by the policy all the same


def test_the_fast_critic_learns_the_ticks_of_demo_episodes_too(tmp_path):
    """A demonstration's ticks are as much the fast critic's data as an online episode's: the learner hands every
    stored transition to its auxiliary learners, demos included (a refactor that gave them online ones only changed
    what a deterministic run's fast critic learned)."""
    import numpy as np

    from robot_rl.safety.fast_critic import INPUT_WIDTH

    learner = fast_learning_learner(tmp_path)
    learner.ingest(ticked_episode(np.random.default_rng(0), "a", INPUT_WIDTH, ticks=4, demo=True))
    assert learner.auxiliaries["fast_critic"].learner.size == 12 and learner.online_received == 0


def test_the_actor_starts_on_the_risk_model_of_a_resumed_or_pretrained_critic(tmp_path):
    """Issue 49 item 5: robot-rl train's actor got the risk model only at the first weight publication after an
    episode, so a resumed run's critic (past safety.warmup) or one pretrained on safety.pretrain_store left the learned
    filter off for the first episode(s); the learner publishes at start, as the ROS learner and the fleet do."""
    from robot_rl.runtime.session import LearnerSession

    cfg = load_config(["task=reach", f"train.run_dir={tmp_path / 'run'}", "safety.enabled=true"])
    env = make_env(cfg.task)
    shapes, action_dim = observation_shapes(env), int(env.action_space.shape[0])
    learning = LearnerSession(cfg, shapes, action_dim, LocalTransport())
    learning.open(resume=False)
    learning.learner.online_received = cfg.safety.warmup  # as a resumed run past the warmup
    acting = ActorSession(cfg, shapes, action_dim, NoHuman())
    acting.start_from(learning.learner)
    assert acting.safety.filter is not None  # the learned filter acts from the first step
    assert acting.weights_version == learning.learner.update_calls
    obs, _ = env.reset(seed=0)
    np.testing.assert_array_equal(
        acting.agent.act(obs, explore=False), learning.learner.agent.act(obs, explore=False)
    )  # on the learner's policy too
    env.close()


def test_a_resumed_actor_draws_on_where_the_run_was_not_from_the_seed_again(tmp_path):
    """Issue 49 item 9: a resumed run's actor restarted its exploration noise from the seed, so the noise of the first
    episodes repeated. Its random state (the agent's generator, each slot's gripper epsilon draws) is in the
    checkpoint: the resumed actor draws what the run would have drawn without the break."""
    from robot_rl.runtime.session import LearnerSession

    cfg = load_config(
        [
            "task=reach",
            f"train.run_dir={tmp_path / 'run'}",
            "train.demo_episodes=0",
            "task.episode_steps=5",
            "agent.gripper_critic=true",
            "agent.gripper_epsilon=0.5",
        ]
    )
    env = make_env(cfg.task)
    shapes, action_dim = observation_shapes(env), int(env.action_space.shape[0])

    def start(resume: bool) -> tuple[LearnerSession, ActorSession]:
        learning = LearnerSession(cfg, shapes, action_dim, LocalTransport())
        acting = ActorSession(cfg, shapes, action_dim, NoHuman())
        acting.counters = learning.open(resume)
        acting.start_from(learning.learner)
        return learning, acting

    def actions(learning: LearnerSession, acting: ActorSession, seed: int) -> np.ndarray:
        acting.play(env, learning.learner.transport, None, seed)
        return np.stack([t.action for t in learning.learner.transport.arrivals.take_all()])

    learning, acting = start(resume=False)
    actions(learning, acting, seed=0)
    learning.save(acting.counters)
    uninterrupted = actions(learning, acting, seed=1)
    resumed = actions(*start(resume=True), seed=1)
    np.testing.assert_array_equal(resumed, uninterrupted)
    restarted = actions(*start(resume=False), seed=1)  # the same weights and episode, the noise from the seed
    assert not np.array_equal(resumed, restarted)
    env.close()


def randomized_reach(*overrides):
    """reach under the compliance set, whose curriculum opens every range from 6k to 14k online steps."""
    from omegaconf import OmegaConf

    from robot_rl.runtime.run_setup import scripted_human, sim_env

    cfg = load_config(["task=reach", "task.episode_steps=5", "randomization=compliance", *overrides])
    task = OmegaConf.to_container(cfg.task, resolve=True)
    envs = [sim_env(cfg, task, 1000 * k, randomize=True) for k in range(2)]
    return cfg, envs, scripted_human(cfg, task, envs[0])


def test_curricula_follow_the_runs_online_steps_not_each_wrappers_own_count():
    """Issue 49 item 2: set_training_step was never called, so each randomization wrapper's curriculum ran on its
    own step count: from zero after a resume, counting demonstration steps, N times slower with N envs. The acting
    session tells every env the run's online step count, before the first reset too."""
    cfg, envs, human = randomized_reach("train.demo_episodes=1", "train.env_steps=20020")
    acting = ActorSession(cfg, observation_shapes(envs[0]), int(envs[0].action_space.shape[0]), human)
    acting.counters.env_steps = 20000  # a resumed run, past the curriculum's end
    assert acting.play(envs[0], LocalTransport(), None, seed=0)["demo"]  # a demonstration: not counted
    assert envs[0].steps == 20000
    assert envs[0].sampled_values()["state_noise"]["sensor.state_noise"] > 0  # drawn from the opened range
    seeds = iter(range(100))
    for _ in acting.play_envs(envs, [NoHuman(), NoHuman()], LocalTransport(), [None, None], lambda: next(seeds)):
        pass
    assert acting.counters.env_steps == 20020
    assert [env.steps for env in envs] == [20020, 20020]  # the run's count in each, not 10 of their own
    for env in envs:
        env.close()


class ClosesOnSteps:
    """A human who takes over on ``steps`` of each episode with no motion and the gripper closed."""

    def __init__(self, steps: range, action_dim: int):
        self.steps, self.action_dim, self.step = steps, action_dim, 0

    def begin_episode(self, demo: bool) -> None:
        self.step = 0

    def __call__(self, obs, policy_action):
        active, self.step = self.step in self.steps, self.step + 1
        return (True, np.eye(self.action_dim, dtype=np.float32)[-1]) if active else (False, None)

    def observe(self, progress: float) -> None:
        pass


def test_after_a_takeover_the_gripper_critics_stay_keeps_the_gripper_the_human_left():
    """Issue 72 item 2: the gripper policy held its own last choice, so "stay" after a take-over repeated the policy's
    command from before it, while training labels "stay" as "repeat the previous executed command". The human closes
    on steps 3-7; a policy whose critic says "stay" keeps it closed on step 8 (it executed open)."""
    import torch

    cfg = load_config(
        ["task=pick_cube", "train.demo_episodes=0", "task.episode_steps=10", "agent.gripper_critic=true"]
        + ["agent.gripper_epsilon=0.0", "agent.gripper_initial_command=-1.0"]
    )
    env = make_env(cfg.task)
    action_dim = int(env.action_space.shape[0])
    acting = ActorSession(cfg, observation_shapes(env), action_dim, ClosesOnSteps(range(3, 8), action_dim))
    head = acting.agent.gripper_critic.net.net[-1]
    with torch.no_grad():  # Q(s, stay) above open and close everywhere
        head.weight.zero_()
        head.bias.copy_(torch.tensor([0.0, 1.0, 0.0]).expand_as(head.bias))
    transport = LocalTransport()
    acting.play(env, transport, None, seed=0)
    grippers = [float(t.action[-1]) for t in transport.arrivals.take_all()]
    env.close()
    assert grippers == [-1.0] * 3 + [1.0] * 7, grippers


def test_a_resumed_run_draws_its_domain_randomization_on_instead_of_replaying_its_first_samples(tmp_path):
    """Issue 71 item 3: the randomization wrappers' random state was not in the checkpoint, so a resumed run replayed
    the samples of its first episodes. It is kept with the actor's: the resumed env samples what the run would have
    sampled without the break."""
    from robot_rl.runtime.session import LearnerSession

    cfg, (env, other), _ = randomized_reach(
        f"train.run_dir={tmp_path / 'run'}", "train.demo_episodes=0", "train.env_steps=30000"
    )
    shapes, action_dim = observation_shapes(env), int(env.action_space.shape[0])

    def start(resume: bool, acting_env) -> tuple[LearnerSession, ActorSession]:
        learning = LearnerSession(cfg, shapes, action_dim, LocalTransport())
        acting = ActorSession(cfg, shapes, action_dim, NoHuman())
        acting.counters = learning.open(resume)
        if not resume:
            acting.counters.env_steps = 20000  # past the curriculum: its ranges open, the draws differ
        acting.start_from(learning.learner, [acting_env])
        return learning, acting

    def samples(learning: LearnerSession, acting: ActorSession, acting_env, seed: int) -> dict:
        acting.play(acting_env, learning.learner.transport, None, seed)
        return acting_env.sampled_values()

    learning, acting = start(False, env)
    samples(learning, acting, env, seed=0)
    learning.save(acting.counters)
    uninterrupted = samples(learning, acting, env, seed=1)
    fresh = randomized_reach()[1][0]  # the resumed process's env, built anew from the seed
    resumed = samples(*start(True, fresh), fresh, seed=1)
    assert resumed == uninterrupted
    restarted_env = randomized_reach()[1][0]
    restarted = samples(*start(False, restarted_env), restarted_env, seed=1)  # from the seed: the first draws again
    assert restarted != uninterrupted
    for each in (env, other, fresh, restarted_env):
        each.close()
