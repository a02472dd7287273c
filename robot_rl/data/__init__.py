"""Episode storage and replay for robot_rl.

The names below load on first use: the replay buffer imports torch (seconds), which a refused command line, the
launcher and a node that only records or filters commands never need.
"""

from importlib import import_module
from typing import Any

#: public name -> the module of this package that defines it
_EXPORTS = {
    "EpisodeRecorder": "recorder",
    "EpisodeStore": "episode_store",
    "EpisodeStoreError": "episode_store",
    "EpisodeWriter": "episode_store",
    "MixedSampler": "samplers",
    "ReplayBuffer": "replay_buffer",
    "StreamRecorders": "recorder",
    "load_episode_store": "replay_buffer",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value
