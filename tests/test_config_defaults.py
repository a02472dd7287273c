"""The defaults a user reads in ``configs/`` are the defaults the code has. The settings dataclasses take their field
defaults from the packaged YAML (:func:`robot_rl.core.config.yaml_defaults`); here every field is checked against the
config Hydra composes (groups, ``defaults`` lists and all): each field is in the YAML and has its value, so a
settings object built in Python (a test, a notebook) behaves like ``robot-rl`` with no overrides."""

import dataclasses
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from robot_rl.cli.main import load_config
from robot_rl.policies.cqn import CQNConfig
from robot_rl.policies.cqn_as import CQNASConfig
from robot_rl.policies.fast_critic import FastCriticFitSettings
from robot_rl.policies.sac import SACConfig
from robot_rl.policies.safety_critic import SafetyCriticConfig
from robot_rl.runtime.fleet_settings import FleetSettings
from robot_rl.runtime.pretrain import PretrainSettings
from robot_rl.runtime.reset_rule import ResetSettings
from robot_rl.runtime.safety_learning import SafetySettings
from robot_rl.runtime.teleop import InterventionRules
from robot_rl.runtime.train_settings import TrainSettings
from robot_rl.runtime.warm_start import InitSettings
from robot_rl.safety.fast_critic import FastCriticSettings
from robot_rl.safety.filter import FilterSettings

SECTIONS = [  # (overrides, config path, dataclass)
    ([], "train", TrainSettings),
    ([], "human", InterventionRules),
    ([], "safety", SafetySettings),
    ([], "safety.filter", FilterSettings),
    ([], "safety.critic", SafetyCriticConfig),
    ([], "safety.fast_critic", FastCriticSettings),
    ([], "fast_critic", FastCriticFitSettings),
    ([], "pretrain", PretrainSettings),
    ([], "init", InitSettings),
    ([], "fleet", FleetSettings),
    ([], "scene_reset", ResetSettings),
    (["agent=sac"], "agent", SACConfig),
    (["agent=cqn"], "agent", CQNConfig),
    (["agent=cqn_as"], "agent", CQNASConfig),
]
PER_RUN = {"train.run_dir", "pretrain.store", "pretrain.out"}  # built from the task and seed in the YAML


def default_of(field: dataclasses.Field):
    value = field.default if field.default is not dataclasses.MISSING else field.default_factory()
    return list(value) if isinstance(value, tuple) else value


@pytest.mark.parametrize("overrides, path, settings", SECTIONS, ids=[f"{p}:{s.__name__}" for _, p, s in SECTIONS])
def test_every_dataclass_default_is_the_yamls(overrides, path, settings):
    block = OmegaConf.to_container(OmegaConf.select(load_config(overrides), path), resolve=True)
    differences = []
    for field in dataclasses.fields(settings):
        key = f"{path}.{field.name}"
        if key in PER_RUN or isinstance(default_of(field), dict):  # nested sections are checked on their own
            continue
        if field.name not in block:
            differences.append(f"{key}: missing from the YAML")
        elif block[field.name] != default_of(field):
            differences.append(f"{key}: YAML {block[field.name]!r}, {settings.__name__} {default_of(field)!r}")
    assert not differences, "\n".join(differences)


def test_a_default_comes_from_the_yaml_and_is_a_fresh_copy_per_object(tmp_path, monkeypatch):
    """The decorator reads the YAML file (not a copy written in the class): a packaged file with other values gives
    other defaults; a list default is not shared between two objects; a field with no default anywhere is refused."""
    from robot_rl.core import config as config_module

    (tmp_path / "robot_rl_test_defaults.yaml").write_text("block:\n  steps: 7\n  sizes: [1, 2]\n  run: ${x}\n")
    monkeypatch.setattr(
        config_module,
        "packaged_yaml",
        lambda file: OmegaConf.to_container(OmegaConf.load(tmp_path / file), resolve=False),
    )

    @config_module.yaml_defaults("robot_rl_test_defaults.yaml", "block")
    class Block:
        steps: int
        sizes: list[int]
        run: str = "runs/default"  # an interpolation in the YAML: the class keeps its own

    first, second = Block(), Block()
    first.sizes.append(3)
    assert (second.steps, second.sizes, second.run) == (7, [1, 2], "runs/default")
    with pytest.raises(TypeError, match="unknown"):

        @config_module.yaml_defaults("robot_rl_test_defaults.yaml", "block")
        class Incomplete:
            steps: int
            unknown: float


def test_the_packaged_yaml_reads_as_omegaconf_reads_it():
    """Issue 77: the settings classes' defaults come from the packaged YAML through PyYAML (only the config loader
    knows OmegaConf); every packaged file reads the same as Hydra's OmegaConf reads it, floats such as 1e-4 included."""
    from importlib.resources import files

    from robot_rl.core.config import YamlLoader, packaged_yaml

    root = files("robot_rl.configs")
    names = sorted(str(path.relative_to(Path(str(root)))) for path in Path(str(root)).rglob("*.yaml"))
    assert len(names) > 30 and "agent/sac.yaml" in names
    for name in names:
        assert packaged_yaml(name) == OmegaConf.to_container(OmegaConf.create((root / name).read_text())), name
    tricky = "a: 1e-4\nb: 2026-12-06\nc: .5\nd: 3\ne: null\nf: yes\n"
    assert yaml.load(tricky, YamlLoader) == OmegaConf.to_container(OmegaConf.create(tricky))
    assert isinstance(yaml.load(tricky, YamlLoader)["a"], float)
