"""The learned safety filter between the policy and the hard layer.

Every proposed action a is scored by a risk model (the safety critic's numpy export,
``risk(state, candidates) -> (K,)``). While the filter is released and a is below ``threshold_on``, a alone is
scored, and passes; otherwise a is scored in one batch together with its scaled-down versions
``scales`` x a (the line search), the recovery action (e.g. hold the pose: zero Cartesian step,
gripper unchanged) and the escape actions (a step of ``escape_step`` along +-x, +-y, +-z of the
action's translation part, gripper unchanged). While the filter is engaged it executes the first
scaled action whose risk is below ``threshold_off``; when there is none, the recovery action if it
is below ``threshold_off`` too, else the least risky of all the candidates, the recovery first on a tie
(Recovery RL's argmin of Q_risk: holding still inside a hazard, e.g. a keep-out zone the arm has entered,
would only prolong the violation, and when the proposed action is what leads out of it, it is kept).
A ``recoveries`` builder replaces the hold and escape rows with rows it makes from (state, action): the safety
node's fast loop (:mod:`robot_rl.safety.fast_critic`) holds the measured pose and retreats along the measured force.
A caller that scores the candidates itself (the fast loop, in C) makes the same steps with
:meth:`SafetyFilter.passes_alone` (a scored alone, when that decides the step) and :meth:`SafetyFilter.decide`
(every candidate scored).

Hysteresis: the filter engages when the risk of a exceeds ``threshold_on`` and releases only
after the risk of a has stayed below ``threshold_off`` for ``dwell_steps`` consecutive steps.
While engaged, every action is held to ``threshold_off``: one whose risk is between the two
thresholds is filtered (scaled down, or replaced), one below ``threshold_off`` passes unchanged
and counts towards the release. Released, every action below ``threshold_on`` passes unchanged.

Bypass: if the risk model raises, returns NaN/inf, or takes longer than ``deadline_s``, the
proposed action passes unchanged (``bypassed``) and the hard layer alone protects the arm. The
model's time is measured in CPU time of the calling thread (``time.thread_time``): a model too
big for the loop is bypassed, but waiting for a core or for the GIL (the learner thread of
``robot-rl train`` holds it for up to 5 ms at a time) does not count against it. The
filter never makes an action less safe than the hard layer allows, since the hard layer is
always applied after it.

Constructing a filter limits numpy's BLAS to one thread in its process: the risk model's matrix
products are small (ten candidates), and waking BLAS worker threads for them adds more latency
than they save (``benchmarks/safety_latency.py`` measures the filter's p50 / p99 both ways).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from robot_rl.core.config import require_all, yaml_defaults

RiskFunction = Callable[[np.ndarray, np.ndarray], np.ndarray]
RecoveryBuilder = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (state, action) -> (1 + E, A) candidate rows


@yaml_defaults("settings/safety.yaml", "safety.filter", frozen=True)
class FilterSettings:
    threshold_on: float  # engage above this risk
    threshold_off: float  # release below this risk ...
    dwell_steps: int  # ... held for this many steps
    scales: tuple[float, ...]  # line search over the action's Cartesian part
    escape_step: float  # length of the escape actions (normalised action units); 0: recovery action only
    deadline_s: float  # a slower risk model is bypassed
    gripper_last: bool  # the last action dimension is the gripper: never scaled

    def __post_init__(self) -> None:
        checks = {
            "threshold_on": (0.0 < self.threshold_on <= 1.0, "a probability in (0, 1]"),
            "threshold_off": (
                0.0 <= self.threshold_off <= self.threshold_on,
                f"a probability <= threshold_on={self.threshold_on}",
            ),
            "dwell_steps": (self.dwell_steps >= 0, "an integer >= 0"),
            "scales": (
                len(self.scales) > 0 and self.scales[0] == 1.0 and all(0.0 <= s <= 1.0 for s in self.scales),
                "factors in [0, 1], the first 1.0 (the proposed action itself)",
            ),
            "escape_step": (0.0 <= self.escape_step <= 1.0, "a number in [0, 1]"),
            "deadline_s": (self.deadline_s > 0, "a positive number of seconds"),
        }
        require_all("safety.filter", self, checks)


@dataclass
class FilterResult:
    action: np.ndarray
    risk: float  # risk of the proposed action (NaN when bypassed)
    intervened: bool  # the executed action differs from the proposed one
    bypassed: bool  # the risk model failed or missed its deadline
    engaged: bool  # the hysteresis state after this step
    seconds: float  # time spent in the risk model


def single_threaded_blas() -> None:
    """Limit numpy's BLAS (OpenBLAS, MKL) to one thread in this process; torch's own thread pool is
    a different library and keeps its threads."""
    from threadpoolctl import ThreadpoolController

    ThreadpoolController().limit(limits=1, user_api="blas")


class SafetyFilter:
    def __init__(
        self,
        risk: RiskFunction,
        settings: FilterSettings | None = None,
        recoveries: RecoveryBuilder | None = None,
        clock: Callable[[], float] = time.thread_time,
    ):
        self.risk, self.settings, self.clock = risk, settings or FilterSettings(), clock
        # the rows after the scaled ones, built per step from (state, action): the recovery action, then the escapes;
        # None: hold (no Cartesian step, gripper unchanged) and the escape steps of the template
        self.recoveries = recoveries
        self._factors: np.ndarray | None = None  # (K, A) line-search factors, built for the first action's size
        self._template: np.ndarray | None = None  # (K + 1 + E, A): zero rows, then hold and the escape steps
        self.engaged = False
        self._calm_steps = 0
        self.interventions = 0
        self.bypasses = 0
        single_threaded_blas()

    def reset(self) -> None:
        self.engaged, self._calm_steps = False, 0

    def candidates(self, action: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
        """The proposed action scaled by every factor, the recovery action, the escape actions:
        (K + 1 + E, A), float32 (what the risk model computes in). ``state`` goes to ``recoveries``."""
        factors = self.line_search_factors(action.size)
        scaled = len(self.settings.scales)
        if self.recoveries is None:
            candidates = self._template.copy()  # rows after the scaled ones: hold and escapes, gripper unset
            if self.settings.gripper_last:
                candidates[scaled:, -1] = action[-1]
        else:
            rows = self.recoveries(state, action)
            candidates = np.empty((scaled + len(rows), action.size), np.float32)
            candidates[scaled:] = rows
        np.multiply(factors, action, out=candidates[:scaled], casting="unsafe")
        return candidates

    def line_search_factors(self, size: int) -> np.ndarray:
        """(K, size) float32: the factors :meth:`candidates` multiplies an action of ``size`` by, one row per scale
        (with ``gripper_last``, the gripper's factor is 1)."""
        if self._template is None or self._template.shape[1] != size:
            self._build_template(size)
        return self._factors

    def _build_template(self, size: int) -> None:
        scales = self.settings.scales
        self._factors = np.repeat(np.asarray(scales, np.float32)[:, None], size, 1)
        if self.settings.gripper_last:
            self._factors[:, -1] = 1.0
        translation = min(3, size - self.settings.gripper_last)
        escapes = 2 * translation if self.settings.escape_step else 0
        self._template = np.zeros((len(scales) + 1 + escapes, size), np.float32)
        for axis in range(escapes // 2):
            rows = len(scales) + 1 + 2 * axis
            self._template[rows : rows + 2, axis] = (self.settings.escape_step, -self.settings.escape_step)

    def _score(self, state: np.ndarray, candidates: np.ndarray) -> tuple[list[float], float]:
        """(risks of ``candidates`` as floats, or [NaN] when the model raised; seconds on :attr:`clock`)."""
        started = self.clock()
        try:
            risks = np.asarray(self.risk(state, candidates)).tolist()  # decisions on (double) Python floats
        except Exception:  # noqa: BLE001 - a broken model must never stop the arm loop: the hard layer still applies
            risks = [math.nan]
        return risks, self.clock() - started

    def passes_alone(self, risk: float, seconds: float) -> bool:
        """Whether a proposed action the model scored ``risk`` alone, in ``seconds``, passes unchanged with no other
        candidate scored: in time, and below ``threshold_on`` while released, below ``threshold_off`` while engaged
        (that step counts towards the release, as in :meth:`decide`). False leaves the filter as it was: the
        candidates are to be scored and :meth:`decide` makes the step."""
        if not (math.isfinite(risk) and seconds <= self.settings.deadline_s):
            return False
        if not self.engaged:
            return risk <= self.settings.threshold_on
        if risk >= self.settings.threshold_off:
            return False
        self._calm_steps += 1
        if self._calm_steps >= self.settings.dwell_steps:
            self.engaged = False
        return True

    def __call__(self, state: np.ndarray, action: np.ndarray) -> FilterResult:
        action = np.asarray(action)
        threshold_on = self.settings.threshold_on
        if self.engaged:
            candidates = self.candidates(action, state)
            risks, seconds = self._score(state, candidates)
        else:  # released: the proposed action alone decides unless it is risky (most ticks: one row, not all)
            candidates = action.astype(np.float32).reshape(1, -1)  # the first candidate, as candidates() makes it
            risks, seconds = self._score(state, candidates)
            if len(risks) == 1 and self.passes_alone(risks[0], seconds):
                return FilterResult(action, risks[0], False, False, False, seconds)
            if len(risks) == 1 and risks[0] > threshold_on and seconds <= self.settings.deadline_s:
                candidates = self.candidates(action, state)
                others, more_seconds = self._score(state, candidates[1:])
                risks, seconds = risks + others, seconds + more_seconds
        return self.decide(action, candidates, risks, seconds)

    def decide(self, action: np.ndarray, candidates: np.ndarray, risks: list[float], seconds: float) -> FilterResult:
        """The step for ``action`` once scored: ``risks`` of ``candidates`` (the proposed action alone, or every row
        of :meth:`candidates`; a model that raised gives ``[NaN]``), ``seconds`` in the model. Updates the
        hysteresis; the executed action is ``action`` itself or a row of ``candidates`` (in ``action``'s dtype)."""
        threshold_on = self.settings.threshold_on
        if seconds > self.settings.deadline_s or not math.isfinite(sum(risks)) or len(risks) != len(candidates):
            self.bypasses += 1
            return FilterResult(action, float("nan"), False, True, self.engaged, seconds)
        proposed = risks[0]
        if proposed > threshold_on:
            self.engaged, self._calm_steps = True, 0
        elif self.engaged:
            self._calm_steps = self._calm_steps + 1 if proposed < self.settings.threshold_off else 0
            if self._calm_steps >= self.settings.dwell_steps:
                self.engaged = False
        if not self.engaged:
            return FilterResult(action, proposed, False, False, False, seconds)
        limit, scaled = self.settings.threshold_off, len(self.settings.scales)  # engaged: held to threshold_off
        safe = [index for index in range(scaled) if risks[index] < limit]
        if safe:
            chosen = safe[0]  # 0, the proposed action itself, when it is below threshold_off already
        elif risks[scaled] < limit:
            chosen = scaled
        else:  # nothing is safe: the least risky of all; on a tie the recovery, then the smaller scalings
            order = [*range(scaled, len(risks)), *range(scaled - 1, -1, -1)]
            chosen = min(order, key=risks.__getitem__)
        executed = candidates[chosen]
        intervened = executed.tolist() != candidates[0].tolist()  # both float32: no rounding difference
        self.interventions += intervened
        return FilterResult(
            executed.astype(action.dtype) if intervened else action, proposed, intervened, False, True, seconds
        )
