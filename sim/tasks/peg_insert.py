"""peg_insert: the peg starts in the closed gripper; insert it ``insert_depth`` metres into a socket.

The socket is a square hole made of four walls on the table, placed at a random xy. Clearance
is the gap between peg and wall on each side (metres).

The start region is the peg held upright in the closed gripper with the TCP in the box the reset draws it from
(:attr:`PandaTaskEnv.tcp_start`, home +- ``tcp_init_noise``): :meth:`PegInsertEnv.in_start_region` tests a scene
against it.
"""

from __future__ import annotations

import numpy as np

from robot_rl.core import config as check
from robot_rl.sim.panda_env import PandaTaskEnv
from robot_rl.sim.scene import SceneSpec
from robot_rl.sim.start_region import StartRegion

GRASP_BELOW_TOP = 0.015  # m: the fingers hold the peg this far below its top
UPRIGHT = 0.1  # rad: a peg tilted less than this from vertical stands upright
START_SLACK = 0.01  # m: a peg brought back this far outside its start box still counts (the box may have no width)


class PegInsertEnv(PandaTaskEnv):
    home_tcp_pos = np.array([0.45, 0.0, 0.25])

    def __init__(
        self,
        peg_half_width: float = 0.012,
        peg_half_length: float = 0.04,
        clearance: float = 0.003,
        socket_height: float = 0.05,
        insert_depth: float = 0.025,
        socket_low: tuple[float, float] = (0.42, -0.12),
        socket_high: tuple[float, float] = (0.58, 0.12),
        **kwargs,
    ):
        self.peg_half_width = check.positive("peg_half_width", peg_half_width)
        self.peg_half_length = check.positive("peg_half_length", peg_half_length)
        self.clearance = check.positive("clearance", clearance)
        self.socket_height = check.positive("socket_height", socket_height)
        if not 0 < insert_depth < socket_height:
            raise check.ConfigError("insert_depth", insert_depth, f"in (0, socket_height={socket_height})")
        self.insert_depth = insert_depth
        self.socket_low, self.socket_high = np.asarray(socket_low, float), np.asarray(socket_high, float)
        if np.any(self.socket_low > self.socket_high):
            raise check.ConfigError("socket_low", list(socket_low), f"<= socket_high={list(socket_high)} per axis")
        super().__init__(**kwargs)
        #: where the peg's centre starts (m, base frame): the TCP's start box, the grasp's offset below it
        grasp = np.array([0.0, 0.0, self.peg_half_length - GRASP_BELOW_TOP])
        self.start_region = StartRegion(self.tcp_start.low - grasp, self.tcp_start.high - grasp, START_SLACK)

    def bind_model(self) -> None:
        self._peg_qpos = self.model.joint("peg").qposadr[0]
        self._peg_body, self._socket_body = self.model.body("peg").id, self.model.body("socket").id

    def placed_fixtures(self) -> list[int]:
        return [self._socket_body]

    def scene(self) -> SceneSpec:
        w, l, h = self.peg_half_width, self.peg_half_length, self.socket_height / 2
        hole = w + self.clearance
        wall = 0.015  # wall half thickness (m)
        off = hole + wall
        span = hole + 2 * wall
        sides = ((wall, span, off, 0), (wall, span, -off, 0), (hole, wall, 0, off), (hole, wall, 0, -off))
        walls = "".join(
            f'<geom name="socket_wall{i}" type="box" size="{sx} {sy} {h}" pos="{px} {py} {h}" rgba="0.2 0.35 0.8 1"/>'
            for i, (sx, sy, px, py) in enumerate(sides)
        )
        return SceneSpec(
            worldbody=(
                f'<body name="socket" pos="0.5 0 0">{walls}</body>'
                f'<body name="peg" pos="0.45 0 0.2"><freejoint name="peg"/>'
                f'<geom name="peg" type="box" size="{w} {w} {l}" rgba="0.9 0.75 0.1 1" mass="0.03" friction="1 0.01 0.0001"'
                ' condim="4"/></body>'
            )
        )

    def reset_task(self, rng: np.random.Generator) -> None:
        self.place_socket(rng)
        self.grasp_peg()

    def place_socket(self, rng: np.random.Generator) -> None:
        """The socket at an xy drawn from ``[socket_low, socket_high]`` (m, base frame)."""
        self.model.body_pos[self._socket_body][:2] = rng.uniform(self.socket_low, self.socket_high)

    def grasp_peg(self) -> None:
        """The peg upright in the closed gripper, held ``GRASP_BELOW_TOP`` below its top, the grasp settled."""
        self.hold("peg", [0.0, 0.0, -(self.peg_half_length - GRASP_BELOW_TOP)], self.peg_half_width)

    @property
    def peg_pos(self) -> np.ndarray:
        """Peg centre (m, base frame)."""
        return self.data.xpos[self._peg_body].copy()

    @property
    def peg_bottom(self) -> np.ndarray:
        return self.peg_pos - [0.0, 0.0, self.peg_half_length]

    @property
    def socket_pos(self) -> np.ndarray:
        """Centre of the hole at table level (m, base frame)."""
        return self.data.xpos[self._socket_body].copy()

    def task_state(self) -> dict[str, np.ndarray]:
        return {
            "peg_pos": self.peg_pos,
            "socket_pos": self.socket_pos,
            "peg_to_socket": self.socket_pos - self.peg_bottom,
        }

    def tilt(self) -> float:
        """Angle (rad) between the peg's long axis and the vertical."""
        return float(np.arccos(np.clip(abs(self.data.xmat[self._peg_body].reshape(3, 3)[2, 2]), -1.0, 1.0)))

    def grasped(self) -> bool:
        """The peg is between the finger pads and the gripper is closed on it."""
        offset = self.peg_pos - self.tcp_pos
        between = np.linalg.norm(offset[:2]) < self.peg_half_width and abs(offset[2]) < self.peg_half_length
        return bool(between and self.gripper_opening < 2 * self.peg_half_width + 0.006)

    def in_start_region(self) -> bool:
        """The peg is held upright in the closed gripper, its centre in the start region, clear of the socket."""
        out = self.peg_bottom[2] > self.socket_height
        upright = self.tilt() < UPRIGHT
        return bool(out and upright and self.grasped() and self.start_region.contains(self.peg_pos))

    def depth(self) -> float:
        """How far the peg's bottom is below the socket's rim (m)."""
        return float(self.socket_height - self.peg_bottom[2])

    def is_success(self) -> bool:
        centred = np.linalg.norm(self.peg_pos[:2] - self.socket_pos[:2]) < self.clearance + 0.002
        return bool(centred and self.depth() > self.insert_depth)

    def dense_reward(self) -> float:
        above = self.socket_pos + [0.0, 0.0, self.socket_height]
        xy = np.linalg.norm(self.peg_bottom[:2] - above[:2])
        z = max(self.peg_bottom[2] - (self.socket_height - self.insert_depth), 0.0)
        return float(1.0 - np.tanh(10.0 * (xy + z)))

    def task_info(self) -> dict:
        return {"insert_depth": self.depth()}
