"""pip's package sources as uv's environment, one ``NAME=value`` a line: ``scripts/setup.sh`` installs with uv from
exactly where pip would (its find-links, indexes, constraints and certificate, from ``pip config list``).

pip takes the best version across all its indexes, so uv is told to do the same (``unsafe-best-match``; uv's own
default takes the first index that has a package). Run with the venv's Python: ``python scripts/uv_env.py``.
"""

from __future__ import annotations

import ast
import subprocess
import sys

#: pip's precedence, lowest first: its configuration files, then its ``PIP_*`` environment variables (``:env:``)
PRECEDENCE = ("global", "user", "site", "env", ":env:")
#: pip setting -> (uv variable, the separator uv reads between values)
UV_VARIABLES = {
    "index-url": ("UV_INDEX_URL", " "),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
    "find-links": ("UV_FIND_LINKS", ","),
    "constraint": ("UV_CONSTRAINT", " "),
    "cert": ("SSL_CERT_FILE", " "),
}


def pip_settings() -> dict[str, str]:
    """The value pip uses for each setting of ``UV_VARIABLES``: its highest-precedence source's."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=True
    ).stdout
    ranked: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        source, _, setting = key.rpartition(".")
        if setting in UV_VARIABLES and source in PRECEDENCE:
            rank = PRECEDENCE.index(source)
            if setting not in ranked or rank >= ranked[setting][0]:
                ranked[setting] = (rank, ast.literal_eval(value))  # pip prints repr()
    return {setting: value for setting, (_, value) in ranked.items()}


def main() -> None:
    print("UV_INDEX_STRATEGY=unsafe-best-match")
    for setting, value in pip_settings().items():
        name, separator = UV_VARIABLES[setting]
        print(f"{name}={separator.join(value.split())}")


if __name__ == "__main__":
    main()
