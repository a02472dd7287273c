"""The cell emulator's operator: the scripted human holding a SpaceMouse, speaking the device's HID reports.

:class:`~robot_rl.runtime.teleop.ScriptedHuman` decides, from the privileged sim state a person in the cell sees, when to
take over (every step of a demonstration; a stall or a regression of the policy). This module turns its decisions
into what a 3Dconnexion SpaceMouse sends over Linux hidraw, written into a FIFO that the real teleop node
(:mod:`robot_rl.ros.nodes.teleop_node`, ``teleop_device.kind=spacemouse``) opens as its device, so the node's own parsing,
scaling and button mapping run:

* report 1: ``x y z rx ry rz`` as little-endian int16 counts (the 12-byte report of current models), the motion
  in the robot's base frame turned into the puck's frame by ``teleop_device.spacemouse_signs`` and scaled by
  ``teleop_device.full_scale``; sent while the puck is moved and once when it is released, as the device does;
* report 3: the button bits (``teleop_device.spacemouse_buttons``): each press is a report with its bit set and
  one with it cleared. The operator presses close / open when the expert's gripper command changes, the take-over
  button at the start and end of a takeover (so a takeover holds while the expert's motion is small, e.g. while
  closing on the cube) and, in a demonstration, holds the success button for as long as the task is done (every
  frame of a success is labelled, as HIL-SERL's operators label a classifier's positives).

Asked for near misses (``cell.operator_near_misses``, a share of the demonstrations; pick_cube), the operator fails
some demonstrations on purpose the way a task is nearly done: the cube grasped and lifted to between
``NEAR_MISS_LIFT`` of the task's lift height, held there, the success button never pressed: the classifier's
hardest negatives, and whole failed episodes for its per-episode calibration (HIL-SERL's operators record failures and
near misses beside the successes).

A FIFO has no report boundaries, so every report is padded to the 64 bytes the teleop node reads at once: each
read returns one report, as it does from hidraw.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import numpy as np

from robot_rl.core.config import ConfigError
from robot_rl.runtime.teleop import ScriptedHuman

from ...sim.panda_env import PandaTaskEnv

REPORT_SIZE = 64  # bytes the teleop node reads per report
NEAR_MISS_LIFT = (0.3, 0.8)  # a near miss lifts the cube this share of the task's lift height (uniform)
AXES = ("x", "y", "z", "rx", "ry", "rz")


def motion_report(twist: np.ndarray, signs: np.ndarray, full_scale: float) -> bytes:
    """Report 1 of a normalised base-frame twist (6 values in [-1, 1]): puck counts, the teleop node's inverse."""
    counts = np.clip(np.round(np.clip(twist, -1.0, 1.0) * signs * full_scale), -32768, 32767)
    return _padded(bytes([1]) + counts.astype("<i2").tobytes())


def button_report(bits: int) -> bytes:
    """Report 3: the buttons held now, one bit each."""
    return _padded(bytes([3]) + int(bits).to_bytes(4, "little"))


def _padded(report: bytes) -> bytes:
    return report + bytes(REPORT_SIZE - len(report))


