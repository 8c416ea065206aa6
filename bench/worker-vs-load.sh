#!/usr/bin/env bash
# What the Rust client's Worker costs: claim-to-ack throughput of
# `hourglass-load --workload worker-drain` (CONSUMERS Workers of
# hourglass-client, each running at most 64 handlers that do nothing; their
# acks riding on claims, `--acks claim`, and apart, `--acks batch`) beside
# `--workload drain --acks batch` (CONSUMERS raw consumers: claims of 64, each
# claim's tasks acked in one request in the background), alternating on the
# same release `hourglass serve`, TASKS tasks each run (enqueued beforehand in
# batches of 1,000, untimed), each run on a queue of its own. ROUNDS rounds;
# the medians and their ratios at the end, and the load average.
#
#   bench/worker-vs-load.sh                          # 50,000 tasks, 4 consumers, 5 rounds, --fsync-every-ms 50
#   TASKS=5000 ROUNDS=3 FSYNC=always bench/worker-vs-load.sh
set -euo pipefail
cd "$(dirname "$0")/.."

TASKS=${TASKS:-50000}
CONSUMERS=${CONSUMERS:-4}
ROUNDS=${ROUNDS:-5}
FSYNC=${FSYNC:-50}
HG=target/release/hourglass
LOAD=target/release/hourglass-load
work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cargo build --release -q -p hourglass-cli -p hourglass-load
fsync_args=()
[ "$FSYNC" != always ] && fsync_args=(--fsync-every-ms "$FSYNC")
"$HG" serve --listen 127.0.0.1:0 --data "$work/data" "${fsync_args[@]}" >"$work/hourglass.out" 2>"$work/hourglass.log" &
server=$!
address=""
for _ in $(seq 200); do
  address=$(sed -n 's/^http //p' "$work/hourglass.out")
  [ -n "$address" ] && break
  sleep 0.05
done
[ -n "$address" ] || { echo "hourglass did not start" >&2; exit 1; }

# One run: its result line, its rate appended to the file of its name.
run() {
  local name=$1; shift
  "$LOAD" --server "http://$address" --tasks "$TASKS" --batch 1000 --consumers "$CONSUMERS" "$@" 2>/dev/null \
    | tee "$work/run.out" | sed 's/^/  /'
  sed -n 's/.*: \([0-9]*\) tasks\/s$/\1/p' "$work/run.out" >>"$work/$name.rates"
}

echo "$TASKS tasks a run, $CONSUMERS consumers, fsync: $FSYNC, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  echo "== round $round"
  run raw --workload drain --acks batch
  run worker --workload worker-drain --acks claim
  run apart --workload worker-drain --acks batch
done

median() { sort -n "$work/$1.rates" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
raw=$(median raw); worker=$(median worker); apart=$(median apart)
echo "== medians of $ROUNDS rounds, tasks/s (load average $(cut -d' ' -f1-3 /proc/loadavg))"
echo "raw claims and batch acks (drain --acks batch):       $raw"
echo "the Worker, acks on claims (worker-drain --acks claim): $worker"
echo "the Worker, acks apart (worker-drain --acks batch):     $apart"
awk -v r="$raw" -v w="$worker" -v a="$apart" \
  'BEGIN { printf "ratio Worker / raw: %.2f (acks on claims), %.2f (acks apart)\n", w / r, a / r }'
