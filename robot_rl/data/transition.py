"""One env step as the actor sends it to the learner and to the recorder: in one process through a queue
(:class:`robot_rl.core.transport.LocalTransport`), in the node graph on ``/rl/transitions`` (:mod:`robot_rl.data.wire`),
and back from an episode store (:func:`stored_transitions`).

Observations map a key to an array (camera images uint8 HxWxC, the rest float32); actions are the env's, normalised
to [-1, 1] per dimension (the TCP step in the tool frame, then the gripper command).
"""

from __future__ import annotations

from dataclasses import dataclass
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
    actor: str = ""  # graph: the sending actor session
    seq: int = 0  # graph: the step's number in that session's stream, from 1 (0 unnumbered)
    floor: int = 0  # graph: the lowest ``seq`` the actor still holds
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


def stored_transitions(episode: dict[str, Any], uid: str, actor: str = "", first_seq: int = 0) -> list[Transition]:
    """The transitions of an episode read from an episode store (``EpisodeStore.read_episode``), as
    the actor sent them; ``first_seq`` numbers them from there (0: unnumbered)."""
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
            actor=actor,
            seq=first_seq + t if first_seq else 0,
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
