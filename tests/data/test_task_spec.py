"""The task spec: built once from an env, read back from a file or an episode store, malformed ones refused."""

import json
import subprocess
import sys

import pytest

from robot_rl.cli.main import main
from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.data import EpisodeStore
from robot_rl.data.task_spec import MAX_SPEC_BYTES, TaskSpec, read_task_spec
from robot_rl.ros.plumbing.node_main import node_task_spec
from robot_rl.runtime.envs import make_env, observation_shapes, task_spec


def reach_spec(*overrides: str) -> TaskSpec:
    return task_spec(load_config(["task=reach", *overrides]).task)


def test_the_spec_is_the_envs_shapes_layout_and_rate_and_reads_back_from_a_file_and_a_store(tmp_path):
    cfg = load_config(["task=pick_cube", "task.cameras=[front]", "task.image_size=32"])
    spec = task_spec(cfg.task)
    env = make_env(cfg.task)
    assert spec.observation_shapes == observation_shapes(env) and spec.action_dim == env.action_space.shape[0]
    assert spec.state_layout == {name: tuple(part) for name, part in env.unwrapped.state_layout.items()}
    env.close()
    assert spec.task == "pick_cube" and spec.robot == "panda" and spec.control_rate_hz == cfg.task.control_rate_hz
    assert spec.cameras == ["front"] and spec.observation_shapes["front"] == (32, 32, 3)
    assert read_task_spec(spec.write(tmp_path / "task_spec.json")) == spec
    store = EpisodeStore.create(tmp_path / "demos.zarr", {**spec.metadata(), "source": "demo"})
    assert read_task_spec(store.path) == spec  # a store recorded from the task holds its spec


def test_a_node_reads_the_handed_spec_and_refuses_another_tasks(tmp_path):
    path = reach_spec().write(tmp_path / "task_spec.json")
    cfg = load_config(["task=reach", f"ros.task_spec={path}"])
    assert node_task_spec(cfg) == reach_spec()
    with pytest.raises(ConfigError) as refused:
        node_task_spec(load_config(["task=pick_cube", f"ros.task_spec={path}"]))
    assert refused.value.key == "ros.task_spec" and "pick_cube" in str(refused.value)


def malformed(spec: dict) -> list[tuple[str, object]]:
    shapes = spec["observation_shapes"]
    return [
        ("not a dict", [1, 2]),
        ("no shapes", {**spec, "observation_shapes": {}}),
        ("a negative size", {**spec, "observation_shapes": {**shapes, "state": [-3]}}),
        ("five dimensions", {**spec, "observation_shapes": {"state": [1, 1, 1, 1, 1]}}),
        ("a float size", {**spec, "observation_shapes": {"state": [3.5]}}),
        ("action_dim true", {**spec, "action_dim": True}),
        ("action_dim 0", {**spec, "action_dim": 0}),
        ("a NaN rate", {**spec, "control_rate_hz": float("nan")}),
        ("a layout past the state", {**spec, "state_layout": {"tcp_pos": [0, 10_000]}}),
        ("a layout of three numbers", {**spec, "state_layout": {"tcp_pos": [0, 1, 2]}}),
        ("task a number", {**spec, "task": 7}),
    ]


@pytest.mark.parametrize("case", range(11))
def test_a_malformed_spec_is_refused_naming_the_key(case, tmp_path):
    what, value = malformed(reach_spec().metadata())[case]
    path = tmp_path / "task_spec.json"
    path.write_text(json.dumps(value))
    with pytest.raises(ConfigError) as refused:
        read_task_spec(path)
    assert refused.value.key == "ros.task_spec", what


def test_a_file_that_is_no_spec_is_refused(tmp_path):
    for name, content in (("junk.json", b"\x00\xff not json"), ("huge.json", b" " * (MAX_SPEC_BYTES + 1))):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(ConfigError, match="ros.task_spec"):
            read_task_spec(tmp_path / name)
    for missing in (tmp_path / "absent.json", tmp_path):  # a folder that is no episode store
        with pytest.raises(ConfigError, match="ros.task_spec"):
            read_task_spec(missing)


def test_a_launch_with_a_bad_spec_is_one_line_and_starts_nothing(tmp_path, capsys):
    (tmp_path / "task_spec.json").write_text("{}")
    run_dir = tmp_path / "run"
    code = main(
        ["launch", "sim_train", "task=reach", f"train.run_dir={run_dir}", f"ros.task_spec={tmp_path}/task_spec.json"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("robot-rl: error: ros.task_spec=")
    assert not run_dir.exists()


NO_SIMULATOR = """
import importlib.abc, sys
class NoSimulator(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("mujoco", "robosuite"):
            print(f"IMPORTED {name}", file=sys.stderr)
            raise ImportError(f"No module named {name!r} (a box without the simulator)")
sys.meta_path.insert(0, NoSimulator())
"""


def test_a_spec_is_read_without_the_simulator_and_without_one_the_node_says_what_it_needs(tmp_path):
    """A learner box has no MuJoCo: with a handed spec nothing imports it; without one, one line."""
    path = reach_spec().write(tmp_path / "task_spec.json")
    script = NO_SIMULATOR + (
        "from robot_rl.core.composed_config import load_config\n"
        "from robot_rl.ros.plumbing.node_main import node_task_spec\n"
        "import robot_rl.ros.nodes.learner_node\n"
        f"print(node_task_spec(load_config(['task=reach', 'ros.task_spec={path}'])).action_dim)\n"
        "node_task_spec(load_config(['task=reach']))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == [str(reach_spec().action_dim)], result.stderr[-2000:]
    assert result.stderr.splitlines()[0] == "IMPORTED mujoco"  # only the second, spec-less call tried
    assert (
        "ConfigError: ros.task_spec=None" in result.stderr and "a task_spec.json or an episode store" in result.stderr
    )
