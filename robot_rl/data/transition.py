"""One env step as the actor sends it to the learner and to the recorder: in one process through a queue
(:class:`robot_rl.core.transport.LocalTransport`), in the node graph on ``/rl/transitions`` (:mod:`robot_rl.data.wire`),
and back from an episode store (:func:`stored_transitions`).

A :class:`Transition` holds the step only. In the node graph an actor's outbox (:mod:`robot_rl.ros.delivery`) sends
each as a :class:`NumberedTransition`, which adds its place in the actor's stream, so that the learner and the recorder
take each step once and in order (:func:`stream_position` reads it from either).

Observations map a key to an array (camera images uint8 HxWxC, the rest float32); actions are the env's, normalised
to [-1, 1] per dimension (the TCP step in the tool frame, then the gripper command).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np


@dataclass
class Transition:
    obs: dict[str, np.ndarray]
    action: np.ndarray  # executed: the human's when ``intervened``, else the policy's (after the safety filter)
    reward: float
    next_obs: dict[str, np.ndarray]
    terminated: bool
    truncated: bool
    intervened: bool = False  # the human's action was executed
    demo: bool = False  # a step of a demonstration episode
    first: bool = False  # the episode's first step
    cost: float = 0.0  # 1 when the step violated a safety constraint
    filtered: bool = False  # the safety filter changed the policy's action
    policy_action: np.ndarray | None = None  # what the policy proposed (None: ``action``)
    success: bool = False  # the task was solved at this step
    violation: int = 0  # the constraint flags of the step (robot_rl.sim.constraints), 0 = none
    episode: str = ""  # the episode's uid ("" unknown)
    step: int | None = None  # the step's index in its episode (None unknown)
    actor: str = ""  # the acting session whose stream of episodes the step belongs to ("" the run's one actor)
    stamp: float = 0.0  # s: when ``next_obs`` was observed, on the actor's clock (sim or wall); 0 unknown
    # samples at their own rate during the step: name -> (values (N, ...), timestamps (N,) s), e.g. the sim's fast
    # loop (robot_rl.sim.fast_critic_loop.FastStream.as_streams); recorded as the episode's streams, not sent over ROS
    streams: dict[str, tuple[np.ndarray, np.ndarray]] | None = None

    def __post_init__(self) -> None:
        if self.policy_action is None:
            self.policy_action = self.action

    def record(self, writer, **extra: Any) -> None:
        """Add the step to an episode being written (:class:`robot_rl.data.EpisodeWriter`, started on ``obs`` of
        the episode's first step); ``extra``: further per-step columns such as ``timestamp``."""
        writer.add(
            self.next_obs,
            self.action,
            self.reward,
            self.terminated,
            self.truncated,
            policy_action=self.policy_action,
            success=self.success,
            intervened=self.intervened,
            safety_flags=self.violation,
            filtered=self.filtered,
            **extra,
        )
        writer.add_streams(self.streams or {})


@dataclass
class NumberedTransition(Transition):
    """A transition as an actor of the node graph sends it: with its place in the stream of the actor session
    (``actor``), which the learner's delivery ledger and the recorder use to take each step once and in order."""

    seq: int = 0  # the step's number in the actor session's stream, from 1 (0 unnumbered)
    floor: int = 0  # the lowest ``seq`` the actor still holds: what lies below can no longer be sent again

    @classmethod
    def of(cls, transition: Transition, actor: str, seq: int, floor: int = 0) -> NumberedTransition:
        """``transition`` (not changed) numbered ``seq`` in the stream of ``actor``."""
        step = {f.name: getattr(transition, f.name) for f in fields(Transition)}
        return cls(**{**step, "actor": actor}, seq=seq, floor=floor)


def stream_position(transition: Transition) -> tuple[int, int]:
    """(``seq``, ``floor``) of a numbered transition; (0, 0) of one that is not (one process, a store)."""
    if isinstance(transition, NumberedTransition):
        return transition.seq, transition.floor
    return 0, 0


def stored_transitions(episode: dict[str, Any], uid: str) -> list[Transition]:
    """The transitions of an episode read from an episode store (``EpisodeStore.read_episode``), as the actor sent
    them (:func:`robot_rl.ros.delivery.numbered` numbers them again in an actor's stream)."""
    demo = episode["attrs"].get("source") == "demo"
    filtered, stamps = episode.get("filtered"), episode.get("timestamp")
    streams = step_streams(episode.get("streams") or {}, stamps, len(episode["action"]))
    return [
        Transition(
            obs={key: value[t] for key, value in episode["obs"].items()},
            next_obs={key: value[t + 1] for key, value in episode["obs"].items()},
            action=episode["action"][t],
            policy_action=episode["policy_action"][t],
            reward=float(episode["reward"][t]),
            terminated=bool(episode["terminated"][t]),
            truncated=bool(episode["truncated"][t]),
            intervened=bool(episode["intervened"][t]),
            demo=demo,
            first=t == 0,
            cost=float(episode["safety_flags"][t] != 0),
            filtered=bool(filtered[t]) if filtered is not None else False,
            success=bool(episode["success"][t]),
            violation=int(episode["safety_flags"][t]),
            episode=uid,
            step=t,
            stamp=float(stamps[t]) if stamps is not None else 0.0,
            streams=streams[t],
        )
        for t in range(len(episode["action"]))
    ]


def step_streams(
    streams: dict[str, dict[str, np.ndarray]], stamps: np.ndarray | None, steps: int
) -> list[dict[str, tuple[np.ndarray, np.ndarray]] | None]:
    """An episode's streams (``read_episode``'s ``streams``: name -> {data, timestamp}) back to its steps: each
    sample to the first step whose observation (``stamps``, s) is later, those after the last one (or all, without
    stamps) to the last step; None for a step without samples."""
    per_step: list[dict[str, tuple[np.ndarray, np.ndarray]]] = [{} for _ in range(steps)]
    for name, stream in streams.items():
        data, times = stream.get("data"), stream.get("timestamp")
        if data is None or times is None or not steps:
            continue
        owner = np.full(len(times), steps - 1) if stamps is None else np.searchsorted(stamps, times, side="right")
        owner = np.minimum(owner, steps - 1)
        for step in np.unique(owner):
            mask = owner == step
            per_step[int(step)][name] = (data[mask], times[mask])
    return [step or None for step in per_step]
