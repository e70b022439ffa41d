#!/usr/bin/env bash
# The test command: the suite against a test stack of its own (ports 2xxxx, data in
# .ragstream-test), started and stopped by tests/conftest.py.  Extra args go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-output
# test-output/junit.xml keeps every test's duration (the console shows the slowest 30)
exec .venv/bin/python -m pytest -ra --timeout=900 --durations=30 --junitxml=test-output/junit.xml "$@"
