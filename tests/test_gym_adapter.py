"""task=gym: observation flattening, action rescaling, module:EnvId, task.imports and task.success_key on toy envs
(the real suites are in tests/sim/test_gym_suites.py)."""

from __future__ import annotations

import sys
import textwrap

import gymnasium as gym
import numpy as np
import pytest

from robot_rl.cli.main import main
from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.runtime.envs import make_env

NESTED = gym.spaces.Dict(
    {
        "robot": gym.spaces.Dict({"joint_pos": gym.spaces.Box(-1, 1, (3,)), "ee/pos": gym.spaces.Box(-1, 1, (2, 2))}),
        "goal": gym.spaces.Tuple((gym.spaces.Box(-1, 1, (1,), np.float64), gym.spaces.Discrete(3))),
        "front": gym.spaces.Box(0, 255, (8, 6, 3), np.uint8),
    }
)


class ToyEnv(gym.Env):
    """Observation ``NESTED`` (or ``observation_space``), actions in [0, 10] x [-2, 2]; reports ``info_key``
    (True from step 2 on) in every step's info; remembers the last action it received."""

    def __init__(self, observation_space: gym.Space = NESTED, info_key: str | None = "done_right", value=None):
        self.observation_space = observation_space
        self.action_space = gym.spaces.Box(np.array([0.0, -2.0], np.float32), np.array([10.0, 2.0], np.float32))
        self.info_key, self.value, self.steps, self.received = info_key, value, 0, None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.steps, self.received = self.steps + 1, action
        info = (
            {} if self.info_key is None else {self.info_key: self.value if self.value is not None else self.steps >= 2}
        )
        return self.observation_space.sample(), 0.0, False, self.steps >= 4, info


for _id, _kwargs in {
    "robot_rl_test/Toy-v0": {},
    "robot_rl_test/ToyIsSuccess-v0": {"info_key": "is_success"},
    "robot_rl_test/ToySilent-v0": {"info_key": None},
    "robot_rl_test/ToyVectorFlag-v0": {"value": np.array([True, False])},
    "robot_rl_test/ToyPixels-v0": {"observation_space": gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)},
    "robot_rl_test/ToyBox-v0": {"observation_space": gym.spaces.Box(-1, 1, (2, 3))},
}.items():
    if _id not in gym.registry:
        gym.register(_id, entry_point=ToyEnv, kwargs=_kwargs, disable_env_checker=True)


def gym_env(*overrides: str) -> gym.Env:
    return make_env(load_config(["task=gym", *overrides]).task)


def test_nested_dict_and_tuple_observations_are_flattened_with_dotted_keys():
    env = gym_env("task.id=robot_rl_test/Toy-v0")
    spaces = env.observation_space.spaces
    assert {key: (space.shape, space.dtype) for key, space in spaces.items()} == {
        "robot.joint_pos": ((3,), np.float32),
        "robot.ee.pos": ((4,), np.float32),  # 2x2 flattened; "/" became "."
        "goal.0": ((1,), np.float32),  # float64 -> float32
        "goal.1": ((3,), np.float32),  # Discrete(3) -> one-hot
        "front": ((8, 6, 3), np.uint8),  # a camera, as it is
    }
    obs, info = env.reset(seed=0)
    assert set(obs) == set(spaces) and info["success"] is False
    for key, value in obs.items():
        assert value.shape == spaces[key].shape and value.dtype == spaces[key].dtype, key
    assert obs["goal.1"].sum() == 1.0 and set(obs["goal.1"].tolist()) <= {0.0, 1.0}


def test_box_observations_are_state_or_pixels():
    assert gym_env("task.id=robot_rl_test/ToyBox-v0").observation_space["state"].shape == (6,)
    pixels = gym_env("task.id=robot_rl_test/ToyPixels-v0")
    assert list(pixels.observation_space) == ["pixels"] and pixels.reset(seed=0)[0]["pixels"].dtype == np.uint8


def test_actions_in_minus_one_one_are_mapped_onto_the_env_bounds_and_clipped():
    env = gym_env("task.id=robot_rl_test/Toy-v0")
    assert env.action_space.low.tolist() == [-1, -1] and env.action_space.high.tolist() == [1, 1]
    env.reset(seed=0)
    env.step(np.array([-1.0, 1.0]))
    assert env.unwrapped.received.tolist() == [0.0, 2.0]
    env.step(np.array([3.0, 0.0]))  # out of range: clipped to 1 -> the upper bound
    assert env.unwrapped.received.tolist() == [10.0, 0.0]
    with pytest.raises(ValueError, match="non-finite"):
        env.step(np.array([np.nan, 0.0]))


