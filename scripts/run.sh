#!/usr/bin/env bash
# Embedded mode: web server, Celery worker and beat started together; Ctrl-C stops all three within 10 s.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export DEBUG="${DEBUG:-true}"
HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
#: seconds the children get to stop cleanly before they are killed
GRACE="${STOP_GRACE_SECONDS:-7}"

$BIN/python manage.py migrate --no-input -v0
if command -v msgfmt >/dev/null; then
  $BIN/python manage.py compilemessages -l zh_Hans --ignore=.venv -v0
fi
$BIN/python manage.py setup_demo

pids=()

# alive: is any child still running; all_alive: are all of them
alive() {
  local pid
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null && return 0
  done
  return 1
}
all_alive() {
  local pid
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null || return 1
  done
}

# Ctrl-C sends SIGINT to every process of the terminal's group: the worker starts a warm shutdown (it finishes
# the task in hand), beat and the web server exit. Whatever has not stopped after GRACE seconds (a long task, a
# worker stuck in shutdown) is killed with its pool processes; an interrupted run is picked up again by the stale
# run recovery. The same happens when any of the three exits or the script is killed.
stop() {
  trap - INT TERM EXIT
  local pid deadline=$((SECONDS + GRACE))
  kill -TERM "${pids[@]}" 2>/dev/null || true
  while alive && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 0.2
  done
  for pid in "${pids[@]}"; do
    pkill -KILL -P "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

# beat runs as its own process: embedded in the worker (--beat) it could hang the worker's shutdown
$BIN/celery -A console worker --loglevel=INFO --concurrency=2 &
pids+=($!)
$BIN/celery -A console beat --loglevel=INFO --schedule "${VAR_DIR:-var}/celerybeat-schedule" &
pids+=($!)
$BIN/python manage.py runserver --noreload "$HOST:$PORT" &
pids+=($!)

# the banner once the console answers (any HTTP status: /healthz says 503 while the broker is down)
until $BIN/python -c "import sys, urllib.request, urllib.error
try:
    urllib.request.urlopen(sys.argv[1], timeout=2)
except urllib.error.HTTPError:
    pass" "http://$HOST:$PORT/healthz" 2>/dev/null; do
  all_alive || exit 1  # one of them failed to start (its error is above)
  sleep 0.5
done
echo
echo "  Console: http://$HOST:$PORT/   (log in as admin / demo-console; Ctrl-C stops web, worker and beat)"
echo
wait -n "${pids[@]}"
