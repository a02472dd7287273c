"""The fast critic's decision: :class:`FastCriticFilter` scores each tick's command with the current model and the
same :class:`~robot_rl.safety.filter.SafetyFilter` as the policy-rate filter (line search, recovery, hysteresis,
dwell, deadline, bypass)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..filter import FilterResult, SafetyFilter
from ..hard_limits import ArmState, Command, Violation
from .features import DELTA_WIDTH, FORCE, INPUT_WIDTH, TcpMotion, command_delta, command_from_delta, fast_state
from .model import FastCriticModel
from .settings import FastCriticSettings, load_fast_model


@dataclass
class FastDecision:
    """What the fast filter made of one tick's command."""

    command: Command  # to pass to the hard layer: the one given, or the scaled-down or recovery one
    risk: float  # of the commanded delta, in [0, 1]; NaN when bypassed
    filtered: bool  # the command was changed
    bypass: str | None  # why the model was not used: one of BYPASS_REASONS; None when it was
    seconds: float  # CPU time in the model (s)


BYPASS_REASONS = ("no_model", "stale_state", "no_context", "deadline", "error")
NO_CONTEXT = np.zeros(0, np.float32)  # the task context a model without context inputs is given
FAST_CRITIC_KEY = "safety.fast_critic_model"  # in published weights (in-process): (FastCriticModel, version)


def decision_flags(decision: FastDecision) -> Violation:
    """The tick's risk flags of a decision: ``RISK_FILTERED`` when it changed the command, ``RISK_BYPASSED`` when
    the model was not used (the hard layer alone applies)."""
    if decision.bypass is not None:
        return Violation.RISK_BYPASSED
    return Violation.RISK_FILTERED if decision.filtered else Violation.NONE


