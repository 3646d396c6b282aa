#!/usr/bin/env bash
# What a hard crash costs (issue 16, points 2 and 8): Redis on h0 with
# recovery points every INTERVAL_MS (default 1000) under a writer of
# RATE acknowledged SETs a second (default 1000; bench/loadclient, one
# connection, one request at a time, every acknowledged write logged);
# `cxlcr pod crash h0`; the daemons' lease is LEASE_MS (default 300). Per
# round, on a fresh pool and pod:
#   crash_to_answer_ms  from just before `pod crash h0` to the first PONG
#                       at the service's address (h1 recovered it); also
#                       from the command's return (h0's processes are
#                       all dead by then), and the command's own time
#   restore_ms          the winner's recovery of the service (its log):
#                       the fresh arena (fresh_arena_ms), then CRIU's
#                       restore of the point's dump
#   lost_writes         writes acknowledged before the crash that the
#                       recovered Redis does not hold (those after the
#                       point it came back from: tests/lib/prefixcheck.py
#                       checks that its data is exactly a prefix)
# Medians over ROUNDS (default 5). PANIC=1: `pod crash h0 --panic` (h0
# leaves the panic tombstone its kernel module would write: the others
# judge it dead at their next look, without waiting for the lease).
# LOCK_HELD=1: h0 dies while a worker of it holds the pool lock
# (build/tests/lock_tool, started on h0 just before the crash), which
# h1's fence waits for (docs/recovery.md, "A host that dies holding the
# pool lock").
#
#   bench/recovery.sh         (ROUNDS=5 LEASE_MS=300 INTERVAL_MS=1000 RATE=1000 PANIC=0 LOCK_HELD=0)
# Output: lines on stdout and bench/out/recovery.txt, recovery.jsonl
# (recovery-panic.* with PANIC=1, recovery-lock.* with LOCK_HELD=1).
# Needs root, CRIU, redis-server; run it on a quiet machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CXLCR=$ROOT/build/cxlcr
OUT=$ROOT/bench/out
ROUNDS=${ROUNDS:-5}
LEASE_MS=${LEASE_MS:-300}
INTERVAL_MS=${INTERVAL_MS:-1000}
RATE=${RATE:-1000}
PANIC=${PANIC:-0}
LOCK_HELD=${LOCK_HELD:-0}
TAG=recovery
[ "$PANIC" = 1 ] && TAG=recovery-panic
[ "$LOCK_HELD" = 1 ] && TAG=recovery-lock
LOCK_TOOL=$ROOT/build/tests/lock_tool
[ "$LOCK_HELD" = 1 ] && [ ! -x "$LOCK_TOOL" ] && die "build first (make): no $LOCK_TOOL"
PORT=6379

say() { printf 'recovery: %s\n' "$*"; }
die() { printf 'recovery: error: %s\n' "$*" >&2; exit 1; }
[ -x "$CXLCR" ] || die "build first (make)"
command -v redis-server >/dev/null || die "redis-server is not installed (make deps)"
mkdir -p "$OUT"
WORK=$(mktemp -d /dev/shm/cxlcr-recovery-XXXX)
chmod 700 "$WORK"
export CXLCR_POOL=$WORK/pool CXLCR_LEASE_MS=$LEASE_MS
LC_PID=
cleanup() {
	set +e
	[ -n "$LC_PID" ] && kill -KILL "$LC_PID" 2>/dev/null
	"$CXLCR" stop rd >/dev/null 2>&1
	"$CXLCR" pod down >/dev/null 2>&1
	rm -rf "$WORK"
}
trap cleanup EXIT
LOADCLIENT=$ROOT/build/bench/loadclient
if [ ! -x "$LOADCLIENT" ] || [ "$ROOT/bench/loadclient.c" -nt "$LOADCLIENT" ]; then
	LOADCLIENT=$WORK/loadclient
	gcc -std=gnu11 -D_GNU_SOURCE -O2 -o "$LOADCLIENT" "$ROOT/bench/loadclient.c" || die "cannot build bench/loadclient.c"
fi
: >"$OUT/$TAG.jsonl"

