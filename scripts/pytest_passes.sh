#!/usr/bin/env bash
# `make pytest` and `make test-db`: the suite in two passes, each reporting its 25 slowest tests and its wall time.
#   1. parallel: all but the slow and browser tests, on pytest-xdist workers (PYTEST_WORKERS; default two per
#      core, at most 8: a worker spends most of its time waiting for Redis, a subprocess or a sleep, so one per
#      core left each core 55-75 % idle; on the 2-core VM, 4 workers took the pass from 291 to 180 s). Each worker starts its own redis-server and gets its own test database (pytest-django
#      adds _gwN to its name), so the tests share nothing.
#   2. slow: the `slow` tests (real worker, web and Redis processes, signals, timing) and the `browser` ones, after
#      the parallel pass (their timing would be at the mercy of its CPU-bound workers if the two overlapped), on
#      SLOW_WORKERS xdist workers (default one more than the cores, at most 6): these tests mostly wait (for
#      leases, processes, a browser); on the 2-core VM, 3 workers took the pass from 382 to 332 s. Whole modules go to one worker (--dist loadscope):
#      their module fixtures (the quick chaos run, the adopted project's wheel) then run once, not once a worker.
#      The longest modules go first (tests/conftest.py orders them by tests/slow_module_seconds.json, which
#      `scripts/slow_module_seconds.py var/pytest-slow.xml` refreshes from this pass's report).
# Usage: scripts/pytest_passes.sh [MARK_EXPRESSION] [pytest arguments...]; MARK_EXPRESSION ("" for all)
# narrows both passes (`make test-db` passes "db"). A pass that selects no test (pytest's exit 5) is not a failure;
# both passes run even when the first fails, and the exit code is the first failure's.
# PYTEST_WORKERS=0 runs the first pass without workers too, SLOW_WORKERS=0 the second (one test at a time).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
mark=${1:-}
shift || true
cores=$(nproc 2>/dev/null || echo 2)
workers=${PYTEST_WORKERS:-$((2 * cores))}
[ "$workers" -gt 8 ] && workers=8
slow_workers=${SLOW_WORKERS:-$((cores + 1))}
[ "$slow_workers" -gt 6 ] && slow_workers=6

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
if [ "$slow_workers" -gt 0 ]; then
  run_pass "slow ($slow_workers workers)" -n "$slow_workers" --dist loadscope --no-loadscope-reorder \
    --junitxml=var/pytest-slow.xml -m "$serial_mark" "$@"
else
  run_pass "slow (one at a time)" -p no:xdist -m "$serial_mark" "$@"
fi
echo "== wall time =="
printf '%s\n' "${summary[@]}" "total: $(($(date +%s) - total_started)) s"
exit "$status"
