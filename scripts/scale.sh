#!/usr/bin/env bash
# `make scale`: Batch Lanes scaled out on this machine. One redis-server, engine workers that take runs from it,
# and several web processes that all serve the page and share the runs through it (and one run store, --data).
# Ctrl-C stops everything this script started.
#
#   scripts/scale.sh                          # redis on 6390, 2 engine workers (real model), webs on 5001-5003
#   BACKEND=sim PORTS="5001 5002" scripts/scale.sh
#
# Settings (environment): PY (.venv/bin/python), REDIS_PORT (6390), PORTS ("5001 5002 5003", spaces or commas),
# WORKERS (2), BACKEND (model, or sim for the simulator), DATA (data/), HOST (127.0.0.1), ASYNC_MODE (threading or
# eventlet), LOG_DIR (a new temporary folder): each process writes its log there, REDIS_PERSIST (yes: Redis keeps
# an append-only file in LOG_DIR, fsync on every write, so a Redis restart keeps the queue and every run's state;
# no: a restarted Redis comes back empty and only the running runs are written back by their engine workers).
# Every process inherits this environment: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (and the other OTEL_* variables) makes
# each web process export a trace span per completion request, as --otlp-traces-endpoint would (docs/live-api.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
REDIS_PORT=${REDIS_PORT:-6390}
PORTS=${PORTS:-"5001 5002 5003"}
WORKERS=${WORKERS:-2}
BACKEND=${BACKEND:-model}
DATA=${DATA:-data}
HOST=${HOST:-127.0.0.1}
ASYNC_MODE=${ASYNC_MODE:-threading}
READY_TIMEOUT_S=${READY_TIMEOUT_S:-180}
REDIS_PERSIST=${REDIS_PERSIST:-yes}

REDIS_SERVER=$(command -v redis-server || true)
if [ -z "$REDIS_SERVER" ]; then
  echo "error: scale-out mode needs redis-server, which is not installed; run:" >&2
  echo "    sudo apt-get install -y redis-server" >&2
  echo "(or scripts/need_redis.sh, which installs it where it may)" >&2
  exit 1
fi
if [ ! -x "$PY" ]; then
  echo "error: no Python at $PY: run make setup first (or set PY)" >&2
  exit 1
fi
PORTS=${PORTS//,/ }
LOG_DIR=${LOG_DIR:-$(mktemp -d -t batch-lanes-scale.XXXXXX)}
mkdir -p "$LOG_DIR" "$DATA"
export PYTHONUNBUFFERED=1 OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
MQ="redis://127.0.0.1:$REDIS_PORT/0"
BACKEND_ARGS=()
[ "$BACKEND" = model ] || BACKEND_ARGS=(--backend "$BACKEND")

PIDS=()
NAMES=()
stop_pids() {  # stop_pids PID...: SIGTERM them, wait up to 10 s, SIGKILL what is left
  local pid alive
  [ $# -eq 0 ] && return 0
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.2
  done
  for pid in "$@"; do kill -KILL "$pid" 2>/dev/null || true; done
}
cleanup() {
  trap - EXIT INT TERM
  [ ${#PIDS[@]} -eq 0 ] && return
  echo "stopping ${#PIDS[@]} processes..."
  # webs and engine workers first: on the way out they take themselves off Redis, so redis (PIDS[0]) goes last
  stop_pids "${PIDS[@]:1}"
  stop_pids "${PIDS[0]}"
  wait 2>/dev/null || true
  echo "stopped; logs in $LOG_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start() {  # start NAME CMD...: in the background, its output in $LOG_DIR/NAME.log
  local name=$1
  shift
  "$@" >"$LOG_DIR/$name.log" 2>&1 &
  PIDS+=($!)
  NAMES+=("$name")
}

died() {  # the name of a started process that is no longer running, if any
  local i
  for i in "${!PIDS[@]}"; do
    if ! kill -0 "${PIDS[i]}" 2>/dev/null; then echo "${NAMES[i]}"; return 0; fi
  done
  return 1
}

fail() {  # fail NAME: say that it stopped, show its log's end, and stop the rest
  echo "error: $1 stopped; the end of $LOG_DIR/$1.log:" >&2
  tail -n 25 "$LOG_DIR/$1.log" >&2 || true
  exit 1
}

redis_ping() {
  (exec 3<>"/dev/tcp/127.0.0.1/$REDIS_PORT" && printf 'PING\r\n' >&3 && IFS= read -r -t 2 reply <&3 &&
   [[ $reply == +PONG* ]]) 2>/dev/null
}

if redis_ping; then
  echo "error: something already answers on port $REDIS_PORT; set REDIS_PORT to a free port" >&2
  exit 1
fi
echo "logs: $LOG_DIR"
PERSIST_ARGS=(--appendonly no)
[ "$REDIS_PERSIST" = yes ] && PERSIST_ARGS=(--appendonly yes --appendfsync always)
start redis "$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" "${PERSIST_ARGS[@]}" --dir "$LOG_DIR"
for _ in $(seq 100); do
  redis_ping && break
  name=$(died) && fail "$name"
  sleep 0.1
done
redis_ping || fail redis
echo "redis-server on port $REDIS_PORT (persistence: $REDIS_PERSIST)"

for i in $(seq "$WORKERS"); do
  start "worker$i" "$PY" -m app.engine_worker --message-queue "$MQ" "${BACKEND_ARGS[@]}" --data "$DATA"
done
echo "$WORKERS engine workers (backend $BACKEND)"
for port in $PORTS; do
  start "web$port" "$PY" -m app --message-queue "$MQ" --host "$HOST" --port "$port" --data "$DATA" \
    --async-mode "$ASYNC_MODE"
done

ready() {  # ready PORT: /healthz on that web process says ready
  "$PY" - "$1" <<'EOF' 2>/dev/null
import json, sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=3) as r:
    sys.exit(0 if json.loads(r.read()).get("ready") else 1)
EOF
}

echo "waiting for the web processes and an engine worker to be ready (up to ${READY_TIMEOUT_S} s)..."
deadline=$((SECONDS + READY_TIMEOUT_S))
for port in $PORTS; do
  until ready "$port"; do
    name=$(died) && fail "$name"
    if [ $SECONDS -ge $deadline ]; then
      echo "error: the web process on port $port is not ready after ${READY_TIMEOUT_S} s; logs in $LOG_DIR" >&2
      exit 1
    fi
    sleep 0.5
  done
done

echo
echo "Batch Lanes, scaled out: $WORKERS engine workers ($BACKEND) and these web processes, one Redis ($MQ):"
for port in $PORTS; do
  shown=$HOST
  [ "$HOST" = 0.0.0.0 ] && shown=127.0.0.1
  echo "    http://$shown:$port/"
done
echo "Ctrl-C stops them all."

while true; do  # until Ctrl-C, or until one of them stops
  name=$(died) && fail "$name"
  sleep 1
done
