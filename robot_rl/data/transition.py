"""One env step as the actor sends it to the learner and to the recorder: in one process through a queue
(:class:`robot_rl.core.transport.LocalTransport`), in the node graph on ``/rl/transitions`` (:mod:`robot_rl.data.wire`),
and back from an episode store (:func:`stored_transitions`).

A :class:`Transition` holds the step and, in one field (``origin``, a frozen :class:`Provenance`), where it came
from: the episode, its index there, the acting session and when it was observed. A step is never re-labelled in
place: a copy with another origin is made (:meth:`Transition.by`). How it travels is not the transition's: in the
node graph an actor's outbox (:mod:`robot_rl.ros.plumbing.delivery`) sends each in an envelope with its place in the
actor's stream (:class:`robot_rl.data.delivery_ledger.Numbered`), and the recorder writes it into an episode
(:class:`robot_rl.data.recorder.EpisodeRecorder`).

Observations map a key to an array (camera images uint8 HxWxC, the rest float32); actions are the env's, normalised
to [-1, 1] per dimension (the TCP step in the tool frame, then the gripper command).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Provenance:
    """Where a step came from; the defaults say "unknown" (a hand-made step, a foreign store)."""

    episode: str = ""  # the episode's uid
    step: int | None = None  # the step's index in its episode
    actor: str = ""  # the acting session whose stream of episodes the step belongs to ("" the run's one actor)
    stamp: float = 0.0  # s: when ``next_obs`` was observed, on the actor's clock (sim or wall); 0 unknown


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
    filtered: bool = False  # the safety filter changed the policy's action
    policy_action: np.ndarray | None = None  # what the policy proposed (None: ``action``)
    success: bool = False  # the task was solved at this step
    violation: int = 0  # the constraint flags of the step (robot_rl.sim.constraints), 0 = none
    origin: Provenance = Provenance()  # where the step came from
    # samples at their own rate during the step: name -> (values (N, ...), timestamps (N,) s), e.g. the sim's fast
    # loop (robot_rl.sim.fast_critic_loop.FastStream.as_streams) or the safety node's ticks; they travel with the
    # step (in one process, on the topics as data/wire.py's ``streams/`` columns, in the fleet's hand-ins) and are
    # recorded as the episode's streams
    streams: dict[str, tuple[np.ndarray, np.ndarray]] | None = None

    def __post_init__(self) -> None:
        if self.policy_action is None:
            self.policy_action = self.action

    @property
    def cost(self) -> float:
        """1 when the step violated a safety constraint (any ``violation`` flag), else 0."""
        return float(self.violation != 0)

    def by(self, actor: str) -> Transition:
        """This step (not changed) as a step of acting session ``actor``'s stream."""
        return replace(self, origin=replace(self.origin, actor=actor))


def stored_transitions(episode: dict[str, Any], uid: str) -> list[Transition]:
    """The transitions of an episode read from an episode store (``EpisodeStore.read_episode``), as the actor sent
    them (:func:`robot_rl.ros.plumbing.delivery.numbered` numbers them again in an actor's stream)."""
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
            filtered=bool(filtered[t]) if filtered is not None else False,
            success=bool(episode["success"][t]),
            violation=int(episode["safety_flags"][t]),
            origin=Provenance(episode=uid, step=t, stamp=float(stamps[t]) if stamps is not None else 0.0),
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
