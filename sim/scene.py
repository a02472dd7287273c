"""MJCF for the robot_rl scenes: a Franka Panda with its parallel gripper on a table.

World frame = robot base frame: origin at the base of link0, z up, x pointing away from the
robot over the table. The table top is the plane z = 0. Lengths are metres.

The arm is driven by six Cartesian actuators (site transmission from the TCP site to the
``tcp_target`` mocap frame), which is how MuJoCo evaluates a Cartesian impedance law inside
every physics step; see :mod:`robot_rl.sim.controller`. Gravity is compensated on every robot body
(``gravcomp``) and each joint's summed actuator torque is clamped to the Panda's limits.

Collision geometry is primitive (capsules and boxes) so that physics stays fast; visual
geometry uses the Panda meshes that ship with robosuite when it is installed, and the same
primitives otherwise. Robot geoms use contype=2 / conaffinity=1: they collide with the world
and the objects but not with each other.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

# Franka Panda joint limits (radians), from the Franka datasheet.
ARM_JOINT_RANGES = (
    (-2.8973, 2.8973),
    (-1.7628, 1.7628),
    (-2.8973, 2.8973),
    (-3.0718, -0.0698),
    (-2.8973, 2.8973),
    (-0.0175, 3.7525),
    (-2.8973, 2.8973),
)
ARM_TORQUE_LIMITS = (87.0, 87.0, 87.0, 87.0, 12.0, 12.0, 12.0)  # N m
FINGER_TRAVEL = 0.04  # m per finger; the gripper opens to 0.08 m
TCP_OFFSET = 0.1034  # m from the hand flange to the point between the fingertips
CAMERA_NAMES = ("front", "wrist")
#: Cartesian actuators: name and gear (force x y z, torque x y z in the tcp_target frame)
CARTESIAN_ACTUATORS = tuple(
    (name, " ".join("1" if i == axis else "0" for i in range(6)))
    for axis, name in enumerate(("move_x", "move_y", "move_z", "turn_x", "turn_y", "turn_z"))
)


def _robosuite_mesh_dirs() -> tuple[Path, Path] | None:
    spec = importlib.util.find_spec("robosuite")
    if spec is None or spec.origin is None:
        return None
    assets = Path(spec.origin).parent / "models" / "assets"
    arm, gripper = assets / "robots" / "panda" / "meshes", assets / "grippers" / "meshes" / "panda_gripper"
    if (arm / "link7.stl").is_file() and (gripper / "hand.stl").is_file():
        return arm, gripper
    return None


@dataclass
class SceneSpec:
    """What a task adds to the base scene: MJCF snippets and the offscreen image size."""

    worldbody: str = ""
    assets: str = ""
    contacts: str = ""
    image_size: tuple[int, int] = (64, 64)
    mesh_visuals: bool = True
    extra_cameras: dict[str, str] = field(default_factory=dict)


def _link(name: str, pos: str, quat: str, joint: int, mass: float, com: str, inertia: str, body: str) -> str:
    lo, hi = ARM_JOINT_RANGES[joint - 1]
    limit = ARM_TORQUE_LIMITS[joint - 1]
    return (
        f'<body name="{name}" pos="{pos}" quat="{quat}" gravcomp="1">'
        f'<inertial pos="{com}" mass="{mass}" diaginertia="{inertia}"/>'
        f'<joint name="joint{joint}" range="{lo} {hi}" actuatorfrcrange="{-limit} {limit}" class="arm"/>'
        f"{body}</body>"
    )


def _visual(mesh: str | None, fallback: str, meshes: bool) -> str:
    if meshes and mesh:
        return f'<geom class="visual" type="mesh" mesh="{mesh}"/>'
    return f'<geom class="visual" {fallback}/>'


def panda_xml(meshes: bool) -> tuple[str, str]:
    """(assets, body) MJCF of the Panda arm and gripper; kinematics of the Franka datasheet."""
    mesh_dirs = _robosuite_mesh_dirs() if meshes else None
    meshes = mesh_dirs is not None
    assets = ""
    if meshes:
        arm_dir, gripper_dir = mesh_dirs
        assets = "".join(f'<mesh name="link{i}" file="{arm_dir / f"link{i}.stl"}"/>' for i in range(8))
        assets += f'<mesh name="hand" file="{gripper_dir / "hand.stl"}"/>'
        assets += f'<mesh name="finger" file="{gripper_dir / "finger.stl"}"/>'

    def vis(i: int, fallback: str) -> str:
        return _visual(f"link{i}", fallback, meshes)

    finger_body = (
        '<inertial pos="0 0.01 0.03" mass="0.015" diaginertia="2e-6 2e-6 1e-6"/>'
        + _visual("finger", 'type="box" size="0.01 0.01 0.026" pos="0 0.01 0.026"', meshes)
        + '<geom class="pad" type="box" size="0.0085 0.004 0.0185" pos="0 0.004 0.0355"/>'
    )
    hand = (
        '<body name="hand" pos="0 0 0.107" quat="0.9238795 0 0 -0.3826834" gravcomp="1">'
        '<inertial pos="0 0 0.03" mass="0.73" diaginertia="0.0025 0.0005 0.0025"/>'
        '<site name="ft_sensor" pos="0 0 0" size="0.005"/>'
        + _visual("hand", 'type="box" size="0.025 0.1 0.03" pos="0 0 0.03"', meshes)
        + '<geom class="collision" type="box" size="0.025 0.1 0.028" pos="0 0 0.03"/>'
        f'<site name="tcp" pos="0 0 {TCP_OFFSET}" size="0.004" rgba="1 0 0 0.5" group="4"/>'
        '<camera name="wrist" pos="0.075 0 0.04" xyaxes="0 1 0 0.772 0 0.635" fovy="70"/>'
        f'<body name="left_finger" pos="0 0 0.0584" gravcomp="1"><joint name="finger_left" class="finger"/>{finger_body}</body>'
        f'<body name="right_finger" pos="0 0 0.0584" quat="0 0 0 1" gravcomp="1"><joint name="finger_right" class="finger"/>'
        f"{finger_body}</body>"
        "</body>"
    )
    link7 = _link(
        "link7",
        "0.088 0 0",
        "1 1 0 0",
        7,
        0.735,
        "0.01 0.01 0.08",
        "0.003 0.003 0.002",
        vis(7, 'type="cylinder" size="0.05 0.01" pos="0 0 0.09"')
        + '<geom class="collision" type="cylinder" size="0.05 0.015" pos="0 0 0.08"/>'
        + hand,
    )
    link6 = _link(
        "link6",
        "0 0 0",
        "1 1 0 0",
        6,
        1.666,
        "0.06 -0.01 0.01",
        "0.005 0.005 0.005",
        vis(6, 'type="capsule" fromto="0 0 0 0.088 0 0" size="0.05"')
        + '<geom class="collision" type="capsule" fromto="0 0 -0.01 0.088 0 0" size="0.05"/>'
        + link7,
    )
    link5 = _link(
        "link5",
        "-0.0825 0.384 0",
        "1 -1 0 0",
        5,
        1.225,
        "0 0.04 -0.11",
        "0.03 0.03 0.005",
        vis(5, 'type="capsule" fromto="0 0 -0.22 0 0.08 -0.08" size="0.05"')
        + '<geom class="collision" type="capsule" fromto="0 0 -0.22 0 0 -0.05" size="0.055"/>'
        + link6,
    )
    link4 = _link(
        "link4",
        "0.0825 0 0",
        "1 1 0 0",
        4,
        3.587,
        "-0.05 0.05 0.03",
        "0.02 0.02 0.01",
        vis(4, 'type="capsule" fromto="0 0 0 -0.0825 0.1 0" size="0.06"') + link5,
    )
    link3 = _link(
        "link3",
        "0 -0.316 0",
        "1 1 0 0",
        3,
        3.228,
        "0.04 0.02 -0.05",
        "0.02 0.02 0.01",
        vis(3, 'type="capsule" fromto="0 0 -0.15 0.0825 0 0" size="0.06"') + link4,
    )
    link2 = _link(
        "link2",
        "0 0 0",
        "1 -1 0 0",
        2,
        0.646,
        "0 -0.07 0",
        "0.008 0.003 0.008",
        vis(2, 'type="capsule" fromto="0 0 0 0 -0.2 0" size="0.06"') + link3,
    )
    link1 = _link(
        "link1",
        "0 0 0.333",
        "1 0 0 0",
        1,
        4.97,
        "0 0 -0.07",
        "0.03 0.03 0.01",
        vis(1, 'type="capsule" fromto="0 0 -0.2 0 0 0" size="0.06"') + link2,
    )
    body = (
        '<body name="tcp_target" mocap="true" pos="0.45 0 0.25">'
        '<site name="tcp_target" size="0.006" rgba="0 0.6 1 0.4" group="4"/></body>'
        '<body name="link0" childclass="panda">'
        + _visual("link0", 'type="cylinder" size="0.07 0.07" pos="0 0 0.07"', meshes)
        + link1
        + "</body>"
    )
    return assets, body


def scene_xml(spec: SceneSpec, physics_timestep: float) -> str:
    """The full MJCF of a task scene."""
    robot_assets, robot_body = panda_xml(spec.mesh_visuals)
    height, width = spec.image_size
    return f"""
