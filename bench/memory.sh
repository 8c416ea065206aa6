#!/usr/bin/env bash
# Memory against payload size, for two builds side by side (BENCHMARKS.md,
# "Payloads on disk"):
# - 1,000 tasks of 1 MB each, due in an hour: resident memory of the server
#   before and after, and the size of its data file;
# - a restart with 1 M tasks of 4 KiB (and, for reference, of 64 B): resident
#   memory once serving, and the time from the start of the process to the
#   first answered request, the median of ROUNDS restarts, with the page
#   cache dropped first (cold) and not (warm).
#
#   bench/memory.sh OLD_HOURGLASS NEW_HOURGLASS [ROUNDS]   # default 3 restarts
#
# OLD_HOURGLASS and NEW_HOURGLASS are `hourglass` binaries (servers); the
# tasks are enqueued by this tree's target/release/hourglass-load (built here
# first).
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: $0 OLD_HOURGLASS NEW_HOURGLASS [ROUNDS] (servers; the load is target/release/hourglass-load)"
old=${1:?$usage}
new=${2:?$usage}
load=target/release/hourglass-load
rounds=${3:-3}
addr=127.0.0.1:7497
work=$(mktemp -d)
trap '[ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
cargo build --release -q -p hourglass-load

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
now_ms() { date +%s%3N; }
start() { # binary, data dir: sets pid, and ready_ms from exec to the first answer
  local began; began=$(now_ms)
  "$1" serve --listen "$addr" --data "$2" 2>/dev/null &
  pid=$!
  for _ in $(seq 6000); do
    if curl -sf "http://$addr/healthz" >/dev/null; then ready_ms=$(( $(now_ms) - began )); return; fi
    kill -0 "$pid" 2>/dev/null || { echo "the server exited" >&2; exit 1; }
    sleep 0.01
  done
  echo "the server did not start" >&2; exit 1
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=; }

echo "## 1,000 tasks of 1 MB, due in an hour"
python3 -c 'import json; print(json.dumps({"payload": {"blob": "x" * 999_000}, "delay_ms": 3_600_000}))' >"$work/1mb.json"
for build in old new; do
  bin=$old; [ "$build" = new ] && bin=$new
  rm -rf "$work/data"
  start "$bin" "$work/data"
  before=$(rss_kib "$pid")
  for _ in $(seq 1000); do
    curl -sf -o /dev/null -H 'content-type: application/json' --data-binary "@$work/1mb.json" "http://$addr/v1/queues/big/tasks"
  done
  after=$(rss_kib "$pid")
  stop
  start "$bin" "$work/data"
  restarted=$(rss_kib "$pid")
  stop
  file=$(stat -c %s "$work/data/tasks.redb")
  echo "$build: RSS $((before / 1024)) MiB empty, $((after / 1024)) MiB after 1,000 x 1 MB, $((restarted / 1024)) MiB after a restart; data file $((file / 1048576)) MiB"
done

for bytes in 64 4096; do
  echo "## restart with 1,000,000 tasks of $bytes B"
  for build in old new; do
    bin=$old; [ "$build" = new ] && bin=$new
    rm -rf "$work/data"
    start "$bin" "$work/data"
    # A batch's body is bounded by the payload limit (1 MiB): 200 tasks of 4 KiB.
    batch=1000; [ "$bytes" -gt 512 ] && batch=200
    "$load" --server "http://$addr" --workload enqueue --producers 8 --batch "$batch" --tasks 1000000 --payload-bytes "$bytes" >/dev/null
    stop
    file=$(stat -c %s "$work/data/tasks.redb")
    # Cold: the page cache dropped first, as after a reboot. Warm: a restart
    # of the process alone, the file still in the page cache.
    for cache in cold warm; do
      times=(); rss=
      for _ in $(seq "$rounds"); do
        [ "$cache" = cold ] && { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
        start "$bin" "$work/data"
        times+=("$ready_ms")
        rss=$(rss_kib "$pid")
        stop
      done
      median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
      echo "$build, $cache: serving after ${times[*]} ms (median $median ms); RSS $((rss / 1024)) MiB = $((rss * 1024 / 1000000)) B/task; data file $((file / 1048576)) MiB"
    done
  done
done
