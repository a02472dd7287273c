"""The ``robot-rl`` command: ``robot-rl <verb> key=value ...`` (Hydra overrides).

Verbs:
  collect   record scripted-expert episodes to an episode store
  tasks     list the task configs
  config    print the composed config
"""

from __future__ import annotations

import json
import os
import sys
from importlib import resources

from hydra import compose, initialize_config_module
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .config import ConfigError

VERBS = ("collect", "tasks", "config")
os.environ.setdefault("MUJOCO_GL", "egl")  # headless rendering unless the user chose a backend


def task_names() -> list[str]:
    folder = resources.files("configs") / "task"
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml") and not p.name.startswith("_"))


def load_config(overrides: list[str]) -> DictConfig:
    """Compose ``configs/config.yaml`` with command-line overrides; bad input -> ConfigError."""
    for override in overrides:
        key, _, value = override.partition("=")
        if key.lstrip("+~") == "task" and value not in task_names():
            raise ConfigError("task", value, "one of " + ", ".join(task_names()))
    try:
        with initialize_config_module(config_module="configs", version_base=None):
            return compose(config_name="config", overrides=overrides)
    except (HydraException, OmegaConfBaseException) as error:
        message = str(error).strip().splitlines()[0]
        raise ConfigError("overrides", " ".join(overrides), f"valid Hydra overrides ({message})") from None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    verb, overrides = argv[0], argv[1:]
    try:
        if verb not in VERBS:
            raise ConfigError("verb", verb, "one of " + ", ".join(VERBS))
        cfg = load_config(overrides)
        if verb == "tasks":
            for name in task_names():
                print(name)
        elif verb == "config":
            print(OmegaConf.to_yaml(cfg))
        elif verb == "collect":
            from .collect import collect

            report = collect(cfg)
            print(json.dumps(report, indent=2))
            return 130 if report["interrupted"] else 0
    except ConfigError as error:
        print(f"robot-rl: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
