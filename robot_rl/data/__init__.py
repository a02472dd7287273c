"""Episode storage and replay for robot_rl."""

from .episode_store import EpisodeStore, EpisodeStoreError, EpisodeWriter
from .recorder import EpisodeRecorder, StreamRecorders
from .replay_buffer import MixedSampler, ReplayBuffer, load_episode_store

__all__ = [
    "EpisodeRecorder",
    "EpisodeStore",
    "EpisodeStoreError",
    "EpisodeWriter",
    "MixedSampler",
    "ReplayBuffer",
    "StreamRecorders",
    "load_episode_store",
]
