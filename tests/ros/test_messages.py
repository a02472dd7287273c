"""Message conversions and their validation (no DDS needed, but real rclpy message types); the transition /
weights codec is tested in test_codec.py."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import require


@pytest.fixture(scope="module")
def messages():
    require("rclpy")
    from robot_rl.ros.plumbing import messages

    return messages


def test_images_round_trip_every_encoding_and_honour_row_padding(messages):
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    for array in (
        rgb,
        rgb[..., 0].copy(),
        rng.integers(0, 4000, (5, 7), dtype=np.uint16),
        rng.random((5, 7), dtype=np.float32),
    ):
        msg = messages.image_msg(array, 12.5, "cam")
        assert (msg.height, msg.width) == (5, 7) and messages.seconds(msg.header.stamp) == 12.5
        np.testing.assert_array_equal(messages.image_to_numpy(msg), array)
    bgr = messages.image_msg(rgb[..., ::-1], 0.0, "cam", encoding="bgr8")
    np.testing.assert_array_equal(messages.image_to_numpy(bgr), rgb)  # always RGB out
    padded = messages.image_msg(rgb, 0.0, "cam")
    padded.step = 7 * 3 + 3  # a driver that pads rows to 24 bytes
    padded.data = np.pad(rgb.reshape(5, 21), ((0, 0), (0, 3))).tobytes()
    np.testing.assert_array_equal(messages.image_to_numpy(padded), rgb)
    padded.encoding = "yuv422"
    with pytest.raises(ValueError, match="yuv422"):
        messages.image_to_numpy(padded)


def test_camera_info_pose_twist_wrench_joints_and_joy(messages):
    info = messages.camera_info_msg(128, 96, messages.pinhole_matrix(128, 96, 90.0), 1.0, "cam")
    k = messages.intrinsics(info)
    assert k[1, 1] == pytest.approx(48.0) and k[0, 2] == pytest.approx(63.5) and k[1, 2] == pytest.approx(47.5)
    rot = np.array([[1.0, 0, 0], [0, -1, 0], [0, 0, -1]])
    pos, back = messages.pose_to_numpy(messages.pose_msg(np.array([0.4, -0.1, 0.2]), rot, 3.0, "base").pose)
    np.testing.assert_allclose(pos, [0.4, -0.1, 0.2])
    np.testing.assert_allclose(back, rot, atol=1e-12)
    twist = messages.twist_msg(np.array([1.0, 2, 3]), np.array([4.0, 5, 6]), 0.0, "base")
    np.testing.assert_array_equal(messages.twist_to_numpy(twist.twist), [1, 2, 3, 4, 5, 6])
    wrench = messages.wrench_msg(np.array([0.0, 0, -9.8]), np.array([0.1, 0, 0]), 0.0, "base")
    np.testing.assert_allclose(messages.wrench_to_numpy(wrench.wrench), [0, 0, -9.8, 0.1, 0, 0])
    joints = messages.joint_state_msg(["a", "b", "c"], [1.0, 2.0, 3.0], [0, 0, 0], [0, 0, 0], 0.0)
    np.testing.assert_array_equal(messages.joint_positions(joints, ["c", "a"]), [3.0, 1.0])
    with pytest.raises(ValueError, match=r"no joints \['finger'\]; it has \['a', 'b', 'c'\]"):
        messages.joint_positions(joints, ["finger"])
    axes, buttons = messages.joy_to_numpy(messages.joy_msg([0.5, -1.0], [1, 0], 0.0))
    assert axes.tolist() == [0.5, -1.0] and buttons.tolist() == [1, 0]


# ----------------------------------------------------------------------------- validation of received messages
def test_malformed_images_are_refused_with_what_was_expected(messages):
    from robot_rl.ros.plumbing.guard import MessageError

    good = messages.image_msg(np.zeros((4, 6, 3), np.uint8), 0.0, "cam")
    cases = {
        "data": ("data", good.data[:-1], r"71 bytes; expected height \* step = 4 \* 18"),
        "encoding": ("encoding", "yuv422", "yuv422"),
        "step": ("step", 17, "step 17 is shorter than a row of 6 rgb8 pixels"),
        "width": ("width", 0, "0x4 pixels"),
        "height": ("height", 2**32 - 1, "expected 1 to"),
    }
    for field, value, expected in cases.values():
        msg = messages.image_msg(np.zeros((4, 6, 3), np.uint8), 0.0, "cam")
        setattr(msg, field, value)
        with pytest.raises(MessageError, match=expected):
            messages.image_to_numpy(msg)
    with pytest.raises(MessageError, match="expected a colour image"):
        messages.colour_image(messages.image_msg(np.zeros((4, 6), np.uint8), 0.0, "cam"), (4, 6))
    assert messages.colour_image(good, (2, 3)).shape == (2, 3, 3)  # resized to the policy's size


def test_poses_twists_wrenches_joints_joys_and_task_state_refuse_bad_values(messages):
    from geometry_msgs.msg import Pose
    from std_msgs.msg import Float32MultiArray, MultiArrayDimension

    from robot_rl.ros.plumbing.guard import MessageError

    pose = Pose()
    pose.orientation.w = 0.0  # all zeros: the quaternion of an unset orientation
    with pytest.raises(MessageError, match="has no length"):
        messages.pose_to_numpy(pose)
    pose.orientation.w, pose.position.x = 1.0, float("nan")
    with pytest.raises(MessageError, match="pose position has non-finite values"):
        messages.pose_to_numpy(pose)
    pose.position.x = 1e30
    with pytest.raises(MessageError, match="beyond 100 m"):
        messages.pose_to_numpy(pose)
    pose.position.x, pose.orientation.z = 0.5, float("inf")
    with pytest.raises(MessageError, match="pose orientation has non-finite values"):
        messages.pose_to_numpy(pose)
    pose.orientation.z = 1.0  # not unit length: normalised
    np.testing.assert_allclose(messages.pose_to_numpy(pose)[1], [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-12)
    with pytest.raises(MessageError, match="twist angular"):
        messages.twist_to_numpy(messages.twist_msg(np.zeros(3), np.array([0, float("nan"), 0]), 0.0, "base").twist)
    with pytest.raises(MessageError, match="wrench force"):
        messages.wrench_to_numpy(messages.wrench_msg(np.array([float("-inf"), 0, 0]), np.zeros(3), 0.0, "b").wrench)

    joints = messages.joint_state_msg(["a", "b"], [1.0, 2.0], [0.0, 0.0], [], 0.0)  # no efforts: allowed
    assert messages.joint_positions(joints, ["b"]).tolist() == [2.0]
    joints.position = [1.0]
    with pytest.raises(MessageError, match="position has 1 entries for 2 names"):
        messages.joint_positions(joints, ["a"])
    joints.position, joints.velocity = [1.0, float("nan")], [0.0]
    with pytest.raises(MessageError, match="velocity has 1 entries for 2 names; expected one per name or none"):
        messages.joint_positions(joints, ["a"])
    joints.velocity = []
    assert messages.joint_positions(joints, ["a"]).tolist() == [1.0]  # a NaN elsewhere is not read
    with pytest.raises(MessageError, match=r"position of \['b'\] has non-finite"):
        messages.joint_positions(joints, ["b"])

    with pytest.raises(MessageError, match="Joy has 1 buttons; expected at least 2"):
        messages.joy_to_numpy(messages.joy_msg([0.0], [1], 0.0), min_buttons=2)
    with pytest.raises(MessageError, match="Joy axes has non-finite"):
        messages.joy_to_numpy(messages.joy_msg([float("nan")], [1, 0], 0.0))

    msg = Float32MultiArray()
    msg.layout.dim = [MultiArrayDimension(label="goal", size=3, stride=3)]
    msg.data = [0.1, 0.2, 0.3]
    assert messages.labelled_array(msg, [("goal", 3)]).dtype == np.float32
    with pytest.raises(MessageError, match=r"expected \[\('cube', 3\)\]"):
        messages.labelled_array(msg, [("cube", 3)])
    msg.data = [0.1, 0.2]
    with pytest.raises(MessageError, match="2 values for the layout"):
        messages.labelled_array(msg, [("goal", 3)])


# fuzz: any field values a publisher can put in a message give either a valid array or a MessageError
_floats = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    height=st.integers(0, 12),
    width=st.integers(0, 12),
    step=st.integers(0, 60),
    extra=st.integers(-3, 3),
    encoding=st.sampled_from(["rgb8", "bgr8", "mono8", "16UC1", "mono16", "32FC1", "yuv422", "", "8UC3"]),
    bigendian=st.integers(0, 255),
    seed=st.integers(0, 2**16),
)
def test_fuzz_image_to_numpy(messages, height, width, step, extra, encoding, bigendian, seed):
    from sensor_msgs.msg import Image

    from robot_rl.ros.plumbing.guard import MessageError

    msg = Image(height=height, width=width, step=step, encoding=encoding, is_bigendian=bigendian)
    msg.data = np.random.default_rng(seed).integers(0, 256, max(height * step + extra, 0), dtype=np.uint8).tobytes()
    try:
        image = messages.image_to_numpy(msg)
    except MessageError:
        return
    assert image.shape[:2] == (height, width) and image.dtype == np.dtype(messages.ENCODINGS[encoding][0])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(_floats, min_size=7, max_size=7))
def test_fuzz_pose_to_numpy(messages, values):
    from geometry_msgs.msg import Pose

    from robot_rl.ros.plumbing.guard import MessageError

    pose = Pose()
    (
        pose.position.x,
        pose.position.y,
        pose.position.z,
        pose.orientation.x,
        pose.orientation.y,
        pose.orientation.z,
        pose.orientation.w,
    ) = values
    try:
        position, rotation = messages.pose_to_numpy(pose)
    except MessageError:
        return
    assert np.all(np.isfinite(position)) and np.all(np.abs(position) <= messages.MAX_POSITION)
    np.testing.assert_allclose(rotation @ rotation.T, np.eye(3), atol=1e-6)  # a rotation, whatever the input


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    names=st.lists(st.sampled_from(["a", "b", "finger", ""]), max_size=5),
    position=st.lists(_floats, max_size=6),
    velocity=st.lists(_floats, max_size=6),
    axes=st.lists(_floats, max_size=4),
    buttons=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=4),
)
def test_fuzz_joint_states_and_joys(messages, names, position, velocity, axes, buttons):
    from sensor_msgs.msg import JointState, Joy

    from robot_rl.ros.plumbing.guard import MessageError

    try:
        opening = messages.joint_positions(JointState(name=names, position=position, velocity=velocity), ["finger"])
        assert opening.shape == (1,) and np.isfinite(opening).all()
    except MessageError:
        pass
    try:
        read_axes, read_buttons = messages.joy_to_numpy(Joy(axes=axes, buttons=buttons), min_buttons=2)
        assert len(read_buttons) >= 2 and np.isfinite(read_axes).all()
    except MessageError:
        pass
