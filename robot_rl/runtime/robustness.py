"""Domain randomization in the training loop and robustness sweeps for ``robot-rl eval``.

``randomization`` is the Hydra group of the same name: ``{name, seed, entries: {entry: {...}}}``
(see :mod:`robot_rl.sim.randomization`). A sweep evaluates a policy on the nominal env and then along
each entry of a set, one at a time, at ``points`` values across the entry's range with
everything else nominal, and writes a table (CSV, JSON) and a plot of success per perturbation.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym

from robot_rl.core.config import ConfigError, plain
from robot_rl.runtime.envs import make_env
from robot_rl.runtime.evaluate import evaluate

RANDOMIZATION_KEYS = ("name", "seed", "entries")


def randomization_entries(randomization: Mapping[str, Any] | None) -> list:
    """The entries of a randomization config (empty without one); bad keys raise ConfigError."""
    if not randomization:
        return []
    randomization = plain(randomization)
    for key in randomization:
        if key not in RANDOMIZATION_KEYS:
            raise ConfigError(f"randomization.{key}", randomization[key], "one of " + ", ".join(RANDOMIZATION_KEYS))
    from robot_rl.sim.randomization import entries_from_config

    return entries_from_config(randomization)


def randomized(env: gym.Env, randomization: Mapping[str, Any] | None, seed: int = 0) -> gym.Env:
    """``env`` inside a DomainRandomization wrapper when the config has entries, drawing from ``seed`` (the env's:
    every env of ``train.num_envs``, every fleet actor and every run seed draws its own samples and noise; the set's
    ``seed`` key only picks the set's stream under it)."""
    entries = randomization_entries(randomization)
    if not entries:
        return env
    from robot_rl.sim.randomization import DomainRandomization

    return DomainRandomization(env, entries, seed=seed, stream=int(randomization.get("seed") or 0))


def robustness_sweep(
    agent, task: Mapping[str, Any], randomization: Mapping[str, Any], points: int, episodes: int, seed: int
) -> list[dict[str, Any]]:
    """Rows of {entry, attribute, mode, value, success_rate, mean_length, ...}; the first is nominal."""
    from robot_rl.sim.randomization import DomainRandomization

    env = make_env(task)
    rows = [
        {"entry": "nominal", "attribute": None, "mode": None, "value": None, **evaluate(agent, env, episodes, seed)}
    ]
    env.close()
    for entry in randomization_entries(randomization):
        env = DomainRandomization(make_env(task), [entry], seed=seed)
        for value in entry.grid(points):
            env.fix(entry.name, float(value))
            result = evaluate(agent, env, episodes, seed)
            rows.append(
                {"entry": entry.name, "attribute": entry.attribute, "mode": entry.mode, "value": float(value), **result}
            )
        env.close()
    return rows


def write_sweep(folder: Path, rows: list[dict[str, Any]], title: str) -> dict[str, str]:
    """robustness.csv, robustness.json and robustness.png in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    columns = ["entry", "attribute", "mode", "value", "success_rate", "mean_length", "mean_return", "continuity_cost"]
    with open(folder / "robustness.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    (folder / "robustness.json").write_text(json.dumps(rows, indent=2))
    plot_sweep(folder / "robustness.png", rows, title)
    return {kind: str(folder / f"robustness.{kind}") for kind in ("csv", "json", "png")}


def plot_sweep(path: Path, rows: list[dict[str, Any]], title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(row["entry"] for row in rows if row["entry"] != "nominal"))
    nominal = rows[0]["success_rate"]
    figure, axes = plt.subplots(1, max(len(names), 1), figsize=(3.2 * max(len(names), 1), 3), dpi=110, squeeze=False)
    for axis, name in zip(axes[0], names):
        sweep = [row for row in rows if row["entry"] == name]
        axis.plot([row["value"] for row in sweep], [row["success_rate"] for row in sweep], "o-")
        axis.axhline(nominal, color="grey", linestyle=":", linewidth=1, label="nominal")
        axis.set_title(name, fontsize=9)
        axis.set_xlabel(f"{sweep[0]['attribute']} ({sweep[0]['mode']})", fontsize=8)
        axis.set_ylim(-0.02, 1.02)
    axes[0][0].set_ylabel("success rate")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
