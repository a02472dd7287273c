"""The order the suite's files go to the workers in (``tests/conftest.py``, ``scripts/test.sh``)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.conftest import slow_files_first

ROOT = Path(__file__).resolve().parents[1]


def item(path: str, slow: bool) -> SimpleNamespace:
    return SimpleNamespace(path=Path(path), name=f"{path}:{slow}", get_closest_marker=lambda name: slow or None)


def test_the_files_with_a_slow_test_go_first_and_keep_their_order():
    quick_a, slow_b, mixed_c, slow_d = item("a.py", False), item("b.py", True), item("c.py", False), item("d.py", True)
    mixed_c_slow = item("c.py", True)
    ordered = slow_files_first([quick_a, slow_b, mixed_c, mixed_c_slow, slow_d])
    assert [entry.name for entry in ordered] == [
        slow_b.name,
        mixed_c.name,  # a file's tests stay together: a worker gets the whole file
        mixed_c_slow.name,
        slow_d.name,
        quick_a.name,
    ]


def test_the_test_script_keeps_that_order():
    """xdist reorders whole files by their number of tests unless told not to."""
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert "--dist loadfile --no-loadscope-reorder" in script