<mujoco model="robot_rl_scene">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{physics_timestep}" integrator="implicitfast" cone="elliptic" impratio="10"/>
  <visual>
    <global offwidth="{max(width, 640)}" offheight="{max(height, 480)}"/>
    <quality shadowsize="1024"/>
  </visual>
  <default>
    <default class="panda">
      <default class="arm"><joint axis="0 0 1" armature="0.1" damping="5.0"/></default>
      <default class="finger"><joint type="slide" axis="0 1 0" range="0 {FINGER_TRAVEL}" armature="0.01"
          damping="10"/></default>
      <default class="visual"><geom contype="0" conaffinity="0" group="1" rgba="0.95 0.95 0.95 1" mass="0"/></default>
      <default class="collision"><geom contype="2" conaffinity="1" group="3" mass="0"/></default>
      <default class="pad"><geom contype="2" conaffinity="1" group="3" mass="0" friction="1.5 0.01 0.0001"
          condim="4" solref="0.01 1" rgba="0.2 0.2 0.2 1"/></default>
    </default>
  </default>
  <asset>
    <texture name="grid" type="2d" builtin="checker" width="256" height="256" rgb1="0.55 0.45 0.35"
        rgb2="0.5 0.4 0.3"/>
    <material name="table" texture="grid" texrepeat="4 4"/>
    <texture name="sky" type="skybox" builtin="gradient" rgb1="0.6 0.7 0.8" rgb2="0.2 0.2 0.25" width="64"
        height="64"/>
    {robot_assets}
    {spec.assets}
  </asset>
  <worldbody>
    <light name="key" pos="0.5 -0.5 1.5" dir="-0.2 0.3 -1" diffuse="0.7 0.7 0.7" castshadow="true"/>
    <light name="fill" pos="1.0 0.8 1.2" dir="-0.5 -0.4 -1" diffuse="0.3 0.3 0.3" castshadow="false"/>
    <geom name="table" type="box" size="0.6 0.6 0.02" pos="0.45 0 -0.02" material="table"/>
    <camera name="front" pos="1.05 0 0.5" xyaxes="0 1 0 -0.6 0 0.8" fovy="55"/>
    {robot_body}
    {spec.worldbody}
  </worldbody>
  <contact>{spec.contacts}</contact>
  <actuator>
    {
        "".join(
            f'<position name="{name}" site="tcp" refsite="tcp_target" gear="{gear}" kp="1" kv="1"/>'
            for name, gear in CARTESIAN_ACTUATORS
        )
    }
    <position name="finger_left" joint="finger_left" kp="800" ctrlrange="0 {FINGER_TRAVEL}" forcerange="-40 40"/>
    <position name="finger_right" joint="finger_right" kp="800" ctrlrange="0 {FINGER_TRAVEL}" forcerange="-40 40"/>
  </actuator>
  <sensor>
    <force name="wrist_force" site="ft_sensor"/>
    <torque name="wrist_torque" site="ft_sensor"/>
  </sensor>
</mujoco>
"""
