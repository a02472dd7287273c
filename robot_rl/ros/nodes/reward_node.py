"""The reward node: the reward classifier as the cell's success signal.

For every new set of frames from ``classifier.cameras`` (``/camera/<name>/color/image_raw``,
resized to the classifier's input size: a new frame from every camera since the last score) it publishes
``/rl/success`` (std_msgs/Bool: P(success) above the threshold on ``classifier.consecutive_frames`` scores in a row
of the episode, the rule the threshold was calibrated for and saved with it), then ``/rl/reward``
(std_msgs/Float64, 1.0 on success else 0.0: the sparse reward of HIL-SERL; it carries the success before it, :mod:`robot_rl.ros.links.topic_env`) and
``/rl/success_probability`` (Float64). A camera that goes silent stops the scores (no frame is scored twice, nor a
dead camera's last one with a live one's new frames): the actor pauses on the silent ``/rl/reward``, and the node
names the camera in its log every ``SILENT_AFTER`` s. A frame that is not a
readable colour image (size, step, encoding) is dropped and counted (``guard.dropped``).

The operator's label (``/rl/operator_label``, std_msgs/Bool: the console's success or failure) overrides the
classifier for the rest of the episode: ``/rl/success`` and ``/rl/reward`` then say the label (P(success) still goes
out as computed) until the actor's next ``/rl/episode_stats`` record, which it publishes when an episode ends; that
record also starts the run of frames above the threshold afresh.

The threshold (a probability) is ``classifier.threshold`` when that is a number, else the one
``robot-rl classifier`` calibrated on held-out frames and saved in ``classifier.out`` (0.5 for a
file saved without one); the node logs it and where it came from at start.

    python -m robot_rl.ros.nodes.reward_node classifier.out=runs/cell/reward_classifier.pt classifier.cameras=[front]
"""

from __future__ import annotations

import json
import sys
import time

from sensor_msgs.msg import Image
from std_msgs.msg import Bool, Float64, String

from robot_rl.core.config import ConfigError
from robot_rl.policies.reward_classifier import SustainedSuccess
from robot_rl.runtime.classifier import load_classifier

from ..links.topic_env import camera_topic
from ..plumbing import qos
from ..plumbing.guard import InputGuard, MessageError
from ..plumbing.messages import colour_image
from ..plumbing.node_main import exit_with_error, node_config, ros_node, spin

SILENT_AFTER = 1.0  # s without a frame from a camera the others still send: the node names it


class RewardPublisher:
    def __init__(self, node, classifier, threshold: float):
        self.classifier, self.log = classifier, node.get_logger()
        self.rule = SustainedSuccess(threshold, classifier.config.consecutive_frames)
        self.latest: dict[str, object] = {}  # camera -> its newest frame not yet scored
        self.arrived: dict[str, float] = {}  # camera -> monotonic time of its last frame
        self.override: bool | None = None  # the operator's label of the episode in progress (None: the classifier's)
        self.guard = InputGuard(node)
        self.guard.subscribe(Bool, "rl/operator_label", self._on_label, qos.EVENT)
        self.guard.subscribe(String, "rl/episode_stats", self._on_episode_end, qos.EPISODE_LOG)
        for camera in classifier.config.cameras:
            self.guard.subscribe(
                Image, camera_topic(camera), lambda m, c=camera: self._on_image(c, m), qos.STREAM_SUBSCRIBER
            )
        self.success_pub = node.create_publisher(Bool, "rl/success", qos.STREAM_PUBLISHER)
        self.reward_pub = node.create_publisher(Float64, "rl/reward", qos.STREAM_PUBLISHER)
        self.probability_pub = node.create_publisher(Float64, "rl/success_probability", qos.STREAM_PUBLISHER)
        node.create_timer(SILENT_AFTER, self._name_silent_cameras)

    def _on_label(self, msg) -> None:
        self.override = bool(msg.data)

    def _on_episode_end(self, msg) -> None:
        """An actor's episode record (a JSON object with its ``kind``): the episode ended, the label's override too."""
        record = json.loads(msg.data)
        if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
            raise MessageError("expected a JSON object with a kind")
        self.override = None
        self.rule.clear()

    def _on_image(self, camera: str, msg) -> None:
        self.latest[camera] = colour_image(msg, self.classifier.image_shapes[camera][:2])
        self.arrived[camera] = time.monotonic()
        if len(self.latest) < len(self.classifier.config.cameras):
            return  # a camera has no new frame yet
        frames, self.latest = self.latest, {}
        probability = self.classifier.probability(frames)
        sustained = self.rule.update(probability)
        success = sustained if self.override is None else self.override
        self.success_pub.publish(Bool(data=bool(success)))
        self.reward_pub.publish(Float64(data=float(success)))
        self.probability_pub.publish(Float64(data=probability))

    def _name_silent_cameras(self) -> None:
        if not self.arrived:
            return  # no camera yet: the actor names the silent reward
        now = time.monotonic()
        for camera in self.classifier.config.cameras:
            silent = now - self.arrived.get(camera, -float("inf"))
            if silent > SILENT_AFTER:
                self.log.warning(
                    f"no frame from camera {camera} on {camera_topic(camera)} for "
                    + (f"{silent:.1f} s" if silent < float("inf") else "the whole run")
                    + ": no success is scored until it returns (the actor pauses on /rl/reward)"
                )


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, ros_args = node_config(sys.argv[1:] if argv is None else argv)
        classifier, threshold, source = load_classifier(cfg)
    except (ConfigError, FileNotFoundError) as error:
        return exit_with_error("robot_rl.ros.nodes.reward_node", error)
    with ros_node("robot_rl_reward", ros_args) as node:
        RewardPublisher(node, classifier, threshold)
        node.get_logger().info(
            f"reward classifier {cfg.classifier.out} on {list(classifier.config.cameras)}:"
            f" success when P(success) > {threshold:.4f}"
            + (f" on {frames} frames in a row" if (frames := classifier.config.consecutive_frames) > 1 else "")
            + f" ({source})"
        )
        spin(node)
    return 0


if __name__ == "__main__":
    sys.exit(main())