def test_success_is_read_from_the_named_key_or_the_default_list():
    named = gym_env("task.id=robot_rl_test/Toy-v0", "task.success_key=done_right")
    named.reset(seed=0)
    assert [named.step(np.zeros(2))[4]["success"] for _ in range(3)] == [False, True, True]
    default = gym_env("task.id=robot_rl_test/ToyIsSuccess-v0")  # is_success is in the default list
    default.reset(seed=0)
    assert [default.step(np.zeros(2))[4]["success"] for _ in range(2)] == [False, True]
    unknown = gym_env("task.id=robot_rl_test/Toy-v0")  # done_right is not in the default list: never a success
    unknown.reset(seed=0)
    assert not any(unknown.step(np.zeros(2))[4]["success"] for _ in range(4))


def test_a_named_success_key_the_env_never_reports_is_a_config_error():
    env = gym_env("task.id=robot_rl_test/ToySilent-v0", "task.success_key=[is_success,solved]")
    env.reset(seed=0)
    for _ in range(3):
        assert env.step(np.zeros(2))[4]["success"] is False  # may still come before the episode ends
    with pytest.raises(ConfigError, match="a key of robot_rl_test/ToySilent-v0's info dict") as error:
        env.step(np.zeros(2))  # the episode's last step
    assert error.value.key == "task.success_key" and error.value.value == ["is_success", "solved"]


def test_a_success_key_holding_more_than_one_value_is_a_config_error():
    env = gym_env("task.id=robot_rl_test/ToyVectorFlag-v0", "task.success_key=done_right")
    env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"one flag; it holds shape \(2,\)"):
        env.step(np.zeros(2))


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """Writes a package ``name`` that registers ``<name>/Toy-v0`` when imported (what gymnasium suites do)."""

    def write(name: str, body: str = "") -> str:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            textwrap.dedent(body)
            + textwrap.dedent(f"""
                import gymnasium
                gymnasium.register("{name}/Toy-v0", entry_point="tests.test_gym_adapter:ToyEnv")
                """)
        )
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    return write


def test_module_colon_id_imports_the_module_first(plugin):
    name = plugin("robot_rl_test_plugin_colon")
    env = gym_env(f"task.id={name}:{name}/Toy-v0")
    assert "robot.joint_pos" in env.observation_space.spaces


def test_task_imports_register_a_suite_before_lookup(plugin):
    name = plugin("robot_rl_test_plugin_imports")
    with pytest.raises(ConfigError, match="task.imports=\\[package\\] or task.id=package:EnvId"):
        gym_env(f"task.id={name}/Toy-v0")  # not imported yet: unknown
    assert gym_env(f"task.id={name}/Toy-v0", f"task.imports=[{name}]").action_space.shape == (2,)


def test_a_missing_package_is_named_with_its_install_command(plugin, monkeypatch):
    with pytest.raises(ConfigError) as error:
        gym_env("task.imports=[no_such_suite]")
    assert error.value.key == "task.imports" and "No module named 'no_such_suite'" in str(error.value)
    assert "check the name" in str(error.value) and "pip install no" not in str(
        error.value
    )  # a typo: nothing to install
    monkeypatch.setitem(sys.modules, "panda_gym", None)  # as if panda-gym were not installed
    with pytest.raises(ConfigError, match="pip install -e .\\[suites\\]") as error:
        gym_env("task.id=panda_gym:PandaReach-v3")
    assert error.value.key == "task.id"
    broken = plugin("robot_rl_test_plugin_broken", "import robot_rl_test_absent_dependency\n")
    with pytest.raises(ConfigError, match="No module named 'robot_rl_test_absent_dependency'") as error:
        gym_env(f"task.imports=[{broken}]")  # the package is there, a dependency of it is not
    assert error.value.value == broken and "pip install robot" not in str(error.value)


def test_an_unknown_id_names_close_ones():
    with pytest.raises(ConfigError, match="a registered gymnasium id \\(close: Pendulum-v1") as error:
        gym_env("task.id=Pendulum-v9")
    assert error.value.key == "task.id"


@pytest.mark.parametrize(
    "override, key",
    [("task.imports=[3]", "task.imports"), ("task.success_key=[]", "task.success_key"), ("task.id=''", "task.id")],
)
def test_bad_task_values_are_config_errors(override, key):
    with pytest.raises(ConfigError) as error:
        env = gym_env("task.id=robot_rl_test/Toy-v0", override)
        env.reset(seed=0)
        env.step(np.zeros(2))
    assert error.value.key == key


def test_the_cli_answers_a_missing_suite_with_one_line(tmp_path, capsys):
    code = main(
        [
            "train",
            "task=gym",
            "task.id=FetchReach-v4",
            "task.imports=[no_such_suite]",
            "train.demo_episodes=0",
            "human.enabled=false",
            f"train.run_dir={tmp_path / 'run'}",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith(
        "robot-rl: error: task.imports='no_such_suite' is not allowed: expected an importable package"
    )
