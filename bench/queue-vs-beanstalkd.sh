#!/usr/bin/env bash
# The durable queue against beanstalkd, side by side, on this machine, over
# loopback. Needs beanstalkd (Debian: apt-get install beanstalkd); it is
# started here and stopped afterwards, as is the hourglass server.
#
#   bench/queue-vs-beanstalkd.sh            # every comparison below
#   bench/queue-vs-beanstalkd.sh protocol   # both through the beanstalk protocol, 3 rounds
#   bench/queue-vs-beanstalkd.sh consumers  # the consumer's cycle: protocol and HTTP, 3 rounds
#   bench/queue-vs-beanstalkd.sh churn      # disk after churning 1 M delayed jobs ten times
#                                           # (JOBS=N, KEEP=N: one job in N kept; PEER=0: no beanstalkd)
set -euo pipefail
cd "$(dirname "$0")/.."

# HG=PATH runs another build of the server (a before/after comparison).
HG=${HG:-target/release/hourglass}
LOAD=target/release/hourglass-load
BEANSTALKD_PORT=11399
HOURGLASS_ADDR=127.0.0.1:7499
# hourglass's beanstalkd front: the same protocol client loads both servers.
HOURGLASS_BEANSTALK=127.0.0.1:11499
work=$(mktemp -d)
source bench/disk.sh
trap 'pkill -f "beanstalkd -l 127.0.0.1 -p $BEANSTALKD_PORT" 2>/dev/null || true; [ -n "${hg_pid:-}" ] && kill "$hg_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

command -v beanstalkd >/dev/null || { echo "beanstalkd is not installed (apt-get install beanstalkd)" >&2; exit 1; }
cargo build --release -q -p hourglass-cli -p hourglass-load

stop_beanstalkd() { # and wait until its port is free again
  pkill -f "beanstalkd -l 127.0.0.1 -p $BEANSTALKD_PORT" 2>/dev/null || true
  for _ in $(seq 100); do pgrep -f "beanstalkd -l 127.0.0.1 -p $BEANSTALKD_PORT" >/dev/null || return 0; sleep 0.05; done
}
start_beanstalkd() { # $1: fsync interval in ms (0 = every write)
  stop_beanstalkd
  rm -rf "$work/bs" && mkdir -p "$work/bs"
  beanstalkd -l 127.0.0.1 -p "$BEANSTALKD_PORT" -b "$work/bs" -f "$1" &
  bs_pid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$BEANSTALKD_PORT") 2>/dev/null && return; sleep 0.05; done
  echo "beanstalkd did not start" >&2; exit 1
}
start_hourglass() { # extra serve flags
  [ -n "${hg_pid:-}" ] && kill "$hg_pid" 2>/dev/null && wait "$hg_pid" 2>/dev/null || true
  rm -rf "$work/hg"
  "$HG" serve --listen "$HOURGLASS_ADDR" --beanstalk "$HOURGLASS_BEANSTALK" --data "$work/hg" "$@" >/dev/null 2>>"$work/hg.log" &
  hg_pid=$!
  for _ in $(seq 100); do curl -sf "http://$HOURGLASS_ADDR/healthz" >/dev/null && return; sleep 0.05; done
  echo "hourglass did not start" >&2; exit 1
}
bench() { "$LOAD" --server "http://$HOURGLASS_ADDR" --beanstalkd "127.0.0.1:$BEANSTALKD_PORT" "$@"; }
# The beanstalk protocol client against hourglass's front.
front() { "$LOAD" --target beanstalkd --beanstalkd "$HOURGLASS_BEANSTALK" "$@"; }

if [ "${1:-}" = "churn" ]; then
  # Disk after churning 1 M delayed jobs ten times (each round: 1 M puts an
  # hour ahead from 64 connections, then all deleted), both relaxed.
  # KEEP=N keeps one job in N of each round (the long-lived jobs that pin
  # a log's files); by default none is kept.
  JOBS=${JOBS:-1000000}
  KEEP=${KEEP:-0}
  start_hourglass --fsync-every-ms 50
  echo "hourglass (data directory $work/hg)"
  front --workload churn --tasks "$JOBS" --rounds 10 --keep-every "$KEEP" --disk "$work/hg"
  # How long each compaction held hourglass's writer (every write waited).
  grep -o 'compacted the store.*' "$work/hg.log" || echo "hourglass did not compact"
  # PEER=0 leaves beanstalkd out (another build of hourglass beside this one).
  [ "${PEER:-1}" = 0 ] && exit 0
  start_beanstalkd 50
  echo "beanstalkd (binlog directory $work/bs)"
  bench --target beanstalkd --workload churn --tasks "$JOBS" --rounds 10 --keep-every "$KEEP" --disk "$work/bs"
  exit 0
fi

