"""The safety node's fast-loop critic (``safety.fast_critic``): weights in, one decision per tick, risk and counts out.

Every tick the node hands this its command before the hard layer (:meth:`FastCritic.step`): the learned filter of
:mod:`robot_rl.safety.fast_critic` scales the command down or replaces it by a recovery command when the risk is high,
or, bypassed, passes it unchanged; the hard layer then has the last word. Each tick's flags carry
``RISK_FILTERED`` (the command was changed), ``RISK_BYPASSED`` (no model, a stale arm state, a missed deadline, NaN
or an error: hard layer only) and ``RISK_MODEL_REJECTED`` (the newest weights message was refused, the node runs on
its last good model); the risk of the command goes out on ``/rl/safety_risk`` (std_msgs/Float64, NaN when
bypassed).

Weights flow like the policy's: ``/rl/fast_risk_weights`` (std_msgs/UInt8MultiArray, latched) carries the bytes of
an ``.npz`` (:meth:`~robot_rl.safety.fast_critic.FastCriticModel.to_bytes`: the layers, ``layout``, ``version``). A
message is checked in its subscription callback, between ticks (size, names, dtypes, shapes, finite values, input
width), then swapped in with one assignment; a bad one is dropped and counted by the node's
:class:`~robot_rl.ros.plumbing.guard.InputGuard` (a rate-limited warning), and the node keeps its last good model (or the
hard layer alone if it has none).

Task context: a model that reads task context after the arm's state (a first layer of 26 + C inputs,
:mod:`robot_rl.safety.fast_critic`) takes it from ``/rl/safety_context`` (std_msgs/Float32MultiArray, C finite values,
sent once per control period by whoever knows the task: the sim robot sends its keep-out zone's corners, a cell's
obstacle tracker would send the tracked box). The newest message is used, checked in its callback (finite, at most
``MAX_CONTEXT`` values); until one of the model's width has come, the model is bypassed (``no_context``). A model
without context inputs ignores it.

Counts and times are reported every ``report_period`` s (one log line, and a JSON record on ``/rl/safety_stats``,
std_msgs/String): ticks and rate, filtered and bypassed ticks by reason, rejected weights, the model version, and
p50 / p99 / max of the tick's and the critic's wall time and of the model's CPU time, with their histograms (1 us
bins), which a benchmark can add up over any span.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ...safety import Command, Violation
from ...safety.fast_critic import (
    BYPASS_REASONS,
    FAST_CRITIC_KEY,
    MAX_CONTEXT,
    FastCriticError,
    FastCriticFilter,
    FastCriticModel,
    FastDecision,
    decision_flags,
)
from ..plumbing import qos

WEIGHTS_TOPIC = "/rl/fast_risk_weights"
RISK_TOPIC = "rl/safety_risk"
CONTEXT_TOPIC = "rl/safety_context"
STATS_TOPIC = "rl/safety_stats"
HISTOGRAM_US = 10_000  # 1 us bins up to 10 ms, then one bin for everything slower


class LatencyHistogram:
    """Durations in 1 us bins: adding one costs a list increment, the percentiles are read at report time."""

    def __init__(self) -> None:
        self.counts = [0] * (HISTOGRAM_US + 1)

    def add(self, seconds: float) -> None:
        micros = int(seconds * 1e6)
        self.counts[min(micros, HISTOGRAM_US)] += 1

    def take(self) -> dict[int, int]:
        """``{microseconds: count}`` of the non-empty bins since the last take; starts over."""
        counts, self.counts = self.counts, [0] * (HISTOGRAM_US + 1)
        return {micros: count for micros, count in enumerate(counts) if count}


def percentiles(histogram: dict[int, int]) -> dict[str, float | None]:
    """p50, p90, p99 and max (us: the lower edge of the bin) of a ``{microseconds: count}`` histogram."""
    if not histogram:
        return {"p50": None, "p90": None, "p99": None, "max": None}
    bins = sorted(histogram)
    cumulative = np.cumsum([histogram[micros] for micros in bins])

    def at(fraction: float) -> float:
        return float(bins[int(np.searchsorted(cumulative, fraction * cumulative[-1]))])

    return {"p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": float(bins[-1])}


def task_context(msg) -> np.ndarray:
    """The task context (C,) float32 of a ``/rl/safety_context`` message; a malformed one raises (the guard drops,
    counts and warns)."""
    values = np.asarray(msg.data, np.float32)
    if values.ndim != 1 or values.size > MAX_CONTEXT or not np.isfinite(values).all():
        raise ValueError(f"task context of {values.size} values; expected at most {MAX_CONTEXT} finite ones")
    return values


class FastCritic:
    """The fast filter of one safety node: its weights subscription, the risk topic, the counts and their report.

    ``publisher(msg_type, topic)`` makes the node's own publishers (the node guards who else publishes there)."""

    def __init__(
        self, node, guard, risk_filter: FastCriticFilter, publisher: Callable[[Any, str], Any], source: str | None
    ):
        from rclpy.clock import Clock, ClockType
        from std_msgs.msg import Float32MultiArray, Float64, String, UInt8MultiArray

        self.node, self.risk_filter = node, risk_filter
        self.risk_pub = publisher(Float64, RISK_TOPIC)
        self.stats_pub = publisher(String, STATS_TOPIC)
        self._messages = {"risk": Float64, "stats": String}
        self.risk = math.nan  # of the last tick's command
        self.handed: Command | None = None  # the command the last tick handed to the hard layer
        self.newest_rejected = False  # the newest weights message was refused: the model is an older one
        self.tick_time, self.critic_time = LatencyHistogram(), LatencyHistogram()  # wall time
        self.model_cpu = LatencyHistogram()  # CPU time of the tick thread in the model (what its deadline is on)
        self.counts = self._zero_counts()  # since the last report
        self.totals = self._zero_counts()  # since the start
        self._since = time.monotonic()
        guard.subscribe(UInt8MultiArray, WEIGHTS_TOPIC, self._on_weights, qos.LATCHED)
        guard.subscribe(Float32MultiArray, CONTEXT_TOPIC, self._on_context, qos.LATCHED)
        node.create_timer(
            risk_filter.settings.report_period, self.report, clock=Clock(clock_type=ClockType.STEADY_TIME)
        )
        if risk_filter.current is None:
            node.get_logger().warning(
                f"fast critic: no model yet, hard layer only (flag RISK_BYPASSED) until {WEIGHTS_TOPIC} brings one"
            )
        else:
            self._log_model(*risk_filter.current, source)

    @staticmethod
    def _zero_counts() -> dict[str, int]:
        return {"ticks": 0, "filtered": 0, **dict.fromkeys(BYPASS_REASONS, 0), "weights_accepted": 0, "rejected": 0}

    def _log_model(self, model: FastCriticModel, version: int, source: str | None) -> None:
        self.node.get_logger().info(
            f"fast critic: model version {version} from {source} ({model.parameters} parameters, hidden "
            f"{model.hidden}, {model.activation}, forward in {'C' if model.native else 'numpy'})"
        )

    # ----------------------------------------------------------------- the tick
    @property
    def last_tick(self) -> tuple[Command, float, np.ndarray]:
        """(the command the last tick handed to the hard layer, its risk (NaN: bypassed), the task context then)."""
        return self.handed, self.risk, self.risk_filter.context

    def step(self, arm, command: Command, gripper: float, now: float) -> tuple[Command, Violation]:
        """The command to hand to the hard layer and this tick's risk flags (see :class:`FastCriticFilter.step`)."""
        started = time.perf_counter()
        try:
            decision = self.risk_filter.step(arm, command, gripper, now)
        except Exception:  # noqa: BLE001 - the critic must never stop the tick: the hard layer alone applies
            decision = FastDecision(command, math.nan, False, "error", 0.0)
        self.critic_time.add(time.perf_counter() - started)
        if decision.bypass is None or decision.bypass == "deadline":
            self.model_cpu.add(decision.seconds)
        self.risk, self.handed = decision.risk, decision.command
        counts, flags = self.counts, decision_flags(decision)
        counts["ticks"] += 1
        if decision.bypass is not None:
            counts[decision.bypass] += 1
        elif decision.filtered:
            counts["filtered"] += 1
        if self.newest_rejected:
            flags |= Violation.RISK_MODEL_REJECTED
        return decision.command, flags

    def publish_risk(self) -> None:
        self.risk_pub.publish(self._messages["risk"](data=self.risk))

    # ----------------------------------------------------------------- weights
    def _on_weights(self, msg) -> None:
        """Check a weights message and swap its model in; a bad one raises (the guard drops, counts and warns)."""
        try:
            model, version = FastCriticModel.from_bytes(msg.data)
        except FastCriticError:
            self.counts["rejected"] += 1
            self.newest_rejected = True
            raise
        self.risk_filter.swap(model, version)
        self.newest_rejected = False
        self.counts["weights_accepted"] += 1
        self._log_model(model, version, WEIGHTS_TOPIC)

    def _on_context(self, msg) -> None:
        self.risk_filter.set_context(task_context(msg))

    # ----------------------------------------------------------------- the report
    def totals_now(self) -> dict[str, int]:
        """Counts since the start, the current period's included."""
        return {key: self.totals[key] + self.counts[key] for key in self.totals}

    def report(self) -> None:
        """Log this period's counts (one line) and publish them with the timing histograms on ``/rl/safety_stats``."""
        now = time.monotonic()
        seconds, self._since = now - self._since, now
        counts, self.counts = self.counts, self._zero_counts()
        for key, value in counts.items():
            self.totals[key] += value
        ticks, critic, model = self.tick_time.take(), self.critic_time.take(), self.model_cpu.take()
        current = self.risk_filter.current
        record = {
            "period_s": round(seconds, 3),
            **counts,
            "rate_hz": round(counts["ticks"] / seconds, 1) if seconds > 0 else None,
            "model_version": None if current is None else current[1],
            "tick_us": percentiles(ticks),
            "critic_us": percentiles(critic),
            "model_cpu_us": percentiles(model),
            "tick_histogram_us": ticks,
            "critic_histogram_us": critic,
            "model_cpu_histogram_us": model,
        }
        bypassed = sum(counts[reason] for reason in BYPASS_REASONS)
        reasons = ", ".join(f"{reason.replace('_', ' ')} {counts[reason]}" for reason in BYPASS_REASONS)
        with contextlib.suppress(Exception):  # shutting down: a report lost is no harm
            self.node.get_logger().info(
                f"fast critic over {seconds:.1f} s: {counts['ticks']} ticks ({record['rate_hz']} Hz), risk filtered "
                f"{counts['filtered']}, bypassed {bypassed} ({reasons}), weights accepted "
                f"{counts['weights_accepted']} rejected {counts['rejected']}, model version "
                f"{record['model_version']}; critic p99 {record['critic_us']['p99']} us, tick p99 "
                f"{record['tick_us']['p99']} us"
            )
            self.stats_pub.publish(self._messages["stats"](data=json.dumps(record)))


class FastRiskOutlet:
    """The learner's side of ``/rl/fast_risk_weights``: its node's route for the fast-loop critic among the weights
    the learner publishes (:attr:`robot_rl.runtime.learner.Learner.weights_outlet`). Called with the weights, it
    takes out ``FAST_CRITIC_KEY`` (``(FastCriticModel, version)``), sends each version once (latched: a safety node
    that starts later gets it too) and returns the rest, the actor's policy, for the weights topic."""

    def __init__(self, node):
        from std_msgs.msg import UInt8MultiArray

        self._message = UInt8MultiArray
        self._out = node.create_publisher(UInt8MultiArray, WEIGHTS_TOPIC, qos.LATCHED)
        self.version: int | None = None  # the version last sent

    def __call__(self, weights: dict[str, Any]) -> dict[str, Any]:
        rest = dict(weights)
        fast = rest.pop(FAST_CRITIC_KEY, None)
        if fast is not None and fast[1] != self.version:
            model, version = fast
            self._out.publish(self._message(data=model.to_bytes(version)))
            self.version = version
        return rest
