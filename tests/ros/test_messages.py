"""Message conversions and the transition / weights codec (no DDS needed, but real rclpy message types)."""

import numpy as np
import pytest
import torch

from tests.conftest import require


@pytest.fixture(scope="module")
def messages():
    require("rclpy")
    from robot_rl.ros import messages

    return messages


def test_images_round_trip_every_encoding_and_honour_row_padding(messages):
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    for array in (rgb, rgb[..., 0].copy(), rng.integers(0, 4000, (5, 7), dtype=np.uint16),
                  rng.random((5, 7), dtype=np.float32)):
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


def test_transitions_and_weights_survive_the_codec(messages):
    from policies.safety_critic import SafetyCritic, SafetyCriticConfig
    from robot_rl.ros.codec import decode_transitions, decode_weights, encode_transitions, encode_weights, pack, unpack

    rng = np.random.default_rng(1)
    transitions = [{"obs": {"state": rng.random(5, dtype=np.float32), "front": rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)},
                    "next_obs": {"state": rng.random(5, dtype=np.float32), "front": rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)},
                    "action": rng.random(4, dtype=np.float32), "reward": -0.5 * i, "terminated": i == 2, "truncated": False,
                    "intervened": i == 1, "demo": False, "first": i == 0, "cost": 0.0, "filtered": False,
                    "policy_action": np.zeros(4, np.float32), "success": i == 2, "violation": 4 * i} for i in range(3)]
    decoded, meta = decode_transitions(encode_transitions(transitions, {"session": "abc"}))
    assert meta["session"] == "abc" and len(decoded) == 3
    for original, back in zip(transitions, decoded):
        for part in ("obs", "next_obs"):
            for key in original[part]:
                np.testing.assert_array_equal(back[part][key], original[part][key])
        np.testing.assert_array_equal(back["action"], original["action"])
        for key in ("reward", "terminated", "intervened", "first", "success", "violation"):
            assert back[key] == original[key], key

    critic = SafetyCritic(5, 4, SafetyCriticConfig(hidden=(16, 16)), seed=0)
    risk = critic.risk_model()
    weights = {"actor.net.0.weight": torch.randn(3, 5), "safety.risk_model": risk}
    back, meta = decode_weights(encode_weights(weights, {"version": 7}))
    assert meta["version"] == 7
    torch.testing.assert_close(back["actor.net.0.weight"], weights["actor.net.0.weight"])
    state, actions = rng.random(5, dtype=np.float32), rng.random((6, 4), dtype=np.float32)
    np.testing.assert_allclose(back["safety.risk_model"](state, actions), risk(state, actions), rtol=1e-6)

    with pytest.raises(ValueError, match="expected a weights message"):
        decode_weights(encode_transitions(transitions))
    arrays, meta = unpack(pack({"x": np.arange(3)}, {"kind": "other"}))
    assert arrays["x"].tolist() == [0, 1, 2] and meta == {"kind": "other"}
    import io

    evil = io.BytesIO()
    np.savez(evil, __meta__=np.frombuffer(b'{"kind": "weights"}', np.uint8), x=np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="pickle"):  # object arrays are never unpickled from a message
        unpack(evil.getvalue())
