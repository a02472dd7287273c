"""One episode of acting: the part of the actor that is the same in-process and in the ROS 2 graph.

Every step the policy proposes an action, the teleop source may take over (the human's action is
executed and flagged ``intervened``), otherwise the safety actor may filter the policy's action;
the env executes it and the transition goes to the learner through the transport, and to the
episode recorder when one is given (in the node graph the recorder node takes it from the topic).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from .data.recorder import EpisodeRecorder
from .data.transition import Transition
from .evaluate import continuity_cost, task_progress
from .interrupts import deferred_interrupt
from .transport import Transport


def run_episode(
    env,
    agent,
    human,
    safety,
    transport: Transport,
    recorder: EpisodeRecorder | None,
    demo: bool,
    seed: int | None,
    after_step: Callable[[bool], bool] | None = None,
    stop: threading.Event | None = None,
) -> dict[str, Any] | None:
    """Act until the episode ends; ``after_step(intervened)`` is called after each step and ends
    the episode early by returning True (a spent step budget). Returns the episode's stats, or None
    when ``stop`` (a Ctrl-C request) was set during the episode: its recording is then dropped. An episode the
    budget cut short is recorded as it is."""
    human.begin_episode(demo)  # before the reset: a human (or the cell) may need to know a demo comes
    obs, info = env.reset(seed=seed)
    agent.begin_episode()
    safety.begin_episode()
    if recorder is not None:
        randomization = info.get("randomization")
        recorder.annotate(seed=seed, **({} if randomization is None else {"randomization": randomization}))
    uid = uuid.uuid4().hex  # the episode's identity in every store and at the learner
    ret, length, interventions, actions = 0.0, 0, 0, []
    while True:
        policy_action = agent.act(obs, explore=True)
        active, human_action = human(obs, policy_action)
        action, filtered = (human_action, False) if active else safety(obs, policy_action)
        next_obs, reward, terminated, truncated, info = env.step(action)
        human.observe(task_progress(env, reward))
        violation = int(info.get("violation", 0))
        safety.observe(violation)
        transition = Transition(
            obs=obs,
            action=action,
            reward=reward,
            next_obs=next_obs,
            terminated=terminated,
            truncated=truncated,
            intervened=bool(active),
            demo=demo,
            first=length == 0,
            cost=float(violation != 0),
            filtered=filtered,
            policy_action=policy_action,
            success=bool(info["success"]),
            violation=violation,
            episode=uid,
            step=length,
            stamp=float(info.get("stamp", 0.0)),
            streams=None if info.get("fast_loop") is None else info["fast_loop"].as_streams(),
        )
        transport.send_transitions([transition])
        if recorder is not None:
            with deferred_interrupt():  # an episode's commit is never cut in half
                recorder.add([transition])
        ret += reward
        length += 1
        interventions += bool(active)
        actions.append(action)
        budget_spent = after_step(bool(active)) if after_step is not None else False  # counts the step sent
        obs = next_obs
        if terminated or truncated:
            break  # recorded, even when a stop came with the last step
        if stop is not None and stop.is_set():
            if recorder is not None:
                recorder.discard()
            return None
        if budget_spent:
            if recorder is not None:
                with deferred_interrupt():
                    recorder.end_episode()
            break
    stats = {
        "success": bool(info["success"]),
        "return": ret,
        "length": length,
        "interventions": interventions,
        "continuity_cost": continuity_cost(np.asarray(actions)),
        "seed": seed,
        **safety.stats(),
    }
    return stats