if [ "${1:-}" = "consumers" ]; then
  # The consumer's cycle: reserve+delete through the protocol beside claim and
  # ack over HTTP (one task a claim, its ack awaited or carried by the next
  # claim; 64 a claim, acks in one request or on the next claim), relaxed
  # and with fsync before every reply; 40000 jobs put first, 4 consumers.
  # The protocol rows also give each server's CPU and sleeps a job in the
  # drain alone.
  for round in 1 2 3; do
    printf "round %s " "$round"; disk_line
    for mode in relaxed durable; do
      if [ "$mode" = relaxed ]; then flags=(--fsync-every-ms 50); bs=50; else flags=(); bs=0; fi
      start_hourglass "${flags[@]}"; printf "round %s %s hourglass front reserve+delete: " "$round" "$mode"
      front --workload drain --consumers 4 --tasks 40000 --server-pid "$hg_pid"
      start_beanstalkd "$bs"; printf "round %s %s beanstalkd reserve+delete: " "$round" "$mode"
      bench --target beanstalkd --workload drain --consumers 4 --tasks 40000 --server-pid "$bs_pid"
      for cycle in "1 wait" "1 claim" "64 batch" "64 claim"; do
        set -- $cycle
        start_hourglass "${flags[@]}"; printf "round %s %s hourglass HTTP claim %s, acks %s: " "$round" "$mode" "$1" "$2"
        bench --target hourglass --workload drain --consumers 4 --tasks 40000 --batch 1000 --claim-max "$1" --acks "$2"
      done
    done
  done
  exit 0
fi

if [ "${1:-}" = "protocol" ]; then
  # Both servers through the same protocol client: puts from 64 connections,
  # reserve+delete, and lateness of delayed jobs to waiting reserves.
  for round in 1 2 3; do
    printf "== round %s: " "$round"; disk_line
    echo "== round $round: put, fsync before every reply (beanstalkd -f 0)"
    start_hourglass;                      printf "hourglass  "; front --workload enqueue --producers 64 --tasks 40000
    start_beanstalkd 0;                   printf "beanstalkd "; bench --target beanstalkd --workload enqueue --producers 64 --tasks 40000
    echo "== round $round: put, relaxed (hourglass --fsync-every-ms 50, beanstalkd -f 50)"
    start_hourglass --fsync-every-ms 50;  printf "hourglass  "; front --workload enqueue --producers 64 --tasks 40000
    start_beanstalkd 50;                  printf "beanstalkd "; bench --target beanstalkd --workload enqueue --producers 64 --tasks 40000
    echo "== round $round: reserve+delete of 40000 ready jobs, 4 consumers, relaxed"
    start_hourglass --fsync-every-ms 50;  printf "hourglass  "; front --workload drain --producers 64 --consumers 4 --tasks 40000
    start_beanstalkd 50;                  printf "beanstalkd "; bench --target beanstalkd --workload drain --producers 64 --consumers 4 --tasks 40000
    echo "== round $round: lateness, 2k jobs/s due 1 s later, 4 waiting reserves, relaxed"
    start_hourglass --fsync-every-ms 50;  printf "hourglass  "; front --workload lateness --rate 2000 --seconds 5 --producers 8 --consumers 4
    start_beanstalkd 50;                  printf "beanstalkd "; bench --target beanstalkd --workload lateness --rate 2000 --seconds 5 --producers 8 --consumers 4
  done
  exit 0
fi

disk_line
echo "== enqueue, fsync before every reply: 64 clients, one task per request"
start_hourglass;        bench --target hourglass  --workload enqueue --producers 64 --tasks 40000
start_beanstalkd 0;     bench --target beanstalkd --workload enqueue --producers 64 --tasks 40000

echo "== enqueue, relaxed: fsync every 50 ms (beanstalkd's default -f 50)"
start_hourglass --fsync-every-ms 50; bench --target hourglass --workload enqueue --producers 64 --tasks 40000
start_beanstalkd 50;    bench --target beanstalkd --workload enqueue --producers 64 --tasks 40000

echo "== the same, relaxed, with reqwest as the producers' HTTP client (about as costly as the server)"
start_hourglass --fsync-every-ms 50; bench --target hourglass --workload enqueue --producers 64 --tasks 40000 --http-client reqwest

echo "== batch endpoint, fsync before every reply: 16 clients, 1000 tasks per request"
start_hourglass;        bench --target hourglass  --workload enqueue --producers 16 --batch 1000 --tasks 400000

echo "== lateness: 10k tasks/s due 1 s later, 4 waiting consumers (durable enqueue and ack)"
start_hourglass;        bench --target hourglass  --workload lateness --rate 10000 --seconds 10 --producers 32 --consumers 4
start_beanstalkd 50;    bench --target beanstalkd --workload lateness --rate 10000 --seconds 10 --producers 32 --consumers 4
