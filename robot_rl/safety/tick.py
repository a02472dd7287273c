"""One tick of the fast loop: the learned fast-loop critic (when there is one), then the hard layer.

The safety node runs this every tick (:mod:`robot_rl.ros.safety.safety_node`, 500 Hz - 1 kHz) and the MuJoCo tasks run it
every control substep between two policy steps (:mod:`robot_rl.sim.fast_critic_loop`), so sim training with the fast-loop
critic goes through the code the real cell runs. The hard layer always has the last word: the critic may only
change the command it is handed, never what :func:`~robot_rl.safety.hard_limits.enforce` makes of it.
"""

from __future__ import annotations

from collections.abc import Callable

from .hard_limits import ArmState, Command, EStopLatch, SafetyLimits, Violation, enforce

Critic = Callable[[ArmState, Command, float, float], tuple[Command, Violation]]
"""(measured arm, command, gripper command last sent, now s) -> (command for the hard layer, risk flags)."""


def safety_tick(
    limits: SafetyLimits,
    latch: EStopLatch,
    arm: ArmState,
    command: Command,
    previous: Command,
    now: float,
    critic: Critic | None = None,
) -> tuple[Command, Violation]:
    """The command to send at ``now`` (s, on the clock of ``arm.stamp`` and ``command.stamp``) and this tick's flags:
    ``critic`` (if any) on ``command``, then the hard layer against the measured ``arm`` and the ``previous`` command
    sent (positions in metres, rotations TCP -> base, base frame)."""
    risk_flags = Violation.NONE
    if critic is not None:  # before the hard layer (a stale command stays stale: the critic keeps its stamp)
        command, risk_flags = critic(arm, command, previous.gripper, now)
    sent, flags = enforce(limits, latch, arm, command, previous, now)
    return sent, flags | risk_flags
