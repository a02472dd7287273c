"""RealSense camera node: publishes what realsense2_camera would, from :mod:`robot_rl.hardware.realsense`.

``/camera/<name>/color/image_raw`` (sensor_msgs/Image rgb8, cropped and resized to the policy's
size, stamped from the hardware clock), ``/camera/<name>/color/camera_info`` (the intrinsics of
the published image) and with ``camera.depth`` ``/camera/<name>/aligned_depth_to_color/image_raw``
(16UC1, millimetres, aligned to the colour image). A camera that stops delivering is reconnected with a log line, never a hang.

    python -m robot_rl.ros.nodes.realsense_node camera.serial=123456789 camera.name=front camera.output_size=[128,128]
"""

from __future__ import annotations

import sys

from sensor_msgs.msg import CameraInfo, Image

from robot_rl.core.config import ConfigError

from ...hardware.realsense import FrameTimeout, RealSenseCamera, RealSenseSettings
from ..links.topic_env import camera_topic
from ..plumbing import qos
from ..plumbing.messages import camera_info_msg, image_msg


class CameraPublisher:
    """One camera's frames onto its topics."""

    def __init__(self, node, camera: RealSenseCamera, name: str):
        self.node, self.camera, self.name = node, camera, name
        self.frame_id = f"{name}_color_optical_frame"
        self.image_pub = node.create_publisher(Image, camera_topic(name), qos.STREAM_PUBLISHER)
        self.info_pub = node.create_publisher(CameraInfo, f"camera/{name}/color/camera_info", qos.STREAM_PUBLISHER)
        self.depth_pub = (
            node.create_publisher(Image, f"camera/{name}/aligned_depth_to_color/image_raw", qos.STREAM_PUBLISHER)
            if camera.settings.depth
            else None
        )

    def publish_next(self) -> bool:
        """Publish the next frame; on a timeout reconnect (logged) and return False."""
        try:
            frame = self.camera.read()
        except FrameTimeout as timeout:
            self.node.get_logger().warning(f"{timeout}; reconnecting")
            self.camera.reconnect()
            return False
        self.image_pub.publish(image_msg(frame.image, frame.stamp, self.frame_id))
        if self.depth_pub is not None:
            self.depth_pub.publish(image_msg(frame.depth, frame.stamp, self.frame_id))  # 16UC1, mm, colour frame
        height, width = frame.image.shape[:2]
        self.info_pub.publish(camera_info_msg(width, height, self.camera.intrinsics(), frame.stamp, self.frame_id))
        return True


def main(argv: list[str] | None = None) -> int:
    from omegaconf import OmegaConf

    from ..plumbing.node_main import exit_with_error, node_config, ros_node

    try:
        cfg, ros_args = node_config(sys.argv[1:] if argv is None else argv)
        settings = dict(OmegaConf.to_container(cfg.camera, resolve=True))
        name = settings.pop("name")
        camera = RealSenseCamera(RealSenseSettings(**settings))
        with ros_node(f"robot_rl_realsense_{name}", ros_args) as node:
            camera.log = node.get_logger().info
            camera.open()
            node.get_logger().info(f"RealSense {camera.serial} streaming to {camera_topic(name)}")
            publisher = CameraPublisher(node, camera, name)
            try:
                while True:
                    publisher.publish_next()
            except KeyboardInterrupt:
                pass
            finally:
                camera.close()
    except (ConfigError, FrameTimeout) as error:
        return exit_with_error("robot_rl.ros.nodes.realsense_node", error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
