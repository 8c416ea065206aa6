# Sourced by the bench scripts, which set LOAD and work first. `disk_line`
# prints how long the disk under $work takes to sync a small append (median,
# 99th percentile, maximum: `hourglass-load --workload fsync`). Every row that
# answers only after an fsync (hourglass's durable mode, beanstalkd's `-f 0`,
# Redis's `appendfsync always`) is bound by it, and it moves between machines
# and within the hour more than most changes measured beside it.
disk_line() { "$LOAD" --workload fsync --tasks 2000 --disk "$work"; }
