"""The teleop node: keyboard, joystick or SpaceMouse -> the spacenav-style topics the actor's mux reads.

Publishes at ``teleop_device.rate_hz``: ``/spacenav/twist`` (geometry_msgs/Twist, normalised
[-1, 1], base frame), ``/spacenav/joy`` (sensor_msgs/Joy: button 0 close, button 1 open the
gripper, each 1 for ``BUTTON_HOLD`` s after its press, 0 otherwise: no button pressed keeps the gripper as it is) and ``/rl/intervention`` (std_msgs/Bool, the take-over switch). The operator's e-stop button
publishes ``/rl/estop`` (std_msgs/Bool true: the safety node holds the arm) and the reset button
``/rl/estop_reset`` (std_msgs/Empty): this node is the safety node's default operator, the only one
whose reset it obeys. Every period it also publishes ``/rl/estop`` false, the heartbeat of the operator's e-stop: when
this node dies the heartbeat stops, and the safety node holds the arm after ``teleop_device.estop_timeout`` s until
the node is back and an operator resets the e-stop.

Keyboard (the terminal the node runs in, or any byte stream on stdin): ``w``/``s`` +x/-x,
``a``/``d`` +y/-y, ``r``/``f`` +z/-z, ``c`` close, ``v`` open, space toggles take-over, ``y``
marks success, ``x`` e-stop, ``z`` e-stop reset, ``q`` quits. A key moves for ``key_hold`` seconds; the terminal's key repeat keeps a held key moving.

SpaceMouse: 3Dconnexion HID reports from ``/dev/hidrawN`` (see :class:`SpaceMouse`).

A joystick or SpaceMouse that goes away (unplugged, its cable pulled, a replayed stream's writer gone) is named in
the log; when the operator was taking over at that moment (moving the puck or the take-over switch on), the node
publishes ``/rl/estop``: the safety node holds the arm until the operator resets it, since nobody drives any
more. The node keeps running and opens the device again when it returns.

Joystick: the Linux joystick interface (``/dev/input/jsN``, 8-byte ``js_event`` records);
``axes``/``axis_signs``/``buttons`` map the pad, ``deadzone`` applies per axis. A device that
only ever reports zero axes gets a warning (a SpaceMouse in the wrong mode, a pad not switched on).

    python -m robot_rl.ros.nodes.teleop_node teleop_device.kind=joystick teleop_device.device=/dev/input/js0
"""

from __future__ import annotations

import os
import select
import struct
import sys
import threading
import time
from pathlib import Path

import numpy as np
from geometry_msgs.msg import Twist
from sensor_msgs.msg import Joy
from std_msgs.msg import Bool, Empty, Float64

from robot_rl.core.config import ConfigError

from ..plumbing import qos
from ..plumbing.messages import joy_msg
from ..plumbing.node_main import exit_with_error, node_config, ros_node

KEYS = {"w": (0, 1.0), "s": (0, -1.0), "a": (1, 1.0), "d": (1, -1.0), "r": (2, 1.0), "f": (2, -1.0)}
KEY_BUTTONS = {"c": "close", "v": "open", " ": "takeover", "y": "success", "x": "estop", "z": "reset"}
JS_EVENT = struct.Struct("IhBB")  # time (ms), value, type, number
JS_BUTTON, JS_AXIS, JS_INIT = 0x01, 0x02, 0x80
AXIS_NAMES = ("x", "y", "z", "rx", "ry", "rz")
SUCCESS_HOLD = 0.5  # s a success mark lasts
BUTTON_HOLD = 0.5  # s a gripper button reads pressed after its press: the actor (10 Hz) sees a click
REOPEN_PERIOD = 0.5  # s between two attempts to open a device that went away


class TeleopState:
    """What the operator asks for now: a 6-D twist, the gripper, the take-over switch."""

    def __init__(self):
        self.twist, self.takeover = np.zeros(6), False
        self.gripper_press = ("", -np.inf)  # the last gripper button ("close" / "open") and its monotonic time
        self.success_until = -np.inf  # monotonic time until which the operator marks success
        self.success_held = False  # a device's success button held down: success for as long as it is
        self.requests: list[str] = []  # "estop" / "reset" presses not yet published
        self.lock = threading.Lock()
        self.quit = False

    def device_lost(self, device: str, log) -> None:
        """The device went away: no motion, no take-over; an e-stop when the operator was taking over (hold the
        lock)."""
        taking_over = self.takeover or bool(np.any(self.twist != 0))
        self.twist, self.takeover = np.zeros(6), False
        if taking_over:
            self.requests.append("estop")
            log.error(f"teleop device {device} went away during a take-over: e-stop, the arm holds until reset")
        else:
            log.warning(f"teleop device {device} went away; waiting for it to return")

    def gripper_buttons(self, now: float) -> list[int]:
        """The Joy buttons [close, open] at monotonic time ``now``: the last gripper button for ``BUTTON_HOLD`` s after
        its press (hold the lock)."""
        button, pressed = self.gripper_press
        held = now - pressed < BUTTON_HOLD
        return [int(held and button == "close"), int(held and button == "open")]

    def press(self, button: str) -> None:
        """A button of any device: ``close``, ``open``, ``takeover`` (toggles), ``success``, ``estop`` or ``reset``
        (hold the lock)."""
        if button in ("close", "open"):
            self.gripper_press = (button, time.monotonic())
        elif button == "takeover":
            self.takeover = not self.takeover
        elif button == "success":
            self.success_until = time.monotonic() + SUCCESS_HOLD
        elif button in ("estop", "reset"):
            self.requests.append(button)


