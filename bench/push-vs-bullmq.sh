#!/usr/bin/env bash
# Push delivery against BullMQ workers whose processor POSTs each job, side by
# side in one run: the same receiver (`hourglass-load --workload receive`, on
# this machine) records when each request arrives against its due time
# (`Hourglass-Due-At`), and requests a second. Redis of this script's own (a
# free port, its own directory, never 6379, appendfsync always), fresh for
# each run. Needs redis-server, redis-cli, curl, Node with npm (BullMQ from
# npm into bench/bullmq, pinned by its lock file) and python3 (medians).
#
#   bench/push-vs-bullmq.sh                 # ROUNDS rounds (3)
#   ONLY=lateness-5000-nodes bench/push-vs-bullmq.sh   # one row, ROUNDS times
#   HG=/tmp/old/hourglass bench/push-vs-bullmq.sh      # another build (not rebuilt)
#   STATS=1 ...                             # Redis's INFO commandstats after each row on Redis
#
# Rows (for ONLY): lateness-1000-embedded, lateness-RATE-nodes,
# lateness-RATE-bullmq (RATE 1000 or 5000), burst-embedded, burst-nodes,
# burst-bullmq. The workloads are the same whichever rows run.
#
# Each round: lateness at 1 k/s (embedded; BullMQ) and at 5 k/s (three nodes
# on Redis; BullMQ), tasks due one second after they are sent, for SECONDS;
# then BURST tasks due at one instant, drained by push (embedded; three
# nodes) and by BullMQ workers. The medians over rounds and their ratios end
# the output, with the load average (the machine is shared).
set -euo pipefail
cd "$(dirname "$0")/.."

HG=${HG:-target/release/hourglass}
LOAD=${LOAD:-target/release/hourglass-load}
ONLY=${ONLY:-}
STATS=${STATS:-}
PORT=${PORT:-6489}
FSYNC=always
RECEIVER=127.0.0.1:${RECEIVER_PORT:-7620}
ROUNDS=${ROUNDS:-3}
SECONDS_RUN=${SECONDS_RUN:-10}
BURST=${BURST:-20000}
WORKERS=${WORKERS:-4}
EMBEDDED=127.0.0.1:${EMBEDDED_PORT:-7621}
NODE_PORT=${NODE_PORT:-7631} # the three nodes listen on it and the next two
NODES=(127.0.0.1:$NODE_PORT 127.0.0.1:$((NODE_PORT + 1)) 127.0.0.1:$((NODE_PORT + 2)))
work=$(mktemp -d)
out="$work/lines"
pids=()
source bench/common.sh
needs redis-server redis-cli node npm curl python3
# A build named by HG or LOAD is measured as it is; the defaults are built.
if [ "$HG" = target/release/hourglass ] && [ "$LOAD" = target/release/hourglass-load ]; then prepare; fi

up() { for _ in $(seq 200); do curl -sf "http://$1/healthz" >/dev/null && return; sleep 0.05; done; }
start_embedded() {
  stop_pids
  rm -rf "$work/data"
  "$HG" serve --listen "$EMBEDDED" --data "$work/data" --push-allow "$RECEIVER" >/dev/null 2>>"$work/servers.log" &
  pids+=($!)
  up "$EMBEDDED"
}
start_nodes() {
  stop_pids
  fresh_redis
  for node in "${NODES[@]}"; do
    "$HG" serve --listen "$node" --store "redis://127.0.0.1:$PORT" --push-allow "$RECEIVER" \
      >/dev/null 2>>"$work/servers.log" &
    pids+=($!)
  done
  for node in "${NODES[@]}"; do up "$node"; done
  sleep 1 # the nodes share out the shards
}
# The receiver in the background until $1 requests; its line goes to $work/received.
receive() {
  "$LOAD" --workload receive --listen "$RECEIVER" --tasks "$1" >"$work/received" 2>/dev/null &
  receiver=$!
  for _ in $(seq 100); do curl -s -o /dev/null "http://$RECEIVER/" && return; sleep 0.05; done
}
received() { wait "$receiver"; sed "s/^/  $1 /" "$work/received" | tee -a "$out"; }
embedded() { "$LOAD" --server "http://$EMBEDDED" --push-to "http://$RECEIVER/hook" "$@" >/dev/null; }
nodes() {
  "$LOAD" --server "http://${NODES[0]}" --also "http://${NODES[1]}" --also "http://${NODES[2]}" \
    --push-to "http://$RECEIVER/hook" "$@" >/dev/null
}
# Whether row $1 runs (every row unless ONLY names one).
row() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }
# With STATS, Redis's commands so far (calls, usec per call), for commands per task,
# and what the nodes' fires handed straight to their waiting claims (logged as they stop).
stats() {
  [ -z "$STATS" ] && return
  redis-cli -p "$PORT" info commandstats | tr -d '\r' | grep '^cmdstat' | sed "s/^/  $1 /"
  stop_pids
  grep -h 'handed_over' "$work/servers.log" | sed 's/.*Fired { //; s/ }.*//' | sed "s/^/  $1 node: /"
  : >"$work/servers.log"
}
bull() { (cd bench/bullmq && REDIS_PORT=$PORT PUSH_URL="http://$RECEIVER/hook" node bench.mjs "$@" >/dev/null); }

