"""The safety node's fast loop inside the MuJoCo tasks: the fast-loop critic and the hard layer every control
substep between two policy steps.

On a real cell the policy's target goes to the safety node, which at 500 Hz - 1 kHz scores it with the fast-loop
critic and clamps it with the hard layer before the impedance controller sees it (:mod:`robot_rl.ros.safety.safety_node`).
With a :class:`SimFastLoop` attached (:meth:`~robot_rl.sim.panda_env.PandaTaskEnv.attach_fast_loop`) a MuJoCo task does
the same: each policy step is ``ticks`` fast ticks of ``n_substeps / ticks`` physics steps, and every tick runs
:func:`robot_rl.safety.tick.safety_tick` (the node's code) on the measured TCP pose and base-frame wrench, then
hands the command it sends to the impedance controller. Hazards that build up within a policy step are therefore
seen, and acted on, at the fast rate.

Each policy step's ticks are kept as a :class:`FastStream` (the env's ``info["fast_loop"]``): per tick the
critic's input (:data:`~robot_rl.safety.fast_critic.STATE_FEATURES` then the
:data:`~robot_rl.safety.fast_critic.DELTA_FEATURES` of the command the hard layer was handed: the policy's, or the
critic's choice, then the task context of the policy step), the risk, the tick's flags
and the task's constraint violations measured after the tick: the labels a fast-loop critic learns from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from robot_rl.core.config import ConfigError
from robot_rl.safety import ArmState, Command, EStopLatch, SafetyLimits, Violation, hold
from robot_rl.safety.fast_critic import (
    INPUT_WIDTH,
    FastCriticFilter,
    FastCriticSettings,
    TcpMotion,
    command_delta,
    command_from_delta,
    decision_flags,
    fast_critic_filter,
    fast_state,
    tick_features,
)
from robot_rl.safety.robot_limits import safety_limits
from robot_rl.safety.tick import safety_tick


@dataclass
class FastStream:
    """One policy step's fast ticks, T rows each: ``time`` (T,) float64 s of sim time at the tick, ``features``
    (T, 26 + C) float32 (fast state, the delta of the command handed to the hard layer, the C values of task
    context; base frame, m, rad, N),
    ``risk`` (T,) float32 (NaN without a model or when bypassed), ``flags`` (T,) uint32 (the safety tick's
    :class:`~robot_rl.safety.Violation` bits), ``violation`` (T,) uint32 (the task's constraint bits after it)."""

    time: np.ndarray
    features: np.ndarray
    risk: np.ndarray
    flags: np.ndarray
    violation: np.ndarray

    @property
    def filtered_ticks(self) -> int:
        """Ticks whose command the fast-loop critic changed (``RISK_FILTERED``)."""
        return int(np.count_nonzero(self.flags & np.uint32(Violation.RISK_FILTERED)))

    @property
    def bypassed_ticks(self) -> int:
        """Ticks where the fast-loop critic was bypassed (``RISK_BYPASSED``: the hard layer alone acted)."""
        return int(np.count_nonzero(self.flags & np.uint32(Violation.RISK_BYPASSED)))

    def as_streams(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The ticks as episode-store streams (``fast_features``, ``fast_risk``, ``fast_flags``,
        ``fast_violation``), each (values, timestamps s)."""
        return {f"fast_{name}": (getattr(self, name), self.time) for name in STREAMS}


STREAMS = ("features", "risk", "flags", "violation")  # FastStream's per-tick arrays, as stored


class SimFastLoop:
    """The fast loop of one sim arm: per-tick ``limits`` (built for ``rate_hz``, as the safety node builds them from
    ``robot.limits``) and, optionally, a fast-loop risk filter.

    Args:
        limits: the hard layer's per-tick limits at ``rate_hz`` (:func:`robot_rl.safety.robot_limits.safety_limits`).
        rate_hz: ticks per second; an integer multiple of the env's control rate that divides its physics rate.
        risk_filter: the learned fast-loop filter (None: the hard layer alone).
        probe: share of policy steps whose ticks send a random candidate command instead (:meth:`begin_step`).
        candidates: the fast filter whose candidate commands a probe draws from (default ``risk_filter``).
    """

    def __init__(
        self,
        limits: SafetyLimits,
        rate_hz: float,
        risk_filter: FastCriticFilter | None = None,
        probe: float = 0.0,
        candidates: FastCriticFilter | None = None,
    ):
        self.limits, self.rate_hz, self.risk_filter = limits, float(rate_hz), risk_filter
        self.probe = float(probe)  # share of policy steps that send a random candidate (begin_step)
        self.candidates = candidates or risk_filter  # what makes the candidate commands a probe draws from
        if self.probe and self.candidates is None:
            raise ValueError("probing needs the fast filter's candidate commands")
        self._probe_row: int | None = None  # the candidate this policy step's ticks send, None: the policy's command
        self.latch = EStopLatch()
        self.previous: Command | None = None
        self.motion = TcpMotion()
        self.context = np.zeros(0, np.float32)  # the task context of the policy step (set_context)
        self._risk = math.nan
        self._chosen: Command | None = None  # the command the hard layer was handed in the last tick

    def ticks_per_step(self, control_rate_hz: float, physics_steps: int) -> int:
        """Fast ticks per policy step; raises ValueError when the rates do not fit."""
        ticks = self.rate_hz / control_rate_hz
        if abs(ticks - round(ticks)) > 1e-6 or round(ticks) < 1 or physics_steps % round(ticks):
            raise ValueError(
                f"fast loop rate {self.rate_hz} Hz: expected an integer multiple of the control rate "
                f"{control_rate_hz} Hz whose ticks divide the {physics_steps} physics steps of a policy step"
            )
        return round(ticks)

    def set_context(self, context: np.ndarray) -> None:
        """The task context (C,) of the policy step about to run (the task's
        :meth:`~robot_rl.sim.panda_env.PandaTaskEnv.safety_context`), as the actor would send it to the safety node:
        recorded with every tick and read by the critic."""
        self.context = np.asarray(context, np.float32).reshape(-1)
        if self.risk_filter is not None:
            self.risk_filter.set_context(self.context)

    @property
    def feature_width(self) -> int:
        """Columns of a tick's row: the critic's 26 inputs and the task context's."""
        return INPUT_WIDTH + self.context.size

    def begin_step(self, rng: np.random.Generator) -> None:
        """A policy step begins: with probability :attr:`probe` its ticks send one random candidate of the fast
        filter's (a scaled command, hold, retreat, an escape; not the policy's own) instead of the policy's command,
        the critic standing aside and the hard layer still applied: probe data in which the command varies in a given
        state, labelled by what followed (``robot-rl collect`` for a probe set). Its ticks are flagged
        ``RISK_FILTERED``, so in training the step counts as filtered. Draws from ``rng`` only when probing."""
        self._probe_row = None
        if self.probe and rng.random() < self.probe:
            self._probe_row = int(rng.integers(1, self.candidates.candidate_count))

    def reset(self, arm: ArmState, gripper: float) -> None:
        """Start an episode holding the measured pose; the twist and the critic's hysteresis start afresh."""
        self.previous, self._probe_row = hold(arm, gripper, arm.stamp), None
        self.motion = TcpMotion()
        self.motion.update(arm.pos, arm.rot, arm.stamp)
        if self.risk_filter is not None:
            self.risk_filter.filter.reset()

    def tick(self, arm: ArmState, command: Command) -> tuple[Command, Violation, np.ndarray]:
        """One tick at ``arm.stamp``: the command to hand to the controller, the flags and the critic's input row
        (26 + C,) of the command the hard layer was handed (``command``, or what the critic chose instead) and the
        task context: the row a fast critic learns from, labelled by what followed."""
        gripper = self.previous.gripper
        self.motion.update(arm.pos, arm.rot, arm.stamp)
        state = fast_state(self.motion.features, arm.force, arm.torque, gripper)
        critic = None
        if self._probe_row is not None:  # the probe's candidate goes to the hard layer, the critic stands aside
            rows = self.candidates.filter.candidates(command_delta(arm, command, gripper), state)
            command = command_from_delta(arm, rows[self._probe_row], command.gripper, command.stamp)
        elif self.risk_filter is not None:
            self.risk_filter.motion = self.motion  # the critic sees the twist measured here
            critic = self._critic
        self._risk, self._chosen = math.nan, command
        self.previous, flags = safety_tick(self.limits, self.latch, arm, command, self.previous, arm.stamp, critic)
        if self._probe_row is not None:  # the policy's command was replaced, as a critic's choice replaces it
            flags |= Violation.RISK_FILTERED
        return self.previous, flags, tick_features(state, arm, self._chosen, gripper, self.context)

    def _critic(self, arm: ArmState, command: Command, gripper: float, now: float) -> tuple[Command, Violation]:
        decision = self.risk_filter.step(arm, command, gripper, now)
        self._risk, self._chosen = decision.risk, decision.command
        return decision.command, decision_flags(decision)

    @property
    def risk(self) -> float:
        """The risk of the last tick's command (NaN without a model or when bypassed)."""
        return self._risk


def sim_fast_loop(settings: FastCriticSettings, robot_limits: Mapping[str, Any]) -> SimFastLoop | None:
    """The sim's fast loop of ``settings`` (``safety.fast_critic``, at its ``sim_rate_hz``; None when that is null)
    with the hard layer of ``robot_limits`` (``robot.limits``) and, when ``enabled``, the fast critic from
    ``weights`` (no file: bypassed, the hard layer alone). Bad values raise :class:`ConfigError` naming their key."""
    if settings.sim_rate_hz is None:
        return None
    limits = safety_limits(dict(robot_limits), settings.sim_rate_hz)
    risk_filter = fast_critic_filter(settings, settings.sim_rate_hz, limits.state_timeout)
    candidates = None  # probing draws from the critic's candidates; without a critic, a filter makes them
    if settings.probe and risk_filter is None:
        candidates = FastCriticFilter(settings, settings.sim_rate_hz, limits.state_timeout)
    return SimFastLoop(limits, settings.sim_rate_hz, risk_filter, settings.probe, candidates)


def attach_fast_loop(env, loop: SimFastLoop | None) -> None:
    """Attach ``loop`` to ``env`` (wrappers allowed) when it is not None; a task without control substeps (not a
    MuJoCo Panda task) raises :class:`ConfigError` naming ``safety.fast_critic.sim_rate_hz``."""
    if loop is None:
        return
    task = env.unwrapped
    if not hasattr(task, "attach_fast_loop"):
        raise ConfigError(
            "safety.fast_critic.sim_rate_hz", loop.rate_hz, f"null for {type(task).__name__} (a MuJoCo Panda task only)"
        )
    try:
        task.attach_fast_loop(loop)
    except ValueError as error:
        raise ConfigError(
            "safety.fast_critic.sim_rate_hz", loop.rate_hz, str(error).partition(": expected ")[2]
        ) from None