class Keyboard:
    def __init__(self, state: TeleopState, speed: float, key_hold: float, stream=None):
        self.state, self.speed, self.key_hold = state, speed, key_hold
        self.stream = stream if stream is not None else sys.stdin
        self.pressed: dict[int, tuple[float, float]] = {}  # axis -> (sign, until)

    def run(self) -> None:
        fd = self.stream.fileno()
        restore = None
        if os.isatty(fd):
            import termios
            import tty

            restore = termios.tcgetattr(fd)
            tty.setcbreak(fd)
        try:
            while not self.state.quit:
                ready, _, _ = select.select([fd], [], [], 0.02)
                if ready:
                    data = os.read(fd, 64)
                    if not data:
                        self.state.quit = True  # the stream closed
                    for key in data.decode(errors="ignore"):
                        self.press(key)
                self.update()
        finally:
            if restore is not None:
                import termios

                termios.tcsetattr(fd, termios.TCSADRAIN, restore)

    def press(self, key: str) -> None:
        now = time.monotonic()
        with self.state.lock:
            if key in KEYS:
                axis, sign = KEYS[key]
                self.pressed[axis] = (sign, now + self.key_hold)
            elif key in KEY_BUTTONS:
                self.state.press(KEY_BUTTONS[key])
            elif key == "q":
                self.state.quit = True

    def update(self) -> None:
        now = time.monotonic()
        twist = np.zeros(6)
        with self.state.lock:
            for axis, (sign, until) in self.pressed.items():
                if now < until:
                    twist[axis] = sign * self.speed
            self.state.twist = twist


class EventDevice:
    """A device read as a stream of records from a character device (or a FIFO replaying one)."""

    record_size = 64
    kind = "device"
    key = "teleop_device.device"  # the key that sets this kind's device path (named by its errors)

    def __init__(self, state: TeleopState, device: str, deadzone: float, log):
        self.state, self.device, self.deadzone, self.log = state, device, deadzone, log
        self.records, self.nonzero_seen = 0, False

    @staticmethod
    def present() -> list[str]:
        """Devices of this kind on the machine."""
        raise NotImplementedError

    @classmethod
    def check_path(cls, device: str) -> None:
        """Fail now, naming the key that set ``device`` and the devices of this kind that are present, if it is not
        there (the node at its start, ``robot-rl launch`` before any node: :func:`check_device`)."""
        if not os.path.exists(device):
            raise ConfigError(cls.key, device, f"a {cls.kind} device; present: {', '.join(cls.present()) or 'none'}")

    def check(self) -> None:
        self.check_path(self.device)

    def run(self) -> None:
        """Read records until the node quits; a device that goes away (:meth:`TeleopState.device_lost`) is opened
        again every ``REOPEN_PERIOD`` s until it returns."""
        while not self.state.quit:
            try:
                self.read_device()
            except OSError as error:
                self.log.warning(f"teleop device {self.device}: {error}", throttle_duration_sec=10.0)
            if self.records:  # it was open: now it is gone
                with self.state.lock:
                    self.state.device_lost(self.device, self.log)
                self.records = 0
            time.sleep(REOPEN_PERIOD)

    def read_device(self) -> None:
        warned, started = False, time.monotonic()
        with open(self.device, "rb", buffering=0) as device:
            while not self.state.quit:
                data = device.read(self.record_size)
                if not data:
                    return  # a FIFO whose writer closed, or the device went away
                if not self.records:
                    self.log.info(f"teleop device {self.device}: reading")
                self.records += 1
                with self.state.lock:
                    self.handle(data)
                if not warned and not self.nonzero_seen and self.records >= 50 and time.monotonic() - started > 1.0:
                    self.log.warning(
                        f"{self.device} reports only zero axes ({self.records} reports): is it in the "
                        "right mode / switched on?"
                    )
                    warned = True

    def handle(self, data: bytes) -> None:
        raise NotImplementedError

    def set_axis(self, axis: int, value: float) -> None:
        self.nonzero_seen |= value != 0
        self.state.twist[axis] = 0.0 if abs(value) < self.deadzone else float(np.clip(value, -1.0, 1.0))


