"""The ``robot-rl`` command: ``robot-rl <verb> key=value ...`` (Hydra overrides). ``robot-rl <verb> --help``: the
verb's main keys and their values; ``robot-rl config [key=value ...]``: every key.

Verbs:
  train                  HIL-SERL training with the scripted human (the main job)
  pretrain               offline RL (Cal-QL, CQL) on episode stores, for a warm start (pretrain.store=PATH|[A,B]
                         pretrain.out=DIR; then robot-rl train init.checkpoint=DIR)
  eval                   evaluate a checkpoint: success rate, episode length, optional mp4
  collect                record scripted-expert episodes to an episode store
  data info              summary table of an episode store          (store=PATH)
  data show              render an episode to mp4 with a plot       (store=PATH episode=N out=FILE.mp4)
  data export            episodes to a rosbag2 MCAP folder          (store=PATH out=DIR [episodes=[0,2]])
                         or a LeRobotDataset v3 folder              (format=lerobot store=PATH out=DIR)
  data import            a rosbag2 MCAP, LeRobot v3 or robomimic HDF5 recording into a new store
                         (format=mcap|lerobot|robomimic in=PATH out=STORE [import.<format>.<key>=...])
  data merge             combine stores after schema checks         (inputs=[A,B] out=PATH)
  classifier             train the reward classifier on an episode store's labelled frames
                         (classifier.store=PATH classifier.out=FILE.pt)
  fast-critic            fit the safety node's fast-loop risk model to an episode store's recorded ticks
                         (fast_critic.store=PATH fast_critic.out=FILE.npz)
  launch <graph>         start a ROS 2 node graph (configs/graph: sim_train, real_train, collect_demos,
                         learner_only, cell) without ros2 launch; overrides go to every node
  console                the operator's web page alone, beside a graph in this ROS_DOMAIN_ID (docs/console.md)
  tasks                  list the task configs
  config                 print the composed config
  doctor                 table of what this machine can do and what is missing, with fixes; exit 1 when the
                         main job cannot run ([doctor.require=[render,ros,...]] makes optional items required)
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from robot_rl.core.composed_config import load_config, task_names
from robot_rl.core.config import ConfigError, choice, integer, is_integer, new_file_path, packaged_yaml, settings_of
from robot_rl.data.episode_store import EpisodeStoreError

# bad input: a config value, or a path the user gave that is missing, taken or of the wrong kind -> exit code 2
USER_ERRORS = (
    ConfigError,
    EpisodeStoreError,
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
)
VERBS = (
    "train",
    "pretrain",
    "eval",
    "collect",
    "data",
    "classifier",
    "fast-critic",
    "launch",
    "console",
    "tasks",
    "config",
    "doctor",
)
VERB_KEYS = {  # the main keys of each verb, listed by ``robot-rl <verb> --help`` (robot-rl config lists every key)
    "train": (
        *("task", "agent", "exploration", "randomization", "fleet", "seed", "train.run_dir", "train.resume"),
        *("train.env_steps", "train.demo_episodes", "train.num_envs", "train.eval_every", "init.checkpoint"),
        "safety.enabled",
    ),
    "pretrain": ("task", "agent", "seed", "pretrain.store", "pretrain.out", "pretrain.algorithm", "pretrain.updates"),
    "eval": ("task", "agent", "randomization", "eval.checkpoint", "eval.episodes", "eval.seed", "eval.video"),
    "collect": ("task", "seed", "collect.episodes", "collect.out", "collect.action_noise"),
    "data": ("data.store", "data.episode", "data.episodes", "data.out", "data.inputs", "data.format", "data.in"),
    "classifier": (
        *("task", "classifier.store", "classifier.out", "classifier.cameras", "classifier.threshold"),
        "classifier.target_false_success",
    ),
    "fast-critic": (
        "fast_critic.store",
        "fast_critic.out",
        "fast_critic.horizon",
        "fast_critic.labels",
        "fast_critic.updates",
    ),
    "launch": (
        *("task", "agent", "robot", "ros.domain_id", "ros.discovery", "ros.sim_time", "train.run_dir"),
        *("train.resume", "train.demo_store", "train.demo_episodes", "classifier.out", "teleop_device.kind"),
        *("teleop_device.spacemouse_device", "cell.spacemouse"),
    ),
    "console": ("console.host", "console.port", "console.token", "task"),
    "tasks": (),
    "config": (),
    "doctor": ("doctor.require",),
}
HELP_FLAGS = ("-h", "--help")
HELP_WIDTH = 118  # characters per line of a verb's help
DATA_COMMANDS = ("info", "show", "export", "import", "merge")
DATA_KEYS = ("store", "episode", "episodes", "out", "inputs", "format", "in", "import")  # given without "data."
os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering unless the user chose a backend


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in HELP_FLAGS:
        print(__doc__.strip())
        return 0
    verb, overrides = argv[0], argv[1:]
    try:
        if verb not in VERBS:
            raise ConfigError("verb", verb, "one of " + ", ".join(VERBS))
        if any(arg in HELP_FLAGS for arg in overrides):
            print(verb_help(verb, [_data_key(o) for o in overrides if "=" in o]))
            return 0
        if verb == "launch":
            from robot_rl.cli.graph import launch

            return launch(overrides[0] if overrides else None, overrides[1:])
        if verb == "console":
            from robot_rl.ros.console.console_node import run

            return run(overrides)
        if verb == "data":
            command = overrides[0] if overrides else None
            if command not in DATA_COMMANDS:
                raise ConfigError("data command", command, "one of " + ", ".join(DATA_COMMANDS))
            overrides = [_data_key(override) for override in overrides[1:]]
        cfg = load_config(overrides)
        if verb == "tasks":
            for name in task_names():
                print(name)
        elif verb == "config":
            check_settings(cfg)
            print(OmegaConf.to_yaml(cfg))
        elif verb == "doctor":
            from robot_rl.cli.doctor import doctor

            return doctor(cfg.doctor.require, cfg.train.run_dir)
        elif verb == "collect":
            from robot_rl.runtime.collect import collect

            report = collect(cfg)
            print(json.dumps(report, indent=2))
            return 130 if report["interrupted"] else 0
        elif verb == "data":
            run_data_command(command, cfg.data)
        elif verb in ("train", "pretrain"):
            summary = learning_run(verb, cfg, overrides)
            print(json.dumps({k: v for k, v in summary.items() if k != "eval_history"}, indent=2))
            return 130 if summary["interrupted"] else 0
        elif verb == "classifier":
            from robot_rl.runtime.classifier import train_classifier

            print(json.dumps(train_classifier(cfg), indent=2))
        elif verb == "fast-critic":
            from robot_rl.runtime.fast_critic_fit import fit_fast_critic

            print(json.dumps(fit_fast_critic(cfg), indent=2))
        elif verb == "eval":
            from robot_rl.runtime.train import evaluate_checkpoint

            if cfg.eval.video is not None:  # before the checkpoint is loaded and the episodes are run
                new_file_path("eval.video", cfg.eval.video, ".mp4")
            print(json.dumps(evaluate_checkpoint(cfg), indent=2))
    except USER_ERRORS as error:
        print(f"robot-rl: error: {one_line(error)}", file=sys.stderr)
        return 2
    return 0


def learning_run(verb: str, cfg: DictConfig, overrides: list[str] = ()) -> dict:
    """``robot-rl train`` (in this process, or with ``fleet=ray`` on a Ray fleet) or ``robot-rl pretrain``; the
    run's summary. A resumed run (``train.resume=true``) runs with its own config.yaml (``overrides``: the command
    line, whose run-defining keys must agree with it)."""
    if verb == "pretrain":
        from robot_rl.runtime.pretrain import pretrain

        return pretrain(cfg)
    from robot_rl.runtime.fleet_settings import fleet_settings
    from robot_rl.runtime.reset_rule import require_in_process, reset_settings
    from robot_rl.runtime.run_folder import given_keys, run_config, run_folder
    from robot_rl.runtime.train_settings import settings_from

    cfg = run_config(cfg, given_keys(overrides))
    settings = settings_from(cfg["train"])  # a bad value or run folder is refused before torch is imported (~1.5 s)
    run_folder(settings.run_dir, settings.resume)
    require_in_process(reset_settings(cfg.get("scene_reset")), settings.num_envs, fleet_settings(cfg).kind)
    if fleet_settings(cfg).kind == "ray":
        from robot_rl.runtime.fleet import train_fleet

        return train_fleet(cfg)
    from robot_rl.runtime.train import train

    return train(cfg)


def verb_help(verb: str, overrides: list[str]) -> str:
    """``robot-rl <verb> --help``: the verb's entries of this module's docstring, then its main keys with the values
    they take with ``overrides`` (the defaults without) and the comments of the root config (``configs/config.yaml`` and ``configs/settings/``)."""
    from robot_rl.core.composed_config import config_groups, group_options, key_comments

    cfg = load_config(overrides)
    defaults = {
        group: value
        for entry in packaged_yaml("config.yaml")["defaults"]
        if isinstance(entry, dict)
        for group, value in entry.items()
    }
    given = {o.partition("=")[0].lstrip("+"): o.partition("=")[2] for o in overrides}
    lines = [wrapped(f"robot-rl {name}: {text}", 4) for name, text in verb_entries(verb)]
    if VERB_KEYS[verb]:
        lines += ["", "main keys (key=value, with the value each takes now):"]
    for key in VERB_KEYS[verb]:
        if key in config_groups():
            value, comment = given.get(key, defaults.get(key)), "one of " + ", ".join(group_options(key))
        else:
            value, comment = OmegaConf.select(cfg, key), key_comments().get(key, "")
            value = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        entry = f"  {key.removeprefix('data.') if verb == 'data' else key}={value if isinstance(value, str) else json.dumps(value)}"
        lines.append(wrapped(f"{entry:<40} {comment}".rstrip(), 41))
    lines += [
        "",
        "Every key and its value: robot-rl config [KEY=VALUE ...] (the composed config; each key is explained in",
        "configs/settings/ and docs/configuration.md). All verbs: robot-rl --help",
    ]
    return "\n".join(lines)


def verb_entries(verb: str) -> list[tuple[str, str]]:
    """(name, description) of the verb's entries in the module docstring's verb list (``data`` has one per
    command), each description on one line."""
    entries: list[tuple[str, str]] = []
    for line in __doc__.split("Verbs:")[1].splitlines():
        entry = re.match(r"^  (\S.*?)\s{2,}(.*)$", line)
        if entry:
            entries.append((entry.group(1), entry.group(2)))
        elif line.startswith("   ") and entries:
            entries[-1] = (entries[-1][0], f"{entries[-1][1]} {line.strip()}")
    return [(name, " ".join(text.split())) for name, text in entries if name.split()[0] == verb]


def wrapped(text: str, indent: int) -> str:
    """``text`` in lines of at most HELP_WIDTH characters, the continuation lines indented by ``indent`` spaces."""
    return textwrap.fill(text, HELP_WIDTH, subsequent_indent=" " * indent, break_on_hyphens=False)


def check_settings(cfg: DictConfig) -> None:
    """``robot-rl config``: the checks ``robot-rl train`` makes of its settings before it starts (train, fleet, human,
    safety, the agent's hyperparameters), so a value train would refuse is refused here too (ConfigError)."""
    from robot_rl.runtime.envs import load_entry_point
    from robot_rl.runtime.fleet_settings import fleet_settings
    from robot_rl.runtime.reset_rule import require_in_process, reset_settings
    from robot_rl.runtime.safety_learning import safety_settings
    from robot_rl.runtime.teleop import InterventionRules
    from robot_rl.runtime.train_settings import settings_from

    settings = settings_from(cfg.train)
    require_in_process(reset_settings(cfg.get("scene_reset")), settings.num_envs, fleet_settings(cfg).kind)
    settings_of("human", InterventionRules, OmegaConf.to_container(cfg.human, resolve=True))
    safety_settings(cfg.get("safety"))
    agent = OmegaConf.to_container(cfg.agent, resolve=True)
    hyperparameters = {key: value for key, value in agent.items() if key not in ("entry_point", "config", "name")}
    settings_of("agent", load_entry_point(agent["config"]), hyperparameters).validate()


def one_line(error: BaseException) -> str:
    """The error's message on one line (a traceback-free answer to bad input)."""
    return " ".join(str(error).split())


def _data_key(override: str) -> str:
    """``store=x`` -> ``data.store=x``, ``import.mcap.split=gap`` -> ``data.import.mcap.split=gap`` for the data
    commands."""
    key = override.partition("=")[0]
    return f"data.{override}" if key.lstrip("+~").split(".")[0] in DATA_KEYS else override


def as_list(value: Any) -> list | None:
    """A config value that takes one item or a list of them as a list (``inputs=a.zarr`` -> ``[a.zarr]``, not its
    characters); None stays None."""
    if value is None:
        return None
    return list(value) if isinstance(value, (ListConfig, list, tuple)) else [value]


def run_data_command(command: str, cfg: DictConfig) -> None:
    from robot_rl.data import tools

    if command == "info":
        print(tools.format_info(tools.info(cfg.store)))
        return
    if command == "merge":
        if not cfg.out:
            raise ConfigError("data.out", cfg.out, "the path of the merged store")
        report = tools.merge([str(path) for path in as_list(cfg.inputs) or []], cfg.out)
    elif command == "show":
        episode = integer("data.episode", cfg.episode)
        out = cfg.out or f"{Path(cfg.store).stem}_episode{episode}.mp4"
        report = tools.render_episode(cfg.store, episode, out)
    elif command == "import":
        from robot_rl.data.formats import import_store

        report = import_store(cfg.format, cfg["in"], cfg.out, OmegaConf.to_container(cfg["import"], resolve=True))
    else:
        from robot_rl.data.formats import EXPORT_FORMATS

        choice("data.format", cfg.format, EXPORT_FORMATS)
        if not cfg.out:
            raise ConfigError("data.out", cfg.out, f"a new folder for the {cfg.format} export")
        episodes = as_list(cfg.episodes)
        if episodes is not None and not all(is_integer(i) for i in episodes):
            raise ConfigError("data.episodes", cfg.episodes, "null (all), an episode index or a list of them ([0,2])")
        if cfg.format == "lerobot":
            from robot_rl.data.formats.lerobot import export_lerobot

            report = export_lerobot(cfg.store, cfg.out, episodes)
        else:
            from robot_rl.data.mcap_export import export_mcap

            report = export_mcap(cfg.store, cfg.out, episodes)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    sys.exit(main())
