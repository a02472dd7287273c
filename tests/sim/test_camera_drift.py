"""The emulated cell's camera drift (issue 74): exposure and white balance that wander slowly, and a camera that sits
a few millimetres elsewhere from one session to the next."""

import mujoco
import numpy as np

from robot_rl.sim.camera_drift import CameraDrift, offset_camera

GREY = np.full((4, 4, 3), 120, np.uint8)


def test_the_gains_wander_slowly_with_the_stationary_spread_asked_for():
    drift = CameraDrift(exposure=0.1, white_balance=0.03, period=60.0, rng=np.random.default_rng(0))
    times = np.arange(0.0, 3600.0 * 3, 1.0 / 3)  # three hours at 3 frames/s
    log_gains = np.array([np.log(drift.gains(t)) for t in times])  # (N, 3): exposure + channel
    total = np.sqrt(0.1**2 + 0.03**2)
    assert np.allclose(log_gains.std(0), total, rtol=0.25), log_gains.std(0)
    step = np.abs(np.diff(log_gains, axis=0)).mean()
    assert step < total / 10  # frame to frame the light barely changes ...
    assert np.corrcoef(log_gains[:-180, 0], log_gains[180:, 0])[0, 1] < np.exp(-1) + 0.15  # ... a minute apart it has
    white = log_gains - log_gains.mean(1, keepdims=True)  # the channels apart: white balance
    assert 0.015 < white.std() < 0.05


def test_no_drift_leaves_frames_unchanged_and_a_drift_changes_them_reproducibly():
    assert CameraDrift(0.0, 0.0, 60.0, np.random.default_rng(0))(GREY, 1.0) is GREY
    first = CameraDrift(0.1, 0.03, 60.0, np.random.default_rng(1))(GREY, 1.0)
    again = CameraDrift(0.1, 0.03, 60.0, np.random.default_rng(1))(GREY, 1.0)
    assert first.dtype == np.uint8 and np.array_equal(first, again) and not np.array_equal(first, GREY)
    assert len(set(first[0, 0].tolist())) > 1  # the channels apart


def test_a_camera_sits_a_few_millimetres_elsewhere():
    model = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><camera name="front" pos="1 0 1"/><geom size=".1"/></worldbody></mujoco>'
    )
    offset = offset_camera(model, "front", 0.003, np.random.default_rng(0))
    assert np.allclose(model.cam_pos[0], [1, 0, 1] + offset)
    assert 0.0 < np.linalg.norm(offset) < 0.02
