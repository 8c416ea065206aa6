#!/usr/bin/env bash
# Two builds of hourglass-bench side by side: the structure scenarios (churn,
# cancel, expiry, timeouts, memory) for hourglass, both DelayQueues and the
# BTreeMap baseline, the builds run alternately ROUNDS times, then the median
# of each row per build and their ratio.
#
#   cargo build --release -p hourglass-bench && cp target/release/hourglass-bench /tmp/new
#   bench/structures-before-after.sh /tmp/old /tmp/new [ROUNDS]   # default 5
#
# BENCH_ARGS adds arguments to every run (BENCH_ARGS=--quick for the quick
# sizes); ONLY and IMPLS replace the scenarios and implementations run. The
# load average is printed before each round: the machine is shared. A row's
# figure is its ns an operation, else its p99 lateness, else its rate (higher
# is better: e2e bursts), else wake-ups a second, else bytes a timer, so the
# e2e, idle and contention scenarios can be compared too.
set -euo pipefail
old=${1:?usage: $0 OLD_BENCH NEW_BENCH [ROUNDS]}
new=${2:?usage: $0 OLD_BENCH NEW_BENCH [ROUNDS]}
rounds=${3:-5}
read -r -a extra <<< "${BENCH_ARGS:-}"
only=()
for scenario in ${ONLY:-churn cancel expiry timeouts memory}; do only+=(--only "$scenario"); done
impls=()
for imp in ${IMPLS:-hourglass tokio-delayqueue btreemap binaryheap}; do impls+=(--impls "$imp"); done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for round in $(seq "$rounds"); do
  echo "round $round: load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  for side in old new; do
    bin=$old; [ "$side" = new ] && bin=$new
    "$bin" --json "${extra[@]}" "${only[@]}" "${impls[@]}" > "$work/$side-$round.jsonl" 2>/dev/null
  done
done
echo "after: load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
python3 - "$work" <<'PY'
import glob, json, statistics, sys
rows = {}
for path in glob.glob(f"{sys.argv[1]}/*.jsonl"):
    side = path.rsplit("/", 1)[1].split("-")[0]
    for line in open(path):
        r = json.loads(line)
        # A row's figure: ns an operation, else the p99 lateness in ns, else a
        # rate (higher is better), else wake-ups a second, else bytes a timer.
        fields = ("ns_per_op", "lateness_p99_ns", "per_sec", "wakeups_per_sec", "bytes_per_timer")
        field = next((f for f in fields if r.get(f) is not None), None)
        if field is None:
            continue
        rows.setdefault((f"{r['scenario']} [{field}]", r["impl"]), {}).setdefault(side, []).append(r[field])
print(f"{'scenario [figure]':44} {'impl':22} {'old':>9} {'new':>9} {'new/old':>8}  new runs")
for (scenario, imp), sides in sorted(rows.items()):
    old, new = (statistics.median(sides[s]) if s in sides else None for s in ("old", "new"))
    ratio = f"{new / old:.2f}" if old and new else "-"
    fmt = lambda v: "-" if v is None else f"{v:.1f}"
    print(f"{scenario:44} {imp:22} {fmt(old):>9} {fmt(new):>9} {ratio:>8}  {[round(v, 1) for v in sides.get('new', [])]}")
PY
