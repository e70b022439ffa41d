#!/usr/bin/env bash
# Install everything ragstream needs on a fresh Debian machine, idempotently:
# Debian packages (apt-get) and the Python virtualenv .venv (pip, with the lock in
# requirements/constraints.txt).  Re-running skips what is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
APT_PACKAGES=(libmagic1 postgresql tesseract-ocr tesseract-ocr-eng poppler-utils chromium
              libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui
              python3-uno bubblewrap socat iproute2 curl)

need_apt=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "bootstrap: apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

stamp=.venv/.ragstream-installed
want=$(cat pyproject.toml requirements/constraints.txt | sha256sum | cut -c1-16)
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "bootstrap: pip install (a few minutes on a fresh machine)"
  .venv/bin/python -m pip install -q --upgrade "pip>=24"
  # torch==2.13.0 is pinned in pyproject: pip takes the CPU wheel that lies on these
  # machines' disk instead of downloading a multi-GB CUDA build.
  .venv/bin/python -m pip install -q -c requirements/constraints.txt -e ".[test]"
  echo "$want" > "$stamp"
fi

# The Triton server's own environment (.venv-triton: nvidia-pytriton pins numpy<2).
bash triton/setup_server_env.sh

# The warm converter's environment (.venv-uno: unoserver under /usr/bin/python3 + pyuno).
bash scripts/setup_uno_env.sh

# Build the embedding model (ONNX, pooling + normalisation in the graph) once.
.venv/bin/python -c "from adapters.embedder import DEFAULT_ONNX_PATH as p, export_onnx; p.exists() or export_onnx(p)"
echo "bootstrap: ready"
