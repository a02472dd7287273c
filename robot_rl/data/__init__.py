"""Episode storage and replay for robot_rl."""

from .episode_store import EpisodeStore, EpisodeWriter

__all__ = ["EpisodeStore", "EpisodeWriter"]
