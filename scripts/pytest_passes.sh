#!/usr/bin/env bash
# `make pytest` and `make test-db`: the suite in two passes, each reporting its 25 slowest tests and its wall time.
#   1. parallel: all but the slow and browser tests, on pytest-xdist workers (PYTEST_WORKERS; default one per
#      core, at most 8). Each worker starts its own redis-server and gets its own test database (pytest-django
#      adds _gwN to its name), so the tests share nothing.
#   2. serial: the `slow` tests (real worker, web and Redis processes, signals, timing) and the `browser` ones,
#      one at a time as before: each starts several processes and keeps both cores busy on its own, and their
#      timing would be at the mercy of the parallel pass if the two overlapped.
# Usage: scripts/pytest_passes.sh [MARK_EXPRESSION] [pytest arguments...]; MARK_EXPRESSION ("" for all)
# narrows both passes (`make test-db` passes "db"). A pass that selects no test (pytest's exit 5) is not a failure;
# both passes run even when the first fails, and the exit code is the first failure's.
# PYTEST_WORKERS=0 runs the first pass without workers too (the suite as it ran before xdist).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
mark=${1:-}
shift || true
workers=${PYTEST_WORKERS:-$(nproc 2>/dev/null || echo 2)}
[ "$workers" -gt 8 ] && workers=8

heavy="slow or browser"
if [ -n "$mark" ]; then
  parallel_mark="($mark) and not ($heavy)"
  serial_mark="($mark) and ($heavy)"
else
  parallel_mark="not ($heavy)"
  serial_mark="$heavy"
fi

status=0
summary=()
run_pass() {  # name, pytest arguments...
  local name=$1 started code
  shift
  echo "== $name: pytest $* =="
  started=$(date +%s)
  "$PY" -m pytest -q --durations=25 "$@"
  code=$?
  [ "$code" -eq 5 ] && code=0  # nothing selected in this pass
  summary+=("$name pass: $(($(date +%s) - started)) s (exit $code)")
  [ "$status" -eq 0 ] && status=$code
}

total_started=$(date +%s)
run_pass "parallel ($workers workers)" -n "$workers" -m "$parallel_mark" "$@"
run_pass "serial" -p no:xdist -m "$serial_mark" "$@"
echo "== wall time =="
printf '%s\n' "${summary[@]}" "total: $(($(date +%s) - total_started)) s"
exit "$status"
