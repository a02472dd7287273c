#!/usr/bin/env bash
# Set up (if needed) and run the main job. Extra arguments are Hydra overrides, e.g. task=reach.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export MUJOCO_GL=${MUJOCO_GL:-egl}
exec .venv/bin/robot-rl collect "$@"
