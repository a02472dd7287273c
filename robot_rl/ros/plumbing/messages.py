"""Conversions between ROS 2 messages and the numpy conventions of robot_rl (no cv_bridge).

Positions in metres, orientations as 3x3 rotation matrices from the TCP frame to the base frame,
twists as (linear m/s, angular rad/s), wrenches as (force N, torque N m), all in the frame named
by the message header. ROS quaternions are (x, y, z, w), robot_rl's (w, x, y, z). Stamps are
``builtin_interfaces/Time``; :func:`seconds` / :func:`stamp` convert them to and from float
seconds. Every ``*_msg`` function builds a new message; every ``*_to_numpy`` reads one.

The readers are also the validators of received messages: each refuses what it cannot read
(sizes, shapes, encodings, NaN / inf, a zero quaternion, missing joints) with a
:class:`~robot_rl.ros.plumbing.guard.MessageError` naming the value and what was expected, so a node's
guarded callback drops the message (:class:`~robot_rl.ros.plumbing.guard.InputGuard`) instead of crashing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from builtin_interfaces.msg import Time
from geometry_msgs.msg import PoseStamped, TwistStamped, WrenchStamped
from sensor_msgs.msg import CameraInfo, Image, JointState, Joy

from robot_rl.core.geometry import matrix_from_quat, quat_from_matrix

from ...data.wire import MessageError, bounded
from .guard import finite

#: Image encodings understood here -> (numpy dtype, channels)
ENCODINGS = {
    "rgb8": (np.uint8, 3),
    "bgr8": (np.uint8, 3),
    "mono8": (np.uint8, 1),
    "16UC1": (np.uint16, 1),
    "mono16": (np.uint16, 1),
    "32FC1": (np.float32, 1),
}
MAX_PIXELS = 4096 * 4096  # width * height of the largest image a node reads (a 16 MP camera)
#: bytes of the largest image a node reads: 32 MiB (a 4K rgb8 frame is 24.9 MB, a 16 MP 16UC1 depth image 32 MiB); a
#: bigger frame (a 50 MB one) is refused before anything is converted or allocated
MAX_IMAGE_BYTES = 32 * 2**20
COLOUR_ENCODINGS = ("rgb8", "bgr8")  # what a camera's colour topic may carry
MAX_POSITION = 100.0  # m: |coordinate| of a pose; no robot cell is larger, and larger values overflow float32 features
MIN_QUAT_NORM = 1e-6  # a quaternion shorter than this has no direction (all zeros: an unset orientation)
MAX_FRAME_ID = 256  # characters of a received header frame id
QUATERNION_TOLERANCE = 0.1  # | |q| - 1 | allowed in a pose to obey or to act on
MAX_ITEMS = 4096  # entries of a joint state or joystick message


def stamped(msg, t: float, frame_id: str = ""):
    """Set ``msg.header`` (stamp ``t`` s, ``frame_id``); returns ``msg``."""
    msg.header.stamp, msg.header.frame_id = stamp(t), frame_id
    return msg


def seconds(time_msg) -> float:
    return time_msg.sec + time_msg.nanosec * 1e-9


STAMP_TOLERANCE_NS = 1000  # a time sent as float seconds (a command answering an observation) comes back within 1 us


def stamp_ns(time_msg) -> int:
    """A stamp (builtin_interfaces/Time) in integer nanoseconds: sim time instants are compared in these."""
    return int(time_msg.sec) * 1_000_000_000 + int(time_msg.nanosec)


def stamp(t: float) -> Time:
    """``t`` s as a header stamp, to the nearest nanosecond (9.9999999999 s is 10 s, not 9.999999999 s)."""
    sec = int(np.floor(t))
    nanosec = round((t - sec) * 1e9)
    if nanosec >= 1_000_000_000:
        sec, nanosec = sec + 1, nanosec - 1_000_000_000
    return Time(sec=sec, nanosec=nanosec)


# ----------------------------------------------------------------------------- poses, twists, wrenches
def pose_to_numpy(pose) -> tuple[np.ndarray, np.ndarray]:
    """geometry_msgs/Pose -> (position (3,) m, rotation (3, 3)); the quaternion is normalised.

    Refuses non-finite values, a coordinate beyond ``MAX_POSITION`` and a quaternion of (near) zero length."""
    p, q = pose.position, pose.orientation
    position = finite("pose position", [p.x, p.y, p.z])
    if np.any(np.abs(position) > MAX_POSITION):
        raise MessageError(f"pose position {position.tolist()} is beyond {MAX_POSITION:g} m of the frame's origin")
    quat = finite("pose orientation", [q.w, q.x, q.y, q.z])
    if np.linalg.norm(quat) < MIN_QUAT_NORM:
        raise MessageError(f"pose orientation {quat.tolist()} (w, x, y, z) has no length; expected a unit quaternion")
    return position, matrix_from_quat(quat)


def command_pose(msg: PoseStamped) -> tuple[np.ndarray, np.ndarray]:
    """(position m, rotation) of a PoseStamped an arm is to follow or reports: :func:`pose_to_numpy`'s checks, a
    frame id of at most ``MAX_FRAME_ID`` characters and a quaternion within ``QUATERNION_TOLERANCE`` of unit length
    (a command is not to be guessed from a far-off one)."""
    bounded("header.frame_id", len(msg.header.frame_id), MAX_FRAME_ID)
    q = msg.pose.orientation
    norm = math.sqrt(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w)
    if not abs(norm - 1.0) <= QUATERNION_TOLERANCE:  # also NaN
        raise MessageError(
            f"orientation has norm {norm:.4g}; expected a unit quaternion (1 +- {QUATERNION_TOLERANCE:g})"
        )
    return pose_to_numpy(msg.pose)


def numpy_to_pose(pose, position: np.ndarray, rotation: np.ndarray):
    """Fill geometry_msgs/Pose ``pose`` in place; returns it."""
    w, x, y, z = quat_from_matrix(rotation)
    pose.position.x, pose.position.y, pose.position.z = map(float, position)
    pose.orientation.w, pose.orientation.x, pose.orientation.y, pose.orientation.z = map(float, (w, x, y, z))
    return pose


def pose_msg(position: np.ndarray, rotation: np.ndarray, t: float, frame_id: str) -> PoseStamped:
    msg = stamped(PoseStamped(), t, frame_id)
    numpy_to_pose(msg.pose, position, rotation)
    return msg


def _vector(name: str, v) -> np.ndarray:
    return finite(name, [v.x, v.y, v.z])


def _fill(v, values) -> None:
    v.x, v.y, v.z = map(float, values)


def twist_msg(linear: np.ndarray, angular: np.ndarray, t: float, frame_id: str) -> TwistStamped:
    msg = stamped(TwistStamped(), t, frame_id)
    _fill(msg.twist.linear, linear)
    _fill(msg.twist.angular, angular)
    return msg


def twist_to_numpy(twist) -> np.ndarray:
    """geometry_msgs/Twist -> (6,) [linear, angular]; non-finite values are refused."""
    return np.concatenate([_vector("twist linear", twist.linear), _vector("twist angular", twist.angular)])


def wrench_msg(force: np.ndarray, torque: np.ndarray, t: float, frame_id: str) -> WrenchStamped:
    msg = stamped(WrenchStamped(), t, frame_id)
    _fill(msg.wrench.force, force)
    _fill(msg.wrench.torque, torque)
    return msg


def wrench_to_numpy(wrench) -> np.ndarray:
    """geometry_msgs/Wrench -> (6,) [force N, torque N m]; non-finite values are refused."""
    return np.concatenate([_vector("wrench force", wrench.force), _vector("wrench torque", wrench.torque)])


# ----------------------------------------------------------------------------- joints and joysticks
def joint_state_msg(
    names: Sequence[str], position: np.ndarray, velocity: np.ndarray, effort: np.ndarray, t: float
) -> JointState:
    msg = stamped(JointState(), t)
    msg.name = list(names)
    msg.position, msg.velocity, msg.effort = (np.asarray(a, float).tolist() for a in (position, velocity, effort))
    return msg


def joint_positions(msg: JointState, names: Sequence[str]) -> np.ndarray:
    """Positions of ``names`` in that order (rad or m).

    Refuses a message whose ``position`` (or a non-empty ``velocity`` / ``effort``) does not have one entry per
    name, a missing joint (naming what the message has) and non-finite positions of the joints asked for."""
    count = len(msg.name)
    bounded("JointState name", count, MAX_ITEMS)
    for field in ("position", "velocity", "effort"):
        size = len(getattr(msg, field))
        if size != count and (field == "position" or size):
            raise MessageError(
                f"JointState {field} has {size} entries for {count} names; expected one per name"
                + ("" if field == "position" else " or none")
            )
    index = {name: i for i, name in enumerate(msg.name)}
    missing = [name for name in names if name not in index]
    if missing:
        raise MessageError(f"JointState has no joints {missing}; it has {list(msg.name)[:20]}")
    return finite(f"JointState position of {list(names)}", [msg.position[index[name]] for name in names])


def joy_msg(axes: Sequence[float], buttons: Sequence[int], t: float) -> Joy:
    msg = stamped(Joy(), t)
    msg.axes, msg.buttons = [float(a) for a in axes], [int(b) for b in buttons]
    return msg


def joy_to_numpy(msg: Joy, min_axes: int = 0, min_buttons: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """sensor_msgs/Joy -> (axes float, buttons int); refuses fewer than ``min_axes`` / ``min_buttons`` entries,
    more than ``MAX_ITEMS`` and non-finite axes."""
    for field, least in (("axes", min_axes), ("buttons", min_buttons)):
        size = len(getattr(msg, field))
        bounded(f"Joy {field}", size, MAX_ITEMS)
        if size < least:
            raise MessageError(f"Joy has {size} {field}; expected at least {least}")
    return finite("Joy axes", msg.axes), np.asarray(msg.buttons, dtype=int)


def labelled_array(msg, expected: Sequence[tuple[str, int]]) -> np.ndarray:
    """std_msgs/*MultiArray whose layout labels and sizes are ``expected`` [(label, size), ...] -> float32 (n,).

    Refuses another layout, a ``data`` length other than the sum of the sizes, and non-finite values."""
    labels = [(d.label, d.size) for d in msg.layout.dim]
    if labels != list(expected):
        raise MessageError(f"layout {labels[:20]}; expected {list(expected)}")
    size = sum(size for _, size in expected)
    if len(msg.data) != size:
        raise MessageError(f"{len(msg.data)} values for the layout {list(expected)}; expected {size}")
    return finite("data", msg.data).astype(np.float32)


# ----------------------------------------------------------------------------- cameras
def image_msg(array: np.ndarray, t: float, frame_id: str, encoding: str | None = None) -> Image:
    """uint8 HxWx3 -> rgb8 (or ``bgr8``), uint8 HxW -> mono8, uint16 HxW -> 16UC1 (depth in mm), float32 -> 32FC1."""
    array = np.ascontiguousarray(array)
    if encoding is None:
        encoding = {
            (np.uint8, 3): "rgb8",
            (np.uint8, 1): "mono8",
            (np.uint16, 1): "16UC1",
            (np.float32, 1): "32FC1",
        }.get((array.dtype.type, array.shape[2] if array.ndim == 3 else 1))
    if encoding not in ENCODINGS:
        raise ValueError(
            f"image of dtype {array.dtype} and shape {array.shape}: no ROS encoding for it "
            f"(supported: {', '.join(ENCODINGS)})"
        )
    msg = stamped(Image(), t, frame_id)
    msg.height, msg.width = array.shape[:2]
    msg.encoding = encoding
    msg.is_bigendian = 0
    msg.step = array.strides[0]
    msg.data = array.tobytes()
    return msg


def image_to_numpy(msg: Image) -> np.ndarray:
    """sensor_msgs/Image -> HxWx3 uint8 RGB (colour encodings) or HxW (single channel); honours row padding.

    Refuses, before converting anything, ``data`` of more than ``MAX_IMAGE_BYTES``, an unknown encoding, an empty
    image or one of more than ``MAX_PIXELS`` pixels, a ``step`` (bytes per row) shorter than a row of pixels, and
    ``data`` whose length is not ``height * step``."""
    bounded("image data", len(msg.data), MAX_IMAGE_BYTES)
    if msg.encoding not in ENCODINGS:
        raise MessageError(
            f"image encoding {msg.encoding[:40]!r} is not supported (expected one of {', '.join(ENCODINGS)})"
        )
    dtype, channels = ENCODINGS[msg.encoding]
    dtype = np.dtype(dtype).newbyteorder(">" if msg.is_bigendian else "<")
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    if not (0 < width * height <= MAX_PIXELS):
        raise MessageError(f"image of {width}x{height} pixels; expected 1 to {MAX_PIXELS} pixels")
    row_bytes = width * channels * dtype.itemsize
    if step < row_bytes:
        raise MessageError(
            f"image step {step} is shorter than a row of {width} {msg.encoding} pixels ({row_bytes} bytes)"
        )
    if len(msg.data) != height * step:
        raise MessageError(f"image data has {len(msg.data)} bytes; expected height * step = {height} * {step}")
    row = np.frombuffer(msg.data, dtype=np.uint8).reshape(height, step)
    pixels = row[:, :row_bytes].copy().view(dtype)
    image = pixels.reshape(height, width, channels) if channels > 1 else pixels.reshape(height, width)
    if msg.encoding == "bgr8":
        image = image[..., ::-1]
    return np.ascontiguousarray(image.astype(dtype.newbyteorder("=")))


def colour_image(msg: Image, size: tuple[int, int]) -> np.ndarray:
    """A colour sensor_msgs/Image as the HxWx3 uint8 RGB array of ``size`` (height, width) a policy reads (area
    interpolation when resized); another encoding (a single-channel or YUV image) is refused before it is converted."""
    if msg.encoding not in COLOUR_ENCODINGS:
        raise MessageError(f"a {msg.encoding[:40]!r} image; expected a colour image ({' or '.join(COLOUR_ENCODINGS)})")
    image = image_to_numpy(msg)
    height, width = size
    if image.shape[:2] != (height, width):
        import cv2  # here: every node imports this module, and OpenCV costs ~0.1 s of CPU a start

        image = cv2.resize(image, (width, height), interpolation=cv2.INTER_AREA)
    return image


def pinhole_matrix(width: int, height: int, fovy_deg: float) -> np.ndarray:
    """3x3 camera matrix K (pixels) of a pinhole camera with vertical field of view ``fovy_deg`` and square pixels."""
    f = 0.5 * height / np.tan(np.deg2rad(fovy_deg) / 2)
    return np.array([[f, 0.0, (width - 1) / 2], [0.0, f, (height - 1) / 2], [0.0, 0.0, 1.0]])


def camera_info_msg(width: int, height: int, k: np.ndarray, t: float, frame_id: str) -> CameraInfo:
    """CameraInfo of an undistorted image with camera matrix ``k`` (3x3, pixels)."""
    k = np.asarray(k, dtype=float)
    msg = stamped(CameraInfo(), t, frame_id)
    msg.width, msg.height = int(width), int(height)
    msg.distortion_model = "plumb_bob"
    msg.d = [0.0] * 5
    msg.k = k.ravel().tolist()
    msg.r = np.eye(3).ravel().tolist()
    msg.p = np.hstack([k, np.zeros((3, 1))]).ravel().tolist()
    return msg


def intrinsics(msg: CameraInfo) -> np.ndarray:
    """The 3x3 camera matrix K (pixels)."""
    return np.asarray(msg.k, dtype=float).reshape(3, 3)