echo "Redis $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/'), appendfsync always; BullMQ $(node -p "require('./bench/bullmq/node_modules/bullmq/package.json').version"), $WORKERS workers x 64"
for round in $(seq "$ROUNDS"); do
  echo "== round $round (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  for rate in 1000 5000; do
    n=$((rate * SECONDS_RUN))
    if [ "$rate" = 1000 ] && row "lateness-$rate-embedded"; then
      start_embedded; receive "$n"; embedded --workload lateness --producers 50 --rate "$rate" --seconds "$SECONDS_RUN" --delay 1s
      received "lateness-$rate hourglass-embedded"
    fi
    if row "lateness-$rate-nodes"; then
      start_nodes; receive "$n"; nodes --workload lateness --producers 50 --rate "$rate" --seconds "$SECONDS_RUN" --delay 1s
      received "lateness-$rate hourglass-3-nodes"
      stats "lateness-$rate-nodes"
    fi
    if row "lateness-$rate-bullmq"; then
      stop_pids; fresh_redis; receive "$n"; bull lateness "$rate" "$SECONDS_RUN" 1000 "$WORKERS"
      received "lateness-$rate bullmq"
    fi
  done
  if row burst-embedded; then
    start_embedded; receive "$BURST"; embedded --workload burst --tasks "$BURST" --batch 1000
    received "burst hourglass-embedded"
  fi
  if row burst-nodes; then
    start_nodes; receive "$BURST"; nodes --workload burst --tasks "$BURST" --batch 1000
    received "burst hourglass-3-nodes"
    stats burst-nodes
  fi
  if row burst-bullmq; then
    stop_pids; fresh_redis; receive "$BURST"; bull burst "$BURST" "$WORKERS"
    received "burst bullmq"
  fi
done
stop_pids

echo "== medians over $ROUNDS rounds (load average $(cut -d' ' -f1-3 /proc/loadavg))"
python3 - "$out" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    workload, system = line.split()[:2]
    m = re.search(r"([\d.]+)/s from .* p50 ([\d.]+) ms, p99 ([\d.]+) ms, max ([\d.]+) ms", line)
    got = re.search(r"receive: (\d+) of (\d+)", line)
    runs.setdefault((workload, system), []).append([float(x) for x in m.groups()] + [int(got[1]) == int(got[2])])
for (workload, system), rs in runs.items():
    med = [statistics.median(r[i] for r in rs) for i in range(4)]
    whole = "" if all(r[4] for r in rs) else " (a run lost requests)"
    print(f"{workload:15} {system:20} {med[0]:8.0f}/s  p50 {med[1]:7.2f} ms  p99 {med[2]:8.2f} ms  max {med[3]:8.2f} ms{whole}")
for workload in sorted({w for w, _ in runs}):
    bull = runs.get((workload, "bullmq"))
    if not bull:
        continue
    b = [statistics.median(r[i] for r in bull) for i in range(4)]
    for (w, system), rs in runs.items():
        if w != workload or system == "bullmq":
            continue
        h = [statistics.median(r[i] for r in rs) for i in range(4)]
        print(f"{workload:15} {system} / bullmq: {h[0] / b[0]:.2f}x the rate, p99 {h[2] / b[2]:.2f}x")
PY
