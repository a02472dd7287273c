"""Evaluations act as training acts: through the learned safety filter (issue 72 item 5: the cell's evaluations
stepped the env with the policy's actions, only the hard limits between them and the arm)."""

import contextlib

import numpy as np

from robot_rl.cli.main import load_config
from robot_rl.runtime.envs import make_env, observation_shapes
from robot_rl.runtime.run_loop import policy_evaluation
from robot_rl.runtime.safety_learning import RISK_MODEL_KEY
from robot_rl.runtime.session import ActorSession
from robot_rl.runtime.teleop import NoHuman
from tests.safety.test_filter import risk_of_speed


class Rushing:
    """A policy that always asks for the longest step in +x."""

    def __init__(self, action_dim: int):
        self.action = np.eye(action_dim, dtype=np.float32)[0]

    def begin_episode(self, slot: int = 0) -> None:
        pass

    def act(self, obs, explore: bool = True) -> np.ndarray:
        return self.action.copy()

    def executed(self, action, slot: int = 0) -> None:
        pass

    def evaluating(self):
        return contextlib.nullcontext()


def test_an_evaluation_goes_through_the_learned_safety_filter_as_training_does():
    cfg = load_config(["task=reach", "train.demo_episodes=0", "task.episode_steps=6", "safety.enabled=true"])
    env = make_env(cfg.task)
    action_dim = int(env.action_space.shape[0])
    acting = ActorSession(cfg, observation_shapes(env), action_dim, NoHuman())
    acting.safety.load({RISK_MODEL_KEY: risk_of_speed(0.3)})
    executed: list[np.ndarray] = []
    step = env.step
    env.step = lambda action: (executed.append(np.asarray(action)), step(action))[1]
    result = policy_evaluation(Rushing(action_dim), env, safety=acting.another_safety_actor)(2)
    env.close()
    assert len(executed) == 12 and result["filter_interventions"] == 12, result
    longest = max(float(np.linalg.norm(action[:-1])) for action in executed)
    assert longest <= 0.3, f"the evaluation executed a step of {longest:.2f} the filter refuses"


def test_one_evaluation_cadence_serves_runs_the_cell_actor_and_pretraining():
    """``EvalSchedule`` is the one rule of when to evaluate (issue 77 item 1), whatever a way of running counts:
    online steps (a run), training episodes (the actor node on a cell), critic steps (pretraining). Every ``every``
    since the last evaluation, the final one once; ``every`` 0: only the final one; a restart goes on from its last
    evaluation."""
    from robot_rl.runtime.run_loop import EvalSchedule

    steps = EvalSchedule(500)
    assert [n for n in (260, 499, 530, 790, 1040, 1100) if steps.due(n)] == [530, 1040]
    assert steps.due(1210, finished=True) and not steps.due(1230, finished=True)  # the final one, once
    episodes = EvalSchedule(10, last=20)  # an actor restarted after 27 episodes, its last evaluation at 20
    assert [n for n in range(27, 45) if episodes.due(n)] == [30, 40]
    updates = EvalSchedule(0)  # pretrain.eval_every=0: only at the end
    assert not any(updates.due(n) for n in range(4, 400, 4)) and updates.due(400, finished=True)
