"""Validation of user-given configuration values.

Every check raises :class:`ConfigError`, whose one-line message names the config key,
the value that was given and what was expected, so a typo on the command line is
answered with a sentence the user can act on.
"""

from __future__ import annotations

import copy
import errno
import functools
import inspect
import math
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING as MISSING_DEFAULT
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml

Settings = TypeVar("Settings")
# a run's configuration, as the command line or a node hands it over: sections of values, read by key (the composed
# YAML: an OmegaConf container at the edge, plain dicts and lists in a Ray actor or an env worker)
Config = Mapping[str, Any]


def plain(value: Any) -> Any:
    """A configuration value as plain Python: mappings as dicts and lists as lists, recursively (a config library's
    containers too; OmegaConf's resolve their interpolations as they are read), tuples kept, strings as they are."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, tuple):
        return tuple(plain(item) for item in value)
    if isinstance(value, Sequence):
        return [plain(item) for item in value]
    return value


def select(cfg: Config, dotted: str, default: Any = None) -> Any:
    """The value at ``dotted`` (``data.min_free_mb``) of ``cfg``, or ``default`` when a part of the path is missing
    (or null)."""
    value: Any = cfg
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or value.get(part) is None:
            return default
        value = value[part]
    return value


class ConfigError(ValueError):
    """A configuration value is not allowed. ``key`` is the dotted config key."""

    def __init__(self, key: str, value: Any, expected: str):
        self.key, self.value, self.expected = key, value, expected
        super().__init__(f"{key}={value!r} is not allowed: expected {expected}")

    def under(self, prefix: str) -> ConfigError:
        """The same error with ``prefix.`` put in front of the key (e.g. ``task.``)."""
        return ConfigError(f"{prefix}.{self.key}", self.value, self.expected)


def is_integer(value: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """A finite int or float that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def choice(key: str, value: Any, allowed: Iterable[Any]) -> Any:
    allowed = list(allowed)
    if value not in allowed:
        raise ConfigError(key, value, "one of " + ", ".join(map(str, allowed)))
    return value


def positive(key: str, value: Any, integer: bool = False) -> float:
    if not (is_integer(value) if integer else is_number(value)) or not value > 0:
        raise ConfigError(key, value, "a positive " + ("integer" if integer else "number"))
    return value


def non_negative(key: str, value: Any) -> float:
    if not is_number(value) or not value >= 0:
        raise ConfigError(key, value, "a number >= 0")
    return value


def integer(key: str, value: Any) -> int:
    if not is_integer(value):
        raise ConfigError(key, value, "an integer")
    return value


def finite_everywhere(values: Any, key: str = "") -> None:
    """Raise for the first NaN or infinite number in a nested config container (dicts and lists).

    No setting of the stack takes NaN or inf: a rate, gain, limit or learning rate that is not
    finite only turns into NaN losses or a silent stop later.
    """
    if isinstance(values, float) and not math.isfinite(values):
        raise ConfigError(key, values, "a finite number")
    if isinstance(values, Mapping):
        children = [(f"{key}.{name}" if key else str(name), value) for name, value in values.items()]
    elif isinstance(values, list):
        children = [(f"{key}[{index}]", value) for index, value in enumerate(values)]
    else:
        return
    for child_key, value in children:
        finite_everywhere(value, child_key)


def output_path(key: str, value: Any, folder: bool) -> Path:
    """A path the stack writes: a non-empty path that is a ``folder`` (or a file) if it exists, whose nearest
    existing ancestor is a writable folder. Nothing is created."""
    kind = "folder" if folder else "file"
    if value is None or not str(value).strip():
        raise ConfigError(key, value, f"the path of a {kind} to write")
    path = Path(str(value)).expanduser()
    if path.exists() and path.is_dir() != folder:
        raise ConfigError(key, str(path), f"the path of a {kind} ({path} is {'not ' if folder else ''}a folder)")
    ancestor = path if path.exists() else next(p for p in path.absolute().parents if p.exists())
    if not ancestor.is_dir():
        raise ConfigError(key, str(path), f"a path under a folder ({ancestor} is a file)")
    if not writable(ancestor):
        raise ConfigError(key, str(path), f"a path where this user can write ({ancestor} is read-only)")
    return path


MB = 1_000_000  # bytes in a megabyte, as data.min_free_mb counts them
FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)  # no space left on the device, or the user's disk quota spent


