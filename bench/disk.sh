# Sourced by the bench scripts, which set LOAD and work first. `disk_line`
# prints how long the disk under $work takes to sync a small append (median,
# 99th percentile, maximum: `hourglass-load --workload fsync`). Every row that
# answers only after an fsync (hourglass's durable mode, beanstalkd's `-f 0`,
# Redis's `appendfsync always`) waits for it, and it moves between machines
# and within the hour by more than most changes measured beside them. If it
# cannot be measured (LOAD=... of a build older than the workload), the line
# says so and the run goes on.
disk_line() {
  "$LOAD" --workload fsync --tasks 2000 --disk "$work" || echo "Disk: not measured by $LOAD"
}
