#!/usr/bin/env bash
# Create (or update) .venv-triton: the Triton server's own environment.
#
# Why a separate venv: the only tritonserver installable from PyPI is the one bundled
# in `nvidia-pytriton` (tritonserver 2.51, Python backend only), and that wheel pins
# numpy<2 while the pipeline's environment resolves numpy 2.x.  The Python-backend
# models (triton/embedder/1/model.py, triton/reranker/1/model.py) run in this venv's
# interpreter, so it also gets onnxruntime and tokenizers.
#
# Idempotent: does nothing but a quick check when everything is already installed.
# Usage: triton/setup_server_env.sh [VENV_DIR]     (default: <repo>/.venv-triton)
# Env:   PYTHON=python3.11 (interpreter for the venv; the tritonserver wheel's Python
#        backend stub is built for the wheel's Python version)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv-triton}"
REQ="$ROOT/triton/server-requirements.txt"

if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x "$ROOT/.venv/bin/python" ]]; then
    # same base interpreter as the pipeline venv (Python 3.11)
    PYTHON="$("$ROOT/.venv/bin/python" -c 'import sys; print(sys.base_prefix)')/bin/python3"
  else
    PYTHON=python3.11
  fi
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "creating $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
fi

stamp="$VENV/.ragstream-requirements.sha256"
want="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] \
   && "$VENV/bin/python" -c 'import pytriton, onnxruntime, tokenizers, numpy' 2>/dev/null; then
  echo "$VENV is up to date"
else
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -r "$REQ"
  echo "$want" > "$stamp"
fi

bin="$("$VENV/bin/python" -c 'import pytriton, pathlib; print(pathlib.Path(pytriton.__file__).parent / "tritonserver" / "bin" / "tritonserver")')"
if [[ ! -x "$bin" ]]; then
  echo "tritonserver binary not found at $bin" >&2
  exit 1
fi
echo "tritonserver: $bin"
