"""The RealSense driver on librealsense's own software device (``rs.software_device``): the real
driver code path (device lookup, profile choice, options, sensor streaming into a frame queue,
timestamps, reconnect) with frames injected instead of a USB camera."""

import threading
import time

import cv2
import numpy as np
import pytest

from robot_rl.core.config import ConfigError
from robot_rl.hardware.realsense import FrameTimeout, RealSenseCamera, RealSenseSettings, crop_resize
from tests.conftest import require


class SoftwareCamera:
    """A software RealSense with one RGB8 colour sensor (640x480 @ 30 and 15 fps) and a frame injector."""

    def __init__(self, serial="815412070001", depth=False):
        rs = self.rs = require("pyrealsense2")
        self.device = rs.software_device()
        self.device.register_info(rs.camera_info.serial_number, serial)
        self.device.register_info(rs.camera_info.name, "Intel RealSense D435 (software)")
        self.sensor = self.device.add_sensor("RGB Camera")
        self.profiles = {fps: self._add_profile(rs, fps, uid) for uid, fps in enumerate((30, 15))}
        # option_range(min, max, default, step) in these bindings
        self.sensor.add_option(rs.option.enable_auto_exposure, rs.option_range(0, 1, 1, 1), True)
        self.sensor.add_option(rs.option.exposure, rs.option_range(1, 10000, 166, 1), True)
        self.sensor.add_option(rs.option.enable_auto_white_balance, rs.option_range(0, 1, 1, 1), True)
        self.sensor.add_option(rs.option.white_balance, rs.option_range(2800, 6500, 4600, 10), True)
        self.streaming, self.number = False, 0
        self.image = np.zeros((480, 640, 3), np.uint8)
        self.depth = None
        if depth:  # a depth sensor with 0.1 mm units, same optics as colour (identity extrinsics)
            self.depth_sensor = self.device.add_sensor("Stereo Module")
            stream = rs.video_stream()
            stream.type, stream.index, stream.uid = rs.stream.depth, 0, 10
            stream.width, stream.height, stream.fps, stream.bpp, stream.fmt = 640, 480, 30, 2, rs.format.z16
            stream.intrinsics = self.profiles[30].as_video_stream_profile().get_intrinsics()
            self.depth_profile = self.depth_sensor.add_video_stream(stream)
            self.depth_sensor.add_read_only_option(rs.option.depth_units, 0.0001)
            extrinsics = rs.extrinsics()
            extrinsics.rotation, extrinsics.translation = [1, 0, 0, 0, 1, 0, 0, 0, 1], [0.0, 0.0, 0.0]
            self.depth_profile.register_extrinsics_to(self.profiles[30], extrinsics)
            self.device.create_matcher(rs.matchers.dlr_c)
            self.depth = np.full((480, 640), 5000, np.uint16)  # 0.5 m

    def _add_profile(self, rs, fps, uid):
        stream = rs.video_stream()
        stream.type, stream.index, stream.uid = rs.stream.color, 0, uid
        stream.width, stream.height, stream.fps, stream.bpp, stream.fmt = 640, 480, fps, 3, rs.format.rgb8
        intrinsics = rs.intrinsics()
        intrinsics.width, intrinsics.height, intrinsics.fx, intrinsics.fy = 640, 480, 600.0, 600.0
        intrinsics.ppx, intrinsics.ppy, intrinsics.model = 320.0, 240.0, rs.distortion.none
        stream.intrinsics = intrinsics
        return self.sensor.add_video_stream(stream)

    def inject(self, fps=30, seconds=1.0):
        """Push ``seconds * fps`` frames from a thread, as a device does: frame n stamped (hardware clock = host ms)
        and sent at start + n / fps, a late one at once, until ``streaming`` is cleared. (Paced by a sleep after each
        frame, a loaded machine once stretched the stream below 24 Hz: the test's clock, not the driver's.)"""
        self.streaming = True
        start = time.time()

        def run():
            for n in range(round(seconds * fps)):
                due = start + n / fps
                time.sleep(max(0.0, due - time.time()))
                if not self.streaming:
                    return
                frame = self.rs.software_video_frame()
                frame.pixels, frame.bpp, frame.stride = self.image, 3, 640 * 3
                frame.timestamp, frame.domain = due * 1000.0, self.rs.timestamp_domain.hardware_clock
                self.number += 1
                frame.frame_number, frame.profile = self.number, self.profiles[fps].as_video_stream_profile()
                if self.depth is not None:
                    depth = self.rs.software_video_frame()
                    depth.pixels, depth.bpp, depth.stride, depth.depth_units = self.depth, 2, 640 * 2, 0.0001
                    depth.timestamp, depth.domain, depth.frame_number = frame.timestamp, frame.domain, self.number
                    depth.profile = self.depth_profile.as_video_stream_profile()
                    self.depth_sensor.on_video_frame(depth)
                self.sensor.on_video_frame(frame)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread


def camera(soft, **settings):
    logs = []
    driver = RealSenseCamera(RealSenseSettings(**settings), devices=lambda: [soft.device], log=logs.append)
    return driver, logs


def test_frames_arrive_at_the_configured_size_and_rate_with_monotonic_stamps():
    soft = SoftwareCamera()
    driver, _ = camera(soft, serial="815412070001", output_size=[128, 128], exposure=500, white_balance=4000)
    driver.open()
    assert soft.sensor.get_option(soft.rs.option.exposure) == 500  # fixed exposure, auto off
    assert soft.sensor.get_option(soft.rs.option.enable_auto_exposure) == 0
    assert soft.sensor.get_option(soft.rs.option.white_balance) == 4000
    soft.inject(fps=30, seconds=2.5)
    frames = [driver.read() for _ in range(60)]
    driver.close()
    soft.streaming = False
    assert all(f.image.shape == (128, 128, 3) and f.image.dtype == np.uint8 for f in frames)
    stamps = np.array([f.stamp for f in frames])
    assert np.all(np.diff(stamps) > 0)
    rate = (len(frames) - 1) / (stamps[-1] - stamps[0])
    assert abs(rate - 30.0) < 0.5, rate  # the device's clock (librealsense maps it to host time), not when read
    assert abs(stamps[-1] - time.time()) < 5.0  # host time (a device's own clock counts from its start)


