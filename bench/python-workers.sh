#!/usr/bin/env bash
# The Python worker of clients/python against BullMQ's Python worker (`bullmq`
# from PyPI), side by side in one sitting: claim-to-ack throughput of one
# worker process with a handler that does nothing, over TASKS tasks enqueued
# beforehand in batches of 1,000. hourglass: a release `hourglass serve
# --fsync-every-ms 50` on a fresh data directory; BullMQ: a redis-server of
# this script's own on a free port (never 6379), fresh each run, with
# `appendfsync everysec` (the nearest to a 50 ms group commit). ROUNDS rounds;
# the medians and their ratio at the end. bench/python_workers.py is each run.
#
#   bench/python-workers.sh                   # 20,000 tasks, concurrency 32, 3 rounds
#   TASKS=5000 CONCURRENCY=8 ROUNDS=1 bench/python-workers.sh
#
# Needs Python 3.10+ with venv, redis-server and redis-cli (Debian:
# redis-server, redis-tools); bullmq (pinned below) and httpx go into a venv
# under target/.
set -euo pipefail
cd "$(dirname "$0")/.."

TASKS=${TASKS:-20000}
CONCURRENCY=${CONCURRENCY:-32}
ROUNDS=${ROUNDS:-3}
BULLMQ_VERSION=3.4.4
HG=target/release/hourglass
VENV=target/python-workers-venv
work=$(mktemp -d)
server=""
redis_port=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  [ -n "$redis_port" ] && redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

for tool in python3 redis-server redis-cli; do
  command -v "$tool" >/dev/null || { echo "$tool is not installed" >&2; exit 1; }
done
cargo build --release -q -p hourglass-cli
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install --quiet "bullmq==$BULLMQ_VERSION" httpx==0.28.1
PY=("$VENV/bin/python" bench/python_workers.py)
export PYTHONPATH=clients/python/src

free_port() { "$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start_hourglass() {
  rm -rf "$work/data" "$work/hourglass.out"
  "$HG" serve --listen 127.0.0.1:0 --data "$work/data" --fsync-every-ms 50 >"$work/hourglass.out" 2>>"$work/hourglass.log" &
  server=$!
  for _ in $(seq 200); do
    address=$(sed -n 's/^http //p' "$work/hourglass.out")
    [ -n "$address" ] && return
    sleep 0.05
  done
  echo "hourglass did not start" >&2; exit 1
}
stop_hourglass() { kill "$server"; wait "$server" 2>/dev/null || true; server=""; }

start_redis() {
  redis_port=$(free_port)
  rm -rf "$work/redis" && mkdir -p "$work/redis"
  redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$work/redis" --appendonly yes --appendfsync everysec \
    --save "" --daemonize yes --logfile "$work/redis.log" >/dev/null
  for _ in $(seq 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "redis-server did not start" >&2; exit 1
}
stop_redis() { redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true; redis_port=""; }

# One run: its lines indented, its rate appended to the file of its name.
run() {
  local name=$1; shift
  "${PY[@]}" "$name" "$@" | tee "$work/run.out" | grep -v '^RESULT' | sed 's/^/  /'
  sed -n 's/^RESULT [^ ]* //p' "$work/run.out" >>"$work/$name.rates"
}

echo "Python $("$VENV/bin/python" -c 'import sys; print(sys.version.split()[0])'), httpx 0.28.1, bullmq $BULLMQ_VERSION," \
  "Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'); $TASKS tasks, concurrency $CONCURRENCY, $(nproc) cores"
for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  for name in hourglass hourglass-threads; do
    start_hourglass
    run "$name" "http://$address" "$TASKS" "$CONCURRENCY"
    stop_hourglass
  done
  start_redis
  run bullmq "$redis_port" "$TASKS" "$CONCURRENCY"
  stop_redis
done

median() { sort -n "$work/$1.rates" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
hg=$(median hourglass); threads=$(median hourglass-threads); bull=$(median bullmq)
echo "== medians of $ROUNDS rounds, tasks/s"
echo "hourglass worker (async handler):     $hg"
echo "hourglass worker (handler in threads): $threads"
echo "BullMQ worker:                        $bull"
awk -v a="$hg" -v t="$threads" -v b="$bull" 'BEGIN { printf "ratio hourglass / BullMQ: %.2f (async handler), %.2f (threads)\n", a / b, t / b }'
