#!/usr/bin/env bash
# Create (or update) .venv-uno: the warm converter's (unoserver's) own environment.
#
# unoserver must run under a Python that can `import uno`; on Debian that is the
# system /usr/bin/python3 with the python3-uno package (the pipeline's .venv uses
# another interpreter build, without pyuno).  So this venv is made from
# /usr/bin/python3 with --system-site-packages and gets only unoserver.
#
# Idempotent: a quick check when everything is already installed.
# Usage: scripts/setup_uno_env.sh [VENV_DIR]        (default: <repo>/.venv-uno)
# Env:   UNO_PYTHON=/usr/bin/python3, UNOSERVER_VERSION=3.7
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$ROOT/.venv-uno}"
PY="${UNO_PYTHON:-/usr/bin/python3}"
VERSION="${UNOSERVER_VERSION:-3.7}"

if ! "$PY" -c 'import uno' 2>/dev/null; then
  echo "setup_uno_env: $PY cannot import uno (apt-get install python3-uno); skipping" >&2
  exit 0
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "creating $VENV with $PY (--system-site-packages, for pyuno)"
  "$PY" -m venv --system-site-packages "$VENV"
fi
if "$VENV/bin/python" -c "import uno, importlib.metadata as m, sys; sys.exit(m.version('unoserver') != '$VERSION')" 2>/dev/null; then
  echo "$VENV is up to date"
else
  "$VENV/bin/python" -m pip install --quiet "unoserver==$VERSION"
  echo "$VENV: unoserver $VERSION installed"
fi
