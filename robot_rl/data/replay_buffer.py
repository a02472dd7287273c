"""Replay buffers for off-policy learning: an episode-aware ring buffer held in torch tensors where the learner learns
(the demo/online mix and the weighted mix of several buffers: :mod:`robot_rl.data.samplers`).

Every observation is stored once. Slot ``i`` holds the observation at some step t and, when a
transition starts there, the action taken, the reward and the end flags; the next
observation is slot ``i + 1`` (modulo capacity). An episode's last observation occupies a
slot of its own with no transition, so each episode costs one extra slot, and images are
never duplicated between ``obs`` and ``next_obs``.

Sampling returns n-step returns (bootstrapping through truncation, not through termination)
and, for action-sequence critics (CQN-AS), the next K actions with a validity mask that is
False past the end of the episode.

Two actions are kept per transition: ``action``, the one executed (what happened; the safety
critic learns from it), and ``learned_action``, the one the task policy learns from (the same
unless the learner relabelled a filtered step with the action the policy proposed).
A stored episode may be a segment of a longer one (a human takeover in the demo buffer): its
``opening_action`` is the action taken just before its first observation, so the gripper
critic's "previous command" stays right at the segment's first step.

Where the data lives: every column is a preallocated torch tensor (images uint8 as given, (H, W, C); the
other observations float32; or what the buffer's ``encode`` makes of each observation, e.g. a frozen camera
backbone's float16 features instead of the images) on the *storage device*: the learner's CUDA device when the buffer takes at most a
quarter of its memory (an online and a demo buffer: half), else CPU memory. Transitions are written one at a
time as they arrive. Sampling (indices, n-step returns, previous actions, action sequences, the demo/online mix)
runs with torch where the data lives and never waits on the device; a batch (:class:`~robot_rl.data.batches.Batch`)
holds tensors on the learner's ``device`` (from CPU storage for a CUDA learner: gathered into pinned memory and copied without
blocking). Random draws come from a torch generator reseeded from the caller's numpy generator at every draw,
so a sampler's whole random state is its numpy generator's (checkpointed as before).

On disk (:meth:`ReplayBuffer.save`): one ``.npy`` file per column and ``meta.json``, no pickle.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robot_rl.core.folders import latest, replacing

from .batches import Batch

BUFFER_FORMAT = "robot_rl.replay/2"  # columns hold the written rows only; "robot_rl.replay" saved every row
_READABLE_FORMATS = (BUFFER_FORMAT, "robot_rl.replay")
_STEP_ARRAYS = ("action", "reward", "cost", "terminated", "truncated", "intervened", "has_transition", "episode")
_SEGMENT_ARRAYS = ("learned_action", "opening_action", "has_opening_action")  # absent in buffers saved before them
_GPU_SHARE = 4  # a buffer goes on the GPU when it takes at most 1 / _GPU_SHARE of the GPU's memory
_KEPT_BLOCKS = 4  # blocks of CPU memory for batches' observations a buffer keeps to hand out again


def storage_device(device: torch.device, nbytes: int) -> torch.device:
    """Where a buffer of ``nbytes`` for a learner on ``device`` lives: that CUDA device when the buffer takes at
    most a quarter of its memory, else the CPU (a CPU learner's buffer is in CPU memory)."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        if nbytes <= torch.cuda.get_device_properties(index).total_memory // _GPU_SHARE:
            return device
    return torch.device("cpu")


class ReplayBuffer:
    """Ring buffer of transitions grouped in episodes, in torch tensors.

    Args:
        capacity: number of observation slots (transitions + one per episode end).
        observation_space: {key: (shape, numpy dtype)} of the observation dict (images uint8 (H, W, C)).
        action_dim: size of the action vector.
        device: where batches go (the learner's device; default the CPU). The columns live there too when it is
            a CUDA device with room for them (:func:`storage_device`).
        encode: what is stored of an observation: ``encode(obs)`` gives the stored dict (of ``observation_space``),
            called once per stored observation (e.g. a frozen encoder's features instead of the pixels,
            :class:`robot_rl.policies.pretrained.FrozenFeatures`); None: the observation as it is.

    Columns (tensors on :attr:`storage_device`, first dimension ``capacity``): ``obs[key]``, ``action``,
    ``learned_action``, ``opening_action`` (float32, (capacity, A)), ``reward``, ``cost`` (float32),
    ``terminated``, ``truncated``, ``intervened``, ``has_transition``, ``has_opening_action`` (bool),
    ``episode`` (int64, -1 where nothing was written).
    """

    def __init__(
        self,
        capacity: int,
        observation_space: Mapping[str, tuple[tuple[int, ...], Any]],
        action_dim: int,
        device: str | torch.device | None = None,
        encode: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
    ):
        if capacity < 2:
            raise ValueError(f"capacity={capacity}; expected at least 2")
        self.capacity = int(capacity)
        self.observation_space = {
            key: (tuple(shape), np.dtype(dtype)) for key, (shape, dtype) in observation_space.items()
        }
        self.action_dim = int(action_dim)
        self.device = torch.device(device if device is not None else "cpu")
        self.encode = encode
        self.storage_device = storage_device(self.device, self.nbytes(capacity, self.observation_space, action_dim))
        self.pinned = self.storage_device.type == "cpu" and self.device.type == "cuda"
        self.obs = {
            key: self._zeros((capacity, *shape), dtype) for key, (shape, dtype) in self.observation_space.items()
        }
        self.action = self._zeros((capacity, action_dim), np.float32)
        self.learned_action = self._zeros((capacity, action_dim), np.float32)
        self.opening_action = self._zeros((capacity, action_dim), np.float32)  # at a segment's first slot
        self.has_opening_action = self._zeros(capacity, bool)
        self.reward = self._zeros(capacity, np.float32)
        self.cost = self._zeros(capacity, np.float32)  # constraint violations (1 = violated), for the safety critic
        self.terminated = self._zeros(capacity, bool)
        self.truncated = self._zeros(capacity, bool)
        self.intervened = self._zeros(capacity, bool)
        self.has_transition = self._zeros(capacity, bool)
        self.episode = self._zeros(capacity, np.int64).fill_(-1)
        self.cursor = 0  # next slot to write
        self.filled = 0  # slots written so far, up to capacity
        self.episodes_started = 0
        self._episode_open = False
        self._episode_length = 0
        # the slots that hold a transition, in no particular order: the first _valid_count entries of _valid_slots
        # (kept on the host; mirrored on the storage device, where sampling reads it) and each slot's position there
        self._valid_count = 0
        self._valid_host = np.zeros(capacity, np.int64)
        self._valid_position = np.full(capacity, -1, np.int64)
        self._valid_slots = self._mirror(self._valid_host)
        self._generator = torch.Generator(self.storage_device)
        self._powers: dict[tuple[float, int], torch.Tensor] = {}  # gamma^m per (gamma, n_step), see _discounts
        self._blocks: list[np.ndarray] = []  # CPU memory for batches' observations, see empty_observations
        self.returns_to_go: torch.Tensor | None = None  # (capacity,) float32 of set_returns_to_go (offline data)

    @staticmethod
    def nbytes(capacity: int, observation_space: Mapping[str, tuple[tuple[int, ...], Any]], action_dim: int) -> int:
        """Bytes the columns of such a buffer take."""
        per_slot = sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for shape, dtype in observation_space.values())
        per_slot += 3 * 4 * action_dim + 2 * 4 + 5 + 2 * 8  # actions, reward + cost, flags, episode + valid slot
        return capacity * per_slot

    def _zeros(self, shape, dtype) -> torch.Tensor:
        if self.storage_device.type == "cpu":  # numpy's zeros: pages are only committed once written
            return torch.from_numpy(np.zeros(shape, dtype))
        return torch.zeros(shape, dtype=torch.from_numpy(np.zeros(0, dtype)).dtype, device=self.storage_device)

    def _mirror(self, host: np.ndarray) -> torch.Tensor:
        """``host`` on the storage device: the same memory on the CPU, a copy elsewhere."""
        return torch.from_numpy(host).to(self.storage_device)

    # ----------------------------------------------------------------- writing
    def add(
        self,
        obs: Mapping[str, np.ndarray],
        action: np.ndarray,
        reward: float,
        next_obs: Mapping[str, np.ndarray],
        terminated: bool,
        truncated: bool,
        intervened: bool = False,
        cost: float = 0.0,
        learned_action: np.ndarray | None = None,
        opening_action: np.ndarray | None = None,
    ) -> None:
        """Add one transition; ``obs`` is only stored when it starts an episode. ``cost`` is 1 when
        the transition violated a safety constraint. ``learned_action`` is what the task policy
        learns from (default: ``action``, the executed one). ``opening_action``, for a transition
        that starts a segment in the middle of an episode, is the action taken just before it.
        Arrays may be numpy arrays, tensors or sequences."""
        if not self._episode_open:
            self._write_obs(obs, new_episode=True)
            if opening_action is not None:
                self.opening_action[self.cursor - 1] = self._row(opening_action)
                self.has_opening_action[self.cursor - 1] = True
        slot = (self.cursor - 1) % self.capacity
        self.action[slot] = self._row(action)
        self.learned_action[slot] = self._row(action if learned_action is None else learned_action)
        self.reward[slot] = float(reward)
        self.cost[slot] = float(cost)
        self.terminated[slot] = bool(terminated)
        self.truncated[slot] = bool(truncated)
        self.intervened[slot] = bool(intervened)
        self._mark(slot, True)
        self._episode_length += 1
        if self._episode_length >= self.capacity - 1:
            raise ValueError(
                f"an episode of {self._episode_length} steps does not fit a buffer of {self.capacity} slots"
            )
        self._write_obs(next_obs, new_episode=False)
        if terminated or truncated:
            self._episode_open = False

    def close_episode(self) -> None:
        """End the open episode without a terminal flag (e.g. a run killed mid-episode): the
        next :meth:`add` starts a new episode, and the closed one bootstraps nowhere past its
        last stored observation."""
        self._episode_open = False

    def add_episode(self, episode: Mapping[str, Any]) -> None:
        """Add a whole episode as read from an EpisodeStore (obs with T + 1 entries)."""
        steps = len(episode["action"])
        intervened = episode.get("intervened", np.zeros(steps, bool))
        violated = np.asarray(episode.get("safety_flags", np.zeros(steps, np.uint32))) != 0
        for t in range(steps):
            self.add(
                {key: episode["obs"][key][t] for key in self.obs},
                episode["action"][t],
                episode["reward"][t],
                {key: episode["obs"][key][t + 1] for key in self.obs},
                bool(episode["terminated"][t]),
                bool(episode["truncated"][t]) or t == steps - 1,
                bool(intervened[t]),
                float(violated[t]),
            )

    def _write_obs(self, obs: Mapping[str, np.ndarray], new_episode: bool) -> None:
        if new_episode:
            self.episodes_started += 1
            self._episode_open = True
            self._episode_length = 0
        slot = self.cursor
        if self.encode is not None:
            obs = self.encode(obs)
        for key, column in self.obs.items():
            column[slot] = self._row(obs[key])
        self._mark(slot, False)
        self.has_opening_action[slot] = False
        self.episode[slot] = self.episodes_started - 1
        self.cursor = (slot + 1) % self.capacity
        self.filled = min(self.filled + 1, self.capacity)

    def _row(self, value: Any) -> torch.Tensor:
        """An observation or action (array, tensor or sequence) to write into a column: a CPU tensor (numpy arrays
        without a copy) for CPU storage; copied to a GPU through pinned memory, so the write does not block."""
        row = value if isinstance(value, torch.Tensor) else torch.as_tensor(np.ascontiguousarray(value))
        if self.storage_device.type == "cpu" or row.device == self.storage_device:
            return row
        return row.pin_memory().to(self.storage_device, non_blocking=True)

    def _mark(self, slot: int, valid: bool) -> None:
        """Set ``has_transition[slot]`` and keep the list of sampleable slots in step (swap-remove)."""
        self.has_transition[slot] = valid
        position = int(self._valid_position[slot])
        if valid == (position >= 0):
            return
        if valid:
            self._place(self._valid_count, slot)
            self._valid_count += 1
            return
        self._valid_count -= 1
        self._valid_position[slot] = -1
        last = int(self._valid_host[self._valid_count])
        if last != slot:
            self._place(position, last)

    def _place(self, position: int, slot: int) -> None:
        self._valid_host[position] = slot
        self._valid_position[slot] = position
        if self.storage_device.type != "cpu":  # on the CPU the mirror is the host array itself
            self._valid_slots[position] = slot

    def set_returns_to_go(self, gamma: float) -> None:
        """Give every batch ``mc_return``: the discounted sum of rewards from each transition to its episode's end
        (an episode cut short ends there too), the Monte-Carlo value Cal-QL calibrates against. For a buffer filled
        once (offline data): transitions added later have none until this is called again."""
        valid = self.has_transition.cpu().numpy()
        reward, episode = self.reward.cpu().numpy().astype(np.float64), self.episode.cpu().numpy()
        ends = (self.terminated | self.truncated).cpu().numpy()
        returns = np.zeros(self.capacity, np.float64)
        for slot in (self.cursor - 1 - np.arange(self.capacity)) % self.capacity:  # newest first: slot + 1 is done
            if not valid[slot]:
                continue
            after = (slot + 1) % self.capacity
            follows = not ends[slot] and valid[after] and episode[after] == episode[slot]
            returns[slot] = reward[slot] + (gamma * returns[after] if follows else 0.0)
        self.returns_to_go = torch.from_numpy(returns.astype(np.float32)).to(self.storage_device)

    # ----------------------------------------------------------------- sampling
    def __len__(self) -> int:
        """Number of transitions that can be sampled."""
        return self._valid_count

    def valid_indices(self) -> torch.Tensor:
        """The slots that hold a transition, ascending: int64 (len(self),) on the storage device."""
        return self._valid_slots[: self._valid_count].sort().values

    def draw(self, batch_size: int, rng: np.random.Generator) -> torch.Tensor:
        """``batch_size`` slots drawn uniformly (with replacement) among those holding a transition: int64
        (batch_size,) on the storage device. Reseeds the buffer's torch generator from ``rng``."""
        if not self._valid_count:
            raise ValueError("cannot sample from an empty replay buffer")
        self._generator.manual_seed(int(rng.integers(2**63)))
        position = torch.randint(
            self._valid_count, (batch_size,), generator=self._generator, device=self.storage_device
        )
        return self._valid_slots.index_select(0, position)

    def sample(
        self,
        batch_size: int,
        rng: np.random.Generator,
        n_step: int = 1,
        gamma: float = 0.99,
        sequence_length: int = 1,
    ) -> Batch:
        """A :class:`Batch` of ``batch_size`` transitions drawn uniformly, tensors on :attr:`device`: n-step returns
        (``n_step``, discount ``gamma``), and with ``sequence_length`` K > 1 the action sequences; ``mc_return`` with
        returns-to-go (:meth:`set_returns_to_go`)."""
        return self.batch(self.draw(batch_size, rng), n_step, gamma, sequence_length)

    def batch(
        self, index: torch.Tensor | np.ndarray, n_step: int = 1, gamma: float = 0.99, sequence_length: int = 1
    ) -> Batch:
        """The batch of :meth:`sample` at the given slots (int (B,), each holding a transition)."""
        index = self._index(index)
        obs, next_obs = self.empty_observations(len(index)), self.empty_observations(len(index))
        return self.gather(index, obs, next_obs, n_step, gamma, sequence_length).to(self.device)

    def empty_observations(self, batch_size: int) -> dict[str, torch.Tensor]:
        """Uninitialised observation tensors for ``batch_size`` rows on the storage device (pinned for a CUDA
        learner's CPU buffer), to :meth:`gather` into.

        In CPU memory they are views of a block this buffer keeps and hands out again once no tensor uses it any
        more: a batch of images is megabytes, and glibc's malloc gives such blocks back to the system when they
        are freed, so fresh ones would cost a page fault per 4 KiB on every draw (most of what sampling cost
        before). GPU and pinned memory come from torch's caching allocators."""
        shapes = {key: (batch_size, *column.shape[1:]) for key, column in self.obs.items()}
        if self.storage_device.type != "cpu" or self.pinned:
            place = {"pin_memory": True} if self.pinned else {"device": self.storage_device}
            return {key: torch.empty(shapes[key], dtype=self.obs[key].dtype, **place) for key in shapes}
        sizes = {
            key: -(-int(np.prod(shape)) * self.obs[key].element_size() // 64) * 64 for key, shape in shapes.items()
        }
        block = self._free_block(sum(sizes.values()))
        out, start = {}, 0
        for key, shape in shapes.items():
            dtype = self.observation_space[key][1]
            out[key] = torch.from_numpy(
                block[start : start + int(np.prod(shape)) * dtype.itemsize].view(dtype).reshape(shape)
            )
            start += sizes[key]
        return out

    def _free_block(self, nbytes: int) -> np.ndarray:
        """A kept block of ``nbytes`` that no tensor uses (a tensor made from a view of a block holds a reference to
        it), or a new one, kept while fewer than _KEPT_BLOCKS are."""
        for block in self._blocks:
            if block.nbytes == nbytes and sys.getrefcount(block) == 3:  # the list, this loop, getrefcount's argument
                return block
        block = np.empty(nbytes, np.uint8)
        if len(self._blocks) < _KEPT_BLOCKS:
            self._blocks.append(block)
        return block

    def gather(
        self,
        index: torch.Tensor,
        obs: dict[str, torch.Tensor],
        next_obs: dict[str, torch.Tensor],
        n_step: int,
        gamma: float,
        sequence_length: int,
    ) -> Batch:
        """The batch at slots ``index`` (int64 (B,) on the storage device), its observations written into ``obs``
        and ``next_obs`` ((B, *shape) tensors on the storage device, e.g. rows of a larger batch); everything on
        the storage device."""
        reward, steps, terminated = self._n_step_returns(index, n_step, gamma)
        next_index = self._wrap(index + steps)
        for key, column in self.obs.items():
            torch.index_select(column, 0, index, out=obs[key])
            torch.index_select(column, 0, next_index, out=next_obs[key])
        previous_action, has_previous = self._previous_actions(index, self.learned_action)
        action_sequence = sequence_mask = None
        if sequence_length > 1:
            action_sequence, sequence_mask = self._action_sequences(index, sequence_length, self.learned_action)
        return Batch(
            obs=obs,
            next_obs=next_obs,
            action=self.learned_action.index_select(0, index),
            executed_action=self.action.index_select(0, index),
            reward=reward,
            cost=self.cost.index_select(0, index),
            discount=(self._discounts(gamma, n_step).index_select(0, steps) * ~terminated).float(),
            terminated=terminated,
            intervened=self.intervened.index_select(0, index),
            index=index,
            previous_action=previous_action,
            has_previous=has_previous,
            action_sequence=action_sequence,
            sequence_mask=sequence_mask,
            mc_return=None if self.returns_to_go is None else self.returns_to_go.index_select(0, index),
        )

    def n_step_returns(
        self, index: torch.Tensor | np.ndarray, n_step: int, gamma: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(discounted reward sum float32, steps taken m int64, terminated within them bool), each (B,) on the
        storage device, from each slot of ``index``."""
        if n_step < 1:
            raise ValueError(f"n_step={n_step}; expected >= 1")
        return self._n_step_returns(self._index(index), n_step, gamma)

    def previous_actions(
        self, index: torch.Tensor | np.ndarray, actions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The action taken one step before each index (from ``actions``, default the executed
        ones): in the same stored episode, or a segment's opening action at its first step; zeros
        at an episode's first step. Also whether there was one. (B, A) float32 and (B,) bool on the storage
        device."""
        return self._previous_actions(self._index(index), self.action if actions is None else actions)

    def action_sequences(
        self, index: torch.Tensor | np.ndarray, length: int, actions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``length`` actions from each index (from ``actions``, default the executed ones;
        zeros past the episode end) and their mask: (B, length, A) float32 and (B, length) bool on the storage
        device."""
        if length < 1:
            raise ValueError(f"sequence length={length}; expected >= 1")
        return self._action_sequences(self._index(index), length, self.action if actions is None else actions)

    # the same on an int64 index on the storage device; index_select and masks multiplied in, not tensor[index]
    # and where(): each costs a few microseconds less on a CPU, and a batch takes some eighty of them
    def _n_step_returns(
        self, index: torch.Tensor, n_step: int, gamma: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        for k, slot, take in self._steps_ahead(index, n_step):
            reward = self.reward.index_select(0, slot) * take
            ended = take & self.terminated.index_select(0, slot)
            if k == 0:
                ret, steps, terminated = reward.double(), take.long(), ended
            else:
                ret += gamma**k * reward
                steps += take
                terminated |= ended
        return ret.float(), steps, terminated

    def _previous_actions(self, index: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        slot = self._wrap(index + (self.capacity - 1))
        in_episode = self.has_transition.index_select(0, slot) & (
            self.episode.index_select(0, slot) == self.episode.index_select(0, index)
        )
        opening = ~in_episode & self.has_opening_action.index_select(0, index)
        previous = actions.index_select(0, slot) * in_episode[:, None]
        previous += self.opening_action.index_select(0, index) * opening[:, None]
        return previous, in_episode | opening

    def _action_sequences(
        self, index: torch.Tensor, length: int, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        steps = [
            (actions.index_select(0, slot) * take[:, None], take) for _, slot, take in self._steps_ahead(index, length)
        ]
        return torch.stack([a for a, _ in steps], 1), torch.stack([m for _, m in steps], 1)

    def _steps_ahead(self, index: torch.Tensor, length: int) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
        """For k < length: (k, slot of step k, whether step k is still a transition of the episode
        that starts at ``index``, i.e. no episode end before it)."""
        slot, take, episode = index, self.has_transition.index_select(0, index), None
        for k in range(length):
            if k:
                alive = take & ~self.terminated.index_select(0, slot) & ~self.truncated.index_select(0, slot)
                episode = self.episode.index_select(0, index) if episode is None else episode
                slot = self._wrap(index + k)
                take = alive & self.has_transition.index_select(0, slot)
                take &= self.episode.index_select(0, slot) == episode
            yield k, slot, take

    def _wrap(self, slots: torch.Tensor) -> torch.Tensor:
        """Slots (>= 0) modulo the capacity."""
        return slots.fmod_(self.capacity)

    def _discounts(self, gamma: float, n_step: int) -> torch.Tensor:
        """gamma^m for m = 0..n_step, float64 on the storage device (made once per gamma and n)."""
        if (gamma, n_step) not in self._powers:
            self._powers[gamma, n_step] = torch.tensor([gamma**m for m in range(n_step + 1)], dtype=torch.float64).to(
                self.storage_device
            )
        return self._powers[gamma, n_step]

    def _index(self, index: torch.Tensor | np.ndarray) -> torch.Tensor:
        return torch.as_tensor(index, dtype=torch.int64).to(self.storage_device).reshape(-1)

    # ----------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write the buffer to a directory (replaced atomically if it exists): the slots written so far
        (``filled`` rows of each column, all of them once the buffer has wrapped), not the empty rest."""
        rows = slice(0, self.filled)
        with replacing(path) as tmp:
            for key, column in self.obs.items():
                np.save(tmp / f"obs.{key}.npy", column[rows].cpu().numpy())
            for name in _STEP_ARRAYS + _SEGMENT_ARRAYS:
                np.save(tmp / f"{name}.npy", getattr(self, name)[rows].cpu().numpy())
            meta = {
                "format": BUFFER_FORMAT,
                "capacity": self.capacity,
                "action_dim": self.action_dim,
                "observation_space": {
                    k: [list(shape), dtype.str] for k, (shape, dtype) in self.observation_space.items()
                },
                "cursor": self.cursor,
                "filled": self.filled,
                "episodes_started": self.episodes_started,
                "episode_open": self._episode_open,
                "episode_length": self._episode_length,
            }
            (tmp / "meta.json").write_text(json.dumps(meta))

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        device: str | torch.device | None = None,
        encode: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None,
    ) -> ReplayBuffer:
        """A buffer written by :meth:`save`, for a learner on ``device`` (default the CPU), storing what is added to
        it through ``encode`` (as it was made)."""
        path = latest(path)
        meta = json.loads((path / "meta.json").read_text())
        if meta.get("format") not in _READABLE_FORMATS:
            raise ValueError(f"{path}: not a robot_rl replay buffer")
        space = {key: (tuple(shape), np.dtype(dtype)) for key, (shape, dtype) in meta["observation_space"].items()}
        buffer = cls(meta["capacity"], space, meta["action_dim"], device, encode)
        for key, column in buffer.obs.items():
            buffer._fill_column(column, path / f"obs.{key}.npy")
        for name in _STEP_ARRAYS:
            buffer._fill_column(getattr(buffer, name), path / f"{name}.npy")
        buffer.learned_action = buffer.action.clone()  # a buffer saved before relabelling learned the executed actions
        for name in _SEGMENT_ARRAYS:
            if (path / f"{name}.npy").exists():
                buffer._fill_column(getattr(buffer, name), path / f"{name}.npy")
        buffer.cursor, buffer.filled = meta["cursor"], meta["filled"]
        buffer.episodes_started = meta["episodes_started"]
        buffer._episode_open, buffer._episode_length = meta["episode_open"], meta["episode_length"]
        valid = np.flatnonzero(buffer.has_transition.cpu().numpy())
        buffer._valid_count = len(valid)
        buffer._valid_host[: len(valid)] = valid
        buffer._valid_position[valid] = np.arange(len(valid))
        buffer._valid_slots = buffer._mirror(buffer._valid_host)
        return buffer

    def _fill_column(self, column: torch.Tensor, file: Path) -> None:
        """Copy a saved column into the first rows of ``column``: buffers save their written rows only
        (older ones saved every row)."""
        array = np.load(file, mmap_mode="r")  # no pickle: np.load refuses object arrays
        same_dtype = array.dtype.kind != "O" and torch.from_numpy(np.zeros(0, array.dtype)).dtype == column.dtype
        if not same_dtype or array.shape[1:] != column.shape[1:] or len(array) > len(column):
            raise ValueError(
                f"{file}: shape {array.shape} {array.dtype}; expected at most {len(column)} rows of "
                f"{tuple(column.shape[1:])} {column.dtype}"
            )
        rows = column[: len(array)]
        if rows.device.type == "cpu":
            rows.numpy()[...] = array  # straight from the file's pages into the column
        else:
            rows.copy_(torch.from_numpy(np.array(array)))


def load_episode_store(store, buffer: ReplayBuffer, sources: tuple[str, ...] | None = None) -> int:
    """Add the store's episodes (optionally only some sources) to ``buffer``; returns how many."""
    added = 0
    for name in store.episode_names():
        if sources is not None and store.episode_attrs(name).get("source") not in sources:
            continue
        buffer.add_episode(store.read_episode(name))
        added += 1
    return added
