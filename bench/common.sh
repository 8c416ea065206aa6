# Sourced by the bench scripts that run BullMQ beside hourglass on a Redis of
# their own ($PORT, never 6379; files under $work; `appendfsync $FSYNC`), which
# set PORT, work and pids before sourcing it; it cleans up after them on exit.

# On exit: the processes in $pids, the Redis on $PORT and $work go.
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# Fails unless every program named is installed.
needs() {
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "$tool is not installed" >&2; exit 1; }
  done
}

# The release binaries, and BullMQ from npm (pinned by bench/bullmq's lock file).
prepare() {
  cargo build --release -q -p hourglass-cli -p hourglass-load
  (cd bench/bullmq && [ -d node_modules ] || npm ci --no-audit --no-fund >/dev/null)
}

# Stops the Redis on $PORT and starts a new one on an empty directory.
fresh_redis() {
  redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
  for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 || break; sleep 0.05; done
  rm -rf "$work/redis" && mkdir -p "$work/redis"
  redis-server --port "$PORT" --bind 127.0.0.1 --dir "$work/redis" --appendonly yes --appendfsync "$FSYNC" \
    --save "" --daemonize yes --logfile "$work/redis.log" >/dev/null
  for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "redis-server did not start" >&2; exit 1
}

# Stops the processes in $pids (the servers the script started).
stop_pids() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  pids=()
}
