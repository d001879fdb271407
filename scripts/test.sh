#!/usr/bin/env bash
# The whole suite. With CI=true it runs against the real PostgreSQL and Redis on
# 127.0.0.1 and fails loudly when either is missing; locally it falls back to
# SQLite and the filesystem broker unless DATABASE_URL / REDIS_URL are set.
#
# Tests run in parallel (pytest-xdist, TEST_WORKERS processes, default one more than the CPU cores: about 30% of
# the suite's time is spent waiting on Celery workers, the browser and the database, and one more worker fills
# it. On 2 cores, with mypy beside the suite: 2 workers 224 s, 3 workers 204 and 217 s, 4 workers 200 and 227 s.)
# Extra arguments go to pytest: scripts/test.sh tests/console -x, or -n 0 to run in one process.
# scripts/test.sh --fast: the edit loop, no lint and no browser, real worker or fault-injection test.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
if [ "${CI:-}" = "true" ]; then
  export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
  export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
fi
# Bytecode caches, whatever the environment says: with PYTHONDONTWRITEBYTECODE every xdist worker, Celery
# worker and manage.py process compiles the project again, and pytest rewrites the asserts of every test
# module again (half of its collection time).
unset PYTHONDONTWRITEBYTECODE
parallel=(-n "${TEST_WORKERS:-$($BIN/python -c 'import os; print((os.cpu_count() or 1) + 1)')}" --dist worksteal)
if [ "${1:-}" = "--fast" ]; then
  shift
  exec $BIN/pytest "${parallel[@]}" -m "not browser and not worker and not faults" "$@"
fi
$BIN/ruff check .
$BIN/ruff format --check .
$BIN/lint-imports  # the layers: contracts in pyproject.toml
# mypy from cold needs about 15 s of one core, and the suite leaves the cores idle about 30% of its time (waiting
# on workers, browsers and the database): mypy runs beside it at a lower priority and is reported at the end.
mypy_log=$(mktemp)
nice -n 10 $BIN/mypy >"$mypy_log" 2>&1 &
mypy_pid=$!
# a background job ignores Ctrl-C: an interrupted run stops mypy itself
trap 'kill "$mypy_pid" 2>/dev/null || true; rm -f "$mypy_log"' EXIT
trap 'exit 130' INT TERM
status=0
$BIN/pytest "${parallel[@]}" "$@" || status=$?
if wait "$mypy_pid"; then
  tail -n 1 "$mypy_log"
else
  cat "$mypy_log"
  echo "mypy found errors (above)" >&2
  status=1
fi
exit "$status"
