"""The command-line half of ``benchmarks/fault_matrix.py`` as a test: every bad input a new user can type is
refused with one line and exit code 2, no user file is lost, a crafted checkpoint never runs, a resume of another
task definition is refused, corrupt stores are named. (The ROS 2 half: tests/ros/test_fuzz.py,
test_safety_node.py, test_node_restarts.py.)"""

import pytest

from benchmarks.fault_matrix import command_line_rows, totals


@pytest.mark.slow
def test_every_command_line_fault_is_refused_with_one_line_and_nothing_is_lost(tmp_path):
    rows = command_line_rows(tmp_path)
    failed = [f"{row.scenario}: expected {row.expected}; observed {row.observed}" for row in rows if not row.ok]
    assert not failed, "\n".join(failed)
    summary = totals(rows)
    assert summary["scenarios"] >= 30 and summary["bad_inputs"] >= 25
    assert summary["crashes"] == summary["hangs"] == summary["files_lost"] == 0
