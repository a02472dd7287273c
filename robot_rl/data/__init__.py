"""Episode storage and replay for robot_rl."""

from .episode_store import EpisodeStore, EpisodeStoreError, EpisodeWriter
from .replay_buffer import MixedSampler, ReplayBuffer, load_episode_store

__all__ = ["EpisodeStore", "EpisodeStoreError", "EpisodeWriter", "MixedSampler", "ReplayBuffer", "load_episode_store"]
