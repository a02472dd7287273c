"""``scripts/uv_env.py``: the set-up's uv installs from exactly the sources pip would use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def uv_environment(tmp_path: Path, **pip_variables: str) -> dict[str, str]:
    """What ``scripts/uv_env.py`` prints, as a dict, with a pip configuration file of the test's own
    (``PIP_CONFIG_FILE``, pip's "env" file) and the given ``PIP_*`` variables over it."""
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nfind-links = /lab/wheels\n  /lab/more-wheels\n"
        "extra-index-url = file:///lab/simple https://mirror.lab/simple\n"
        "index-url = https://proxy.lab/pypi/simple\nconstraint = /lab/constraints.txt\n"
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=str(config), **pip_variables)
    printed = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "uv_env.py")], env=env, capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split("=", 1) for line in printed.splitlines())


def test_pip_settings_become_uv_variables_with_uvs_separators_and_pips_index_strategy(tmp_path):
    uv = uv_environment(tmp_path)
    assert uv["UV_FIND_LINKS"] == "/lab/wheels,/lab/more-wheels"
    assert uv["UV_EXTRA_INDEX_URL"] == "file:///lab/simple https://mirror.lab/simple"
    assert uv["UV_INDEX_URL"] == "https://proxy.lab/pypi/simple"
    assert uv["UV_CONSTRAINT"] == "/lab/constraints.txt"
    assert uv["UV_INDEX_STRATEGY"] == "unsafe-best-match"  # pip's: the best version over every index


def test_a_pip_environment_variable_wins_over_the_configuration_files_as_in_pip(tmp_path):
    uv = uv_environment(tmp_path, PIP_FIND_LINKS="/override/wheels", PIP_INDEX_URL="https://other/simple")
    assert uv["UV_FIND_LINKS"] == "/override/wheels"
    assert uv["UV_INDEX_URL"] == "https://other/simple"
    assert uv["UV_CONSTRAINT"] == "/lab/constraints.txt"  # not overridden: the file's
