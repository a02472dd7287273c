"""The composed config: ``configs/config.yaml`` with its parts (``configs/settings/``: train, data, safety, ros, tools),
its groups (task, agent, exploration, randomization, graph, fleet, robot) and the command line's Hydra overrides,
checked before anything runs. Every verb of ``robot-rl`` and every node composes its config here.

The one module that knows the config library (Hydra and OmegaConf): it composes a config, reads and writes a run
folder's ``config.yaml`` with its interpolations (``${train.run_dir}``) as written, and sets keys of one. Everything
else reads a config as a mapping (:data:`~robot_rl.core.config.Config`) and turns its sections into typed settings."""

from __future__ import annotations

import difflib
import functools
import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from hydra import compose, initialize_config_module
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from robot_rl.core.config import Config, ConfigError, finite_everywhere, integer, plain

SETTINGS = "settings"  # configs/settings/: the root config's parts (train, data, safety, ros, tools), always all in


def config_groups() -> list[str]:
    """The Hydra groups: the folders of ``configs/`` that hold options (``task``, ``agent``, ``randomization``, ...);
    not ``settings/``, whose files are parts of the root config, each always in."""
    folders = [p.name for p in resources.files("robot_rl.configs").iterdir() if p.is_dir() and p.name != SETTINGS]
    return sorted(name for name in folders if group_options(name))


def root_config_files() -> list[str]:
    """The root config's files under ``configs/``: ``config.yaml`` and its parts in ``settings/``."""
    parts = resources.files("robot_rl.configs") / SETTINGS
    return ["config.yaml", *sorted(f"{SETTINGS}/{p.name}" for p in parts.iterdir() if p.name.endswith(".yaml"))]


def group_options(group: str) -> list[str]:
    """The configs of a Hydra group (files starting with ``_`` are shared parts, not options)."""
    folder = resources.files("robot_rl.configs") / group
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml") and not p.name.startswith("_"))


@functools.cache
def key_comments() -> dict[str, str]:
    """Dotted key -> the comment written on its line of the root config's files (``train.env_steps`` -> ``online env
    steps (demos not counted)``), with the comment-only lines below it that continue it; keys without a comment are
    absent."""
    comments: dict[str, str] = {}
    for file in root_config_files():
        comments.update(file_comments(file))
    return comments


def file_comments(file: str) -> dict[str, str]:
    """:func:`key_comments` of one packaged file ``configs/<file>``."""
    comments: dict[str, str] = {}
    path: list[tuple[int, str]] = []  # (indent, key) of the line and its parents
    commented = None  # the key whose comment the next comment-only line (indented deeper) continues
    for line in (resources.files("robot_rl.configs") / file).read_text().splitlines():
        match = re.match(r"^( *)([A-Za-z_][\w-]*):(.*)$", line)
        more = re.match(r"^( +)# ?(.*)$", line)
        if more and commented and len(more.group(1)) > path[-1][0]:
            comments[commented] += " " + more.group(2).strip()
            continue
        commented = None
        if not match:
            continue
        indent = len(match.group(1))
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, match.group(2)))
        _, hash_, comment = match.group(3).partition(" #")
        if hash_:
            commented = ".".join(key for _, key in path)
            comments[commented] = comment.strip()
    return comments


def task_names() -> list[str]:
    return group_options("task")


def nearest_key(key: str, group_overrides: list[str]) -> str | None:
    """The known key most like a mistyped ``key`` (``train.env_step`` -> ``train.env_steps``), in the config the
    group choices ``group_overrides`` compose; None when none is close."""
    with initialize_config_module(config_module="robot_rl.configs", version_base=None):
        cfg = compose(config_name="config", overrides=group_overrides)
    known: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for name, value in node.items():
            dotted = f"{prefix}{name}"
            known.append(dotted)
            if isinstance(value, dict):
                walk(value, dotted + ".")

    walk(OmegaConf.to_container(cfg, resolve=False), "")
    close = difflib.get_close_matches(key.lstrip("+~"), known, n=1, cutoff=0.8)
    return close[0] if close else None


