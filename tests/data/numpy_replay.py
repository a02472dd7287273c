"""The numpy replay buffer and mixing sampler as they were before the device-resident replay (git e02af6b,
robot_rl/data/replay_buffer.py), kept verbatim below this note as the reference the property tests of
tests/data/test_device_replay.py hold the torch implementation to (same slots -> same batch contents); only
the import of the folder helpers is absolute, and ``load_episode_store`` is left out.

Replay buffers for off-policy learning: episode-aware ring buffer and demo/online mixing.

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
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from robot_rl.core.folders import latest, replacing

BUFFER_FORMAT = "robot_rl.replay"
_STEP_ARRAYS = ("action", "reward", "cost", "terminated", "truncated", "intervened", "has_transition", "episode")
_SEGMENT_ARRAYS = ("learned_action", "opening_action", "has_opening_action")  # absent in buffers saved before them


class ReplayBuffer:
    """Ring buffer of transitions grouped in episodes.

    Args:
        capacity: number of observation slots (transitions + one per episode end).
        observation_space: {key: (shape, dtype)} of the observation dict.
        action_dim: size of the action vector.
    """

    def __init__(self, capacity: int, observation_space: Mapping[str, tuple[tuple[int, ...], Any]], action_dim: int):
        if capacity < 2:
            raise ValueError(f"capacity={capacity}; expected at least 2")
        self.capacity = int(capacity)
        self.observation_space = {
            key: (tuple(shape), np.dtype(dtype)) for key, (shape, dtype) in observation_space.items()
        }
        self.action_dim = int(action_dim)
        self.obs = {key: np.zeros((capacity, *shape), dtype) for key, (shape, dtype) in self.observation_space.items()}
        self.action = np.zeros((capacity, action_dim), np.float32)
        self.learned_action = np.zeros((capacity, action_dim), np.float32)
        self.opening_action = np.zeros((capacity, action_dim), np.float32)  # at a segment's first slot
        self.has_opening_action = np.zeros(capacity, bool)
        self.reward = np.zeros(capacity, np.float32)
        self.cost = np.zeros(capacity, np.float32)  # constraint violations (1 = violated), for the safety critic
        self.terminated = np.zeros(capacity, bool)
        self.truncated = np.zeros(capacity, bool)
        self.intervened = np.zeros(capacity, bool)
        self.has_transition = np.zeros(capacity, bool)
        self.episode = np.full(capacity, -1, np.int64)
        self.cursor = 0  # next slot to write
        self.filled = 0  # slots written so far, up to capacity
        self.episodes_started = 0
        self._episode_open = False
        self._episode_length = 0
        self._valid: np.ndarray | None = None

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
        that starts a segment in the middle of an episode, is the action taken just before it."""
        if not self._episode_open:
            self._write_obs(obs, new_episode=True)
            if opening_action is not None:
                self.opening_action[self.cursor - 1] = opening_action
                self.has_opening_action[self.cursor - 1] = True
        slot = (self.cursor - 1) % self.capacity
        self.action[slot] = action
        self.learned_action[slot] = action if learned_action is None else learned_action
        self.reward[slot] = reward
        self.cost[slot] = cost
        self.terminated[slot] = terminated
        self.truncated[slot] = truncated
        self.intervened[slot] = intervened
        self.has_transition[slot] = True
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
        for key, array in self.obs.items():
            array[slot] = obs[key]
        self.has_transition[slot] = False
        self.has_opening_action[slot] = False
        self.episode[slot] = self.episodes_started - 1
        self.cursor = (slot + 1) % self.capacity
        self.filled = min(self.filled + 1, self.capacity)
        self._valid = None

    # ----------------------------------------------------------------- sampling
    def __len__(self) -> int:
        """Number of transitions that can be sampled."""
        return len(self.valid_indices())

    def valid_indices(self) -> np.ndarray:
        if self._valid is None:
            self._valid = np.flatnonzero(self.has_transition)
        return self._valid

    def sample(
        self,
        batch_size: int,
        rng: np.random.Generator,
        n_step: int = 1,
        gamma: float = 0.99,
        sequence_length: int = 1,
    ) -> dict[str, Any]:
        """A batch of transitions.

        Returns a dict with ``obs`` and ``next_obs`` (dicts of arrays), ``action``,
        ``reward`` (n-step discounted sum), ``discount`` (gamma^m, 0 if the episode terminated
        within the m <= n steps taken), ``terminated``, ``intervened``, ``index``,
        ``previous_action`` with ``has_previous`` (the action one step earlier in the episode)
        and, when
        ``sequence_length`` K > 1, ``action_sequence`` (B, K, A) with ``sequence_mask`` (B, K).
        """
        valid = self.valid_indices()
        if not len(valid):
            raise ValueError("cannot sample from an empty replay buffer")
        index = valid[rng.integers(0, len(valid), batch_size)]
        reward, steps, terminated = self.n_step_returns(index, n_step, gamma)
        next_index = (index + steps) % self.capacity
        batch = {
            "obs": {key: array[index] for key, array in self.obs.items()},
            "next_obs": {key: array[next_index] for key, array in self.obs.items()},
            "action": self.learned_action[index],
            "executed_action": self.action[index],
            "reward": reward,
            "cost": self.cost[index],
            "discount": np.where(terminated, 0.0, gamma**steps).astype(np.float32),
            "terminated": terminated,
            "intervened": self.intervened[index],
            "index": index,
        }
        batch["previous_action"], batch["has_previous"] = self.previous_actions(index, self.learned_action)
        if sequence_length > 1:
            batch["action_sequence"], batch["sequence_mask"] = self.action_sequences(
                index, sequence_length, self.learned_action
            )
        return batch

    def n_step_returns(self, index: np.ndarray, n_step: int, gamma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(discounted reward sum, steps taken m, terminated within them) from each index."""
        if n_step < 1:
            raise ValueError(f"n_step={n_step}; expected >= 1")
        ret = np.zeros(len(index), np.float64)
        steps = np.zeros(len(index), np.int64)
        terminated = np.zeros(len(index), bool)
        for k, slot, take in self._steps_ahead(index, n_step):
            ret += np.where(take, gamma**k * self.reward[slot], 0.0)
            steps += take
            terminated |= take & self.terminated[slot]
        return ret.astype(np.float32), steps, terminated

    def previous_actions(self, index: np.ndarray, actions: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The action taken one step before each index (from ``actions``, default the executed
        ones): in the same stored episode, or a segment's opening action at its first step; zeros
        at an episode's first step. Also whether there was one."""
        actions = self.action if actions is None else actions
        slot = (index - 1) % self.capacity
        in_episode = self.has_transition[slot] & (self.episode[slot] == self.episode[index])
        opening = ~in_episode & self.has_opening_action[index]
        previous = np.where(
            in_episode[:, None], actions[slot], np.where(opening[:, None], self.opening_action[index], 0.0)
        )
        return previous.astype(np.float32), in_episode | opening

    def action_sequences(
        self, index: np.ndarray, length: int, actions: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``length`` actions from each index (from ``actions``, default the executed ones;
        zeros past the episode end) and their mask."""
        if length < 1:
            raise ValueError(f"sequence length={length}; expected >= 1")
        source = self.action if actions is None else actions
        actions = np.zeros((len(index), length, self.action_dim), np.float32)
        mask = np.zeros((len(index), length), bool)
        for k, slot, take in self._steps_ahead(index, length):
            actions[take, k] = source[slot[take]]
            mask[:, k] = take
        return actions, mask

    def _steps_ahead(self, index: np.ndarray, length: int):
        """For k < length: (k, slot of step k, whether step k is still a transition of the episode
        that starts at ``index``, i.e. no episode end before it)."""
        alive = np.ones(len(index), bool)
        for k in range(length):
            slot = (index + k) % self.capacity
            take = alive & self.has_transition[slot] & (self.episode[slot] == self.episode[index])
            yield k, slot, take
            alive = take & ~self.terminated[slot] & ~self.truncated[slot]

    # ----------------------------------------------------------------- persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write the buffer to a directory (replaced atomically if it exists)."""
        with replacing(path) as tmp:
            for key, array in self.obs.items():
                np.save(tmp / f"obs.{key}.npy", array)
            for name in _STEP_ARRAYS + _SEGMENT_ARRAYS:
                np.save(tmp / f"{name}.npy", getattr(self, name))
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
    def load(cls, path: str | os.PathLike) -> ReplayBuffer:
        """A buffer written by :meth:`save`."""
        path = latest(path)
        meta = json.loads((path / "meta.json").read_text())
        if meta.get("format") != BUFFER_FORMAT:
            raise ValueError(f"{path}: not a robot_rl replay buffer")
        space = {key: (tuple(shape), np.dtype(dtype)) for key, (shape, dtype) in meta["observation_space"].items()}
        buffer = cls(meta["capacity"], space, meta["action_dim"])
        for key in buffer.obs:
            buffer.obs[key] = np.load(path / f"obs.{key}.npy")
        for name in _STEP_ARRAYS:
            setattr(buffer, name, np.load(path / f"{name}.npy"))
        buffer.learned_action = buffer.action.copy()  # a buffer saved before relabelling learned the executed actions
        for name in _SEGMENT_ARRAYS:
            if (path / f"{name}.npy").exists():
                setattr(buffer, name, np.load(path / f"{name}.npy"))
        buffer.cursor, buffer.filled = meta["cursor"], meta["filled"]
        buffer.episodes_started = meta["episodes_started"]
        buffer._episode_open, buffer._episode_length = meta["episode_open"], meta["episode_length"]
        return buffer


class MixedSampler:
    """Draws a fixed expected fraction of every batch from the demo buffer (RLPD / HIL-SERL).

    With ``demo_fraction`` f and batch size B, a batch takes floor(f B) demo rows plus one more
    with probability frac(f B), so the long-run fraction is exactly f. If one buffer is empty
    the whole batch comes from the other. ``is_demo`` marks the demo rows.
    """

    def __init__(self, online: ReplayBuffer, demo: ReplayBuffer, demo_fraction: float = 0.5, seed: int | None = None):
        if not 0.0 <= demo_fraction <= 1.0:
            raise ValueError(f"demo_fraction={demo_fraction}; expected a number in [0, 1]")
        self.online, self.demo, self.demo_fraction = online, demo, demo_fraction
        self.rng = np.random.default_rng(seed)

    def sample(self, batch_size: int, **kwargs: Any) -> dict[str, Any]:
        n_online, n_demo = len(self.online), len(self.demo)
        if not n_online and not n_demo:
            raise ValueError("both replay buffers are empty")
        exact = self.demo_fraction * batch_size
        take_demo = int(exact) + int(self.rng.random() < exact - int(exact))
        if not n_demo:
            take_demo = 0
        elif not n_online:
            take_demo = batch_size
        parts = []
        if batch_size - take_demo:
            parts.append(self.online.sample(batch_size - take_demo, self.rng, **kwargs))
        if take_demo:
            parts.append(self.demo.sample(take_demo, self.rng, **kwargs))
        batch = _concatenate(parts)
        batch["is_demo"] = np.arange(batch_size) >= batch_size - take_demo
        return batch


def _concatenate(parts: list[dict[str, Any]]) -> dict[str, Any]:
    if len(parts) == 1:
        return parts[0]
    out: dict[str, Any] = {}
    for key, value in parts[0].items():
        if isinstance(value, dict):
            out[key] = {k: np.concatenate([p[key][k] for p in parts]) for k in value}
        else:
            out[key] = np.concatenate([p[key] for p in parts])
    return out
