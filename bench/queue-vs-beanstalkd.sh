#!/usr/bin/env bash
# The durable queue against beanstalkd, side by side, on this machine, over
# loopback. Needs beanstalkd (Debian: apt-get install beanstalkd); it is
# started here and stopped afterwards, as is the hourglass server.
#
#   bench/queue-vs-beanstalkd.sh            # every comparison below
set -euo pipefail
cd "$(dirname "$0")/.."

HG=target/release/hourglass
BEANSTALKD_PORT=11399
HOURGLASS_ADDR=127.0.0.1:7499
work=$(mktemp -d)
trap 'pkill -f "beanstalkd -l 127.0.0.1 -p $BEANSTALKD_PORT" 2>/dev/null || true; [ -n "${hg_pid:-}" ] && kill "$hg_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

command -v beanstalkd >/dev/null || { echo "beanstalkd is not installed (apt-get install beanstalkd)" >&2; exit 1; }
cargo build --release -q -p hourglass-cli

stop_beanstalkd() { # and wait until its port is free again
  pkill -f "beanstalkd -l 127.0.0.1 -p $BEANSTALKD_PORT" 2>/dev/null || true
  for _ in $(seq 100); do pgrep -f "beanstalkd -l 127.0.0.1 -p $BEANSTALKD_PORT" >/dev/null || return 0; sleep 0.05; done
}
start_beanstalkd() { # $1: fsync interval in ms (0 = every write)
  stop_beanstalkd
  rm -rf "$work/bs" && mkdir -p "$work/bs"
  beanstalkd -l 127.0.0.1 -p "$BEANSTALKD_PORT" -b "$work/bs" -f "$1" &
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$BEANSTALKD_PORT") 2>/dev/null && return; sleep 0.05; done
  echo "beanstalkd did not start" >&2; exit 1
}
start_hourglass() { # extra serve flags
  [ -n "${hg_pid:-}" ] && kill "$hg_pid" 2>/dev/null && wait "$hg_pid" 2>/dev/null || true
  rm -rf "$work/hg"
  "$HG" serve --listen "$HOURGLASS_ADDR" --data "$work/hg" "$@" 2>/dev/null &
  hg_pid=$!
  for _ in $(seq 100); do curl -sf "http://$HOURGLASS_ADDR/healthz" >/dev/null && return; sleep 0.05; done
  echo "hourglass did not start" >&2; exit 1
}
bench() { "$HG" bench --server "http://$HOURGLASS_ADDR" --beanstalkd "127.0.0.1:$BEANSTALKD_PORT" "$@"; }

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
