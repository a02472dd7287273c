"""Append-only episode store on zarr v3: one group per episode, visible only when complete.

Layout::

    store.zarr/
      zarr.json                  root group; attrs: format, schema_version, software_version, metadata
      episodes/
        episode_000000/          attrs: episode metadata (length, source, uid, checksum, success, return, seed, ...)
          obs/state              (T + 1, D) float32: reset observation, then one per step
          obs/<camera>           (T + 1, H, W, 3) uint8: one frame per chunk, blosc-lz4
          action                 (T, A) float32: the action executed (human or policy)
          policy_action          (T, A) float32: what the policy proposed (= action for demos)
          reward (float32), terminated, truncated, success, intervened (bool),
          safety_flags (uint32 bit mask), timestamp (float64, s; sim time if metadata clock=sim)   all (T,)
          streams/<name>/data, streams/<name>/timestamp   optional sensor streams at their own rate
      .staging/                  the episode being written; never read

Every chunk carries a CRC32C checksum. An episode is written under ``.staging`` (camera frames
as they arrive, so a long episode never sits in memory) and moved into ``episodes/`` with one
directory rename once complete: a crash or SIGKILL loses only the episode in flight, and a
reader, even one that opened the store while a writer appends, never sees a partial episode.

Each episode carries ``uid`` (uuid4 hex unless the writer gives one: a resent episode keeps its
uid, so merges recognise it) and ``checksum``, the sha256 content hash of :class:`ContentHash`.
:func:`~robot_rl.data.verification.verify` checks every chunk, the lengths and the checksum. :meth:`EpisodeStore.create`
never removes anything it did not make: it refuses a file and a folder that holds anything but
a store.
"""

from __future__ import annotations

import asyncio
import atexit
import errno
import hashlib
import json
import math
import os
import shutil
import time
import uuid
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from zarr.codecs import BloscCodec, BloscShuffle, Crc32cCodec
from zarr.core.sync import sync

import robot_rl
from robot_rl.core.config import plain

ZARR_EXIT_WAIT = 10.0  # s the exit waits for zarr's I/O thread to stop; zarr's own hook waits 0.2 s


@atexit.register  # registered after zarr's own hook, so it runs first (atexit is last in, first out)
def _stop_zarr_io_thread() -> None:
    """Stop zarr's event-loop thread before zarr's exit hook closes the loop.

    zarr's hook asks the loop to stop, waits 0.2 s for its thread, then closes the loop; on a
    loaded machine the thread may not have run yet, and the close raises "Cannot close a running
    event loop", a traceback on stderr at the exit of every process that used a store. Waiting
    here leaves zarr's hook a stopped loop.
    """
    import zarr.core.sync as zarr_sync

    loop, thread = getattr(zarr_sync, "loop", [None])[0], getattr(zarr_sync, "iothread", [None])[0]
    if loop is None or thread is None or not thread.is_alive() or loop.is_closed():
        return
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=ZARR_EXIT_WAIT)


FORMAT = "robot_rl.episodes"
SCHEMA_VERSION = 1
SOURCES = ("demo", "online", "intervention", "eval", "probe")  # probe: noisy expert runs (collect.action_noise)
IMAGE_CODECS = [BloscCodec(cname="lz4", clevel=5, shuffle=BloscShuffle.bitshuffle), Crc32cCodec()]
ARRAY_CODECS = [BloscCodec(cname="zstd", clevel=3, shuffle=BloscShuffle.shuffle), Crc32cCodec()]
ARRAY_CONFIG = {"write_empty_chunks": True}  # every chunk exists on disk, so a missing one is an error
#: per-step arrays every episode has: name -> dtype
STEP_FIELDS = {
    "action": np.float32,
    "policy_action": np.float32,
    "reward": np.float32,
    "terminated": np.bool_,
    "truncated": np.bool_,
    "success": np.bool_,
    "intervened": np.bool_,
    "safety_flags": np.uint32,
    "timestamp": np.float64,
}


#: compression assumed for camera frames on disk (blosc-lz4, bit-shuffled) when a run estimates what it will write:
#: 2x, the low end of the 2-5x rendered and camera frames reach; the other arrays are counted uncompressed
ASSUMED_FRAME_COMPRESSION = 2.0
DISK_BLOCK = 4096  # bytes: a file takes whole blocks of its disk, and every camera frame is a chunk file of its own


