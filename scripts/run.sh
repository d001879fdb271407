#!/usr/bin/env bash
# Embedded mode: web server and a Celery worker in one process group; Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export DEBUG="${DEBUG:-true}"
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"

$BIN/python manage.py migrate --no-input -v0
if command -v msgfmt >/dev/null; then
  $BIN/python manage.py compilemessages -l zh_Hans --ignore=.venv -v0
fi
$BIN/python manage.py setup_demo

# stop both children (they shut down cleanly) when either exits or on Ctrl-C
trap 'trap - INT TERM EXIT; kill $(jobs -p) 2>/dev/null; wait' INT TERM EXIT
echo
echo "  Console: http://$HOST:$PORT/   (log in as admin / demo-console; Ctrl-C stops web and worker)"
echo
$BIN/celery -A console worker --loglevel=INFO --concurrency=2 --beat --schedule "${VAR_DIR:-var}/celerybeat-schedule" &
$BIN/python manage.py runserver --noreload "$HOST:$PORT" &
wait -n
