"""The console's view of the run's episode store (``ros.recorder.store``), read only: the page's episode list, the
chosen episode's curves and its recorded frames (``robot_rl.ros.console.console_node`` serves them)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from aiohttp import web

from ...data import EpisodeStore
from ...data.episode_store import EpisodeStoreError
from ..plumbing.guard import MessageError

EPISODES_LISTED = 200  # the newest episodes of the store the page lists


def encoded(image: np.ndarray, extension: str, params: list[int]) -> bytes:
    """An RGB (or mono) uint8 image encoded as ``extension`` (``.jpg``, ``.png``) with OpenCV's ``params``."""
    if image.ndim == 3:
        image = cv2.cvtColor(image, cv2.COLOR_RGB2BGR)
    ok, data = cv2.imencode(extension, image, params)
    if not ok:
        raise MessageError(f"the frame could not be encoded as {extension}")
    return data.tobytes()


class Episodes:
    """The run's episode store, read only: what the page's episode list, video and curves come from."""

    def __init__(self, path: str, quality: int):
        self.path, self.quality = Path(path), quality
        self.frames: tuple[tuple[str, str], np.ndarray] | None = None  # ((episode, camera), its frames): the one played

    def _store(self) -> EpisodeStore:
        try:
            return EpisodeStore.open(self.path)
        except FileNotFoundError:
            raise web.HTTPNotFound(text=f"no episode store at {self.path} yet\n") from None
        except EpisodeStoreError as error:
            raise web.HTTPNotFound(text=f"{error}\n") from None

    def _name(self, store: EpisodeStore, index: str) -> str:
        names = store.episode_names()
        if not index.isdigit() or not int(index) < len(names):
            raise web.HTTPNotFound(text=f"no episode {index} in {self.path} ({len(names)} episodes)\n")
        return names[int(index)]

    def listing(self) -> dict:
        """The newest ``EPISODES_LISTED`` episodes: index, name and their attributes (source, length, success, return,
        interventions, operator_label where an operator labelled it)."""
        if not (self.path / "zarr.json").exists():
            return {"store": str(self.path), "episodes": []}
        store = self._store()
        names = store.episode_names()
        keys = ("source", "length", "success", "return", "interventions", "operator_label")
        rows = []
        for index in range(max(0, len(names) - EPISODES_LISTED), len(names)):
            attrs = store.episode_attrs(names[index])
            rows.append({"index": index, "name": names[index], **{k: attrs[k] for k in keys if k in attrs}})
        return {"store": str(self.path), "episodes": rows}

    def curves(self, index: str) -> dict:
        """One episode's actions (per step, each in [-1, 1]), rewards, takeover flags, cameras and control rate (Hz)."""
        store = self._store()
        name = self._name(store, index)
        data = store.read_episode(name, keys={"action", "reward", "intervened"})
        return {
            "index": int(index),
            "name": name,
            "attrs": {k: v for k, v in data["attrs"].items() if isinstance(v, (bool, int, float, str))},
            "action": np.asarray(data["action"], float).round(4).tolist(),
            "reward": np.asarray(data["reward"], float).round(4).tolist(),
            "intervened": np.asarray(data["intervened"], bool).tolist(),
            "cameras": store.cameras,
            "fps": float(store.metadata.get("control_rate_hz") or 10),
        }

    def frame(self, index: str, camera: str, step: str) -> bytes:
        """The JPEG of ``camera``'s observation ``step`` (0: the reset's) of episode ``index``."""
        store = self._store()
        name = self._name(store, index)
        if camera not in store.cameras:
            raise web.HTTPNotFound(text=f"no camera {camera}; the store has {', '.join(store.cameras) or 'none'}\n")
        if self.frames is None or self.frames[0] != (name, camera):  # a committed episode never changes
            self.frames = (name, camera), store.read_episode(name, keys={f"obs/{camera}"})["obs"][camera]
        frames = self.frames[1]
        if not step.isdigit() or not int(step) < len(frames):
            raise web.HTTPNotFound(text=f"no step {step} in episode {index} ({len(frames)} frames)\n")
        return encoded(frames[int(step)], ".jpg", [cv2.IMWRITE_JPEG_QUALITY, self.quality])
