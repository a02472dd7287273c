"""Domain randomization: what each randomizer changes, no drift, per-episode constancy, seeding, bad input."""

from pathlib import Path

import mujoco
import numpy as np
import pytest

from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.runtime.envs import make_env
from robot_rl.sim.randomization import DomainRandomization, RandomizationEntry, entries_from_config
from tests.conftest import require


def pick_cube(**task):
    return make_env({**dict(load_config(["task=pick_cube"]).task), **task})


def randomized_pick_cube(*entries: RandomizationEntry, seed: int = 0, **task) -> DomainRandomization:
    """pick_cube wrapped with ``entries``, after its first reset."""
    wrapped = DomainRandomization(pick_cube(**task), list(entries), seed=seed)
    wrapped.reset(seed=0)
    return wrapped


def model_arrays(model: mujoco.MjModel) -> dict[str, np.ndarray]:
    """Copies of every numeric array of the model."""
    out = {}
    for name in dir(model):
        if name.startswith("_"):
            continue
        value = getattr(model, name)
        if isinstance(value, np.ndarray) and value.dtype.kind in "fiu":
            out[name] = value.copy()
    return out


def randomization_set(name: str) -> list[RandomizationEntry]:
    cfg = load_config([f"randomization={name}"])
    from omegaconf import OmegaConf

    return entries_from_config(OmegaConf.to_container(cfg.randomization))


MODEL_ENTRIES = [
    e for e in randomization_set("dynamics") + randomization_set("visual") if not e.attribute.startswith("controller.")
]


SHIPPED_SETS = sorted(path.stem for path in (Path(__file__).parents[2] / "configs" / "randomization").glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED_SETS)
def test_every_shipped_set_binds_to_its_task_and_records_its_samples(name):
    cameras = ["front", "wrist"] if name in ("visual", "sensors", "full") else []
    entries = randomization_set(name)
    env = randomized_pick_cube(*entries, cameras=cameras, image_size=32)
    _, info = env.reset(seed=1)
    assert set(info["randomization"]) == {entry.name for entry in entries}
    _, _, _, _, info = env.step(np.zeros(4, np.float32))
    assert all(np.isfinite(value) for values in info["randomization"].values() for value in values.values())


@pytest.mark.parametrize("entry", MODEL_ENTRIES, ids=lambda e: e.name)
def test_each_model_randomizer_changes_exactly_its_target_within_its_range(entry):
    env = pick_cube()
    before = model_arrays(env.unwrapped.model)
    wrapped = DomainRandomization(env, [entry], seed=3)
    for episode in range(5):
        wrapped.reset(seed=episode)
        after = model_arrays(env.unwrapped.model)
        changed = {name for name in before if not np.array_equal(before[name], after[name])}
        assert changed == {entry.attribute}, changed
        binding = wrapped._bindings[0]
        diff = np.argwhere(
            before[entry.attribute].reshape(len(before[entry.attribute]), -1)
            != after[entry.attribute].reshape(len(after[entry.attribute]), -1)
        )
        assert set(diff[:, 0]) <= set(binding.rows.tolist()) and set(diff[:, 1]) <= set(binding.columns.tolist())
        low, high = entry.range
        default = binding.default
        value = binding.array[np.ix_(binding.rows, binding.columns)]
        relative = value if entry.mode == "absolute" else value / default if entry.mode == "scale" else value - default
        assert (relative >= low - 1e-9).all() and (relative <= high + 1e-9).all()


def test_controller_gains_and_only_they_change():
    env = pick_cube()
    entry = RandomizationEntry("kp", target="tcp", attribute="controller.kp_pos", range=[0.5, 1.5])
    wrapped = DomainRandomization(env, [entry], seed=0)
    for seed in range(5):
        wrapped.reset(seed=seed)
        gains = env.unwrapped.controller.gains
        assert 1500 <= gains.kp_pos <= 4500 and (gains.kp_rot, gains.kd_pos, gains.kd_rot) == (200.0, 300.0, 15.0)
        actuators = env.unwrapped.controller.actuators[:3]
        np.testing.assert_allclose(env.unwrapped.model.actuator_gainprm[actuators, 0], gains.kp_pos)