def camera_keys(observation_shapes: Mapping[str, tuple[int, ...]]) -> list[str]:
    """The image observations (``(H, W, C)``) of ``observation_shapes``, in observation order."""
    return [key for key, shape in observation_shapes.items() if len(shape) == 3]


def bytes_per_step(observation_shapes: Mapping[str, tuple[int, ...]], action_dim: int) -> int:
    """Estimated bytes on disk of one recorded step: its observation (camera frames, uint8 HxWxC, compressed
    ``ASSUMED_FRAME_COMPRESSION`` times, whole ``DISK_BLOCK`` s each; other keys float32) and the step fields of
    ``STEP_FIELDS`` (actions of ``action_dim``), uncompressed."""
    total = 0
    for shape in observation_shapes.values():
        size = math.prod(shape)
        if len(shape) == 3:
            total += math.ceil(size / ASSUMED_FRAME_COMPRESSION / DISK_BLOCK) * DISK_BLOCK
        else:
            total += 4 * size
    for name, dtype in STEP_FIELDS.items():
        total += np.dtype(dtype).itemsize * (action_dim if name.endswith("action") else 1)
    return total


class EpisodeStoreError(ValueError):
    """A store, episode or field does not match what was expected; names where."""


def is_image(shape: tuple[int, ...], dtype: np.dtype) -> bool:
    return np.dtype(dtype) == np.uint8 and len(shape) == 3 and shape[-1] in (1, 3, 4)


class ContentHash:
    """The checksum of an episode's arrays: sha256 over the fields in sorted order, each as its
    path (``obs/front``, ``action``, ``streams/ft/data``), a NUL byte and the sha256 of the
    sha256 digests of its rows (along the first axis; little-endian C-order bytes). Rows may be
    added one at a time in any order, so the threads that write camera frames hash them too."""

    def __init__(self) -> None:
        self._rows: dict[str, dict[int, bytes]] = {}

    def add_row(self, field: str, index: int, row: np.ndarray) -> None:
        row = np.ascontiguousarray(row)
        if row.dtype.byteorder == ">":
            row = row.astype(row.dtype.newbyteorder("<"))
        self._rows.setdefault(field, {})[index] = hashlib.sha256(row).digest()

    def add(self, field: str, data: np.ndarray) -> None:
        for index, row in enumerate(data):
            self.add_row(field, index, row)

    def hexdigest(self) -> str:
        total = hashlib.sha256()
        for field in sorted(self._rows):
            rows = self._rows[field]
            total.update(field.encode() + b"\0" + hashlib.sha256(b"".join(rows[i] for i in range(len(rows)))).digest())
        return total.hexdigest()


