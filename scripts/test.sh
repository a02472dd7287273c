#!/usr/bin/env bash
# Set up (if needed) and run the test suite. Extra arguments go to pytest.
#   bash scripts/test.sh          every test (the README's command, and CI's)
#   bash scripts/test.sh --fast   all but the tests marked slow (learning, multi-process, builds): the edit loop
# The test files are shared among one pytest worker per core (ROBOT_RL_TEST_WORKERS, at most 4 by default; 1 runs in
# this process): every test has its own ROS 2 domain, run folder and Ray cluster, so workers never meet.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
selection=()
if [[ ${1:-} == --fast ]]; then
  shift
  selection=(-m "not slow")
fi
bash scripts/setup.sh
export MUJOCO_GL=${MUJOCO_GL:-egl}
workers=${ROBOT_RL_TEST_WORKERS:-$(($(nproc) < 4 ? $(nproc) : 4))}
parallel=()
if ((workers > 1)); then
  # a file's tests on one worker: its module fixtures are built once; the files in the order tests/conftest.py
  # gives them (those with a slow test first), not xdist's (the most tests first: the long single tests came last)
  parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder)
  # one OpenMP thread per process unless asked: two workers training torch models on two threads each spin-waited
  # each other out (the reward classifier's test took 638 s instead of 123 s)
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  # and Mesa's llvmpipe (EGL rendering without a GPU) rasterizes in the calling thread, not in a pool of its own:
  # 5-14% less CPU per camera frame (python -m benchmarks.render_threads)
  export LP_NUM_THREADS=${LP_NUM_THREADS:-0}
fi
exec .venv/bin/python -m pytest -q --durations=25 "${parallel[@]}" "${selection[@]}" "$@"  # the slowest 25 at the end: docs/testing.md