class FastCriticFilter:
    """The fast loop's learned filter: :class:`FastCriticModel` + :class:`~robot_rl.safety.filter.SafetyFilter` on the
    commanded delta, with the recovery candidates hold, retreat along the force and (``escape_step``) escapes.

    :attr:`current` is ``(model, version)`` or None; :meth:`swap` replaces it with one assignment, so a model swapped
    in between ticks is used whole from the next tick on. ``clock`` times the model (default: CPU time of the
    calling thread, so being preempted does not count against the model's deadline)."""

    def __init__(
        self,
        settings: FastCriticSettings,
        rate_hz: float,
        state_timeout: float,
        model: FastCriticModel | None = None,
        version: int = 0,
        clock=time.thread_time,
    ):
        self.settings, self.state_timeout = settings, state_timeout
        self.current: tuple[FastCriticModel, int] | None = None if model is None else (model, version)
        self.motion = TcpMotion()
        self.context = np.zeros(0, np.float32)  # the task context of the last policy step (see set_context)
        self._row = np.zeros(INPUT_WIDTH, np.float32)  # the model's input of the tick's command (_native_step)
        filter_settings = settings.filter_settings(rate_hz)
        self.filter = SafetyFilter(_no_model, filter_settings, recoveries=self._recoveries, clock=clock)
        escape = settings.escape_step
        self._recovery_rows = np.zeros((2 + (6 if escape else 0), DELTA_WIDTH), np.float32)  # hold, retreat, escapes
        for axis in range(3 if escape else 0):
            self._recovery_rows[2 + 2 * axis : 4 + 2 * axis, axis] = (escape, -escape)

    @property
    def candidate_count(self) -> int:
        """Candidates scored when engaged: the scaled commands, hold, retreat and the escapes."""
        return len(self.filter.settings.scales) + len(self._recovery_rows)

    def swap(self, model: FastCriticModel, version: int) -> None:
        self.current = (model, version)

    def set_context(self, context: np.ndarray) -> None:
        """The task context (C,) the model reads after the arm's state from now on (one assignment); a model that
        reads context of another width is bypassed (``no_context``), one that reads none ignores it."""
        self.context = np.asarray(context, np.float32).reshape(-1)

    def _recoveries(self, state: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """The recovery candidates of a tick's fast ``state`` and commanded ``delta`` (:meth:`_recovery_rows_of`)."""
        return self._recovery_rows_of(state[FORCE].tolist(), delta[-1])

    def _recovery_rows_of(self, force: Sequence[float], gripper_delta: float) -> np.ndarray:
        """Hold the measured pose, retreat ``retreat_distance`` m along the measured ``force`` (N, base frame; hold
        when there is none), the escape steps; each with the commanded ``gripper_delta``: (R, 7) float32."""
        rows = self._recovery_rows.copy()
        rows[:, -1] = gripper_delta
        fx, fy, fz = force
        norm = math.sqrt(fx * fx + fy * fy + fz * fz)
        if norm > 1e-6:
            scale = self.settings.retreat_distance / norm
            rows[1, 0:3] = (fx * scale, fy * scale, fz * scale)
        return rows

    def step(self, arm: ArmState, command: Command, gripper: float, now: float) -> FastDecision:
        """Score ``command`` (base frame) against the measured ``arm`` and decide what goes on to the hard layer.
        ``gripper``: the gripper command last sent; ``now``: s on the clock of ``arm.stamp``. The motion features
        are those of the last :meth:`TcpMotion.update` on :attr:`motion`."""
        current = self.current
        if current is None:
            return FastDecision(command, math.nan, False, "no_model", 0.0)
        if not now - arm.stamp <= self.state_timeout:
            return FastDecision(command, math.nan, False, "stale_state", 0.0)
        context, width = self.context, getattr(current[0], "context_width", 0)  # (any (state, deltas) -> risks runs)
        if width and width != context.size:
            return FastDecision(command, math.nan, False, "no_context", 0.0)
        model = current[0]
        if getattr(model, "native", False):
            decision = self._native_step(model, arm, command, gripper, context if width else NO_CONTEXT)
            if decision is not None:
                return decision
        # a model without context inputs runs on the arm's state alone, whatever the task gives
        state = fast_state(self.motion.features, arm.force, arm.torque, gripper, context if width else ())
        self.filter.risk = model
        return self._decision(arm, command, self.filter(state, command_delta(arm, command, gripper)))

    def _native_step(
        self, model: FastCriticModel, arm: ArmState, command: Command, gripper: float, context: np.ndarray
    ) -> FastDecision | None:
        """The tick in C, the choice in :class:`SafetyFilter`: the command alone is scored, which decides most
        ticks (:meth:`SafetyFilter.passes_alone`), then, when it does not (a risky command, NaN, late), every
        candidate (:meth:`SafetyFilter.decide`). The decisions of the Python path, in one or two calls into C
        instead of some forty numpy calls; None for a command half a turn from the measured orientation, which the
        Python path decides."""
        clock, row = self.filter.clock, self._row
        if row.size != INPUT_WIDTH + context.size:
            row = self._row = np.zeros(INPUT_WIDTH + context.size, np.float32)
        started = clock()
        risk = model.score_command(self.motion.features, arm, command, gripper, context, row)
        seconds = clock() - started
        if risk is None:
            return None
        if self.filter.passes_alone(risk, seconds):
            return FastDecision(command, risk, False, None, seconds)
        values = row.tolist()
        recoveries = self._recovery_rows_of(values[FORCE], values[-1])
        factors = self.filter.line_search_factors(DELTA_WIDTH)
        candidates = np.empty((len(factors) + len(recoveries), DELTA_WIDTH), np.float32)
        risks = np.empty(len(candidates), np.float32)
        started = clock()
        model.score_candidates(row, factors, recoveries, candidates, risks)
        seconds += clock() - started
        return self._decision(arm, command, self.filter.decide(candidates[0], candidates, risks.tolist(), seconds))

    def _decision(self, arm: ArmState, command: Command, result: FilterResult) -> FastDecision:
        """What goes on to the hard layer after the filter's ``result`` for ``command``."""
        if result.bypassed:
            reason = "deadline" if result.seconds > self.filter.settings.deadline_s else "error"
            return FastDecision(command, math.nan, False, reason, result.seconds)
        if not result.intervened:
            return FastDecision(command, result.risk, False, None, result.seconds)
        chosen = command_from_delta(arm, result.action, command.gripper, command.stamp)
        return FastDecision(chosen, result.risk, True, None, result.seconds)


def _no_model(state: np.ndarray, deltas: np.ndarray) -> np.ndarray:
    raise RuntimeError("no fast risk model")  # replaced by the current model before every call


def fast_critic_filter(settings: FastCriticSettings, rate_hz: float, state_timeout: float) -> FastCriticFilter | None:
    """The fast-loop filter of ``settings`` ticking at ``rate_hz`` with its starting model (None when disabled; no
    ``weights`` file: no model, bypassed); a weights file that is missing or malformed raises :class:`ConfigError`.
    ``state_timeout``: s after which the arm state is stale (the hard layer's)."""
    if not settings.enabled:
        return None
    model, version = load_fast_model(settings)
    return FastCriticFilter(settings, rate_hz, state_timeout, model, version)