class Joystick(EventDevice):
    """Linux joystick interface: 8-byte ``js_event`` records."""

    record_size = JS_EVENT.size
    kind = "joystick"

    def __init__(
        self,
        state: TeleopState,
        device: str,
        axes: dict[str, int],
        signs: dict[str, float],
        buttons: dict[str, int],
        deadzone: float,
        log,
    ):
        super().__init__(state, device, deadzone, log)
        unknown = set(axes) - set(AXIS_NAMES)
        if unknown:
            raise ConfigError("teleop_device.axes", sorted(unknown), f"keys among {AXIS_NAMES}")
        self.axes = {index: (AXIS_NAMES.index(name), float(signs.get(name, 1.0))) for name, index in axes.items()}
        self.buttons = {index: name for name, index in buttons.items()}

    @staticmethod
    def present() -> list[str]:
        return (
            sorted(f"/dev/input/{p}" for p in os.listdir("/dev/input") if p.startswith("js"))
            if os.path.isdir("/dev/input")
            else []
        )

    def handle(self, data: bytes) -> None:
        _, value, kind, number = JS_EVENT.unpack(data)
        kind &= ~JS_INIT
        if kind == JS_AXIS and number in self.axes:
            axis, sign = self.axes[number]
            self.set_axis(axis, sign * value / 32767.0)
        elif kind == JS_BUTTON and number in self.buttons and value:
            self.state.press(self.buttons[number])


