#!/usr/bin/env bash
# The test command: the suite against a test stack of its own (ports 2xxxx, data in
# .ragstream-test), started and stopped by tests/conftest.py.  Extra args go to pytest.
#
# Two pytest processes run side by side (tests/conftest.py suite_part decides which
# test goes where):
#   stack  the tests that use the embedded stack, or are marked integration/slow, in
#          order, on the session stack (output here, test-output/junit.xml);
#   unit   every other test (no stack, no services), under `nice` so the stack tests'
#          timing is first on the CPU (output in test-output/unit.log, printed at its end;
#          test-output/junit-unit.xml).
# The stack tests mostly wait on their services, so the unit tests use cores that would
# sit idle: measured in the README (its "How long, in CI's layout" list).
# RAGSTREAM_TEST_SERIAL=1 runs one process with every test instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p test-output
PYTEST=(.venv/bin/python -m pytest -ra --timeout=900 --durations=30)

if [[ "${RAGSTREAM_TEST_SERIAL:-0}" == "1" ]]; then
  # test-output/junit.xml keeps every test's duration (the console shows the slowest 30)
  exec "${PYTEST[@]}" --junitxml=test-output/junit.xml "$@"
fi

# each part draws the ports of its tests' own services from a range of its own
# (devstack/ports.py; + offsets up to 10011 for SeaweedFS: 22000-26911 and 27000-31911)
unit_tmp=$(mktemp -d /tmp/ragstream-unit-XXXXXX)
RAGSTREAM_TEST_PART=unit RAGSTREAM_FREE_PORTS=17000-21900 nice -n 10 "${PYTEST[@]}" -p no:cacheprovider --basetemp="$unit_tmp/t" \
  --junitxml=test-output/junit-unit.xml "$@" > test-output/unit.log 2>&1 &
unit_pid=$!
trap 'kill "$unit_pid" 2>/dev/null || true' INT TERM

set +e
RAGSTREAM_TEST_PART=stack RAGSTREAM_FREE_PORTS=12000-16900 "${PYTEST[@]}" --junitxml=test-output/junit.xml "$@"
stack_rc=$?
wait "$unit_pid"
unit_rc=$?
set -e
rm -rf "$unit_tmp"

echo
echo "================ the unit part (test-output/unit.log) ================"
cat test-output/unit.log
echo "stack part: exit ${stack_rc}; unit part: exit ${unit_rc}"
# 5: that part had no test to run (arguments that select only the other part's tests)
if [[ $stack_rc -eq 5 && $unit_rc -eq 5 ]]; then exit 5; fi
[[ $stack_rc -eq 5 ]] && stack_rc=0
[[ $unit_rc -eq 5 ]] && unit_rc=0
if [[ $stack_rc -ne 0 ]]; then exit "$stack_rc"; fi
exit "$unit_rc"