class HidFifo:
    """A FIFO standing in for ``/dev/hidrawN``. Made at ``path`` unless one is there already (anything else there is
    refused: the emulator overwrites nothing), and removed at :meth:`close` only when made here. Writes never block:
    with no reader yet, or a reader that lags, a report is dropped, as a HID queue overflows. :meth:`unplug` closes
    the writing end (the reader sees the device go away) until :meth:`plug`."""

    def __init__(self, path: str | Path, key: str = "cell.spacemouse"):
        self.path = Path(path)
        if self.path.exists() or self.path.is_symlink():
            if not stat.S_ISFIFO(self.path.stat().st_mode):
                raise ConfigError(key, str(path), "a free path or a FIFO for the emulated SpaceMouse's hidraw node")
            self.made = False
        else:
            if not self.path.parent.is_dir():
                raise ConfigError(key, str(path), f"a path in an existing folder ({self.path.parent} is none)")
            os.mkfifo(self.path)
            self.made = True
        self.fd: int | None = None
        self.plugged = True
        self.dropped = 0

    def write(self, report: bytes) -> bool:
        """Send one report; False when nobody reads it (no reader, a full pipe, unplugged)."""
        if not self.plugged:
            return False
        if self.fd is None:
            try:
                self.fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as error:
                if error.errno != errno.ENXIO:  # ENXIO: no reader has the FIFO open yet
                    raise
                return False
        try:
            os.write(self.fd, report)
            return True
        except BlockingIOError:
            self.dropped += 1
            return False
        except BrokenPipeError:  # the reader closed: open again when one returns
            self._close_fd()
            return False

    def unplug(self) -> None:
        self.plugged = False
        self._close_fd()

    def plug(self) -> None:
        self.plugged = True

    def close(self) -> None:
        self._close_fd()
        if self.made:
            self.path.unlink(missing_ok=True)

    def _close_fd(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class ScriptedOperator:
    """The scripted human at the cell, on a SpaceMouse (module docstring). ``tick`` is called at the device's report
    rate; the intervention rules advance once per ``control_period`` s."""

    def __init__(
        self,
        env: PandaTaskEnv,
        human: ScriptedHuman,
        device: HidFifo,
        signs: dict[str, float],
        full_scale: float,
        buttons: dict[str, int],
        control_period: float,
        near_misses: float = 0.0,
        seed: int = 0,
    ):
        """``near_misses``: the share of demonstrations played as near misses (module docstring), drawn from
        ``seed``."""
        if near_misses and not hasattr(human.expert, "near_miss_height"):
            raise ConfigError("cell.operator_near_misses", near_misses, "0 for a task without near misses (pick_cube)")
        self.env, self.human, self.device = env, human, device
        self.near_misses, self.rng = near_misses, np.random.default_rng([seed, 0x4E4D])
        self.signs = np.array([float(signs.get(axis, 1.0)) for axis in AXES])
        self.full_scale, self.buttons, self.period = float(full_scale), dict(buttons), control_period
        self.takeover_on = False  # the teleop node's take-over switch, as the operator's presses left it
        self.closed = False  # the gripper as the operator's presses left it (the node starts open)
        self.moving = False
        self.next_decision, self.first, self.active = 0.0, True, False
        self.held = 0  # the button bits held down (the success button, while the task is done)
        self.takeover_steps = 0  # control periods the operator drove

    def begin_episode(self, demo: bool) -> None:
        """A new episode's scene is ready: a demonstration (the operator drives every step) or a policy episode."""
        self.human.begin_episode(demo)
        if self.near_misses:
            near_miss = demo and self.rng.random() < self.near_misses
            lift = self.rng.uniform(*NEAR_MISS_LIFT) * self.env.lift_height
            self.human.expert.near_miss_height = lift if near_miss else None
        self.next_decision, self.first, self.active = 0.0, True, False
        self.set_takeover(False)
        self.hold_success(False)

    def tick(self, now: float, progress: float) -> None:
        """``now``: the cell's monotonic time (s); ``progress``: the task's dense reward, what a person judges."""
        if now >= self.next_decision:
            self.next_decision = now + self.period
            if not self.first:
                self.human.observe(progress)
            self.first = False
            self.active, _ = self.human(None, None)
            self.takeover_steps += int(self.active)
            if not self.human.demo:
                self.set_takeover(self.active)
        twist = np.zeros(6)
        if self.active:
            action = np.asarray(self.human.expert.act(None), dtype=float)
            rot = self.env.tcp_rot  # the expert's deltas are in the TCP frame; a SpaceMouse speaks base frame
            twist[:3] = rot @ action[:3]
            if action.size == 7:
                twist[3:] = rot @ action[3:6]
            if (action[-1] > 0) != self.closed:
                self.closed = action[-1] > 0
                self.press("close" if self.closed else "open")
        if self.active or self.moving:  # a moved puck reports; a released one reports zeros once
            self.device.write(motion_report(twist, self.signs, self.full_scale))
            self.moving = self.active
        self.hold_success(self.human.demo and self.env.is_success())

    def set_takeover(self, on: bool) -> None:
        if on != self.takeover_on and self.press("takeover"):
            self.takeover_on = on

    def hold_success(self, on: bool) -> None:
        """Hold the success button down (``on``) or let it go."""
        bit = self.buttons.get("success")
        if bit is None or bool(self.held >> bit & 1) == on:
            return
        held = self.held | 1 << bit if on else self.held & ~(1 << bit)
        if self.device.write(button_report(held)):
            self.held = held

    def press(self, button: str) -> bool:
        """Press and release ``button`` (False when unmapped or nobody reads the device); held buttons stay held."""
        bit = self.buttons.get(button)
        if bit is None:
            return False
        sent = self.device.write(button_report(self.held | 1 << bit))
        self.device.write(button_report(self.held))
        return sent
