#!/usr/bin/env bash
# hourglass on Redis (three nodes) against BullMQ, side by side, on one Redis
# of this script's own (a free port, its own directory, never 6379), each run
# alone on a fresh Redis with the same persistence. Needs redis-server and
# redis-cli (Debian: redis-server, redis-tools) and Node with npm (BullMQ and
# ioredis are installed from npm into bench/bullmq, pinned by its lock file).
#
#   bench/queue-vs-bullmq.sh          # every workload, ROUNDS rounds (3)
#   FSYNC=everysec bench/queue-vs-bullmq.sh
#   ONLY=lateness-5000-nodes bench/queue-vs-bullmq.sh  # that row of hourglass alone, ROUNDS times
#   ONLY=idle bench/queue-vs-bullmq.sh                 # the idle row (both systems), ROUNDS times
#   ONLY=enqueue bench/queue-vs-bullmq.sh              # the enqueue row (both systems), ROUNDS times
#   HG=/tmp/old/hourglass LOAD=... bench/queue-vs-bullmq.sh  # another build (not rebuilt)
#
# Lines start with the system's name; BENCHMARKS.md quotes the medians.
set -euo pipefail
cd "$(dirname "$0")/.."

HG=${HG:-target/release/hourglass}
LOAD=${LOAD:-target/release/hourglass-load}
ONLY=${ONLY:-}
PORT=${PORT:-6479}
FSYNC=${FSYNC:-always}
ROUNDS=${ROUNDS:-3}
NODES=(127.0.0.1:7511 127.0.0.1:7512 127.0.0.1:7513)
work=$(mktemp -d)
pids=()
source bench/common.sh
source bench/disk.sh
needs redis-server redis-cli node npm
# A build named by HG or LOAD is measured as it is; the defaults are built.
if [ "$HG" = target/release/hourglass ] && [ "$LOAD" = target/release/hourglass-load ]; then prepare; fi

start_nodes() {
  stop_pids
  for node in "${NODES[@]}"; do
    "$HG" serve --listen "$node" --store "redis://127.0.0.1:$PORT" >/dev/null 2>>"$work/nodes.log" &
    pids+=($!)
  done
  for node in "${NODES[@]}"; do
    for _ in $(seq 100); do curl -sf "http://$node/healthz" >/dev/null && break; sleep 0.05; done
  done
  sleep 1 # the nodes share out the shards
}
info() { redis-cli -p "$PORT" info "$1" | tr -d '\r' | sed -n "s/^$2://p"; }
# Consumers ack each claim's tasks in one request (POST /v1/acks).
hg() { "$LOAD" --server "http://${NODES[0]}" --also "http://${NODES[1]}" --also "http://${NODES[2]}" --acks batch "$@"; }
bull() { (cd bench/bullmq && REDIS_PORT=$PORT node bench.mjs "$@"); }
# Redis commands a task over a run of $1 tasks: the command that follows, counted.
per_task() {
  local tasks=$1; shift
  local before after
  before=$(info stats total_commands_processed)
  "$@"
  after=$(info stats total_commands_processed)
  echo "  redis commands a task (whole life, every node's background work included): $(( (after - before) / tasks ))"
}

# Idle: nothing due, consumers waiting, 10 s; hourglass, then BullMQ.
idle_row() {
  fresh_redis; start_nodes
  local waiters=() before after
  for node in "${NODES[@]}" "${NODES[@]}"; do
    (while true; do curl -s -XPOST "http://$node/v1/queues/idle/claim" -H 'content-type: application/json' -d '{"wait_ms":60000}' >/dev/null || sleep 1; done) &
    waiters+=($!)
  done
  sleep 1
  before=$(info stats total_commands_processed)
  sleep 10
  after=$(info stats total_commands_processed)
  for pid in "${waiters[@]}"; do kill "$pid" 2>/dev/null || true; done
  echo "hourglass idle: 3 nodes, 6 waiting claims, nothing due, 10 s: $(awk "BEGIN { printf \"%.1f\", ($after - $before) / 10 }") redis commands a second"
  stop_pids; fresh_redis
  bull idle 10 6
}