def test_state_noise_has_the_sampled_std():
    wrapped = randomized_pick_cube(
        RandomizationEntry("noise", target="state", attribute="sensor.state_noise", range=[0.01, 0.02], mode="absolute")
    )
    env = wrapped.env
    std = wrapped.sampled_values()["noise"]["sensor.state_noise"]
    errors = []
    for _ in range(30):
        obs, *_ = wrapped.step(np.zeros(4, np.float32))
        errors.append(obs["state"] - env.unwrapped.observation()["state"])
    assert np.std(errors) == pytest.approx(std, rel=0.15)


def test_privileged_state_stays_clean_under_state_noise():
    wrapped = randomized_pick_cube(
        RandomizationEntry(
            "noise", target="state", attribute="sensor.state_noise", range=[0.02, 0.02], mode="absolute"
        ),
        privileged_state=True,
    )
    for _ in range(5):
        obs, *_ = wrapped.step(np.zeros(4, np.float32))
        clean = wrapped.env.unwrapped.observation()["state"]
        np.testing.assert_array_equal(obs["privileged_state"], clean)
        assert np.abs(obs["state"] - clean).max() > 0.01  # the actor's copy is the noisy one
    assert wrapped.observation_space["privileged_state"] == wrapped.observation_space["state"]


def test_image_corruptions_change_only_camera_frames():
    wrapped = randomized_pick_cube(
        RandomizationEntry("n", target="front", attribute="sensor.image_noise", range=[20, 20], mode="absolute"),
        RandomizationEntry("b", target="front", attribute="sensor.brightness", range=[0.5, 0.5], mode="absolute"),
        cameras=["front"],
        image_size=32,
    )
    obs, _ = wrapped.reset(seed=0)
    clean = wrapped.env.unwrapped.observation()
    np.testing.assert_array_equal(obs["state"], clean["state"])
    assert obs["front"].mean() < 0.7 * clean["front"].mean()  # darker
    assert obs["front"].dtype == np.uint8


def test_action_delay_executes_the_previous_action():
    wrapped = randomized_pick_cube(
        RandomizationEntry("delay", target="action", attribute="actuation.action_delay", range=[1, 1], mode="absolute")
    )
    env = wrapped.env
    finger = env.unwrapped._finger_act
    commands = [-1.0, 1.0, 1.0, -1.0, 1.0]
    executed = []
    for command in commands:
        wrapped.step(np.array([0, 0, 0, command], np.float32))
        executed.append(float(env.unwrapped.data.ctrl[finger][0]))
    opening = {-1.0: env.unwrapped.data.ctrl[finger][0] * 0 + 0.04, 1.0: 0.0}
    expected = [opening[c] for c in [commands[0]] + commands[:-1]]  # the first action is held for the delay
    np.testing.assert_allclose(executed, expected, atol=1e-9)


def test_period_jitter_varies_the_physics_steps_per_control_step():
    wrapped = randomized_pick_cube(
        RandomizationEntry(
            "jitter", target="action", attribute="actuation.period_jitter", range=[0.2, 0.2], mode="absolute"
        )
    )
    env = wrapped.env
    counts = set()
    for _ in range(30):
        wrapped.step(np.zeros(4, np.float32))
        counts.add(env.unwrapped.n_substeps)
    assert len(counts) > 5 and min(counts) >= 40 and max(counts) <= 60


