"""The nodes' shared set-up (robot_rl/ros/plumbing/node_main.py) against real rclpy."""

import random
import subprocess
import sys
import threading

import pytest

from tests.conftest import require

ROUNDS = 500  # the old code failed within 20-195 rounds in every try (6 tries)


def test_a_background_executor_stops_without_an_error_in_its_thread(monkeypatch):
    """CI saw the robot fleet's actor print ``Exception in thread robot_rl_actor_executor ... InvalidHandle: cannot
    use Destroyable because destruction was requested`` as it shut down: ``Executor.shutdown`` from the node's main
    thread destroyed the executor's guard condition while the executor thread ran a callback about to trigger it
    (rclpy's shutdown does not wait for the spin in progress). A node with busy timers is spun in the background and
    stopped again, ``ROUNDS`` times, at random instants."""
    rclpy = require("rclpy")
    from robot_rl.ros.plumbing.node_main import spinning_in_background

    errors: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(repr(args.exc_value)))
    rclpy.init()
    node = rclpy.create_node("robot_rl_spinning")
    fired = []
    node.create_timer(0.0005, lambda: fired.append(1))
    node.create_timer(0.0003, lambda: None)
    rng = random.Random(0)
    try:
        for round_ in range(ROUNDS):
            with spinning_in_background(node) as thread:
                threading.Event().wait(rng.uniform(0.0, 0.005))
            assert not thread.is_alive()
            assert not errors, f"round {round_}: {errors[0]}"
    finally:
        node.destroy_node()
        rclpy.shutdown()
    assert fired  # the timers ran: the executor spun


# The second SIGINT, sent from every line the first one's ``set`` runs (never from a nested one): Python runs the
# second handler at its next check, inside that ``set``, where ``threading.Event.set`` holds the event's lock.
TWO_SIGNALS = """
import signal, sys, threading
from robot_rl.ros.plumbing.node_main import stop_requests

inside = []

def lines(frame, event, arg):
    if event == "line" and len(inside) == 1:
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    elif event == "return":
        inside.pop()
    return lines

def calls(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "set":
        inside.append(frame)
        return lines
    return None

with stop_requests() as stop:
    sys.settrace(calls)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    while not stop.is_set():
        pass
    sys.settrace(None)
print("stopped", stop.is_set(), signal.getsignal(signal.SIGINT) == signal.SIG_IGN)
"""


def test_a_second_stop_signal_inside_the_first_ones_handler_does_not_hang_the_node():
    """CI saw the emulated cell not stop within its launcher's 10 s after a Ctrl-C, and killed without its report: a
    node stopped with Ctrl-C gets SIGINT from its process group and again from its launcher, and the second handler
    ran inside the first one's ``threading.Event.set``, waiting forever for the lock that set held. Old code: the
    process below hangs."""
    require("rclpy")
    try:
        child = [sys.executable, "-c", TWO_SIGNALS]
        result = subprocess.run(child, check=False, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise AssertionError("a second SIGINT inside the first one's handler hung the process") from None
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["stopped", "True", "True"]  # stopped, and later signals ignored in the clean-up


# A node stopped as a launch stops it: SIGINT, then a second signal while the node cleans up
SECOND_SIGNAL_IN_THE_CLEAN_UP = """
import os, signal, sys, time
from robot_rl.ros.plumbing.node_main import ros_node

second = getattr(signal, sys.argv[1])
with ros_node("robot_rl_two_stops", []) as node:
    try:
        os.kill(os.getpid(), signal.SIGINT)  # the process group's Ctrl-C
        time.sleep(60)
    except KeyboardInterrupt:  # the clean-up, as the actor's: the launcher's signal comes in it
        os.kill(os.getpid(), second)
        time.sleep(0.2)
        print("cleaned up", flush=True)
"""


@pytest.mark.parametrize("second", ["SIGINT", "SIGTERM"])
def test_a_second_stop_signal_during_a_nodes_clean_up_is_ignored(second):
    """A loaded CI run's actor died with a traceback as its launch stopped it: the second SIGINT (its process group's,
    then its launcher's) came in its ``except KeyboardInterrupt`` clause, before that clause ignored signals. Now the
    first signal's handler ignores the later ones. Old code: a KeyboardInterrupt in the clean-up, no "cleaned up"."""
    require("rclpy")
    child = [sys.executable, "-c", SECOND_SIGNAL_IN_THE_CLEAN_UP, second]
    result = subprocess.run(child, check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stdout.split() == ["cleaned", "up"]


def test_the_stores_of_an_fr3_session_say_fr3_in_data_info(tmp_path, capsys):
    """Issue 73 item 7: ``robot-rl data info`` said ``robot panda`` for an fr3 session. The task spec ``robot-rl launch``
    hands its nodes, whose metadata the recorder and the actor write into their stores, took the robot from the sim
    model; it is the session's arm (``robot=fr3``) when the config names one."""
    require("rclpy")
    from robot_rl.cli.graph import graph_nodes, handed_task_spec
    from robot_rl.cli.main import main
    from robot_rl.core.composed_config import load_config
    from robot_rl.data import EpisodeStore
    from robot_rl.ros.plumbing.node_main import node_task_spec

    session = ["graph=collect_demos", "robot=fr3", "task=pick_cube"]
    cfg = load_config(session)
    with handed_task_spec(cfg, graph_nodes(cfg)) as spec_overrides:
        metadata = node_task_spec(load_config([*session, *spec_overrides])).metadata()  # what the recorder writes
    EpisodeStore.create(tmp_path / "demos.zarr", metadata)
    assert main(["data", "info", f"store={tmp_path / 'demos.zarr'}"]) == 0
    assert "task           pick_cube   robot fr3 " in capsys.readouterr().out
    assert node_task_spec(load_config(["task=pick_cube"])).robot == "panda"  # no arm named: the sim model's