# The enqueue row: 50,000 tasks from 64 producers, hourglass then BullMQ.
enqueue_row() {
  fresh_redis; start_nodes
  echo "hourglass, 3 nodes:"; hg --workload enqueue --tasks 50000 --producers 64 | sed 's/^/  /'
  stop_pids; fresh_redis
  echo "BullMQ:"; bull enqueue 50000 64 | sed 's/^/  /'
}

# ONLY=enqueue: the enqueue row alone (both systems), ROUNDS times.
if [ "$ONLY" = enqueue ]; then
  for round in $(seq "$ROUNDS"); do
    echo "== round $round"
    disk_line
    enqueue_row
  done
  exit 0
fi

# ONLY=idle: the idle row alone, ROUNDS times.
if [ "$ONLY" = idle ]; then
  for round in $(seq "$ROUNDS"); do
    echo "== round $round"
    disk_line
    idle_row
  done
  exit 0
fi

# ONLY=lateness-RATE-nodes: hourglass's pull lateness row alone, then what each
# node's fires handed straight to its waiting claims (logged as it stops).
if [ -n "$ONLY" ]; then
  rate=${ONLY#lateness-}
  rate=${rate%-nodes}
  for round in $(seq "$ROUNDS"); do
    echo "== round $round (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    disk_line
    fresh_redis; start_nodes
    echo "hourglass, 3 nodes:"
    per_task $((rate * 10)) hg --workload lateness --rate "$rate" --seconds 10 --delay 1s --consumers 6 | sed 's/^/  /'
    stop_pids
    grep -h 'handed_over' "$work/nodes.log" | sed 's/.*Fired { //; s/ }.*//; s/^/  node: /' || true
    : >"$work/nodes.log"
  done
  exit 0
fi
echo "Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), appendfsync $FSYNC; BullMQ $(node -p "require('./bench/bullmq/node_modules/bullmq/package.json').version")"
for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  disk_line
  for rate in 1000 5000; do
    fresh_redis; start_nodes
    echo "hourglass, 3 nodes:"
    per_task $((rate * 10)) hg --workload lateness --rate "$rate" --seconds 10 --delay 1s --consumers 6 | sed 's/^/  /'
    stop_pids; fresh_redis
    echo "BullMQ:"
    bull lateness "$rate" 10 1000 6 | sed 's/^/  /'
  done
  fresh_redis; start_nodes
  echo "hourglass, 3 nodes:"; hg --workload burst --tasks 100000 --batch 1000 --consumers 6 | sed 's/^/  /'
  stop_pids; fresh_redis
  echo "BullMQ:"; bull burst 100000 6 | sed 's/^/  /'
  enqueue_row
  fresh_redis; start_nodes
  echo "hourglass, 3 nodes:"; hg --workload drain --tasks 50000 --batch 1000 --consumers 6 | sed 's/^/  /'
  stop_pids; fresh_redis
  echo "BullMQ:"; bull drain 50000 6 | sed 's/^/  /'
  # Memory: 100,000 delayed tasks with the same payload, INFO memory's delta.
  fresh_redis; start_nodes
  before=$(info memory used_memory)
  hg --workload enqueue --tasks 100000 --batch 1000 --producers 4 >/dev/null
  after=$(info memory used_memory)
  echo "hourglass memory: 100000 delayed tasks: $(( (after - before) / 100000 )) bytes of redis memory a task"
  stop_pids; fresh_redis
  bull memory 100000
  idle_row
  # Redelivery: the node a consumer claimed a task through (lease 5 s) is
  # killed with kill -9; a consumer on another node waits for the task.
  fresh_redis; start_nodes
  curl -sf -XPOST "http://${NODES[0]}/v1/queues/held/tasks" -H 'content-type: application/json' -d '{"payload":1}' >/dev/null
  curl -sf -XPOST "http://${NODES[1]}/v1/queues/held/claim" -H 'content-type: application/json' \
    -d '{"lease_ms":5000,"wait_ms":5000}' | grep -q '"id"'
  kill -9 "${pids[1]}"
  killed=$(date +%s%3N)
  curl -sf -XPOST "http://${NODES[2]}/v1/queues/held/claim" -H 'content-type: application/json' \
    -d '{"wait_ms":30000}' | grep -q '"id"'
  echo "hourglass redelivery: the node a task was claimed through killed (lease 5000 ms): delivered again $(( $(date +%s%3N) - killed )) ms later"
  stop_pids; fresh_redis
  bull redelivery 5000
done