for round in $(seq "$ROUNDS"); do
	"$CXLCR" pod down >/dev/null 2>&1 || true
	rm -f "$CXLCR_POOL"
	"$CXLCR" pool format --size 4G >/dev/null
	"$CXLCR" pod up --hosts 2 >/dev/null
	"$CXLCR" run --host h0 --name rd --arena 256M --recovery-interval "$INTERVAL_MS" --log "$WORK/rd.log" -- \
		redis-server --port $PORT --protected-mode no --save '' --appendonly no >/dev/null
	addr=$("$CXLCR" status rd --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["address"])')
	python3 "$ROOT/tests/lib/kvclient.py" wait --host "$addr" --port $PORT >/dev/null
	rm -f "$WORK/ack"
	"$LOADCLIENT" --host "$addr" --port $PORT --proto redis --mode set --keys 10000 --key-prefix ack: \
		--value-size 64 --rate "$RATE" --ack-log "$WORK/ack" --json "$WORK/load.json" --quiet &
	LC_PID=$!
	# Two intervals and a bit under load: the points are in their rhythm,
	# and the crash falls anywhere in an interval.
	python3 -c "import random, time; time.sleep(2.2 * $INTERVAL_MS / 1000 + random.random() * $INTERVAL_MS / 1000)"
	if [ "$LOCK_HELD" = 1 ]; then
		rm -f "$WORK/lock.out"
		"$CXLCR" pod exec h0 -- "$LOCK_TOOL" h0 >"$WORK/lock.out" 2>&1 &
		for _ in $(seq 1 400); do [ -s "$WORK/lock.out" ] && break; python3 -c 'import time; time.sleep(0.005)'; done
		grep -q '^locked' "$WORK/lock.out" || die "round $round: lock_tool did not lock: $(cat "$WORK/lock.out")"
	fi
	python3 - "$CXLCR" "$addr" $PORT "$WORK/answer.json" "$LC_PID" "$PANIC" <<'PY'
import json, os, signal, socket, subprocess, sys, time
cxlcr, addr, port, out, load = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
panic = ["--panic"] if sys.argv[6] == "1" else []
t0 = time.monotonic()
subprocess.run([cxlcr, "pod", "crash", "h0"] + panic, check=True, stdout=subprocess.DEVNULL)
t1 = time.monotonic()
# The writer stops at the crash: what it wrote to the recovered service
# would not be the point's.
os.kill(load, signal.SIGTERM)
# Short connect timeouts: while the address has no host, a connect waits
# for the neighbour resolution, and a long wait would be counted.
while time.monotonic() - t0 < 60:
    try:
        with socket.create_connection((addr, port), timeout=0.01) as s:
            s.settimeout(1)
            s.sendall(b"PING\r\n")
            if s.recv(16).startswith(b"+PONG"):
                break
    except OSError:
        pass
    time.sleep(0.002)
else:
    sys.exit("no answer within 60 s")
t2 = time.monotonic()
json.dump({"crash_cmd_ms": (t1 - t0) * 1e3, "crash_to_answer_ms": (t2 - t0) * 1e3,
           "crashed_to_answer_ms": (t2 - t1) * 1e3}, open(out, "w"))
PY
	kill -TERM "$LC_PID" 2>/dev/null || true
	wait "$LC_PID" 2>/dev/null || true
	LC_PID=
	python3 "$ROOT/tests/lib/prefixcheck.py" --host "$addr" --port $PORT --json "$WORK/ack" >"$WORK/prefix.json" ||
		die "round $round: the recovered data is not a prefix of the writes: $(cat "$WORK/prefix.json")"
	"$CXLCR" pod logs h1 >"$WORK/h1.log"
	python3 - "$WORK/answer.json" "$WORK/prefix.json" "$WORK/h1.log" "$round" <<'PY' | tee -a "$OUT/$TAG.jsonl"
import json, re, sys
a = json.load(open(sys.argv[1]))
p = json.load(open(sys.argv[2]))
m = re.search(r"^rd recovered on h1 .*; fresh arena ([0-9.]+) ms; ([0-9.]+) ms\)$", open(sys.argv[3]).read(), re.M)
print(json.dumps({"round": int(sys.argv[4]), **a, "fresh_arena_ms": float(m.group(1)) if m else None,
                  "restore_ms": float(m.group(2)) if m else None,
                  "lost_writes": p["acknowledged_after_cut"], "writes": p["writes"]}))
PY
	"$CXLCR" stop rd >/dev/null 2>&1 || true
done

python3 - "$OUT/$TAG.jsonl" "$LEASE_MS" "$INTERVAL_MS" "$RATE" "$PANIC" "$LOCK_HELD" <<'PY' | tee "$OUT/$TAG.txt"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
med = lambda k: statistics.median(r[k] for r in rows)
print("hard crash%s%s, lease %s ms, recovery points every %s ms, %s writes/s, %d rounds (medians):"
      % (" with a panic tombstone" if sys.argv[5] == "1" else "",
         " while a worker of the host holds the pool lock" if sys.argv[6] == "1" else "",
         sys.argv[2], sys.argv[3], sys.argv[4], len(rows)))
print("  crash to first answer on the new host: %.0f ms (each: %s)"
      % (med("crash_to_answer_ms"), ", ".join("%.0f" % r["crash_to_answer_ms"] for r in rows)))
print("  from the crash command's return:       %.0f ms (the command itself: %.0f ms)"
      % (med("crashed_to_answer_ms"), med("crash_cmd_ms")))
print("  of which the winner's recovery:        %.0f ms (making the fresh arena: %.0f ms)"
      % (med("restore_ms"), med("fresh_arena_ms")))
print("  acknowledged writes lost:              %.0f (each: %s)"
      % (med("lost_writes"), ", ".join(str(r["lost_writes"]) for r in rows)))
PY
