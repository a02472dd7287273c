"""The reset service of a real cell: bring the TCP home through the safety node.

Serves ``/rl/reset`` (std_srvs/SetBool, what the actor's env calls between episodes; ``data`` says
a human demonstration comes next and is logged for the operator). On a request it publishes TCP
targets on ``/rl/action`` (PoseStamped, base frame) along the straight line from the measured
pose to ``reset.position`` / ``reset.rotvec`` at ``reset.speed`` m/s, with the gripper open
(``reset.open_gripper``; false leaves the gripper's last command alone): the
same path as the policy's commands, so every hard limit applies to the reset too. It answers
once the TCP is within ``reset.tolerance`` m of home, or fails after ``reset.timeout`` s. A
request while a reset runs fails at once (one motion at a time); a malformed pose (NaN, a zero
quaternion) is dropped and counted (``guard.dropped``). The objects of the task are the lab's to
reset (or a scripted motion of their own).

Two steps a cell may need around the homing:

* ``reset.recovery_service``: a std_srvs/Trigger service called first, when the arm reports an error on
  ``arm/error`` (std_msgs/String, non-empty: a Franka's reflex, a UR's protective stop): the arm takes no
  command until recovered (the emulated cell serves ``arm/error_recovery``; on a Franka, a shim over
  franka_ros2's error-recovery action, which needs ``franka_msgs``, not on PyPI).
* ``reset.scene_wait``: once the arm is home, publish ``rl/scene_reset`` (std_msgs/Bool: a demonstration comes
  next) and answer only when ``rl/scene_ready`` (std_msgs/Empty) comes from whoever puts the objects back (the
  operator, a scripted helper, the emulated cell's person), at most ``reset.scene_timeout`` s.

    python -m robot_rl.ros.nodes.home_reset_node robot=fr3 reset.position=[0.45,0.0,0.25]
"""

from __future__ import annotations

import sys
import threading
import time
from types import SimpleNamespace

import numpy as np
from geometry_msgs.msg import PoseStamped
from std_msgs.msg import Bool, Empty, Float64, String
from std_srvs.srv import SetBool, Trigger

from robot_rl.core.config import ConfigError, require_all
from robot_rl.core.geometry import matrix_from_rotvec, rotvec_from_matrix

from ..plumbing import qos
from ..plumbing.guard import InputGuard
from ..plumbing.messages import pose_msg, pose_to_numpy

POSE_TOPIC = "franka_robot_state_broadcaster/current_pose"
MAX_RECOVERIES = 3  # reflexes on the way home before a reset gives up


class ArmErrorOnTheWay(RuntimeError):
    """The arm reported an error while the reset moved it home."""