@pytest.mark.slow
def test_scale_mode_never_drifts_over_1000_episodes():
    env = pick_cube()
    original = model_arrays(env.unwrapped.model)
    wrapped = DomainRandomization(env, randomization_set("dynamics") + randomization_set("visual"), seed=0)
    randomized = {}  # model array -> (rows, columns) the entries may change
    for binding in wrapped._bindings:
        if binding.array is not None:
            randomized.setdefault(binding.entry.attribute, []).append((binding.rows, binding.columns))
    cartesian = env.unwrapped.controller.actuators  # impedance gains live in these actuators' parameters
    randomized["actuator_gainprm"] = [(cartesian, np.array([0]))]
    randomized["actuator_biasprm"] = [(cartesian, np.array([1, 2]))]
    for episode in range(1000):
        wrapped.reset(seed=episode)
    now = model_arrays(env.unwrapped.model)
    for name, array in original.items():
        if name not in randomized:
            np.testing.assert_array_equal(now[name], array, err_msg=name)
            continue
        mask = np.ones(array.reshape(len(array), -1).shape, bool)
        for rows, columns in randomized[name]:
            mask[np.ix_(rows, columns)] = False
        np.testing.assert_array_equal(
            now[name].reshape(mask.shape)[mask], array.reshape(mask.shape)[mask], err_msg=name
        )
    mass = next(b for b in wrapped._bindings if b.entry.name == "object_mass")
    np.testing.assert_allclose(mass.default, original["body_mass"][mass.rows][:, None])  # defaults still the originals
    assert 0.5 * 0.05 <= env.unwrapped.model.body("cube").mass[0] <= 3.0 * 0.05


def test_values_stay_constant_within_an_episode_unless_resampled_every_n_steps():
    env = pick_cube()
    per_episode = RandomizationEntry("mass", target="cube", attribute="body_mass", range=[0.5, 2])
    every_five = RandomizationEntry(
        "friction", target="cube", attribute="geom_friction", columns=[0], range=[0.5, 2], frequency=5
    )
    wrapped = DomainRandomization(env, [per_episode, every_five], seed=0)
    _, info = wrapped.reset(seed=0)
    masses, frictions = [info["randomization"]["mass"]["cube"]], [info["randomization"]["friction"]["cube[0]"]]
    for _ in range(12):
        *_, info = wrapped.step(np.zeros(4, np.float32))
        masses.append(info["randomization"]["mass"]["cube"])
        frictions.append(info["randomization"]["friction"]["cube[0]"])
    assert len(set(masses)) == 1
    # steps 1-5 use the reset sample, 6-10 the one drawn before step 6, 11-12 the next
    assert len(set(frictions[:6])) == 1 and len(set(frictions[6:11])) == 1 and len(set(frictions[11:])) == 1
    assert len(set(frictions)) == 3
    _, info = wrapped.reset(seed=1)
    assert info["randomization"]["mass"]["cube"] != masses[0]


def test_same_seed_same_samples():
    def samples(seed):
        wrapped = DomainRandomization(pick_cube(), randomization_set("dynamics"), seed=seed)
        return [wrapped.reset(seed=i)[1]["randomization"] for i in range(5)]

    assert samples(7) == samples(7)
    assert samples(7) != samples(8)
    pinned = RandomizationEntry("mass", target="cube", attribute="body_mass", range=[0.5, 2], seed=42)
    other = RandomizationEntry("mass", target="cube", attribute="body_mass", range=[0.5, 2], seed=43)

    def first_sample(entry, seed):
        return DomainRandomization(pick_cube(), [entry], seed=seed).reset(seed=0)[1]["randomization"]

    # an entry's own seed picks a stream under the env's seed, never one that two env seeds share
    assert first_sample(pinned, 1) == first_sample(pinned, 1)
    assert first_sample(pinned, 1) != first_sample(pinned, 2)
    assert first_sample(pinned, 1) != first_sample(other, 1)


@pytest.mark.parametrize("name", ["dynamics", "actuation"])
def test_envs_built_with_different_seeds_draw_different_randomizations(name):
    """Every shipped set has a ``seed`` key; the env's seed (each env of train.num_envs, each fleet actor, each run
    seed) must still give draws of its own: the set's seed only picks a stream under it (issue 49)."""
    from robot_rl.runtime.fleet_settings import member_seed
    from robot_rl.runtime.robustness import randomized

    cfg = load_config(["task=pick_cube", f"randomization={name}"])
    assert cfg.randomization.get("seed") is not None

    def draws(seed):
        env = randomized(make_env(dict(cfg.task)), cfg.randomization, seed)
        obs, info = env.reset(seed=0)  # the same episode seed: only the env's seed differs
        states = [obs["state"], *(env.step(np.zeros(4, np.float32))[0]["state"] for _ in range(3))]
        env.close()
        return info["randomization"], np.stack(states)

    run = draws(0)
    assert run[0] == draws(0)[0] and np.array_equal(run[1], draws(0)[1])  # reproducible
    for seed in (1, 1000, member_seed(0, 0), member_seed(0, 1)):  # a run seed, env 1, fleet actors 0 and 1
        other = draws(seed)
        assert other[0] != run[0] or not np.array_equal(other[1], run[1]), seed


