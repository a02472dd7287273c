"""What a checkpoint folder holds besides buffers and counters: agent weights and the task definition.

Weights are read with ``torch.load(weights_only=True)``: tensors and plain containers only, so a
crafted ``agent.pt`` can never run code. ``task_definition.json`` records what a resumed run must
keep (task name, reward, control rate, episode length, observation and action spaces, the agent
settings that shape its networks, its exploration); resuming with another definition is refused
before anything is loaded or written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from robot_rl.core.config import ConfigError

DEFINITION_FILE = "task_definition.json"
PRETRAIN_FILE = "pretrain.json"  # robot-rl pretrain's record of what a checkpoint learned from (stores, algorithm)
# task settings that define the problem a checkpoint learned (absent ones are skipped: not every task has each)
TASK_KEYS = (
    "name",
    "id",
    "env_name",
    "robot",
    "kwargs",
    "reward",
    "control_rate_hz",
    "physics_rate_hz",
    "episode_steps",
    "terminate_on_success",
    "action_dim",
    "pos_step",
    "rot_step",
    "cameras",
    "image_size",
    "object_state",
    "force_torque",
    "privileged_state",
)
# agent settings that shape its networks or how it explores
AGENT_KEYS = (
    "name",
    "hidden",
    "critic_ensemble",
    "exploration",
    "sde_full_std",
    "sde_use_expln",
    "gripper_critic",
    "camera_encoder",
    "camera_feature_dim",
    "camera_strides",
    "levels",
    "bins",
    "atoms",
    "v_min",
    "v_max",
    "horizon",
)


def task_definition(task: Mapping[str, Any], agent_cfg: Mapping[str, Any], agent) -> dict[str, Any]:
    """Flat ``{dotted config key: value}`` of what a run is (its ``task`` and ``agent`` config sections, plain
    values), as JSON values (``observation_shapes``: per key, in pixels or state dimensions; ``action_dim``: the
    agent's action size)."""
    definition = {
        **{f"task.{key}": task[key] for key in TASK_KEYS if key in task},
        **{f"agent.{key}": agent_cfg[key] for key in AGENT_KEYS if key in agent_cfg},
        "observation_shapes": {key: list(shape) for key, shape in agent.observation_shapes.items()},
        "action_dim": agent.action_dim,
    }
    if agent_cfg.get("camera_encoder") == "pretrained":  # the frozen trunk's depth shapes its heads' inputs
        definition["agent.pretrained_blocks"] = agent_cfg["pretrained_blocks"]
    return json.loads(json.dumps(definition))  # tuples -> lists, as read back from the file


def write_task_definition(folder: Path, definition: dict[str, Any]) -> None:
    (folder / DEFINITION_FILE).write_text(json.dumps(definition, indent=2, sort_keys=True))


def check_task_definition(
    folder: Path, definition: dict[str, Any], key: str = "train.resume", prefixes: tuple[str, ...] = ("",)
) -> None:
    """Raise a ConfigError naming the first key (of those starting with one of ``prefixes``) whose value differs from
    the one ``folder`` recorded (``key``: the setting that named ``folder``, for an unreadable file).

    A checkpoint from before task definitions were recorded has no file: only the agent identity check applies."""
    path = folder / DEFINITION_FILE
    if not path.exists():
        return
    try:
        saved = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(
            key, str(folder), f"a checkpoint with a readable {DEFINITION_FILE} ({type(error).__name__})"
        ) from None
    if not isinstance(saved, dict):
        raise ConfigError(key, str(folder), f"a checkpoint whose {DEFINITION_FILE} is a JSON object")
    hints = {
        "train.resume": "a resumed run keeps its task definition; start a new train.run_dir instead",
        "eval.checkpoint": "an evaluated agent is built as it was trained",
    }
    hint = hints.get(key, f"a run starting from {key} keeps the task definition it learned")
    for name in sorted(set(saved) | set(definition)):
        if name.startswith(prefixes) and saved.get(name) != definition.get(name):
            raise ConfigError(
                name, definition.get(name), f"{saved.get(name)!r} as the checkpoint {folder} has it ({hint})"
            )


def load_tensors(key: str, path: Path, device: torch.device | str = "cpu") -> Any:
    """The contents of a ``torch.save`` file, restricted to tensors and plain values (never code).

    A crafted, truncated or foreign file -> ConfigError naming ``key``."""
    try:
        return torch.load(path, map_location=device, weights_only=True)
    except Exception as error:  # noqa: BLE001 - UnpicklingError (code, unknown classes), RuntimeError, EOFError
        raise ConfigError(
            key,
            str(path),
            f"a file of tensors and plain values written by robot_rl ({type(error).__name__}: it is not one)",
        ) from None


def load_agent(key: str, agent, path: Path) -> None:
    """Load ``path`` (``OffPolicyAgent.state_dict`` saved by robot_rl) into ``agent``; a checkpoint of another agent
    or task, or one with missing parts -> ConfigError naming ``key``."""
    state = load_tensors(key, path, agent.device)
    try:
        agent.load_state_dict(state)
    except ValueError as error:  # check_identity: the checkpoint's agent, observations or actions differ
        raise ConfigError(key, str(path.parent), f"a checkpoint of this agent and task ({error})") from None
    except (KeyError, TypeError, AttributeError, RuntimeError) as error:
        raise ConfigError(
            key,
            str(path.parent),
            f"a complete robot_rl agent checkpoint ({type(error).__name__}: {' '.join(str(error).split())[:200]})",
        ) from None
