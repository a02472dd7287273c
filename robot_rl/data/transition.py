"""One env step as the actor sends it to the learner and to the recorder: in one process through a queue
(:class:`robot_rl.transport.LocalTransport`), in the node graph on ``/rl/transitions`` (:mod:`robot_rl.data.wire`),
and back from an episode store (:func:`robot_rl.ros.delivery.stored_transitions`).

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
    # loop (robot_rl.sim.fast_loop.FastStream.as_streams); recorded as the episode's streams, not sent over ROS
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