def test_curriculum_widens_the_range_with_training_steps():
    entry = RandomizationEntry(
        "m",
        target="cube",
        attribute="body_mass",
        range=[0.5, 3.0],
        curriculum={"start_step": 0, "end_step": 1000, "start_fraction": 0.0},
    )
    rng = np.random.default_rng(0)
    assert np.allclose(entry.sample(rng, 100, step=0), 1.0)  # nothing randomized at the start
    halfway = entry.sample(rng, 2000, step=500)
    assert halfway.min() >= 0.75 - 1e-9 and halfway.max() <= 2.0 + 1e-9 and halfway.max() > 1.9
    full = entry.sample(rng, 2000, step=5000)
    assert full.min() < 0.55 and full.max() > 2.9


@pytest.mark.parametrize(
    "spec, key, expected",
    [
        (
            {"target": "nothing_here", "attribute": "body_mass", "range": [0.5, 2]},
            "randomization.entries.bad.target",
            "a name (pattern) of a body in the model",
        ),
        (
            {"target": "cube", "attribute": "body_mass", "range": [2, 0.5]},
            "randomization.entries.bad.range",
            "low <= high",
        ),
        (
            {"target": "cube", "attribute": "body_mass", "range": [-1.0, -0.5], "mode": "additive"},
            "randomization.entries.bad.range",
            "keep body_mass >= 0",
        ),
        (
            {"target": "cube", "attribute": "geom_friction", "range": [-2.0, -1.0], "mode": "additive"},
            "randomization.entries.bad.range",
            "keep geom_friction >= 0",
        ),
        (
            {"target": "cube", "attribute": "body_colour", "range": [0, 1]},
            "randomization.entries.bad.attribute",
            "an attribute of mujoco.MjModel",
        ),
        (
            {"target": "cube", "attribute": "body_mass", "range": [1, 2], "distribution": "cauchy"},
            "randomization.entries.bad.distribution",
            "uniform, loguniform, normal",
        ),
        (
            {"target": "front", "attribute": "sensor.image_noise", "range": [0, 5], "mode": "absolute"},
            "randomization.entries.bad.target",
            "an observation key",
        ),
        (
            {"target": "cube", "attribute": "body_mass", "range": [1, 2], "speed": 3},
            "randomization.entries.bad.speed",
            "one of",
        ),
    ],
)
def test_bad_entries_are_named(spec, key, expected):
    with pytest.raises(ConfigError) as error:
        env = pick_cube()
        wrapped = DomainRandomization(env, entries_from_config({"entries": {"bad": spec}}), seed=0)
        wrapped.reset(seed=0)
    assert error.value.key == key and expected in str(error.value)


@pytest.mark.slow
def test_robosuite_tasks_randomize_through_the_same_wrapper():
    require("robosuite")
    task = dict(load_config(["task=robosuite_lift"]).task)
    env = make_env(task)
    model = env.unwrapped.mj_model
    body = next(
        mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, i)
        for i in range(model.nbody)
        if "cube" in (mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, i) or "")
    )
    default = float(model.body(body).mass[0])
    wrapped = DomainRandomization(
        env, [RandomizationEntry("m", target=body, attribute="body_mass", range=[2, 3])], seed=0
    )
    for seed in range(3):
        wrapped.reset(seed=seed)
        assert env.unwrapped.mj_model is model  # robosuite kept its model (no hard reset)
        assert 2 * default <= model.body(body).mass[0] <= 3 * default
