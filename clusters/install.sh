#!/usr/bin/env bash
# Install adaptlab and its pinned runtime into a virtual environment. One script for the
# container image (Dockerfile) and the VM bootstrap (vm-cluster.yaml), so both get the same
# versions.
#
#   clusters/install.sh PROJECT [cpu|gpu]
#     PROJECT  a project folder, a wheel (adaptlab-*.whl) or an sdist (adaptlab-*.tar.gz)
#     cpu|gpu  torch from PyTorch's CPU wheel index, or its CUDA 12.8 index (+ the gpu extra);
#              either way with the all extra, so every model family runs on the cluster
#   env: ADAPTLAB_VENV (default /opt/adaptlab/venv), PIP_INDEX_URL / TORCH_INDEX_URL to use a
#        mirror, ADAPTLAB_INSTALL_DRY_RUN=1 to print the commands instead of running them.
#
# Needs python3 >= 3.10 with the venv module (Ubuntu: apt-get install -y python3-venv).
# Never needs root when ADAPTLAB_VENV is writable; installs nothing into the system Python (PEP 668).
set -euo pipefail

RAY_VERSION="2.60.0"
TORCH_VERSION="2.13.0"

project="${1:?usage: install.sh PROJECT [cpu|gpu]}"
variant="${2:-cpu}"
venv="${ADAPTLAB_VENV:-/opt/adaptlab/venv}"

case "$variant" in
  cpu) torch_index="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}"; extra="[all]" ;;
  gpu) torch_index="${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cu128}"; extra="[all,gpu]" ;;
  *) echo "install.sh: variant must be cpu or gpu, got '$variant'" >&2; exit 2 ;;
esac

if [ -d "$project" ]; then
  [ -f "$project/pyproject.toml" ] || { echo "install.sh: $project has no pyproject.toml" >&2; exit 2; }
elif [ ! -f "$project" ]; then
  echo "install.sh: $project: no such folder, wheel or sdist" >&2; exit 2
fi

run() {
  if [ "${ADAPTLAB_INSTALL_DRY_RUN:-0}" = "1" ]; then printf '%q ' "$@"; echo; else "$@"; fi
}

run python3 -m venv "$venv"
run "$venv/bin/python" -m pip install --no-cache-dir --upgrade "pip>=24"
run "$venv/bin/python" -m pip install --no-cache-dir --index-url "$torch_index" "torch==$TORCH_VERSION"
# torch first: the project's "torch>=2.3" is then already satisfied and pulls nothing more
run "$venv/bin/python" -m pip install --no-cache-dir "ray[default,tune]==$RAY_VERSION" "${project}${extra}"
run "$venv/bin/python" -c "import adaptlab, ray, torch; print('adaptlab', adaptlab.__version__, 'ray', ray.__version__, 'torch', torch.__version__)"
