#!/usr/bin/env bash
# Two builds of the server side by side, in one sitting, to show what an
# engine change costs. Each round runs every workload of the suite against the
# old build, then the new one, on a fresh data directory; the same client
# drives both: this tree's load generator, target/release/hourglass-load
# (built here first). Prints every run, then the median of each and the
# ratio. OLD_HOURGLASS and NEW_HOURGLASS are `hourglass` binaries (servers).
# Suites:
# - engine (default): the service workloads of BENCHMARKS.md section 2;
# - payloads: claim-and-ack throughput and lateness with 64 B, 1 KiB and
#   64 KiB payloads (BENCHMARKS.md, "Payloads on disk").
#
#   bench/engine-before-after.sh OLD_HOURGLASS NEW_HOURGLASS [ROUNDS] [SUITE]   # 5 rounds, engine
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: $0 OLD_HOURGLASS NEW_HOURGLASS [ROUNDS] [SUITE] (servers; the load is target/release/hourglass-load)"
old=${1:?$usage}
new=${2:?$usage}
load=target/release/hourglass-load
rounds=${3:-5}
suite=${4:-engine}
addr=127.0.0.1:7498
work=$(mktemp -d)
results="$work/results.tsv"
trap '[ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
cargo build --release -q -p hourglass-load

start() { # binary, extra serve flags
  local bin=$1; shift
  rm -rf "$work/data"
  "$bin" serve --listen "$addr" --data "$work/data" "$@" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 200); do curl -sf "http://$addr/healthz" >/dev/null && return; sleep 0.05; done
  echo "the server did not start" >&2; exit 1
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=; }
bench() { "$load" --server "http://$addr" "$@"; }
record() { # build, workload, value
  printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$results"
}
rate() { grep -o '[0-9]* tasks/s' | head -1 | awk '{print $1}'; }
percentile() { grep -o "$1 [0-9.]*" | head -1 | awk '{print $2}'; }
lateness() { # build, label, bench arguments
  local build=$1 label=$2; shift 2
  line=$(bench --workload lateness "$@"); echo "round $round $build: $line"
  record "$build" "$label, p50 (ms)" "$(echo "$line" | percentile p50)"
  record "$build" "$label, p99 (ms)" "$(echo "$line" | percentile p99)"
  record "$build" "$label, max (ms)" "$(echo "$line" | percentile max)"
}

payloads() { # build, binary
  # Filler sizes; the payload is 8 bytes more ({"f":"..."}): 128 B is the
  # largest payload kept in memory, 129 B the smallest kept on disk.
  for filler in 56 120 121 1016 65528; do
    # Batches of up to 100, within the 1 MiB request body limit.
    batch=$(( 900000 / (filler + 64) )); [ "$batch" -gt 100 ] && batch=100
    start "$2"
    line=$(bench --workload drain --tasks 20000 --batch "$batch" --consumers 4 --payload-bytes "$filler")
    echo "round $round $1: $line"
    record "$1" "claim + ack, $((filler + 8)) B payloads (tasks/s)" "$(echo "$line" | rate)"
    stop
  done
  start "$2"
  lateness "$1" "lateness at 10 k/s, 1 KiB" --rate 10000 --seconds 10 --producers 32 --consumers 4 --payload-bytes 1016
  stop
  start "$2"
  lateness "$1" "lateness at 1 k/s, 64 KiB" --rate 1000 --seconds 10 --producers 32 --consumers 4 --payload-bytes 65528
  stop
}

for round in $(seq "$rounds"); do
  for build in old new; do
    bin=$old; [ "$build" = new ] && bin=$new
    if [ "$suite" = payloads ]; then
      payloads "$build" "$bin"
      continue
    fi
    start "$bin"
    line=$(bench --workload enqueue --producers 64 --tasks 40000); echo "round $round $build: $line"
    record "$build" "durable enqueue, 64 clients (tasks/s)" "$(echo "$line" | rate)"
    stop
    start "$bin" --fsync-every-ms 50
    line=$(bench --workload enqueue --producers 64 --tasks 40000); echo "round $round $build: $line"
    record "$build" "relaxed enqueue, 64 clients (tasks/s)" "$(echo "$line" | rate)"
    stop
    start "$bin"
    line=$(bench --workload enqueue --producers 16 --batch 1000 --tasks 400000); echo "round $round $build: $line"
    record "$build" "batch enqueue, 16 x 1000 (tasks/s)" "$(echo "$line" | rate)"
    stop
    start "$bin"
    lateness "$build" "lateness at 10 k/s" --rate 10000 --seconds 10 --producers 32 --consumers 4
    stop
  done
done

python3 - "$results" <<'PY'
import csv, statistics, sys
runs = {}
for build, workload, value in csv.reader(open(sys.argv[1]), delimiter="\t"):
    runs.setdefault(workload, {}).setdefault(build, []).append(float(value))
print(f"\n| workload | old (median) | new (median) | new / old | runs old | runs new |")
print("|---|---:|---:|---:|---|---|")
for workload, by in runs.items():
    old, new = statistics.median(by["old"]), statistics.median(by["new"])
    fmt = lambda xs: ", ".join(f"{x:g}" for x in xs)
    print(f"| {workload} | {old:g} | {new:g} | {new / old:.2f} | {fmt(by['old'])} | {fmt(by['new'])} |")
PY
