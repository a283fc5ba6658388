#!/usr/bin/env bash
# `make scale`: Batch Lanes scaled out on this machine. One redis-server, engine workers that take runs from it,
# and several web processes that all serve the page and share the runs through it (and one run store, --data).
# When one process exits the others keep serving: a line says which, its exit code and when; RESTART=yes starts it
# again. Ctrl-C (or SIGTERM) stops everything this script started.
#
#   scripts/scale.sh                          # redis on 6390, 2 engine workers (real model), webs on 5001-5003
#   BACKEND=sim PORTS="5001 5002" RESTART=yes scripts/scale.sh
#   kill -9 "$(cat "$LOG_DIR/worker1.pid")"   # a fault of docs/scale-out.md's tables: the rest keeps serving
#
# Settings (environment): PY (.venv/bin/python), REDIS_PORT (6390), PORTS ("5001 5002 5003", spaces or commas),
# WORKERS (2), BACKEND (model, or sim for the simulator), PACE (with sim: each simulated step takes PACE times its
# simulated time; 1, real time, by default; 0 as fast as it goes), DATA (data/), HOST (127.0.0.1), ASYNC_MODE
# (threading or eventlet), LOG_DIR (a new temporary folder): each process writes its log (NAME.log) and its pid
# (NAME.pid) there, REDIS_PERSIST (yes: Redis keeps an append-only file in LOG_DIR, fsync on every write, so a
# Redis restart keeps the queue and every run's state; no: a restarted Redis comes back empty and only the running
# runs are written back by their engine workers), RESTART (no; yes: a process that exits after start-up is started
# again, after 1, 2, 4, 8, then 16 s), RESTART_MAX (5: the most restarts of each process).
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
PACE=${PACE:-1}
RESTART=${RESTART:-no}
RESTART_MAX=${RESTART_MAX:-5}

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
[ "$BACKEND" = sim ] && BACKEND_ARGS+=(--pace "$PACE")

PIDS=()      # per process, in start order (redis first): its pid, "" while it is not running
NAMES=()     # redis, worker1.., web5001..
BORN=()      # when it (last) started, ms
RESTARTS=()  # how often it was restarted
DUE=()       # when it is to be restarted, ms ("" when it is not)
now_ms() { local t=${EPOCHREALTIME/[.,]/}; echo $((t / 1000)); }
say() { echo "[$(date -u +%H:%M:%S)] $*"; }
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
  local i others=()
  [ ${#PIDS[@]} -eq 0 ] && return
  for i in "${!PIDS[@]}"; do [ "$i" -gt 0 ] && [ -n "${PIDS[i]}" ] && others+=("${PIDS[i]}"); done
  echo "stopping $((${#others[@]} + (${#PIDS[0]} > 0))) processes..."
  # webs and engine workers first: on the way out they take themselves off Redis, so redis (PIDS[0]) goes last
  stop_pids "${others[@]}"
  [ -n "${PIDS[0]}" ] && stop_pids "${PIDS[0]}"
  wait 2>/dev/null || true
  echo "stopped; logs in $LOG_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

launch() {  # launch I: start process I (by its name) in the background, its output appended to $LOG_DIR/NAME.log
  local name=${NAMES[$1]}
  local cmd=()
  case $name in
    redis) cmd=("$REDIS_SERVER" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" "${PERSIST_ARGS[@]}" --dir "$LOG_DIR") ;;
    worker*) cmd=("$PY" -m app.engine_worker --message-queue "$MQ" "${BACKEND_ARGS[@]}" --data "$DATA") ;;
    web*) cmd=("$PY" -m app --message-queue "$MQ" --host "$HOST" --port "${name#web}" --data "$DATA"
               --async-mode "$ASYNC_MODE") ;;
  esac
  "${cmd[@]}" >>"$LOG_DIR/$name.log" 2>&1 &
  PIDS[$1]=$!
  BORN[$1]=$(now_ms)
  echo "$!" >"$LOG_DIR/$name.pid"
}

start() {  # start NAME: a new process, started
  local i=${#NAMES[@]}
  NAMES[i]=$1
  RESTARTS[i]=0
  DUE[i]=""
  launch "$i"
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

exited() {  # exited I: process I is no longer running: say so, and plan its restart if RESTART=yes and any are left
  local i=$1 pid=${PIDS[$1]} code=0 how="" delay
  wait "$pid" 2>/dev/null || code=$?
  PIDS[i]=""
  [ "$code" -gt 128 ] && how=" (killed by SIG$(kill -l $((code - 128)) 2>/dev/null || echo $((code - 128))))"
  say "${NAMES[i]} (pid $pid) exited with code $code$how after $((($(now_ms) - BORN[i]) / 1000)) s;" \
      "the others keep serving; its log: $LOG_DIR/${NAMES[i]}.log"
  if [ "$RESTART" != yes ]; then
    say "${NAMES[i]} is not restarted (RESTART=yes would)"
  elif [ "${RESTARTS[i]}" -ge "$RESTART_MAX" ]; then
    say "${NAMES[i]} is not restarted: restarted $RESTART_MAX times already (RESTART_MAX)"
  else
    delay=$((1 << RESTARTS[i]))
    [ $delay -gt 16 ] && delay=16
    RESTARTS[i]=$((RESTARTS[i] + 1))
    DUE[i]=$(($(now_ms) + delay * 1000))
    say "${NAMES[i]} restarts in $delay s (restart ${RESTARTS[i]} of at most $RESTART_MAX)"
  fi
}

supervise() {  # until Ctrl-C: report each process that exits, restart it when due; end when nothing is left to serve
  local i
  while true; do
    for i in "${!NAMES[@]}"; do
      if [ -n "${PIDS[i]}" ] && ! kill -0 "${PIDS[i]}" 2>/dev/null; then
        exited "$i"
      elif [ -z "${PIDS[i]}" ] && [ -n "${DUE[i]}" ] && [ "$(now_ms)" -ge "${DUE[i]}" ]; then
        DUE[i]=""
        launch "$i"
        say "${NAMES[i]} restarted (pid ${PIDS[i]})"
      fi
    done
    if [[ -z "${PIDS[*]// /}${DUE[*]// /}" ]]; then
      echo "error: every process has exited and none is to be restarted; logs in $LOG_DIR" >&2
      exit 1
    fi
    sleep 0.5
  done
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
start redis
for _ in $(seq 100); do
  redis_ping && break
  name=$(died) && fail "$name"
  sleep 0.1
done
redis_ping || fail redis
echo "redis-server on port $REDIS_PORT (persistence: $REDIS_PERSIST)"

for i in $(seq "$WORKERS"); do
  start "worker$i"
done
pace=""
[ "$BACKEND" = sim ] && pace=", pace $PACE"
echo "$WORKERS engine workers (backend $BACKEND$pace)"
for port in $PORTS; do
  start "web$port"
done

ready() {  # ready PORT: /healthz on that web process says ready (read with bash's /dev/tcp: no process a poll)
  local reply
  reply=$( (exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
            timeout 3 cat <&3) 2>/dev/null) || return 1
  [[ $reply == *'"ready":true'* ]]
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
echo "Processes (pids in $LOG_DIR/NAME.pid):"
for i in "${!NAMES[@]}"; do echo "    ${NAMES[i]} pid ${PIDS[i]}"; done
echo "One that exits is reported (RESTART=$RESTART). Ctrl-C stops them all."
supervise
