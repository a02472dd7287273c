"""One rule for a run folder (``train.run_dir``), the same for ``robot-rl train`` (one process or ``fleet=ray``) and
``robot-rl launch`` of a graph that trains:

* a folder that holds anything is continued only with ``train.resume=true`` (:func:`run_folder`);
* a resumed run's configuration is its own ``config.yaml`` (:func:`resumed_config`): a key given on the command line
  that changes what the run is (task, agent, exploration, randomization, demonstrations, seed, ...) is refused with
  one line naming the key and both values; the budget, evaluation and where the run lives (``RESUME_MAY_CHANGE``)
  may change, and :func:`record_resume` writes them into ``config.yaml`` with the resume's date;
* the counts go on from the run's (the learner's checkpoint; the graph's actor counts the run's recorded episodes,
  :func:`recorded_counts`).
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from robot_rl.core.composed_config import config_with, config_yaml, load_config, read_config, unresolved
from robot_rl.core.config import Config, ConfigError, output_path
from robot_rl.core.folders import latest, write_text_atomically

CONFIG_FILE = "config.yaml"
#: keys a resumed run may change: its step budget, its evaluations, checkpoints, threads and where it lives (a key, or
#: a section: every key under it). Every other key of ``RUN_SECTIONS`` is what the run is.
RESUME_MAY_CHANGE = (
    "train.run_dir",
    "train.resume",
    "train.env_steps",
    "train.eval_every",
    "train.eval_episodes",
    "train.final_eval_episodes",
    "train.stop_at_success",
    "train.checkpoint_every",
    "train.torch_threads",
)
#: the top-level keys that define a run (the other sections are about other verbs, the ROS wiring or evaluation)
RUN_SECTIONS = (
    "seed",
    "task",
    "agent",
    "randomization",
    "human",
    "safety",
    "init",
    "robot",
    "fleet",
    "fast_critic",
    "classifier",  # the reward of a cell's session: another threshold or model under a buffer labelled with this one's
    "train",
)
#: sections a group option writes whole (``task=reach``): a resumed run keeps its own, without keys added from another
GROUP_SECTIONS = ("task", "agent", "randomization")
ABSENT = "<absent>"  # a key the run's config.yaml does not have
#: top-level sections renamed since a run may have been made (old name -> new): a resumed run's config.yaml is read
#: under the new name
RENAMED_SECTIONS = {"fast_fit": "fast_critic"}
#: keys that say where this launch finds things, not what the run is: a resumed run always takes the command line's
#: (``ros.task_spec``: the launch's hand-over file of its last start is gone; the checkpoint checks the shapes)
LAUNCH_KEYS = ("ros.task_spec",)


def run_folder(run_dir: Any, resume: Any) -> Path:
    """The run folder ``train.run_dir``, checked for ``train.resume``: without it a new (or empty) folder, with it a
    robot_rl run folder (``config.yaml`` and a checkpoint). Nothing is created."""
    path = output_path("train.run_dir", run_dir, folder=True)
    if resume is not True and resume is not False:
        raise ConfigError("train.resume", resume, "true or false")
    if not resume and path.exists() and any(path.iterdir()):
        is_run = (path / CONFIG_FILE).is_file()
        raise ConfigError(
            "train.run_dir",
            str(path),
            "a new folder (or train.resume=true to continue that run)"
            if is_run
            else "a new folder; it holds files that are no robot_rl run (nothing there is touched): choose another",
        )
    if resume and not ((path / CONFIG_FILE).is_file() and (latest(path / "checkpoint") / "counters.json").is_file()):
        raise ConfigError(
            "train.resume", True, f"a robot_rl run folder (config.yaml and a checkpoint); {path} is not one"
        )
    return path


def run_config(cfg: Config, given: list[str] | tuple[str, ...] = ()) -> Config:
    """The configuration a training run runs with: ``cfg``, or with ``train.resume=true`` on a run folder the run's own
    ``config.yaml`` with the budget and evaluation keys ``cfg`` changes (:func:`resumed_config`;
    ``given``: the command line's keys). Bad input raises ConfigError."""
    if cfg["train"].get("resume") is not True:
        return cfg
    run_folder(cfg["train"]["run_dir"], True)
    return resumed_config(cfg, given)


def leaves(values: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config container as ``{dotted key: value}``; a list, a scalar or an empty section is one leaf."""
    if isinstance(values, dict) and values:
        flat: dict[str, Any] = {}
        for key, value in values.items():
            flat.update(leaves(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: values}


def config_leaves(cfg: Config) -> dict[str, Any]:
    """``cfg``'s leaves as written (interpolations such as ``${train.run_dir}`` unresolved)."""
    return leaves(unresolved(cfg))


def may_change(key: str) -> bool:
    """Whether a resumed run may take a new value for ``key``."""
    section = key.split(".")[0]
    return section not in RUN_SECTIONS or any(key == k or key.startswith(k + ".") for k in RESUME_MAY_CHANGE)


def under(key: str, prefixes: Iterable[str]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def resumed_config(cfg: Config, given: Iterable[str] = ()) -> Config:
    """The configuration of the run ``cfg`` resumes: its ``<train.run_dir>/config.yaml``, with the keys the command line
    gave that a resumed run may change (``RESUME_MAY_CHANGE``, sections outside ``RUN_SECTIONS``). A key counts as
    given when it is in ``given`` (the command line's keys and groups) or differs from the packaged default; a given
    key of ``RUN_SECTIONS`` whose value differs from the run's raises ConfigError naming the key and both values.
    Keys added to robot_rl since the run was made (outside ``GROUP_SECTIONS``) take ``cfg``'s values."""
    path = Path(str(cfg["train"]["run_dir"])) / CONFIG_FILE
    try:
        saved_cfg = read_config(path)
    except (OSError, ValueError) as error:  # unreadable or not YAML: one line, naming the file
        raise ConfigError("train.resume", True, f"a run folder with a readable {path} ({error})") from None
    for old, renamed in RENAMED_SECTIONS.items():
        if old in saved_cfg and renamed not in saved_cfg:
            saved_cfg[renamed] = saved_cfg.pop(old)
    saved, new = config_leaves(saved_cfg), config_leaves(cfg)
    base = config_leaves(load_config(["graph=" + cfg["graph"]["name"]] if "graph" in cfg else []))
    given = [key.lstrip("+~") for key in given]
    conflicts, taken = [], {}
    for key in sorted(new.keys() | saved.keys()):
        value, before = new.get(key, ABSENT), saved.get(key, ABSENT)
        if value == before or not (under(key, given) or value != base.get(key, ABSENT)):
            continue
        if may_change(key):
            taken[key] = value
        elif before == ABSENT and value == base.get(key, ABSENT):
            continue  # added since the run was made, at its default: taken below
        else:
            conflicts.append((key, value, before))
    if conflicts:  # the group's name first (task.name of task=reach), then the first key
        key, value, before = min(conflicts, key=lambda c: (not c[0].endswith(".name"), c[0]))
        if before == ABSENT:  # a key the run has no value for: name the value it has above it (randomization=None)
            above = next((p for p in reversed(parents(key)) if p in saved), None)
            before = f"{above}={saved[above]!r}" if above else f"no {key}"
        else:
            before = repr(before)
        raise ConfigError(
            key,
            None if value == ABSENT else value,
            f"{before} as the run was made ({path}; a resumed run keeps what it is: a new train.run_dir "
            "starts another)",
        )
    taken.update({key: new[key] for key in LAUNCH_KEYS if key in new})
    for key, value in new.items():
        if key not in saved and not under(key, GROUP_SECTIONS) and not any(prefix in saved for prefix in parents(key)):
            taken.setdefault(key, value)  # a key added since the run was made
    return config_with(saved_cfg, {key: value for key, value in taken.items() if value != ABSENT})


def parents(key: str) -> list[str]:
    """``a.b.c`` -> ``[a, a.b]``."""
    parts = key.split(".")
    return [".".join(parts[:n]) for n in range(1, len(parts))]


def record_resume(run_dir: Path, cfg: Config) -> dict[str, tuple[Any, Any]]:
    """Write ``cfg`` (a resumed run's configuration) as the run's ``config.yaml`` when it changed a key (the budget,
    evaluation, ...): a comment line at the top says when and what (``# resumed <date>: train.env_steps 60 -> 100``),
    below those of earlier resumes. The file is written to a temporary sibling and renamed. Returns the changes."""
    path = Path(run_dir) / CONFIG_FILE
    text = path.read_text()
    saved, new = leaves(read_config(text)), config_leaves(cfg)
    changes = {
        key: (saved.get(key, ABSENT), value)
        for key, value in new.items()
        if key != "train.resume" and key not in LAUNCH_KEYS and saved.get(key, ABSENT) != value
    }
    if changes:
        date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        header = [*itertools.takewhile(lambda line: line.startswith("#"), text.splitlines())]
        header.append(f"# resumed {date}: " + ", ".join(f"{k} {old} -> {value}" for k, (old, value) in changes.items()))
        write_text_atomically(path, "\n".join(header) + "\n" + config_yaml(cfg))
    return changes


def given_keys(overrides: Iterable[str]) -> list[str]:
    """The keys (and groups) of command-line overrides: ``+train.env_steps=5`` -> ``train.env_steps``."""
    return [o.partition("=")[0].lstrip("+~") for o in overrides if "=" in o or o.startswith("~")]


def recorded_counts(stores: Iterable[Any]) -> dict[str, int]:
    """A resumed graph actor's counts from the run's episode stores on its machine (the recorder's and its own;
    an episode in both counted once by its uid): ``demo_episodes_done``, ``episodes`` and ``env_steps`` (the online
    steps of finished episodes). Stores that do not exist count nothing."""
    from robot_rl.data import EpisodeStore

    counts = {"demo_episodes_done": 0, "episodes": 0, "env_steps": 0}
    seen: set[str] = set()
    for path in stores:
        if not path or not (Path(str(path)) / "zarr.json").is_file():
            continue
        store = EpisodeStore.open(path)
        for name in store.episode_names():
            attrs = store.episode_attrs(name)
            uid = attrs.get("uid") or f"{path}/{name}"
            if uid in seen or attrs.get("source") not in ("demo", "online", "intervention"):
                continue
            seen.add(uid)
            counts["episodes"] += 1
            if attrs["source"] == "demo":
                counts["demo_episodes_done"] += 1
            else:
                counts["env_steps"] += int(attrs.get("length", 0))
    return counts
