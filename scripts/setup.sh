#!/usr/bin/env bash
# Set up robot_rl on Debian/Ubuntu with Python >= 3.10: system libraries for headless MuJoCo
# rendering and pyrealsense2 (installed when run as root, named otherwise), a virtualenv in
# .venv and robot-rl with all extras. Safe to run again: it skips what is already done.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# chromium, chromium-driver: the operator console's browser tests (tests/ros/test_console.py)
APT_PACKAGES=(libegl1 libegl-mesa0 libgl1-mesa-dri libosmesa6 libusb-1.0-0 chromium chromium-driver)
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}   # the CPU wheel on the lab's machines; any torch >= 2.2 works
UV_SPEC=${UV_SPEC:-uv==0.13.9}            # the installer; UV_SPEC=none installs with pip

missing=()
for package in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  if [[ $(id -u) == 0 ]]; then
    echo "robot-rl setup: apt-get install ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "robot-rl setup: not root, so these system packages were not installed: ${missing[*]}" >&2
    echo "robot-rl setup: run 'sudo apt-get install ${missing[*]}' for camera rendering, RealSense and the console's browser tests" >&2
  fi
fi

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || {
  echo "robot-rl setup: Python >= 3.10 is required, $PYTHON is $("$PYTHON" --version 2>&1)" >&2
  exit 1
}
[[ -x $VENV/bin/python ]] || "$PYTHON" -m venv "$VENV"

stamp=$VENV/.robot_rl_installed
fingerprint=$(cat pyproject.toml scripts/setup.sh scripts/uv_env.py robot_rl/safety/_mlp.c | sha256sum | cut -d' ' -f1)  # C: rebuilt
if [[ ! -f $stamp || $(cat "$stamp") != "$fingerprint" ]]; then
  # uv when it can be had: the same packages from the same sources, a fresh install in 24 s here instead of pip's 67
  if [[ $UV_SPEC != none ]] && "$VENV/bin/python" -m pip install -q "$UV_SPEC" 2>/dev/null; then
    # pip's find-links, indexes and constraints (scripts/uv_env.py); bytecode compiled, as pip does: where
    # PYTHONDONTWRITEBYTECODE=1 no import writes it, and every process would compile torch again
    mapfile -t uv_env < <("$VENV/bin/python" scripts/uv_env.py)
    install=(env "${uv_env[@]}" "$VENV/bin/python" -m uv pip install --python "$VENV/bin/python" -q --compile-bytecode)
  else
    echo "robot-rl setup: installing with pip (UV_SPEC=$UV_SPEC)"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    install=("$VENV/bin/python" -m pip install -q)
  fi
  "${install[@]}" "$TORCH_SPEC"
  "${install[@]}" -e ".[robosuite,ros,realsense,suites,data,fleet,dev]"
  echo "$fingerprint" > "$stamp"
fi
# bytecode for our own packages (the editable install compiles none): where PYTHONDONTWRITEBYTECODE=1 no import
# writes it, and every node process of a test would compile them again; quick when nothing changed
"$VENV/bin/python" -m compileall -q -j 0 robot_rl sim policies hardware  # -q: only errors are printed
echo "robot-rl setup: ready ($VENV, $("$VENV/bin/python" --version))"