class SpaceMouse(EventDevice):
    """3Dconnexion SpaceMouse over Linux hidraw (the reports hidapi and pyspacemouse read).

    Report 1: translation x, y, z as int16 (SpaceMouse Compact / Wireless / Pro: 12 bytes with
    rotation rx, ry, rz after it); report 2: rotation (older models); report 3: button bits, each bit a
    button of ``buttons`` (default bit 0, left: close the gripper; bit 1, right: open it; a SpaceMouse Pro's
    further buttons can take ``takeover``, ``success``, ``estop``, ``reset``), acting when pressed; success lasts as
    long as its button is held (at least ``SUCCESS_HOLD`` s), so an operator labels every frame of a success. Raw values are divided by
    ``full_scale`` (350 counts); ``axis_signs`` turns the puck's frame into the robot's base frame.
    Moving the puck is the take-over (the actor's mux watches the twist magnitude).
    """

    kind = "SpaceMouse (hidraw)"
    key = "teleop_device.spacemouse_device"
    VENDORS = ("0000256F", "0000046D")  # 3Dconnexion, Logitech (older SpaceMice)

    def __init__(
        self,
        state: TeleopState,
        device: str,
        signs: dict[str, float],
        full_scale: float,
        deadzone: float,
        log,
        buttons: dict[str, int] | None = None,
    ):
        super().__init__(state, device, deadzone, log)
        self.signs = np.array([float(signs.get(name, 1.0)) for name in AXIS_NAMES])
        self.full_scale = float(full_scale)
        buttons = {"close": 0, "open": 1} if buttons is None else buttons
        known = set(KEY_BUTTONS.values())
        if not set(buttons) <= known or not all(isinstance(bit, int) and 0 <= bit < 64 for bit in buttons.values()):
            raise ConfigError(
                "teleop_device.spacemouse_buttons", buttons, f"{{button: bit 0-63}} with buttons among {sorted(known)}"
            )
        self.buttons = {bit: name for name, bit in buttons.items()}
        self.held = 0  # the button bits of the last report

    @staticmethod
    def present() -> list[str]:
        found = []
        for entry in sorted(os.listdir("/sys/class/hidraw")) if os.path.isdir("/sys/class/hidraw") else []:
            try:
                uevent = Path(f"/sys/class/hidraw/{entry}/device/uevent").read_text()
            except OSError:
                continue
            if any(f":{vendor}:" in uevent for vendor in SpaceMouse.VENDORS):
                found.append(f"/dev/{entry}")
        return found

    def handle(self, data: bytes) -> None:
        report, payload = data[0], data[1:]
        if report in (1, 2) and len(payload) >= 6:
            count = min(len(payload) // 2, 6 if report == 1 else 3)  # report 1: translation (and rotation); 2: rotation
            values = struct.unpack(f"<{count}h", payload[: 2 * count])
            first = 0 if report == 1 else 3
            for offset, raw in enumerate(values):
                axis = first + offset
                self.set_axis(axis, self.signs[axis] * raw / self.full_scale)
        elif report == 3 and payload:
            bits = int.from_bytes(payload[:8], "little")
            pressed, released, self.held = bits & ~self.held, self.held & ~bits, bits
            for bit, name in self.buttons.items():
                if pressed >> bit & 1:
                    self.state.press(name)
                if name == "success" and (pressed | released) >> bit & 1:
                    self.state.success_held = bool(pressed >> bit & 1)


DEVICES = {"joystick": Joystick, "spacemouse": SpaceMouse}  # teleop_device.kind -> its reader (keyboard: stdin)


def check_device(device_cfg) -> None:
    """ConfigError naming the key the user set when ``teleop_device``'s device is not on this machine (none for the
    keyboard): ``robot-rl launch`` calls it before any node starts."""
    if device_cfg.kind in DEVICES:
        reader = DEVICES[device_cfg.kind]
        reader.check_path(str(device_cfg[reader.key.split(".")[1]]))


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, ros_args = node_config(sys.argv[1:] if argv is None else argv)
        device_cfg = cfg.teleop_device
        if device_cfg.kind not in ("keyboard", "joystick", "spacemouse"):
            raise ConfigError("teleop_device.kind", device_cfg.kind, "keyboard, joystick or spacemouse")
        with ros_node("robot_rl_teleop", ros_args) as node:
            state = TeleopState()
            if device_cfg.kind == "keyboard":
                source = Keyboard(state, float(device_cfg.speed), float(device_cfg.key_hold))
            elif device_cfg.kind == "joystick":
                source = Joystick(
                    state,
                    str(device_cfg.device),
                    dict(device_cfg.axes),
                    dict(device_cfg.axis_signs),
                    dict(device_cfg.buttons),
                    float(device_cfg.deadzone),
                    node.get_logger(),
                )
            else:
                source = SpaceMouse(
                    state,
                    str(device_cfg.spacemouse_device),
                    dict(device_cfg.spacemouse_signs),
                    float(device_cfg.full_scale),
                    float(device_cfg.deadzone),
                    node.get_logger(),
                    dict(device_cfg.get("spacemouse_buttons") or {"close": 0, "open": 1}),
                )
            if device_cfg.kind != "keyboard":
                source.check()
            twist_pub = node.create_publisher(Twist, "spacenav/twist", qos.STREAM_PUBLISHER)
            joy_pub = node.create_publisher(Joy, "spacenav/joy", qos.STREAM_PUBLISHER)
            switch_pub = node.create_publisher(Bool, "rl/intervention", qos.STREAM_PUBLISHER)
            estop_pub = node.create_publisher(Bool, "rl/estop", qos.EVENT)
            reset_pub = node.create_publisher(Empty, "rl/estop_reset", qos.EVENT)
            if device_cfg.publish_success:
                success_pub = node.create_publisher(Bool, "rl/success", qos.STREAM_PUBLISHER)
                reward_pub = node.create_publisher(Float64, "rl/reward", qos.STREAM_PUBLISHER)
            reader = threading.Thread(target=source.run, daemon=True)
            reader.start()
            period = 1.0 / float(device_cfg.rate_hz)
            try:
                while not state.quit and reader.is_alive():  # a device reader runs until the node quits
                    with state.lock:
                        twist, takeover = state.twist.copy(), state.takeover
                        buttons = state.gripper_buttons(time.monotonic())
                        requests, state.requests = state.requests, []
                    for request in requests:
                        if request == "estop":
                            estop_pub.publish(Bool(data=True))
                        else:
                            reset_pub.publish(Empty())
                        node.get_logger().info(f"operator: {request}")
                    estop_pub.publish(Bool(data=False))  # the heartbeat: the operator's e-stop is here (not pressed)
                    msg = Twist()
                    msg.linear.x, msg.linear.y, msg.linear.z = map(float, twist[:3])
                    msg.angular.x, msg.angular.y, msg.angular.z = map(float, twist[3:])
                    twist_pub.publish(msg)
                    joy_pub.publish(joy_msg(twist.tolist(), buttons, time.time()))
                    switch_pub.publish(Bool(data=bool(takeover)))
                    if device_cfg.publish_success:
                        success = state.success_held or time.monotonic() < state.success_until
                        success_pub.publish(Bool(data=success))
                        reward_pub.publish(Float64(data=float(success)))
                    time.sleep(period)
            except KeyboardInterrupt:
                pass
    except ConfigError as error:
        return exit_with_error("robot_rl.ros.nodes.teleop_node", error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
