"""The cell-fault benchmark's counting (benchmarks/cell_faults.py, issue 71): when the session moved again, whether
the arm moved while the safety node was down, and which episodes a kill lost or duplicated."""

from __future__ import annotations

import numpy as np

from benchmarks.cell_faults import (
    changes,
    console_row,
    largest_move,
    largest_move_beyond_target,
    ledger,
    moved_again,
    restart_line,
    safety_gaps,
)


def test_the_session_moves_again_at_the_first_passing_tick_after_a_command_sent_after_the_kill():
    actions = [9.0, 10.5, 12.0]
    ticks = [(10.0, 0), (10.6, 4), (11.0, 4), (12.1, 0), (12.2, 0)]
    assert moved_again(actions, ticks, since=10.2) == 12.1 - 10.2  # the held ticks after 10.5's command do not count
    assert moved_again(actions, ticks, since=12.5) is None  # no command since
    assert moved_again([13.0], ticks, since=12.5) is None  # a command, no tick passed it yet


def test_the_arm_moving_counts_only_inside_the_safety_nodes_gaps():
    ticks = [(t, 0) for t in np.arange(0.0, 2.0, 0.01)] + [(t, 0) for t in np.arange(5.0, 6.0, 0.01)]
    gaps = safety_gaps(ticks, 1.0, 6.0)
    assert len(gaps) == 1 and abs(gaps[0][0] - 1.99) < 1e-6 and gaps[0][1] == 5.0
    poses = [(t, np.array([0.5, 0.0, 0.3 + (0.01 if 3.0 <= t < 4.0 else 0.0)])) for t in np.arange(0.0, 6.0, 0.1)]
    assert abs(largest_move(poses, gaps) - 0.01) < 1e-9  # 1 cm while no tick came
    assert largest_move(poses, [(0.0, 2.5)]) == 0.0  # the arm still before
    assert safety_gaps(ticks, 0.5, 1.5) == []


def test_the_ledger_finds_a_lost_a_duplicated_and_a_cut_episode_in_their_windows():
    records = [
        (1.0, {"kind": "train", "uid": "a"}),  # before the first kill: no window
        (11.0, {"kind": "train", "uid": "b"}),
        (12.0, {"kind": "train", "uid": "c"}),  # never stored: lost
        (21.0, {"kind": "started", "episode_cut": True}),  # the actor's death cut "x" short
        (25.0, {"kind": "train", "uid": "d"}),
        (31.0, {"kind": "paused", "episode_cut": True}),  # a cut episode that no store holds: lost
        (35.0, {"kind": "train", "uid": "e"}),  # stored twice: duplicated
    ]
    stored = [
        {"uid": u, "store": "recorder"}
        for u in ("a", "b", "x", "d", "e", "stop")  # "stop": the session's stop cut it
    ] + [{"uid": "e", "store": "actor"}]
    rows = ledger(records, stored, kills=[10.0, 20.0, 30.0])
    assert [(r["ended"], r["lost"], r["duplicated"]) for r in rows] == [(2, 1, 0), (1, 0, 0), (1, 1, 1)]
    assert [(r["cuts_announced"], r["cuts_stored"]) for r in rows] == [(0, 0), (1, 1), (1, 0)]


def test_the_launchs_line_and_the_consoles_row_of_a_node():
    log = (
        "[launch] started teleop (pid 12): ...\n[launch] teleop exited with code -9; restarting it in 1 s (restart 1 of"
        " 3)\n[launch] teleop2 exited with code 1\n"
    )
    assert restart_line(log, "teleop") == "[launch] teleop exited with code -9; restarting it in 1 s (restart 1 of 3)"
    assert restart_line(log, "actor") is None
    rows = [{"name": "home_reset", "up": True}, {"name": "actor", "up": False}]
    assert console_row(rows, "reset") == rows[0] and console_row(rows, "safety") is None
    assert changes([1, 1, 2, 2, 1]) == [1, 2, 1]


def test_the_arm_going_on_to_the_safety_nodes_last_target_is_told_apart_from_going_elsewhere():
    """Left alone, the compliant arm goes on to the last target the safety node sent: 3 cm along that way is 0 beyond
    it; 1 cm sideways of it is 1 cm."""
    start, target = np.array([0.5, 0.0, 0.3]), np.array([0.53, 0.0, 0.3])
    targets = [(0.9, target)]
    along = [(0.0, start), (1.5, start + [0.015, 0.0, 0.0]), (2.0, target)]
    assert largest_move_beyond_target(along, targets, [(1.0, 3.0)]) < 1e-12
    assert abs(largest_move(along, [(1.0, 3.0)]) - 0.03) < 1e-9  # moved 3 cm, all of it on the way to the target
    aside = [*along, (2.5, target + [0.0, 0.01, 0.0])]
    assert abs(largest_move_beyond_target(aside, targets, [(1.0, 3.0)]) - 0.01) < 1e-9
    beyond = [*along, (2.5, target + [0.02, 0.0, 0.0])]  # past the target along the same line
    assert abs(largest_move_beyond_target(beyond, targets, [(1.0, 3.0)]) - 0.02) < 1e-9
    assert largest_move_beyond_target(along, [], [(1.0, 3.0)]) == 0.0  # no target known: nothing to say
