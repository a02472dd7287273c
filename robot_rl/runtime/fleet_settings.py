"""Where the actors act: one actor in this process (``fleet=local``) or sim actors on Ray (``fleet=ray``) for
``robot-rl train``, and one robot or several (``fleet.robots``, each in its own ROS 2 namespace) for
``robot-rl launch``; and how a fleet shares out a run (seeds, step budgets, demonstrations, episode stores)."""

from __future__ import annotations

import re
from pathlib import Path

from robot_rl.core.config import Config, choice, is_integer, is_number, require_all, settings_of, yaml_defaults


@yaml_defaults("fleet/local.yaml")
class FleetSettings:
    kind: str  # local: one actor in the training process | ray: sim actors on Ray (robot_rl/runtime/fleet.py)
    actors: int  # ray: sim actors, each with its own seed and randomization draws
    address: str | None  # ray: an existing cluster ("auto", "ray://host:10001"); null: a local Ray instance
    episodes_per_call: int  # ray: whole episodes an actor plays per hand-in of its transitions
    pace: str  # ray: learner (actors wait for the updates their steps made due) | actors (they play on; the learner
    #   makes as many of the updates due as it has time for)
    max_restarts: int  # ray: times Ray restarts a crashed actor before the run goes on without it
    cpus_per_actor: float  # ray: CPUs Ray reserves per actor
    object_store_mb: int  # ray: object store of a local Ray instance (MiB)
    robots: list[str] | None  # launch: one namespaced actor + safety node + drivers per robot; null: one robot


def fleet_settings(cfg: Config) -> FleetSettings:
    settings = settings_of("fleet", FleetSettings, cfg.get("fleet") or {})
    choice("fleet.kind", settings.kind, ("local", "ray"))
    choice("fleet.pace", settings.pace, PACES)
    require_all(
        "fleet",
        settings,
        {
            "actors": (is_integer(settings.actors) and settings.actors >= 1, "an integer >= 1"),
            "address": (settings.address is None or isinstance(settings.address, str), "null or a Ray address"),
            "episodes_per_call": (
                is_integer(settings.episodes_per_call) and settings.episodes_per_call >= 1,
                "an integer >= 1",
            ),
            "max_restarts": (is_integer(settings.max_restarts) and settings.max_restarts >= 0, "an integer >= 0"),
            "cpus_per_actor": (is_number(settings.cpus_per_actor) and settings.cpus_per_actor > 0, "a number > 0"),
            "object_store_mb": (
                is_integer(settings.object_store_mb) and settings.object_store_mb >= 80,
                "an integer >= 80 (MiB)",
            ),
            "robots": (
                settings.robots is None
                or (
                    isinstance(settings.robots, list)
                    and len(settings.robots) >= 1
                    and all(isinstance(name, str) and ROBOT_NAME.fullmatch(name) for name in settings.robots)
                    and len(set(settings.robots)) == len(settings.robots)
                ),
                ROBOTS_EXPECTED,
            ),
        },
    )
    return settings


PACES = ("learner", "actors")  # fleet.pace: who sets the pace of a Ray fleet (robot_rl/runtime/fleet.py)
ROBOT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,31}")
ROBOTS_EXPECTED = "null or a list of distinct robot names (a ROS 2 namespace token: a letter, then letters, digits, _)"


def share(total: int, index: int, count: int) -> int:
    """Member ``index``'s share of ``total`` (steps, demonstrations) split over ``count`` members, the first ones
    taking one more when it does not divide."""
    return total // count + (index < total % count)


def member_seed(seed: int, index: int) -> int:
    """The seed of fleet member ``index`` (a Ray actor, a robot): its own env, randomization and exploration draws."""
    return int(seed) + 1000 * (index + 1)


def robot_path(path: str | Path, robot: str | None) -> Path:
    """A run's file or folder of robot ``robot``: ``<parent>/<robot>/<name>`` (``path`` itself without a fleet of
    robots), e.g. each robot's recorder store ``runs/x/left/episodes.zarr``."""
    path = Path(path)
    return path.parent / robot / path.name if robot else path
