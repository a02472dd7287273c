#!/usr/bin/env bash
# Set up (if needed) and run the test suite. Extra arguments go to pytest.
#   bash scripts/test.sh          every test (the README's command, and CI's)
#   bash scripts/test.sh --fast   all but the tests marked slow (learning, multi-process, builds): the edit loop
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
selection=()
if [[ ${1:-} == --fast ]]; then
  shift
  selection=(-m "not slow")
fi
bash scripts/setup.sh
export MUJOCO_GL=${MUJOCO_GL:-egl}
exec .venv/bin/python -m pytest -q --durations=25 "${selection[@]}" "$@"  # the slowest 25 at the end: docs/testing.md
