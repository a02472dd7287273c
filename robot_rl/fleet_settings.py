"""Where ``robot-rl train`` acts: one actor in this process (``fleet=local``) or sim actors on Ray (``fleet=ray``)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from .config import choice, is_integer, is_number, require_all, settings_of, yaml_defaults


@yaml_defaults("fleet/local.yaml")
class FleetSettings:
    kind: str  # local: one actor in the training process | ray: sim actors on Ray (robot_rl/fleet.py)
    actors: int  # ray: sim actors, each with its own seed and randomization draws
    address: str | None  # ray: an existing cluster ("auto", "ray://host:10001"); null: a local Ray instance
    episodes_per_call: int  # ray: whole episodes an actor plays per hand-in of its transitions
    max_restarts: int  # ray: times Ray restarts a crashed actor before the run goes on without it
    cpus_per_actor: float  # ray: CPUs Ray reserves per actor
    object_store_mb: int  # ray: object store of a local Ray instance (MiB)


def fleet_settings(cfg: DictConfig) -> FleetSettings:
    settings = settings_of("fleet", FleetSettings, OmegaConf.to_container(cfg.get("fleet") or {}, resolve=True))
    choice("fleet.kind", settings.kind, ("local", "ray"))
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
        },
    )
    return settings
