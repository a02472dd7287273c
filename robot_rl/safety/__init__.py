"""Safety: the hard-limit layer (never learned) that every arm command passes last."""

from .hard_limits import HOLDS, ArmState, Command, EStopLatch, SafetyLimits, Violation, enforce, hold

__all__ = ["HOLDS", "ArmState", "Command", "EStopLatch", "SafetyLimits", "Violation", "enforce", "hold"]
