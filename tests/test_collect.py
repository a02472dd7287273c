"""robot-rl collect writes expert episodes; an interrupted run keeps every finished episode."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from robot_rl.core.composed_config import load_config
from robot_rl.core.config import ConfigError
from robot_rl.data import EpisodeStore
from robot_rl.runtime.collect import collect


def test_collect_writes_complete_episodes(tmp_path):
    out = tmp_path / "reach.zarr"
    cfg = load_config(["task=reach", "collect.episodes=4", f"collect.out={out}", "seed=10"])
    report = collect(cfg)
    assert report["episodes"] == 4 and report["episodes_in_store"] == 4 and report["success_rate"] == 1.0
    store = EpisodeStore.open(out)
    assert store.metadata["task"] == "reach" and store.metadata["action_dim"] == 4
    for index, episode in enumerate(store):
        length = episode["attrs"]["length"]
        assert episode["attrs"]["seed"] == 10 + index and episode["attrs"]["source"] == "demo"
        assert episode["obs"]["state"].shape == (length + 1, 19)
        assert episode["action"].shape == (length, 4) and episode["action"].dtype == np.float32
        assert episode["terminated"][-1] and episode["success"][-1]
        assert np.all(np.abs(episode["action"]) <= 1.0)

    # a second run appends
    collect(load_config(["task=reach", "collect.episodes=2", f"collect.out={out}", "seed=20"]))
    assert len(EpisodeStore.open(out)) == 6


def test_collected_actions_replay_to_the_same_outcome(tmp_path):
    out = tmp_path / "pick.zarr"
    collect(load_config(["task=pick_cube", "collect.episodes=1", f"collect.out={out}"]))
    episode = next(iter(EpisodeStore.open(out)))
    from robot_rl.runtime.envs import make_env

    env = make_env(load_config(["task=pick_cube"]).task)
    obs, _ = env.reset(seed=episode["attrs"]["seed"])
    np.testing.assert_array_equal(obs["state"], episode["obs"]["state"][0])
    for action in episode["action"]:
        obs, _, _terminated, _truncated, info = env.step(action)
    np.testing.assert_array_equal(obs["state"], episode["obs"]["state"][-1])
    assert info["success"]


def test_ctrl_c_keeps_every_finished_episode(tmp_path):
    out = tmp_path / "demos.zarr"
    # far more episodes than fit in the wait below (~12 episodes/s here): the run must still be going at the SIGINT
    command = [
        sys.executable,
        "-m",
        "robot_rl.cli.main",
        "collect",
        "task=peg_insert",
        "collect.episodes=10000",
        f"collect.out={out}",
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        episodes = out / "episodes"
        if episodes.exists() and len([p for p in episodes.iterdir() if p.name.startswith("episode_")]) >= 3:
            break
        time.sleep(0.1)
    os.kill(process.pid, signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    report = json.loads(stdout)
    assert report["interrupted"] and report["episodes"] >= 3
    store = EpisodeStore.open(out)
    assert len(store) == report["episodes"] == report["episodes_in_store"]
    for episode in store:
        assert episode["attrs"]["success"] and episode["obs"]["state"].shape[0] == episode["attrs"]["length"] + 1


def test_noisy_collection_records_probe_episodes_with_their_violations(tmp_path):
    out = tmp_path / "probe.zarr"
    overrides = [
        "task=pick_cube_hazard",
        "collect.episodes=6",
        f"collect.out={out}",
        "seed=100000",
        "collect.action_noise=1.0",
        "collect.noise_correlation=0.95",
    ]
    report = collect(load_config(overrides))
    episodes = list(EpisodeStore.open(out))
    assert all(e["attrs"]["source"] == "probe" and not e["intervened"].any() for e in episodes)
    flags = np.concatenate([e["safety_flags"] for e in episodes])
    assert flags.any() and report["violations_per_episode"] == (flags > 0).sum() / 6  # the hazards were hit
    assert sum(e["attrs"]["violations"] for e in episodes) == (flags > 0).sum()
    clean = collect(load_config([*overrides[:3], f"collect.out={tmp_path / 'demos.zarr'}"]))
    assert clean["violations_per_episode"] == 0.0  # the noiseless expert respects them


def test_bad_noise_settings_name_the_key(tmp_path):
    for key, value in (("collect.noise_correlation", 1.0), ("collect.action_noise", -0.1)):
        with pytest.raises(ConfigError) as error:
            collect(load_config(["task=reach", f"{key}={value}", f"collect.out={tmp_path / 'x.zarr'}"]))
        assert error.value.key == key