def test_crop_then_resize_and_the_intrinsics_follow():
    soft = SoftwareCamera()
    y, x = np.mgrid[0:480, 0:640]
    soft.image = np.stack([x % 256, y % 256, (x // 256) * 100], -1).astype(np.uint8)
    driver, _ = camera(soft, crop=[160, 0, 640, 480], output_size=[96, 96])
    driver.open()
    soft.inject(seconds=1.0)
    frame = driver.read()
    driver.close()
    soft.streaming = False
    np.testing.assert_array_equal(frame.image, crop_resize(soft.image, [160, 0, 640, 480], [96, 96]))
    assert crop_resize(soft.image, [160, 0, 640, 480], None)[0, 0].tolist() == [160, 0, 0]  # x0 = 160 is column 0
    k = driver.intrinsics()
    np.testing.assert_allclose(
        k, [[600 * 96 / 480, 0, (320 - 160) * 96 / 480], [0, 600 * 96 / 480, 240 * 96 / 480], [0, 0, 1]]
    )


def test_depth_is_aligned_to_colour_cropped_resized_and_in_millimetres():
    soft = SoftwareCamera(depth=True)
    soft.depth[:, 320:] = 12000  # the right half 1.2 m away
    driver, _ = camera(soft, depth=True, crop=[160, 0, 640, 480], output_size=[96, 96])
    driver.open()
    soft.inject(seconds=2.0)
    frame = driver.read()
    driver.close()
    soft.streaming = False
    assert frame.depth.shape == (96, 96) and frame.depth.dtype == np.uint16 and frame.image.shape == (96, 96, 3)
    expected = crop_resize((soft.depth // 10).astype(np.uint16), [160, 0, 640, 480], [96, 96], cv2.INTER_NEAREST)
    # 0.1 mm units -> mm; nearest neighbour: no blended values at the step; alignment's reprojection may leave a
    # line of holes (0 = no depth), as librealsense does on real cameras
    assert set(np.unique(frame.depth)) <= {0, 500, 1200}
    valid = frame.depth > 0
    assert valid.mean() > 0.98 and np.array_equal(frame.depth[valid], expected[valid])
    with pytest.raises(ConfigError, match="a depth Z16 mode of RealSense 815412070001: 640x480@30"):
        camera(soft, depth=True, depth_width=1280, depth_height=720)[0].open()


def test_a_stalled_device_times_out_and_reconnects_with_a_log_line():
    soft = SoftwareCamera()
    driver, logs = camera(soft, frame_timeout=0.3)
    driver.open()
    soft.inject(seconds=0.5)
    driver.read()
    soft.streaming = False
    time.sleep(0.1)
    while driver.queue.poll_for_frame():
        pass
    started = time.monotonic()
    with pytest.raises(FrameTimeout, match="no frame from RealSense 815412070001 for 0.3 s"):
        driver.read()
    assert time.monotonic() - started < 1.0  # a timeout, not a hang
    driver.reconnect()
    assert any("reconnected" in line for line in logs)
    soft.inject(seconds=1.0)
    assert driver.read().image.shape == (480, 640, 3)  # streaming again
    driver.close()
    soft.streaming = False


def test_bad_serial_and_unsupported_modes_list_what_is_available():
    soft = SoftwareCamera()
    with pytest.raises(ConfigError, match="connected: 815412070001"):
        camera(soft, serial="000")[0].open()
    with pytest.raises(ConfigError, match="640x480@15, 640x480@30"):
        camera(soft, fps=60)[0].open()
    with pytest.raises(ConfigError, match="camera.crop"):
        camera(soft, crop=[0, 0, 700, 480])
    none = RealSenseCamera(RealSenseSettings(), devices=list)
    with pytest.raises(ConfigError, match="connected RealSense serials: none"):
        none.open()


def test_camera_node_publishes_the_realsense2_camera_topics():
    rclpy = require("rclpy")
    from sensor_msgs.msg import CameraInfo, Image

    from robot_rl.ros.nodes.realsense_node import CameraPublisher
    from robot_rl.ros.plumbing.messages import image_to_numpy, intrinsics

    soft = SoftwareCamera()
    driver, _ = camera(soft, output_size=[64, 64])
    driver.open()
    rclpy.init()
    node = rclpy.create_node("robot_rl_test_camera")
    received = {}
    node.create_subscription(Image, "/camera/front/color/image_raw", lambda m: received.setdefault("image", m), 10)
    node.create_subscription(
        CameraInfo, "/camera/front/color/camera_info", lambda m: received.setdefault("info", m), 10
    )
    publisher = CameraPublisher(node, driver, "front")
    try:
        soft.inject(seconds=3.0)
        end = time.monotonic() + 3
        while len(received) < 2 and time.monotonic() < end:
            publisher.publish_next()
            rclpy.spin_once(node, timeout_sec=0.01)
        assert image_to_numpy(received["image"]).shape == (64, 64, 3)
        assert intrinsics(received["info"])[0, 0] == pytest.approx(600 * 64 / 640)
    finally:
        soft.streaming = False
        driver.close()
        node.destroy_node()
        rclpy.shutdown()