class EpisodeStore:
    """A directory of episodes. :meth:`create` to write (or append), :meth:`open` to read."""

    def __init__(self, path: str | os.PathLike, root: zarr.Group):
        self.path = Path(path)
        self.root = root
        self._next_index: int | None = None  # of the next episode committed (see _next_name)

    # ----------------------------------------------------------------- opening
    @classmethod
    def create(cls, path: str | os.PathLike, metadata: Mapping[str, Any]) -> EpisodeStore:
        """Create a store (at a new path or in an empty folder), or open an existing one for appending.

        ``metadata`` must hold ``observation_shapes`` ({key: shape}) and ``action_dim``; these
        and ``task`` must equal an existing store's. Leftovers of a crashed writer are removed.
        A file, or a folder holding anything but a robot_rl store, is refused (nothing is changed).
        """
        metadata = _jsonable(dict(metadata))
        for key in ("observation_shapes", "action_dim"):
            if key not in metadata:
                raise EpisodeStoreError(f"{path}: store metadata needs {key!r}")
        if os.fspath(path) and (Path(path) / "zarr.json").exists():
            store = cls.open(path)
            for key in ("observation_shapes", "action_dim", "task"):
                old, new = store.metadata.get(key), metadata.get(key)
                if old != new:
                    raise EpisodeStoreError(f"{store.path}: store has {key}={old!r}, the new episodes {new!r}")
            shutil.rmtree(store.path / ".staging", ignore_errors=True)  # a crashed writer's episode in flight
            return store
        path = cls.check_new_path(path)
        path.mkdir(parents=True, exist_ok=True)
        try:
            root = zarr.open_group(str(path), mode="w-")  # fails, and changes nothing, if anything is there
        except FileExistsError:
            raise EpisodeStoreError(f"{path}: something was put there meanwhile; expected an empty folder") from None
        root.attrs.update(
            {
                "format": FORMAT,
                "schema_version": SCHEMA_VERSION,
                "software_version": robot_rl.__version__,
                "created": time.time(),
                "metadata": metadata,
            }
        )
        root.create_group("episodes")
        return cls(path, root)

    @staticmethod
    def check_new_path(path: str | os.PathLike) -> Path:
        """``path`` as a Path if a new store may be made there (a new path or an empty folder);
        EpisodeStoreError for an empty path, a file, or a folder that holds anything."""
        if not os.fspath(path):
            raise EpisodeStoreError("store path='' is empty; expected the path of a new or existing episode store")
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise EpisodeStoreError(f"{path}: is a file; expected a folder for an episode store")
        if path.exists() and any(path.iterdir()):
            raise EpisodeStoreError(
                f"{path}: folder holds files and is not a robot_rl episode store; "
                "expected a new path, an empty folder or an existing store"
            )
        return path

    @classmethod
    def open(cls, path: str | os.PathLike) -> EpisodeStore:
        path = Path(path)
        if not (path / "zarr.json").exists():
            raise FileNotFoundError(f"{path}: no robot_rl episode store here")
        root = zarr.open_group(str(path), mode="r")
        if root.attrs.get("format") != FORMAT:
            raise EpisodeStoreError(f"{path}: not a robot_rl episode store (format={root.attrs.get('format')!r})")
        version = root.attrs.get("schema_version")
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise EpisodeStoreError(
                f"{path}: schema_version={version!r} was written by a newer robot_rl "
                f"({root.attrs.get('software_version')}); this one ({robot_rl.__version__}) reads up to {SCHEMA_VERSION}"
            )
        return cls(path, root)

    # ----------------------------------------------------------------- reading
    @property
    def metadata(self) -> dict[str, Any]:
        return dict(self.root.attrs["metadata"])

    @property
    def observation_shapes(self) -> dict[str, tuple[int, ...]]:
        return {key: tuple(shape) for key, shape in self.metadata["observation_shapes"].items()}

    @property
    def cameras(self) -> list[str]:
        return camera_keys(self.observation_shapes)

    def episode_names(self) -> list[str]:
        """Names of the complete episodes, in the order they were written (re-listed each call)."""
        folder = self.path / "episodes"
        return sorted(p.name for p in folder.iterdir() if p.name.startswith("episode_") and (p / "zarr.json").exists())

    def episode_names_at(self, indices: list[int] | None) -> list[str]:
        """Names of the episodes at ``indices`` (all when None); EpisodeStoreError for one out of range."""
        names = self.episode_names()
        for index in indices or []:
            if not 0 <= index < len(names):
                raise EpisodeStoreError(f"{self.path}: episode index {index} out of range (0..{len(names) - 1})")
        return names if indices is None else [names[index] for index in indices]

    def __len__(self) -> int:
        return len(self.episode_names())

    def episode_attrs(self, name: str) -> dict[str, Any]:
        return dict(self._group(name).attrs)

    def read_episode(self, name: str, keys: set[str] | None = None) -> dict[str, Any]:
        """Arrays of an episode as numpy (``obs`` and ``streams`` as dicts) plus ``attrs``.

        ``keys`` limits what is read (e.g. ``{"action", "reward"}``; ``"obs/front"``). Every
        chunk is checked: a missing or corrupt one raises EpisodeStoreError naming the field.
        """
        group = self._group(name)
        out: dict[str, Any] = {"attrs": dict(group.attrs), "obs": {}, "streams": {}}
        for field, array in stored_arrays(group):
            if keys is not None and field not in keys and field.split("/")[0] not in keys:
                continue
            data = self.read_field(name, field, array)
            if field.startswith("obs/"):
                out["obs"][field[4:]] = data
            elif field.startswith("streams/"):
                _, stream, leaf = field.split("/")
                out["streams"].setdefault(stream, {})[leaf] = data
            else:
                out[field] = data
        return out

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for name in self.episode_names():
            yield self.read_episode(name)

    def writer(self) -> EpisodeWriter:
        return EpisodeWriter(self)

    def _next_name(self) -> str:
        """The name of the next episode committed: one past the newest. The folder is listed once and the count
        kept (listing it at every commit grew with the store: ~6 ms at 300 episodes); names that other writers of
        this store (the fleet's recorder processes) took since are stepped over one by one, never by listing again:
        with several writers nearly every commit finds its name taken."""
        if self._next_index is None:
            names = self.episode_names()
            self._next_index = int(names[-1].split("_")[1]) + 1 if names else 0
        while (self.path / "episodes" / f"episode_{self._next_index:06d}").exists():  # a rename made it whole
            self._next_index += 1
        return f"episode_{self._next_index:06d}"

    def _claimed(self, name: str) -> None:
        """Episode ``name`` (from :meth:`_next_name`) is now in the store."""
        self._next_index = int(name.split("_")[1]) + 1

    def _group(self, name: str) -> zarr.Group:
        path = self.path / "episodes" / name
        if not (path / "zarr.json").exists():
            raise EpisodeStoreError(f"{self.path}: no complete episode {name!r}")
        return zarr.open_group(str(path), mode="r")

    def read_field(self, name: str, field: str, array: zarr.Array) -> np.ndarray:
        """One array of an episode, every chunk checked (EpisodeStoreError naming episode and field)."""
        chunk_dir = self.path / "episodes" / name / field / "c"
        expected = math.prod(math.ceil(s / c) for s, c in zip(array.shape, array.chunks)) if array.size else 0
        found = sum(1 for p in chunk_dir.rglob("*") if p.is_file()) if chunk_dir.exists() else 0
        if found != expected:
            raise EpisodeStoreError(f"{self.path}: episode {name}, field {field}: {expected - found} chunk(s) missing")
        try:
            return array[:]
        except Exception as error:  # noqa: BLE001 - checksum or codec failure
            raise EpisodeStoreError(f"{self.path}: episode {name}, field {field}: corrupt chunk ({error})") from None


