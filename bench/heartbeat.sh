#!/usr/bin/env bash
# What the pod's membership costs the pool: the heartbeat writes of each
# host's daemon, measured from the counters in the host table (issue 15).
# An emulated pod of HOSTS hosts runs for SECONDS; the counters are read
# with `cxlcr hosts --json` before and after, timed on this machine's
# monotonic clock. One beat is one atomic add of an 8-byte counter and the
# write-back of its cache line (64 B). Also: how long a one-shot
# `cxlcr hosts` takes (its sample window).
#
#   bench/heartbeat.sh            (HOSTS=4, SECONDS_RUN=20, default lease)
# Output: lines on stdout and bench/out/heartbeat.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CXLCR=$ROOT/build/cxlcr
OUT=$ROOT/bench/out
HOSTS=${HOSTS:-4}
SECONDS_RUN=${SECONDS_RUN:-20}

say() { printf 'heartbeat: %s\n' "$*"; }
die() { printf 'heartbeat: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=bench/lib/scratch_pod.sh
. "$ROOT/bench/lib/scratch_pod.sh"
scratch_pod heartbeat 1G "$HOSTS"
mkdir -p "$OUT"
mono() { python3 -c 'import time; print(time.monotonic_ns())'; }
snap() { "$CXLCR" hosts --json >"$1"; }

t0=$(mono); snap "$WORK/a.json"
sleep "$SECONDS_RUN"
t1=$(mono); snap "$WORK/b.json"
w0=$(mono); "$CXLCR" hosts >/dev/null; w1=$(mono)

python3 - "$WORK/a.json" "$WORK/b.json" "$t0" "$t1" "$w0" "$w1" <<'PY' | tee "$OUT/heartbeat.txt"
import json, sys
a = {h["host"]: h for h in json.load(open(sys.argv[1]))["hosts"]}
b = {h["host"]: h for h in json.load(open(sys.argv[2]))["hosts"]}
secs = (int(sys.argv[4]) - int(sys.argv[3])) / 1e9
rates = []
for name in sorted(b):
    if name in a and b[name]["state"] == "alive":
        r = (b[name]["counter"] - a[name]["counter"]) / secs
        rates.append(r)
        print(f"heartbeat: {name}: {r:.2f} writes/s (period {b[name]['period_ms']:.0f} ms), {r * 64:.0f} B/s written back")
if rates:
    mean = sum(rates) / len(rates)
    print(f"heartbeat: {mean:.2f} writes/s per host over {secs:.1f} s; a pod of {len(rates)} hosts: "
          f"{mean * len(rates):.1f} writes/s, {mean * len(rates) * 64:.0f} B/s into the pool")
print(f"heartbeat: one `cxlcr hosts` look: {(int(sys.argv[6]) - int(sys.argv[5])) / 1e6:.0f} ms")
PY