class DiskSpaceError(ConfigError):
    """The disk of an output (config ``key``, ``path``) has too little space: at the start, below
    ``data.min_free_mb``, or during a run (ENOSPC). One line, exit code 2, like any bad input."""

    def __init__(self, key: str, path: Any, problem: str):
        self.key, self.value, self.expected = key, str(path), problem
        ValueError.__init__(self, f"{key}={str(path)!r}: {problem}")


def free_bytes(path: Any) -> int:
    """Bytes this user may still write on the disk of ``path`` (of its nearest existing ancestor when it is not
    there yet): ``shutil.disk_usage(...).free``."""
    folder = Path(str(path)).expanduser().absolute()
    while not folder.exists():
        folder = folder.parent
    return shutil.disk_usage(folder).free


def check_disk_space(
    key: str, path: Any, need_bytes: float, min_free_mb: Any, warn: Callable[[str], None] | None = None
) -> int:
    """Before a run writes ``need_bytes`` (an estimate) under ``path`` (config ``key``): DiskSpaceError when its disk
    has less than ``min_free_mb`` MB free (``data.min_free_mb``), a warning line with the numbers (to ``warn``;
    default stderr) when it has less than the estimate. Returns the free bytes."""
    floor = non_negative("data.min_free_mb", min_free_mb)
    free = free_bytes(path)
    if free < floor * MB:
        raise DiskSpaceError(
            key,
            path,
            f"{free / MB:.1f} MB free on its disk, below data.min_free_mb={floor:g}; free space there, "
            f"or write elsewhere (this run would write about {need_bytes / MB:.1f} MB)",
        )
    if free < need_bytes:
        line = (
            f"{key}={str(path)!r}: this run may write about {need_bytes / MB:.1f} MB and its disk has "
            f"{free / MB:.1f} MB free; it stops with every finished episode kept when the disk is full"
        )
        if warn is None:
            print(f"robot-rl: warning: {line}", file=sys.stderr)
        else:
            warn(line)
    return free


def disk_full(error: BaseException | None) -> bool:
    """Whether ``error``, or an error it was raised from or during, is an OSError for a full disk (ENOSPC, EDQUOT)."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError) and error.errno in FULL_DISK_ERRNOS:
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def full_disk_error(key: str, path: Any, then: str) -> DiskSpaceError:
    """The one-line error of a run that stopped on a full disk: the output (config ``key``, ``path``), the free space
    now, and ``then``, what was kept and how to go on."""
    return DiskSpaceError(
        key,
        path,
        f"no space left on device ({free_bytes(path) / MB:.1f} MB free); {then}",
    )


def stops_on_full_disk(key: str, then: str) -> Callable[[Callable], Callable]:
    """Decorator of ``run(cfg, ...)`` whose output is config ``key`` (e.g. ``train.run_dir``): a full disk
    (:func:`disk_full`) out of it becomes :func:`full_disk_error` (one line, exit code 2, no traceback)."""

    def decorate(run: Callable) -> Callable:
        @functools.wraps(run)
        def guarded(cfg, *args, **kwargs):
            try:
                return run(cfg, *args, **kwargs)
            except Exception as error:
                if not disk_full(error):
                    raise
                path = functools.reduce(lambda node, name: node[name], key.split("."), cfg)
                raise full_disk_error(key, path, then) from None

        return guarded

    return decorate


def new_file_path(key: str, value: Any, suffix: str) -> Path:
    """A file the stack is about to write: a ``suffix`` path (e.g. ``.mp4``) that is not there yet, in an existing
    folder this user can write to. Nothing is created; an existing file is refused, never overwritten."""
    expected = f"a new {suffix} file in an existing folder"
    if value is not None and Path(str(value)).expanduser().is_file():
        raise ConfigError(key, str(value), f"{expected} ({value} exists; robot-rl never overwrites a file)")
    path = output_path(key, value, folder=False)
    if path.suffix.lower() != suffix:
        raise ConfigError(key, str(path), f"{expected} (not a {path.suffix or 'suffix-less'} file)")
    if not path.absolute().parent.is_dir():
        raise ConfigError(key, str(path), f"{expected} ({path.absolute().parent} does not exist)")
    return path


def writable(folder: Path) -> bool:
    """Whether a new entry can be made in ``folder``: tried with an empty temporary folder, removed at once
    (permission bits do not tell for root, read-only mounts or /proc)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".robot_rl_write_test_", dir=folder))
    except OSError:
        return False
    return True