class EpisodeWriter:
    """Writes one episode at a time: ``start(obs)``, ``add(...)`` per step, ``commit()``.

    Camera frames are compressed and written by background threads as they arrive (at most
    ``max_in_flight`` frames queued, so memory stays bounded and the control loop is not held
    up by the disk; the same threads hash them, so commit only hashes the small arrays);
    per-step scalars are kept in memory (small) and written at commit.
    ``discard()`` drops an episode in progress.
    """

    growth = 64  # frames allocated at a time in an image array
    max_in_flight = 32

    def __init__(self, store: EpisodeStore):
        self.store = store
        self.shapes = store.observation_shapes
        self.action_dim = int(store.metadata["action_dim"])
        self._staging: Path | None = None
        self._group: zarr.Group | None = None
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="episode-writer")
        self._in_flight: deque[Future] = deque()

    @property
    def active(self) -> bool:
        return self._group is not None

    def start(self, obs: Mapping[str, np.ndarray]) -> None:
        """Begin an episode with its reset observation (discarding any unfinished one)."""
        self.discard()
        self._check_obs(obs)
        # a staging folder of its own: writers of one store may have episodes open at once (envs stepped together);
        # the episode's name is given when it is committed, in commit order
        self._staging = self.store.path / ".staging" / f"{self.store._next_name()}.{uuid.uuid4().hex[:12]}"
        self._staging.parent.mkdir(exist_ok=True)
        self._group = zarr.open_group(str(self._staging), mode="w-")
        self._hash = ContentHash()
        obs_group = self._group.create_group("obs")
        self._frames: dict[str, zarr.Array] = {}
        self._small_obs: dict[str, list[np.ndarray]] = {}
        for key, value in obs.items():
            value = np.asarray(value)
            if is_image(value.shape, value.dtype):
                self._frames[key] = obs_group.create_array(
                    key,
                    shape=(self.growth, *value.shape),
                    chunks=(1, *value.shape),
                    dtype=np.uint8,
                    compressors=IMAGE_CODECS,
                    config=ARRAY_CONFIG,
                )
            else:
                self._small_obs[key] = []
        self._n_obs = 0
        self._steps: dict[str, list[Any]] = {}
        self._streams: dict[str, tuple[list[np.ndarray], list[float]]] = {}
        self._append_obs(obs)

    def add(
        self,
        obs: Mapping[str, np.ndarray],
        action: np.ndarray,
        reward: float,
        terminated: bool,
        truncated: bool,
        *,
        policy_action: np.ndarray | None = None,
        success: bool = False,
        intervened: bool = False,
        safety_flags: int = 0,
        timestamp: float | None = None,
        **extras: float,
    ) -> None:
        """Record one step: the action executed and what it led to."""
        if not self.active:
            raise RuntimeError("EpisodeWriter.add before start")
        self._check_obs(obs)
        action = np.asarray(action, dtype=np.float32)
        if action.shape != (self.action_dim,):
            raise EpisodeStoreError(
                f"{self._staging.name}: action has shape {action.shape}, the store ({self.action_dim},)"
            )
        step = {
            "action": action,
            "policy_action": action if policy_action is None else np.asarray(policy_action, dtype=np.float32),
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "success": success,
            "intervened": intervened,
            "safety_flags": safety_flags,
            "timestamp": time.time() if timestamp is None else timestamp,
            **extras,
        }
        for key, value in step.items():
            self._steps.setdefault(key, []).append(value)
        self._append_obs(obs)

    def add_stream(self, name: str, value: np.ndarray, timestamp: float) -> None:
        """Record a sample of a sensor stream with its own rate (e.g. wrist F/T at 1 kHz)."""
        self.add_stream_block(name, np.asarray(value)[None], np.array([timestamp]))

    def add_streams(self, streams: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """Record blocks of several streams: name -> (values (N, ...), timestamps (N,) s)."""
        for name, (values, timestamps) in streams.items():
            self.add_stream_block(name, values, timestamps)

    def add_stream_block(self, name: str, values: np.ndarray, timestamps: np.ndarray) -> None:
        """Record N samples of a stream at once: ``values`` (N, ...) and their ``timestamps`` (N,) s."""
        data, stamps = self._streams.setdefault(name, ([], []))
        data.extend(np.asarray(values))
        stamps.extend(np.asarray(timestamps, np.float64).tolist())

    def __len__(self) -> int:
        return len(self._steps.get("action", [])) if self.active else 0

    def discard(self) -> None:
        self._drain(raise_errors=False)
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
        self._staging, self._group = None, None

    def _drain(self, raise_errors: bool = True) -> None:
        """Wait for the queued frame writes."""
        while self._in_flight:
            future = self._in_flight.popleft()
            error = future.exception()
            if error is not None and raise_errors:
                self._drain(raise_errors=False)
                raise error

    def commit(self, source: str, uid: str | None = None, **attrs: Any) -> str:
        """Finish the episode and make it visible; returns its name.

        ``uid`` identifies the episode across stores (a new uuid4 hex unless given: a sender
        passes its own so a resent episode is recognised). ``attrs`` become episode metadata;
        ``success`` (any step succeeded) and ``return`` (sum of rewards) are filled in unless
        given; ``length``, ``source``, ``uid`` and ``checksum`` are always the writer's.
        """
        if not self.active or not len(self):
            raise RuntimeError("cannot commit an episode with no steps")
        if source not in SOURCES:
            raise EpisodeStoreError(f"source={source!r}; expected one of {', '.join(SOURCES)}")
        if uid is not None and not (isinstance(uid, str) and 0 < len(uid) <= 128 and uid.isprintable()):
            raise EpisodeStoreError(f"uid={uid!r}; expected a printable string of 1 to 128 characters")
        group, length = self._group, len(self)
        self._drain()
        for array in self._frames.values():
            array.resize((self._n_obs, *array.shape[1:]))
        arrays = [(group["obs"], f"obs/{key}", np.stack(values)) for key, values in self._small_obs.items()]
        arrays += [(group, key, np.asarray(values, dtype=STEP_FIELDS.get(key))) for key, values in self._steps.items()]
        if self._streams:
            streams = group.create_group("streams")
            for name, (data, stamps) in self._streams.items():
                stream = streams.create_group(name)
                arrays.append((stream, f"streams/{name}/data", np.stack(data)))
                arrays.append((stream, f"streams/{name}/timestamp", np.asarray(stamps, dtype=np.float64)))
        for _, field, data in arrays:
            self._hash.add(field, data)
        _write_arrays(self._staging, [(field, data) for _, field, data in arrays])
        summary = {"success": bool(np.any(self._steps["success"])), "return": float(np.sum(self._steps["reward"]))}
        identity = {"uid": uid or uuid.uuid4().hex, "checksum": self._hash.hexdigest()}
        group.update_attributes(  # one write of the group's zarr.json (attrs.update writes it once per key)
            _jsonable({**summary, **attrs, "length": length, "source": source, **identity})
        )
        _fsync_tree(self._staging)
        while True:
            name = self.store._next_name()
            try:
                os.rename(self._staging, self.store.path / "episodes" / name)
                break
            except OSError as error:  # another process's writer took the name since: _next_name steps past it
                if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
        self.store._claimed(name)
        self._staging, self._group = None, None
        return name

    def _write_frame(self, key: str, index: int, frame: np.ndarray) -> None:
        self._frames[key][index] = frame
        self._hash.add_row(f"obs/{key}", index, frame)

    def _append_obs(self, obs: Mapping[str, np.ndarray]) -> None:
        index = self._n_obs
        for key, array in self._frames.items():
            if index >= array.shape[0]:
                array.resize((array.shape[0] + self.growth, *array.shape[1:]))  # metadata only
            while len(self._in_flight) >= self.max_in_flight:
                self._in_flight.popleft().result()
            self._in_flight.append(self._pool.submit(self._write_frame, key, index, np.array(obs[key], copy=True)))
        for key, values in self._small_obs.items():
            values.append(np.asarray(obs[key]))
        self._n_obs += 1

    def _check_obs(self, obs: Mapping[str, np.ndarray]) -> None:
        where = self._staging.name if self._staging is not None else self.store._next_name()
        if set(obs) != set(self.shapes):
            raise EpisodeStoreError(
                f"{where}: observation keys {sorted(obs)} differ from the store's {sorted(self.shapes)}"
            )
        for key, value in obs.items():
            if tuple(np.shape(value)) != self.shapes[key]:
                raise EpisodeStoreError(
                    f"{where}: obs/{key} has shape {tuple(np.shape(value))}, the store {self.shapes[key]}"
                )


def stored_arrays(group: zarr.Group, prefix: str = "") -> Iterator[tuple[str, zarr.Array]]:
    """(field path, array) of every array under an episode's ``group``, nested groups' fields as ``a/b``."""
    for key, member in group.members():
        if isinstance(member, zarr.Array):
            yield prefix + key, member
        else:
            yield from stored_arrays(member, f"{prefix}{key}/")


def _write_arrays(folder: Path, arrays: list[tuple[str, np.ndarray]]) -> None:
    """Create and fill an episode's arrays (path in the episode's group, data) in ``folder``, the group's folder.

    zarr encodes them in memory, in one wait on its event loop for all of them, and their files (each array's
    ``zarr.json`` and chunks, laid out as zarr's local store lays them out) are written here: zarr writing each small
    file through its event loop and threads cost ~1.3 ms of CPU per array, more than the encoding (an episode has a
    dozen arrays). The parent groups are in ``folder`` already."""
    encoded: dict[str, Any] = {}  # store key -> zarr Buffer
    memory = zarr.storage.MemoryStore(store_dict=encoded)

    async def write(path: str, data: np.ndarray) -> None:
        array = await zarr.api.asynchronous.create_array(
            memory, name=path, shape=data.shape, dtype=data.dtype, compressors=ARRAY_CODECS, config=ARRAY_CONFIG
        )
        await array.setitem(Ellipsis, data)

    async def write_all() -> None:
        await asyncio.gather(*(write(path, data) for path, data in arrays))

    sync(write_all())
    prefixes = tuple(f"{path}/" for path, _ in arrays)
    for key, buffer in encoded.items():
        if key.startswith(prefixes):  # the arrays' files, not the parents zarr made in memory
            file = folder / key
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_bytes(buffer.to_bytes())


def _fsync_tree(path: Path) -> None:
    """Flush the files of a finished episode to disk before it is made visible (in parallel:
    fsync releases the GIL and the device serves several requests at once)."""

    def flush(file: Path) -> None:
        with open(file, "rb") as handle:
            os.fsync(handle.fileno())

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(flush, [file for file in path.rglob("*") if file.is_file()]))


def _jsonable(value: Any) -> Any:
    """Plain JSON types (numpy scalars and arrays, tuples, a config's containers included)."""
    return json.loads(json.dumps(plain(value), default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot store {type(value).__name__} in episode metadata")
