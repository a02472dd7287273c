"""RealSense camera driver (colour, optionally depth aligned to it) on pyrealsense2's sensor API.

The driver opens one device by serial number, picks the colour sensor's stream profile that
matches the configured resolution, rate and RGB8 format, fixes or frees exposure and white
balance, and streams into a frame queue. Each frame is cropped then resized to the policy's
size and stamped in host time from the camera's hardware clock: the offset between the two is
the smallest seen (transport only ever adds delay), so stamps are monotonic and free of USB
jitter. With ``depth`` the depth sensor streams too, colour and depth are matched by a syncer
and depth is aligned to the colour image (``rs.align``), cropped and resized the same way
(nearest neighbour) and converted to millimetres. A frame that does not arrive within ``frame_timeout`` raises :class:`FrameTimeout`;
:meth:`RealSenseCamera.reconnect` closes and reopens the device by serial.

Devices come from a provider (``connected_devices`` by default); tests pass librealsense's own
``rs.software_device``, which runs this same code without hardware.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from robot_rl.core.config import ConfigError


class FrameTimeout(RuntimeError):
    """No frame within the frame timeout."""


@dataclass
class RealSenseSettings:
    serial: str | None = None  # None: the only connected device
    width: int = 640  # pixels, colour stream
    height: int = 480
    fps: int = 30
    exposure: float | None = None  # microseconds; None: auto exposure
    white_balance: float | None = None  # kelvin; None: auto white balance
    crop: Sequence[int] | None = None  # [x0, y0, x1, y1] pixels of the colour image, before resizing
    output_size: Sequence[int] | None = None  # [height, width] of published images; None: as cropped
    frame_timeout: float = 1.0  # s
    depth: bool = False  # also stream depth, aligned to the colour image (same crop and size), in millimetres
    depth_width: int | None = None  # depth mode; None: the colour resolution
    depth_height: int | None = None


@dataclass
class Frame:
    image: np.ndarray  # uint8 HxWx3 RGB, cropped and resized
    stamp: float  # s, host clock (time.time), from the hardware timestamp
    hardware_ms: float  # the camera's own timestamp
    number: int
    depth: np.ndarray | None = None  # uint16 HxW millimetres, aligned to ``image`` (0: no depth)


def crop_resize(
    image: np.ndarray, crop: Sequence[int] | None, size: Sequence[int] | None, interpolation: int = cv2.INTER_AREA
) -> np.ndarray:
    """Crop ``[x0, y0, x1, y1]`` (pixels), then resize to ``[height, width]`` (area interpolation for
    colour; pass ``cv2.INTER_NEAREST`` for depth, which must not blend surfaces)."""
    if crop is not None:
        x0, y0, x1, y1 = (int(v) for v in crop)
        image = image[y0:y1, x0:x1]
    if size is not None and tuple(image.shape[:2]) != tuple(size):
        image = cv2.resize(image, (int(size[1]), int(size[0])), interpolation=interpolation)
    return np.ascontiguousarray(image)


def connected_devices() -> list:
    import pyrealsense2 as rs

    return list(rs.context().query_devices())


class RealSenseCamera:
    def __init__(
        self,
        settings: RealSenseSettings,
        devices: Callable[[], list] = connected_devices,
        log: Callable[[str], None] = print,
    ):
        self.settings, self.devices, self.log = settings, devices, log
        if settings.crop is not None:
            x0, y0, x1, y1 = settings.crop
            if not (0 <= x0 < x1 <= settings.width and 0 <= y0 < y1 <= settings.height):
                raise ConfigError(
                    "camera.crop",
                    list(settings.crop),
                    f"[x0, y0, x1, y1] inside the {settings.width}x{settings.height} image with x0 < x1, y0 < y1",
                )
        self.sensor = self.profile = self.queue = self.align = None
        self.sensors: list = []  # (sensor, profile) streaming now
        self.serial: str | None = None
        self.offset: float | None = None  # host time - hardware time (s), smallest seen
        self.last_stamp = -np.inf

    # ----------------------------------------------------------------- lifecycle
    def open(self) -> None:
        import pyrealsense2 as rs

        device = self._find_device(rs)
        self.serial = device.get_info(rs.camera_info.serial_number)
        s = self.settings
        self.sensor, self.profile = self._profile(rs, device, rs.stream.color, rs.format.rgb8, s.width, s.height)
        self._set_options(rs)
        self.sensors = [(self.sensor, self.profile)]
        if s.depth:
            depth = self._profile(
                rs, device, rs.stream.depth, rs.format.z16, s.depth_width or s.width, s.depth_height or s.height
            )
            self.sensors.append(depth)
            self.queue, self.align = rs.syncer(), rs.align(rs.stream.color)  # framesets of colour + depth
        else:
            self.queue, self.align = rs.frame_queue(2), None
        for sensor, profile in self.sensors:
            sensor.open(profile)
            sensor.start(self.queue)
        self.offset = None

    def close(self) -> None:
        for sensor, _ in self.sensors:
            for stop in (sensor.stop, sensor.close):
                try:
                    stop()
                except RuntimeError:
                    pass  # already stopped, or the device is gone
        self.sensor, self.sensors, self.queue = None, [], None

    def reconnect(self, attempts: int = 5, backoff: float = 0.5) -> None:
        """Close and reopen the device by serial; raises after ``attempts`` failures (never hangs)."""
        self.close()
        for attempt in range(1, attempts + 1):
            try:
                self.open()
                self.log(f"RealSense {self.serial}: reconnected (attempt {attempt})")
                return
            except (ConfigError, RuntimeError) as error:
                self.log(f"RealSense {self.settings.serial or ''}: reconnect attempt {attempt} failed: {error}")
                time.sleep(backoff * attempt)
        raise FrameTimeout(f"RealSense {self.settings.serial}: could not reconnect after {attempts} attempts")

    # ----------------------------------------------------------------- frames
    def read(self) -> Frame:
        deadline = time.monotonic() + self.settings.frame_timeout
        while not (frames := self._poll()):
            if time.monotonic() > deadline:
                raise FrameTimeout(f"no frame from RealSense {self.serial} for {self.settings.frame_timeout:g} s")
            time.sleep(0.001)
        frame, depth = frames
        received = time.time()
        hardware_ms = float(frame.get_timestamp())
        offset = received - hardware_ms / 1000.0
        self.offset = offset if self.offset is None else min(self.offset, offset)
        stamp = max(hardware_ms / 1000.0 + self.offset, self.last_stamp + 1e-6)
        self.last_stamp = stamp
        s = self.settings
        image = np.asanyarray(frame.get_data()).reshape(s.height, s.width, 3)
        if depth is not None:
            millimetres = np.asanyarray(depth.get_data()).astype(np.float64) * depth.get_units() * 1000.0
            depth = crop_resize(np.round(millimetres).astype(np.uint16), s.crop, s.output_size, cv2.INTER_NEAREST)
        return Frame(
            crop_resize(image, s.crop, s.output_size), stamp, hardware_ms, int(frame.get_frame_number()), depth
        )

    def _poll(self):
        """(colour frame, aligned depth frame or None) if a complete set is waiting, else None."""
        if self.align is None:
            frame = self.queue.poll_for_frame()
            return (frame, None) if frame else None
        frames = self.queue.poll_for_frames()
        if not frames or not frames.get_color_frame() or not frames.get_depth_frame():
            return None
        aligned = self.align.process(frames)
        return aligned.get_color_frame(), aligned.get_depth_frame()

    def intrinsics(self) -> np.ndarray:
        """3x3 camera matrix (pixels) of the published images: the stream's, shifted by the crop and scaled."""
        intr = self.profile.as_video_stream_profile().get_intrinsics()
        k = np.array([[intr.fx, 0.0, intr.ppx], [0.0, intr.fy, intr.ppy], [0.0, 0.0, 1.0]])
        x0, y0, x1, y1 = self.settings.crop or (0, 0, self.settings.width, self.settings.height)
        k[0, 2] -= x0
        k[1, 2] -= y0
        if self.settings.output_size is not None:
            k[0] *= self.settings.output_size[1] / (x1 - x0)
            k[1] *= self.settings.output_size[0] / (y1 - y0)
        return k

    # ----------------------------------------------------------------- helpers
    def _find_device(self, rs):
        devices = self.devices()
        serials = [d.get_info(rs.camera_info.serial_number) for d in devices]
        if self.settings.serial is None:
            if len(devices) != 1:
                raise ConfigError("camera.serial", None, f"one of the connected RealSense serials: {serials or 'none'}")
            return devices[0]
        if self.settings.serial not in serials:
            raise ConfigError(
                "camera.serial",
                self.settings.serial,
                f"a connected RealSense; connected: {', '.join(serials) or 'none'}",
            )
        return devices[serials.index(self.settings.serial)]

    def _profile(self, rs, device, stream, fmt, width: int, height: int):
        """(sensor, profile) of the ``stream`` mode with this size, ``fps`` and format; else the modes there are."""
        fps, available = self.settings.fps, []
        for sensor in device.query_sensors():
            for profile in sensor.get_stream_profiles():
                if profile.stream_type() != stream or profile.format() != fmt:
                    continue
                video = profile.as_video_stream_profile()
                available.append(f"{video.width()}x{video.height()}@{profile.fps()}")
                if (video.width(), video.height(), profile.fps()) == (width, height, fps):
                    return sensor, profile
        kind = "colour RGB8" if stream == rs.stream.color else "depth Z16"
        raise ConfigError(
            "camera",
            f"{width}x{height}@{fps}",
            f"a {kind} mode of RealSense {self.serial}: {', '.join(sorted(set(available))) or 'none'}",
        )

    def _set_options(self, rs) -> None:
        for auto, option, value in (
            (rs.option.enable_auto_exposure, rs.option.exposure, self.settings.exposure),
            (rs.option.enable_auto_white_balance, rs.option.white_balance, self.settings.white_balance),
        ):
            if self.sensor.supports(auto):
                self.sensor.set_option(auto, 1.0 if value is None else 0.0)
            if value is not None:
                if not self.sensor.supports(option):
                    raise ConfigError(
                        f"camera.{option.name}", value, f"unset: RealSense {self.serial} has no {option.name}"
                    )
                self.sensor.set_option(option, float(value))
