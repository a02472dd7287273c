"""One episode of acting: the part of the actor that is the same in-process and in the ROS 2 graph.

Every step the policy proposes an action, the teleop source may take over (the human's action is
executed and flagged ``intervened``), otherwise the safety actor may filter the policy's action;
the env executes it and the transition goes to the learner through the transport, and to the
episode recorder when one is given (in the node graph the recorder node takes it from the topic).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from robot_rl.core.interrupts import deferred_interrupt
from robot_rl.core.transport import ActorLink
from robot_rl.data.recorder import EpisodeRecorder
from robot_rl.data.transition import Provenance, Transition
from robot_rl.runtime.evaluate import continuity_cost, task_progress


class EpisodePlay:
    """One episode in progress on one env: the reset, then every step of it (the human may take over, else the
    safety actor may filter the policy's action; the transition goes to the learner and the recorder), and its
    stats. The same for one env (:func:`run_episode`) and for N envs stepped together (:func:`run_envs`).

    ``actor`` names the stream the transitions belong to when one process steps several envs (None: the only one);
    ``scene`` (a sim env's :meth:`~robot_rl.sim.panda_env.PandaTaskEnv.scene_state`) starts the episode where another
    left the scene instead of a fresh draw (learned resets)."""

    def __init__(
        self,
        env,
        human,
        safety,
        transport: ActorLink,
        recorder: EpisodeRecorder | None,
        demo: bool,
        seed: int | None,
        actor: str | None = None,
        scene: Any = None,
    ):
        self.env, self.human, self.safety, self.transport, self.recorder = env, human, safety, transport, recorder
        self.demo, self.seed, self.actor = demo, seed, actor
        human.begin_episode(demo)  # before the reset: a human (or the cell) may need to know a demo comes
        self.obs, info = env.reset(seed=seed) if scene is None else env.reset(seed=seed, options={"scene": scene})
        safety.begin_episode()
        if recorder is not None:
            randomization = info.get("randomization")
            recorder.annotate(seed=seed, **({} if randomization is None else {"randomization": randomization}))
        self.uid = uuid.uuid4().hex  # the episode's identity in every store and at the learner
        self.ret, self.length, self.interventions, self.actions = 0.0, 0, 0, []
        self.intervened, self.info = False, info  # of the last step
        self.chosen: tuple | None = None  # (policy action, action, human active, filtered) of the step in progress

    def step(self, policy_action: np.ndarray) -> bool:
        """Execute one step on the policy's proposal; True when the episode has ended (terminated or truncated)."""
        return self.take(*self.env.step(self.choose(policy_action)))

    def choose(self, policy_action: np.ndarray) -> np.ndarray:
        """The action to execute on the policy's proposal: the human's when they take over, else the safety
        filter's. :meth:`take` then takes what the env made of it (:meth:`step` is the two in one; N envs stepped
        together choose all, step all, then take all)."""
        obs = self.obs
        active, human_action = self.human(obs, policy_action)
        action, filtered = (human_action, False) if active else self.safety(obs, policy_action)
        self.chosen = (policy_action, action, bool(active), filtered)
        return action

    def take(self, next_obs: dict[str, np.ndarray], reward: float, terminated: bool, truncated: bool, info) -> bool:
        """The env's answer to the chosen action (what ``env.step`` returns): the transition goes to the learner and
        the recorder; True when the episode has ended (terminated or truncated)."""
        obs, human, safety = self.obs, self.human, self.safety
        policy_action, action, active, filtered = self.chosen
        human.observe(task_progress(self.env, reward))
        violation = int(info.get("violation", 0))
        fast = info.get("fast_loop")  # the step's fast-loop ticks (a sim task with safety.fast_critic.sim_rate_hz)
        safety.observe(violation, fast)
        # the fast-loop critic changing the policy's command counts as the safety layer filtering it, as the policy-rate
        # filter's change does (the learner's penalty teaches the policy to keep clear); a human's command is theirs
        filtered = filtered or (not active and fast is not None and fast.filtered_ticks > 0)
        transition = Transition(
            obs=obs,
            action=action,
            reward=reward,
            next_obs=next_obs,
            terminated=terminated,
            truncated=truncated,
            intervened=bool(active),
            demo=self.demo,
            first=self.length == 0,
            filtered=filtered,
            policy_action=policy_action,
            success=bool(info["success"]),
            violation=violation,
            origin=Provenance(self.uid, self.length, self.actor or "", float(info.get("stamp", 0.0))),
            streams=None if fast is None else fast.as_streams(),
        )
        self.transport.send_transitions([transition])
        if self.recorder is not None:
            with deferred_interrupt():  # an episode's commit is never cut in half
                self.recorder.add([transition])
        self.ret += reward
        self.length += 1
        self.interventions += bool(active)
        self.intervened = bool(active)
        self.actions.append(action)
        self.obs, self.info = next_obs, info
        return bool(terminated or truncated)

    def cut(self) -> None:
        """The step budget is spent: the episode ends here, recorded as it is (by this driver's recorder, or by
        the recorder behind the transport)."""
        self.transport.cut_episode(self.uid)
        if self.recorder is not None:
            with deferred_interrupt():
                self.recorder.end_episode()

    def drop(self) -> None:
        """A stop request came mid-episode: its recording is dropped."""
        if self.recorder is not None:
            self.recorder.discard()

    def stats(self) -> dict[str, Any]:
        return {
            "success": bool(self.info["success"]),
            "return": self.ret,
            "length": self.length,
            "interventions": self.interventions,
            "continuity_cost": continuity_cost(np.asarray(self.actions)),
            "seed": self.seed,
            "uid": self.uid,  # the episode's identity in the stores (a fault benchmark matches records with them)
            **self.safety.stats(),
            **({"arm_error": self.info["arm_error"]} if self.info.get("arm_error") else {}),  # a cell's arm cut it
        }


def run_episode(
    env,
    agent,
    human,
    safety,
    transport: ActorLink,
    recorder: EpisodeRecorder | None,
    demo: bool,
    seed: int | None,
    after_step: Callable[[bool], bool] | None = None,
    stop: threading.Event | None = None,
    scene: Any = None,
) -> dict[str, Any] | None:
    """Act until the episode ends (from ``scene`` when one is given: :class:`EpisodePlay`); ``after_step(intervened)``
    is called after each step and ends the episode early by returning True (a spent step budget). Returns the
    episode's stats, or None when ``stop`` (a Ctrl-C request) was set during the episode: its recording is then
    dropped. An episode the budget cut short is recorded as it is."""
    play = EpisodePlay(env, human, safety, transport, recorder, demo, seed, scene=scene)
    agent.begin_episode()
    while True:
        ended = play.step(agent.act(play.obs, explore=True))
        agent.executed(play.actions[-1])  # a take-over's gripper command is the one a "stay" holds next
        budget_spent = after_step(play.intervened) if after_step is not None else False  # counts the step sent
        if ended:
            break  # recorded, even when a stop came with the last step
        if stop is not None and stop.is_set():
            play.drop()
            return None
        if budget_spent:
            play.cut()
            break
    return play.stats()


def run_envs(
    envs: Sequence[Any],
    agent,
    humans: Sequence[Any],
    safeties: Sequence[Any],
    transport: ActorLink,
    recorders: Sequence[EpisodeRecorder | None],
    seeds: Callable[[], int],
    after_step: Callable[[bool], bool],
    stop: threading.Event | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Online episodes on N envs stepped together, one batched policy call per step (slot k = env k, its
    transitions the stream ``env<k>``): yields (env, stats) as each episode ends, and a new one starts there with a
    seed from ``seeds()``. ``after_step(intervened)`` after every env step; once it returns True (the step budget is
    spent) the episodes in progress end there, recorded as they are, and are yielded too. A stop request drops the
    episodes in progress and ends the generator."""

    def start(k: int) -> EpisodePlay:
        play = EpisodePlay(envs[k], humans[k], safeties[k], transport, recorders[k], False, seeds(), f"env{k}")
        agent.begin_episode(k)
        return play

    plays = [start(k) for k in range(len(envs))]
    while True:
        actions = agent.act_batch({key: np.stack([p.obs[key] for p in plays]) for key in plays[0].obs}, explore=True)
        answers = step_all(envs, [play.choose(actions[k]) for k, play in enumerate(plays)])
        for k, play in enumerate(plays):
            ended = play.take(*answers[k])
            agent.executed(play.actions[-1], k)
            budget_spent = after_step(play.intervened)
            if ended:
                yield k, play.stats()
                if not budget_spent:
                    plays[k] = start(k)
            if budget_spent:
                for other, rest in enumerate(plays):
                    if rest is play and ended:
                        continue  # yielded above
                    if rest.length == 0:
                        rest.drop()  # started this step, never stepped: nothing to record or count
                        continue
                    rest.cut()
                    yield other, rest.stats()
                return
            if stop is not None and stop.is_set():
                for rest in plays:
                    rest.drop()
                return


def set_training_step(env, step: int) -> None:
    """Tell ``env``'s curricula where the run is: ``step`` online env steps of the whole run (every env, every actor;
    demonstrations not counted). Reaches a :class:`~robot_rl.sim.randomization.DomainRandomization` wrapper anywhere in
    ``env``'s wrappers, or a worker env (:class:`~robot_rl.runtime.env_workers.EnvWorker`, which sends it with its next
    request); an env without a curriculum ignores it."""
    while env is not None:
        setter = getattr(env, "set_training_step", None)
        if callable(setter):
            setter(step)
            return
        env = getattr(env, "env", None)  # the next wrapper in


def env_random_state(env) -> list[dict[str, Any]] | None:
    """The random state of ``env``'s domain randomization (:meth:`~robot_rl.sim.randomization.DomainRandomization.
    random_state`, anywhere in its wrappers), or None for an env without one (or in a worker process)."""
    while env is not None:
        getter = getattr(env, "random_state", None)
        if callable(getter):
            return getter()
        env = getattr(env, "env", None)
    return None


def load_env_random_state(env, state: list[dict[str, Any]] | None) -> None:
    """Draw on in ``env``'s domain randomization from :func:`env_random_state`'s ``state`` (None: nothing to load)."""
    while state is not None and env is not None:
        loader = getattr(env, "load_random_state", None)
        if callable(loader):
            loader(state)
            return
        env = getattr(env, "env", None)


def step_all(envs: Sequence[Any], actions: Sequence[np.ndarray]) -> list[tuple]:
    """``env.step(action)`` of every env; envs in worker processes (``step_async``/``step_wait``,
    :class:`~robot_rl.runtime.env_workers.EnvWorker`) are all sent their action before the first answer is awaited, so
    they step in parallel."""
    for env, action in zip(envs, actions):
        if hasattr(env, "step_async"):
            env.step_async(action)
    return [env.step_wait() if hasattr(env, "step_async") else env.step(action) for env, action in zip(envs, actions)]
