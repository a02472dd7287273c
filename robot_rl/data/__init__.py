"""Episode storage and replay for robot_rl."""

from .episode_store import EpisodeStore, EpisodeStoreError, EpisodeWriter
from .recorder import EpisodeRecorder
from .replay_buffer import MixedSampler, ReplayBuffer, load_episode_store

__all__ = [
    "EpisodeRecorder",
    "EpisodeStore",
    "EpisodeStoreError",
    "EpisodeWriter",
    "MixedSampler",
    "ReplayBuffer",
    "load_episode_store",
]
