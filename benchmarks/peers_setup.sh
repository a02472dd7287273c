#!/usr/bin/env bash
# The peers' own environments for benchmarks/peers.py (issue 75), under .peers/ (git-ignored), never the project's
# .venv: LeRobot 0.4.4 pins torch < 2.11, robot_rl runs on torch 2.13.
#   .peers/lerobot-venv  lerobot[hilserl]==0.4.4 (its SAC, actor and learner over gRPC, gym_manipulator) + gym-hil
#                        0.1.14 + robot_rl (editable: the tasks, the scripted human and the evaluation the workers
#                        share); torch 2.10 comes from PyPI with its CUDA wheels (~3 GB, a few minutes)
#   .peers/sb3-venv      stable-baselines3 + gym-hil 0.1.14 + robot_rl (editable, for robot_rl/PickCube-v0's
#                        gymnasium registration) on the project's torch 2.13 CPU wheel
#   .peers/gym-hil       gym-hil 0.1.14 alone (no dependencies), put on PYTHONPATH of the project's own robot-rl
#                        train for gym-hil's task: its dependencies (mujoco, gymnasium, ...) are the project's
# Safe to run again: a finished environment is kept (delete its folder to rebuild it).
#   bash benchmarks/peers_setup.sh [lerobot|sb3|gym-hil ...]     (default: all three)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
PEERS=.peers
LEROBOT_SPEC=("lerobot[hilserl]==0.4.4" "gym-hil==0.1.14")
SB3_SPEC=("stable-baselines3==2.9.2" "gym-hil==0.1.14" "matplotlib>=3.7")
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}   # the project's CPU wheel
UV_SPEC=${UV_SPEC:-uv==0.13.9}            # the installer (as scripts/setup.sh); UV_SPEC=none installs with pip

"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
  echo "peers setup: Python 3.11 is expected (lerobot 0.4.4's wheels), $PYTHON is $("$PYTHON" --version 2>&1)" >&2
  exit 1
}

# install VENV PACKAGE...: uv with pip's own sources (scripts/uv_env.py) when it can be had, pip otherwise
install() {
  local venv=$1
  shift
  if [[ $UV_SPEC != none ]] && "$venv/bin/python" -m pip install -q "$UV_SPEC" 2>/dev/null; then
    mapfile -t uv_env < <("$venv/bin/python" scripts/uv_env.py)
    env "${uv_env[@]}" "$venv/bin/python" -m uv pip install --python "$venv/bin/python" -q --compile-bytecode "$@"
  else
    "$venv/bin/python" -m pip install -q "$@"
  fi
}

build() {  # build NAME: create .peers/NAME-venv (or .peers/gym-hil) unless its stamp says it is done
  local name=$1 target stamp
  case $name in
    gym-hil) target=$PEERS/gym-hil ;;
    *) target=$PEERS/$name-venv ;;
  esac
  stamp=$target/.peers_ready
  if [[ -f $stamp ]]; then
    echo "peers setup: $target ready"
    return
  fi
  echo "peers setup: building $target"
  case $name in
    lerobot)
      "$PYTHON" -m venv "$target"
      install "$target" "${LEROBOT_SPEC[@]}" -e .   # one resolution: robot_rl's pins (numpy, mujoco) beside lerobot's
      ;;
    sb3)
      "$PYTHON" -m venv "$target"
      install "$target" "$TORCH_SPEC"
      install "$target" "${SB3_SPEC[@]}"
      install "$target" -e .
      ;;
    gym-hil)
      "$PYTHON" -m pip install -q --no-deps --target "$target" "gym-hil==0.1.14"
      ;;
    *)
      echo "peers setup: unknown environment $name; expected lerobot, sb3 or gym-hil" >&2
      exit 2
      ;;
  esac
  date -u +%FT%TZ > "$stamp"
  echo "peers setup: $target ready"
}

mkdir -p "$PEERS"
for name in "${@:-gym-hil sb3 lerobot}"; do
  for each in $name; do build "$each"; done
done
