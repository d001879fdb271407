#!/usr/bin/env bash
# The whole suite. With CI=true it runs against the real PostgreSQL and Redis on
# 127.0.0.1 and fails loudly when either is missing; locally it falls back to
# SQLite and the filesystem broker unless DATABASE_URL / REDIS_URL are set.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
if [ "${CI:-}" = "true" ]; then
  export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/test}"
  export REDIS_URL="${REDIS_URL:-redis://127.0.0.1:6379/0}"
fi
$BIN/ruff check .
$BIN/ruff format --check .
$BIN/mypy
$BIN/lint-imports  # the layers: contracts in pyproject.toml
$BIN/pytest "$@"