class HomeReset:
    def __init__(self, node, settings: dict):
        require_all(
            "reset",
            SimpleNamespace(**settings),
            {
                "position": (len(settings["position"]) == 3, "[x, y, z] in metres, base frame"),
                "rotvec": (len(settings["rotvec"]) == 3, "a rotation vector [rx, ry, rz] in radians"),
                "speed": (settings["speed"] > 0, "a positive speed in m/s"),
                "tolerance": (settings["tolerance"] > 0, "a positive distance in m"),
                "timeout": (settings["timeout"] > 0, "a positive time in s"),
                "scene_timeout": (settings.get("scene_timeout", 1) > 0, "a positive time in s"),
            },
        )
        self.node, self.settings = node, settings
        self.home_pos = np.asarray(settings["position"], float)
        self.home_rot = matrix_from_rotvec(np.asarray(settings["rotvec"], float))
        self.pose: tuple[np.ndarray, np.ndarray] | None = None
        self.lock = threading.Lock()
        self.busy = threading.Lock()  # held while a reset moves the arm
        self.stopping = threading.Event()  # set at shutdown: a running reset gives up
        self.mover: threading.Thread | None = None  # the thread of the reset in flight
        self.guard = InputGuard(node)
        from rclpy.callback_groups import ReentrantCallbackGroup

        # one group that excludes nothing: a reset's answer is a coroutine that holds its callback's group until the
        # arm is home, and the pose, the arm's errors, the recovery's answer and a second request come meanwhile
        group = ReentrantCallbackGroup()
        self.guard.subscribe(PoseStamped, POSE_TOPIC, self._on_pose, qos.STREAM_SUBSCRIBER, callback_group=group)
        self.action_pub = node.create_publisher(PoseStamped, "rl/action", qos.COMMAND)
        self.gripper_pub = node.create_publisher(Float64, "rl/gripper", qos.COMMAND)
        node.create_service(SetBool, "rl/reset", self._on_reset, callback_group=group)
        self.arm_error = ""
        self.guard.subscribe(String, "arm/error", self._on_arm_error, qos.LATCHED, callback_group=group)
        self.recovery = None
        if settings.get("recovery_service"):
            self.recovery = node.create_client(Trigger, settings["recovery_service"], callback_group=group)
        self.scene_ready = threading.Event()
        if settings.get("scene_wait"):
            self.scene_pub = node.create_publisher(Bool, "rl/scene_reset", qos.EVENT)
            self.guard.subscribe(
                Empty, "rl/scene_ready", lambda _: self.scene_ready.set(), qos.EVENT, callback_group=group
            )

    def _on_arm_error(self, msg) -> None:
        self.arm_error = str(msg.data)[:200]

    def _on_pose(self, msg) -> None:
        pose = pose_to_numpy(msg.pose)
        with self.lock:
            self.pose = pose

    async def _on_reset(self, request, response):
        """Answer once the reset is done: it moves the arm on a thread of its own (:meth:`reset`) while this node's
        single executor thread goes on serving the pose, the arm's errors, the scene's signal and the recovery
        service's answer, which the reset waits for. (A multi-threaded executor did this before: rclpy's used
        0.25-1.0 cores between two 100 Hz poses, and in a bench took 5 of them a second.)"""
        if not self.busy.acquire(blocking=False):
            response.success, response.message = False, "a reset is already running"
            return response
        from rclpy.task import Future

        finished = Future()
        self.mover = threading.Thread(
            target=lambda: finished.set_result(self.reset(request, response)), name="home_reset", daemon=True
        )
        self.mover.start()
        return await finished

    def reset(self, request, response):
        """Bring the arm home (recovering it from an error first), then wait for the scene; ``response`` filled in.
        Runs on the reset's own thread, holding ``busy``."""
        log = self.node.get_logger()
        started = time.monotonic()
        try:
            demo = "; a demonstration comes next, take the SpaceMouse" if request.data else ""
            for attempt in range(MAX_RECOVERIES + 1):
                if self.arm_error:
                    self.recover()
                log.info(f"reset: moving home{demo}")
                try:
                    self.go_home()
                    break
                except ArmErrorOnTheWay as error:
                    if attempt == MAX_RECOVERIES:
                        raise RuntimeError(f"reset: the arm stopped {attempt + 1} times on the way home ({error})")
                    log.warning(f"reset: the arm stopped on the way home ({error}); recovering")
            if self.settings.get("scene_wait"):
                self.wait_for_scene(bool(request.data))
            response.success, response.message = True, "home"
            log.info(f"reset: ready in {time.monotonic() - started:.2f} s")  # the reset's share of the cell's time
        except Exception as error:  # noqa: BLE001 - a failed reset is the caller's answer, not the node's end
            log.error(str(error))
            response.success, response.message = False, str(error)
        finally:
            self.busy.release()
        return response

    def recover(self) -> None:
        """The arm reports an error: call ``reset.recovery_service`` and wait until the error is gone."""
        log, error = self.node.get_logger(), self.arm_error
        if self.recovery is None:
            raise RuntimeError(f"reset: the arm reports {error!r} and reset.recovery_service is not set")
        if not self.recovery.wait_for_service(timeout_sec=self.settings["timeout"]):
            raise TimeoutError(f"reset: no recovery service {self.recovery.srv_name}")
        log.warning(f"reset: the arm reports {error!r}; calling {self.recovery.srv_name}")
        future = self.recovery.call_async(Trigger.Request())
        deadline = time.monotonic() + self.settings["timeout"]
        while not future.done() or self.arm_error:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reset: the arm still reports {self.arm_error!r} after {self.recovery.srv_name}")
            self._sleep(0.01)
        log.info(f"reset: recovered ({future.result().message})")

    def wait_for_scene(self, demo: bool) -> None:
        """Ask for the objects to be put back (``rl/scene_reset``) and wait for ``rl/scene_ready``."""
        self.scene_ready.clear()
        self.scene_pub.publish(Bool(data=demo))
        self.node.get_logger().info("reset: the arm is home; waiting for the scene (rl/scene_ready)")
        deadline = time.monotonic() + self.settings["scene_timeout"]
        while not self.scene_ready.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError(f"reset: no rl/scene_ready within {self.settings['scene_timeout']:g} s")
            self._sleep(0.01)

    def go_home(self) -> None:
        """Stream targets toward home at the configured speed until the TCP is there."""
        settings, period = self.settings, 0.02
        deadline = time.monotonic() + settings["timeout"]
        while self.pose is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reset: no pose on {POSE_TOPIC}")
            self._sleep(0.01)
        with self.lock:
            target_pos, target_rot = self.pose[0].copy(), self.pose[1].copy()
        turn = rotvec_from_matrix(self.home_rot @ target_rot.T)
        steps = max(1, int(np.ceil(np.linalg.norm(self.home_pos - target_pos) / (settings["speed"] * period))))
        start_pos, start_rot = target_pos, target_rot
        for step in range(1, steps + 1):
            fraction = step / steps
            self._command(
                start_pos + fraction * (self.home_pos - start_pos), matrix_from_rotvec(fraction * turn) @ start_rot
            )
            self._sleep(period)
        while True:
            self._command(self.home_pos, self.home_rot)
            with self.lock:
                distance = float(np.linalg.norm(self.pose[0] - self.home_pos))
            if distance < settings["tolerance"]:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"reset: TCP still {distance:.3f} m from home after {settings['timeout']:g} s")
            self._sleep(period)

    def _sleep(self, seconds: float) -> None:
        if self.stopping.wait(seconds):
            raise InterruptedError("reset: the node is shutting down")

    def _command(self, position: np.ndarray, rotation: np.ndarray) -> None:
        if self.arm_error:  # a reflex on the way home: the arm takes no command until recovered
            raise ArmErrorOnTheWay(self.arm_error)
        self.action_pub.publish(pose_msg(position, rotation, self.node.get_clock().now().nanoseconds * 1e-9, "base"))
        if self.settings["open_gripper"]:  # otherwise the gripper keeps its last command (e.g. holding a part)
            self.gripper_pub.publish(Float64(data=-1.0))


def main(argv: list[str] | None = None) -> int:
    from omegaconf import OmegaConf

    from ..plumbing.node_main import exit_with_error, node_config, ros_node, spin

    try:
        cfg, ros_args = node_config(sys.argv[1:] if argv is None else argv)
        settings = OmegaConf.to_container(cfg.reset, resolve=True)
        with ros_node("robot_rl_home_reset", ros_args) as node:
            reset = HomeReset(node, settings)
            try:
                spin(node)
            finally:
                reset.stopping.set()  # a reset in flight stops streaming targets
                if reset.mover is not None:
                    reset.mover.join(timeout=5.0)
    except ConfigError as error:
        return exit_with_error("robot_rl.ros.nodes.home_reset_node", error)
    return 0


if __name__ == "__main__":
    sys.exit(main())