def subset(key: str, values: Sequence[str], allowed: Iterable[str]) -> tuple[str, ...]:
    allowed = list(allowed)
    if isinstance(values, str):
        values = [values]
    for value in values:
        if value not in allowed:
            raise ConfigError(key, value, "names from " + ", ".join(allowed))
    if len(set(values)) != len(values):
        raise ConfigError(key, list(values), "each name at most once")
    return tuple(values)


def image_size(key: str, value: Any) -> tuple[int, int]:
    """An image size given as ``N`` (square) or ``[height, width]``, both positive ints."""
    size = [value, value] if isinstance(value, int) and not isinstance(value, bool) else value
    try:
        height, width = size
    except (TypeError, ValueError):
        raise ConfigError(key, value, "a positive integer or [height, width]") from None
    for side in (height, width):
        if isinstance(side, bool) or not isinstance(side, int) or side <= 0:
            raise ConfigError(key, value, "a positive integer or [height, width] of positive integers")
    return int(height), int(width)


def require_all(prefix: str, settings: Any, checks: dict[str, tuple[bool, str]]) -> None:
    """Raise for the first ``{field: (ok, expected)}`` check that failed, as ``<prefix>.<field>``."""
    for key, (ok, expected) in checks.items():
        if not ok:
            raise ConfigError(f"{prefix}.{key}", getattr(settings, key), expected)


def settings_of(prefix: str, cls: type[Settings], values: Mapping[str, Any] | None) -> Settings:
    """``cls(**values)`` for a config section (as plain values: :func:`plain`): a key that is no field of the dataclass
    is named as ``<prefix>.<key>``."""
    values = plain(values or {})
    known = {f.name for f in fields(cls)}
    for key in values:
        if key not in known:
            raise ConfigError(f"{prefix}.{key}", values[key], "one of " + ", ".join(sorted(known)))
    return cls(**values)


# ----------------------------------------------------------------------------- defaults: the packaged YAML
class YamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader reading scalars as Hydra and OmegaConf read the same files: YAML 1.2's floats (``1e-4``
    is a float, not a string) and no timestamps (a date stays a string)."""


YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?[0-9]+(?:_[0-9]+)*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
        |\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.VERBOSE,
    ),
    list("-+0123456789."),
)
YamlLoader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in YamlLoader.yaml_implicit_resolvers.items()
}


@functools.cache
def packaged_yaml(file: str) -> dict[str, Any]:
    """The packaged config file ``configs/<file>`` (installed as ``robot_rl.configs``) as plain containers, its
    interpolations (``${...}``) left as written."""
    from importlib.resources import files

    return yaml.load((files("robot_rl.configs") / file).read_text(), YamlLoader)  # a safe loader: data only


def yaml_defaults(file: str, section: str | None = None, frozen: bool = False) -> Callable[[type], type]:
    """Class decorator: a settings dataclass whose field defaults are the values of ``section`` (dotted; None: the
    whole file) of the packaged ``configs/<file>``, so the YAML a user reads and edits is the one place a default is
    written, and a settings object built in Python (a test, a notebook) behaves like ``robot-rl`` without overrides.

    Fields the YAML leaves to the composed config keep the default written in the class: an interpolation
    (``${task.name}`` in a run folder) and a nested section (its own settings class). An inherited field gets this
    file's value too (``agent/cqn_as.yaml`` over ``agent/cqn.yaml``). A field with a default from neither is an
    error when the class is defined."""

    def make(cls: type) -> type:
        values: Any = packaged_yaml(file)
        for key in section.split(".") if section else []:
            values = values[key]
        own = inspect.get_annotations(cls)
        inherited = {f.name: f for f in fields(cls)} if is_dataclass(cls) else {}
        for name in [*inherited, *(name for name in own if name not in inherited)]:
            value = values.get(name)
            if name not in values or isinstance(value, dict) or (isinstance(value, str) and "${" in value):
                continue
            declared = own[name] if name in own else inherited[name].type
            if name not in own:  # redeclared in this class, in its place among the inherited fields
                cls.__annotations__[name] = declared
            if isinstance(value, list) and "tuple" in str(declared):
                value = tuple(value)  # an immutable default, as the class declares it
            setattr(
                cls,
                name,
                field(default_factory=functools.partial(copy.deepcopy, value)) if isinstance(value, list) else value,
            )
        made = dataclass(frozen=frozen)(cls)
        missing = [f.name for f in fields(made) if f.default is f.default_factory is MISSING_DEFAULT]
        if missing:
            raise TypeError(f"{cls.__name__}: no default in configs/{file} ({section}) for {', '.join(missing)}")
        return made

    return make
