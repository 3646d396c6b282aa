#!/usr/bin/env bash
# Snapshots have no bound on their runs (scattered writes over a large
# heap make tens of thousands in an incremental one), but a fork child
# that shares its snapshot's pages maps each run. So (with the bound
# lowered to 1000 for a small heap, $CXLCR_FORK_SHARE_RUNS_MAX):
#   - an incremental snapshot after scattered writes stays incremental,
#     with more runs than the bound (`snapshot --json` says how many);
#   - a fork of share-mode children from it takes a full snapshot first
#     (the fork's JSON has its figures), and the children hold every key;
#   - a fork of copy-mode children takes none (they map nothing of it).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

export CXLCR_FORK_SHARE_RUNS_MAX=1000
COUNT=20000
field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
# kv write|check HOST ROUND: every key k of 0..COUNT-1 holds "k:r:" repeated to
# 1000 B, r the last round whose write reached it (round R rewrites every
# tenth key, starting at the R-th: scattered all over the heap).
kv() {
	python3 - "$@" "$COUNT" <<'PY'
import socket, sys
how, host, last, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
s = socket.create_connection((host, 6379), timeout=60)
f = s.makefile("rb")
def val(k, r):
    head = b"%d:%d:" % (k, r)
    return (head * (1000 // len(head) + 1))[:1000]
def cmd(*a):
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a)
def reply():
    line = f.readline()
    if line[:1] == b"$":
        n = int(line[1:])
        return None if n < 0 else f.read(n + 2)[:-2]
    if line[:1] == b"-":
        sys.exit("redis: " + line.decode())
    return line
def owner(k):
    r = 0
    for rr in range(1, last + 1):
        if k % 10 == rr % 10:
            r = rr
    return r
keys = range(count) if how == "check" or last == 0 else [k for k in range(count) if k % 10 == last % 10]
for lo in range(0, len(keys), 1000):
    chunk = keys[lo:lo + 1000]
    if how == "write":
        s.sendall(b"".join(cmd(b"SET", b"k%d" % k, val(k, last)) for k in chunk))
        for _ in chunk:
            reply()
    else:
        s.sendall(b"".join(cmd(b"GET", b"k%d" % k) for k in chunk))
        for k in chunk:
            if reply() != val(k, owner(k)):
                sys.exit("key k%d is wrong at %s" % (k, host))
PY
}
new_pool 4G
pod_up 2
pod_redis r h0 512M
parent=$addr
kv write "$parent" 0
full=$("$CXLCR" snapshot r --json) || die "the first snapshot failed"
runs0=$(echo "$full" | field runs)
[ "$runs0" -le 1000 ] || die "a full snapshot of $COUNT fresh keys has $runs0 runs: lower the test's data"
# Every tenth key rewritten: scattered pages all over the heap.
kv write "$parent" 1
inc=$("$CXLCR" snapshot r --json) || die "the second snapshot failed"
[ "$(echo "$inc" | field incremental)" = True ] || die "the second snapshot is not incremental: $inc"
runs1=$(echo "$inc" | field runs)
[ "$runs1" -gt 1000 ] || die "the incremental snapshot has only $runs1 runs: the test writes too little"
ok "snapshots: full with $runs0 runs, then incremental with $runs1 (no bound)"

out=$("$CXLCR" fork r --to h1 --mode share --json) || die "fork --mode share failed"
snap_ms=$(echo "$out" | field snapshot_ms)
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$snap_ms" ||
	die "a share-mode fork from a snapshot of $runs1 runs took no snapshot: $out"
[ "$(echo "$out" | field mode)" = share ] || die "the share-mode fork made other children: $out"
child=$(echo "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["children"][0]["address"])')
kv check "$child" 1 || die "the share-mode child does not hold every key"
ok "a share-mode fork took a full snapshot first; its child holds every key"

kv write "$parent" 2
"$CXLCR" snapshot r >/dev/null || die "the third snapshot failed"
out=$("$CXLCR" fork r --to h1 --mode copy --json) || die "fork --mode copy failed"
[ "$(echo "$out" | field snapshot_ms)" = 0.0 ] && [ "$(echo "$out" | field mode)" = copy ] ||
	die "a copy-mode fork took a snapshot, or made other children: $out"
child=$(echo "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["children"][0]["address"])')
kv check "$child" 2 || die "the copy-mode child does not hold every key"
ok "a copy-mode fork took none; its child holds every key"
