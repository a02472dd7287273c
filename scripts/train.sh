#!/usr/bin/env bash
# Set up (if needed) and run the main job: HIL-SERL training on pick_cube with the scripted human.
# Extra arguments are Hydra overrides, e.g. seed=1 train.run_dir=runs/pick_seed1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export MUJOCO_GL=${MUJOCO_GL:-egl}
exec .venv/bin/robot-rl train "$@"