def load_config(overrides: list[str]) -> Config:
    """Compose ``configs/config.yaml`` with command-line overrides; bad input -> ConfigError.

    Checked here for every verb and node: each override names a known key or group option (a group typo lists the
    group's options), no number anywhere is NaN or infinite, and ``seed`` is an integer."""
    groups = config_groups()
    for override in overrides:
        key, assigned, value = override.partition("=")
        group = key.lstrip("+~")
        if group in groups and (assigned or not key.startswith("~")) and value not in group_options(group):
            raise ConfigError(group, value, "one of " + ", ".join(group_options(group)))
    try:
        with initialize_config_module(config_module="robot_rl.configs", version_base=None):
            cfg = compose(config_name="config", overrides=overrides)
        values = OmegaConf.to_container(cfg, resolve=True)
    except (HydraException, OmegaConfBaseException) as error:
        message = str(error).strip().splitlines()[0]
        unknown = re.search(r"Could not override '([^']+)'", message)
        if unknown:
            key = unknown.group(1)
            value = next((o.partition("=")[2] for o in overrides if o.partition("=")[0] == key), None)
            near = nearest_key(key, [o for o in overrides if o.partition("=")[0].lstrip("+~") in groups])
            hint = f"did you mean {near}? " if near else ""
            raise ConfigError(key, value, f"an existing config key ({hint}`robot-rl config` lists them)") from None
        raise ConfigError("overrides", " ".join(overrides), f"valid Hydra overrides ({message})") from None
    finite_everywhere(values)
    integer("seed", values.get("seed"))
    warm_start_without_demos(cfg, overrides)
    return cfg


def given(key: str, overrides: list[str]) -> bool:
    """Whether the command line sets ``key`` (``key=...``, ``+key=...`` or ``++key=...``)."""
    return any(override.partition("=")[0].lstrip("+~") == key for override in overrides)


def warm_start_without_demos(cfg: Config, overrides: list[str]) -> None:
    """WSRL keeps no offline data: a warm start (``init.checkpoint``) collects no scripted demonstrations unless the
    command line asks for them (``train.demo_episodes=N``); a run from scratch keeps ``train.demo_episodes``."""
    train, init = cfg.get("train"), cfg.get("init")
    if train is None or init is None or init.get("checkpoint") is None or given("train.demo_episodes", overrides):
        return
    train["demo_episodes"] = 0


def steps_to_record(cfg: Config) -> int:
    """Steps a run records at most: ``train.env_steps`` online and the demonstrations' (``train.demo_episodes``
    episodes of ``task.episode_steps``), for estimating what it writes."""
    return int(cfg["train"]["env_steps"]) + int(cfg["train"].get("demo_episodes") or 0) * int(
        cfg["task"].get("episode_steps") or 0
    )


# ----------------------------------------------------------------------------- a run folder's config.yaml
def config_yaml(cfg: Config) -> str:
    """``cfg`` as YAML: a composed config's interpolations (``${train.run_dir}/episodes.zarr``) as written, so a run
    folder's ``config.yaml`` follows the folder; a plain mapping as its values."""
    return OmegaConf.to_yaml(cfg if OmegaConf.is_config(cfg) else OmegaConf.create(plain(cfg)))


def save_config(cfg: Config, path: Path) -> None:
    """Write :func:`config_yaml` of ``cfg`` to ``path``."""
    Path(path).write_text(config_yaml(cfg))


def read_config(source: Path | str) -> dict[str, Any]:
    """The values of a ``config.yaml`` (a path) or of its text, as written (interpolations unresolved); a file that
    is not a YAML mapping raises ValueError (OSError when it cannot be read)."""
    text = Path(source).read_text() if isinstance(source, Path) else source
    try:
        values = OmegaConf.to_container(OmegaConf.create(text), resolve=False)
    except (OmegaConfBaseException, yaml.YAMLError) as error:
        values = " ".join(str(error).split())
    if isinstance(values, dict):
        return values
    raise ValueError(values if isinstance(values, str) else "not a YAML mapping")


def unresolved(cfg: Config) -> dict[str, Any]:
    """``cfg``'s values as written: a composed config's interpolations unresolved, a plain mapping as it is."""
    return OmegaConf.to_container(cfg, resolve=False) if OmegaConf.is_config(cfg) else plain(cfg)


def config_with(values: dict[str, Any], changes: dict[str, Any]) -> Config:
    """A config of ``values`` (as written, interpolations live) with each dotted key of ``changes`` set (added where
    it is missing)."""
    cfg = OmegaConf.create(values)
    for key, value in changes.items():
        OmegaConf.update(cfg, key, value, force_add=True)
    return cfg
