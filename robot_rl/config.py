"""Validation of user-given configuration values.

Every check raises :class:`ConfigError`, whose one-line message names the config key,
the value that was given and what was expected, so a typo on the command line is
answered with a sentence the user can act on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


class ConfigError(ValueError):
    """A configuration value is not allowed. ``key`` is the dotted config key."""

    def __init__(self, key: str, value: Any, expected: str):
        self.key, self.value, self.expected = key, value, expected
        super().__init__(f"{key}={value!r} is not allowed: expected {expected}")

    def under(self, prefix: str) -> "ConfigError":
        """The same error with ``prefix.`` put in front of the key (e.g. ``task.``)."""
        return ConfigError(f"{prefix}.{self.key}", self.value, self.expected)


def choice(key: str, value: Any, allowed: Iterable[Any]) -> Any:
    allowed = list(allowed)
    if value not in allowed:
        raise ConfigError(key, value, "one of " + ", ".join(map(str, allowed)))
    return value


def positive(key: str, value: Any, integer: bool = False) -> float:
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not value > 0:
        raise ConfigError(key, value, "a positive " + ("integer" if integer else "number"))
    return value


def non_negative(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ConfigError(key, value, "a number >= 0")
    return value


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
