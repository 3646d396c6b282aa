#!/usr/bin/env bash
# A snapshot whose draft finds no room in the pool (a draft leaves room for
# its finish, so it needs more than the bare copy) is copied whole in the
# freeze instead, and says so; the writes after it must still be known, so
# the next snapshot is incremental on it, and a child forked from that one
# holds every key. Before the fix, the freeze's copy noted no scan while the
# daemon's scan before its draft had re-armed the heap: the next snapshot
# went full, "writes since its newest snapshot are not all known" (what
# session 7 saw at 4 GiB after every fork that took a full snapshot: the
# pool had no room for its draft). A recovery point without room for its
# draft is skipped before the freeze, and the snapshot after it compares
# every page with the newest one rather than copying the heap again.
#
# The pool is filled by a second service whose arena leaves, after the first
# snapshot, room for the bare copy and its images but not for a draft.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

COUNT=200000
MIB=$((1 << 20))
field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
kv() { python3 "$KV" "$1" --host "$2" --port 6379 --size 1000 --count "$3" --start "$4" --seed "$5" >/dev/null; }

new_pool 2G
pod_up 2
pod_redis r h0 512M
parent=$addr
kv fill "$parent" "$COUNT" 0 1
first=$("$CXLCR" snapshot r --json) || die "the first snapshot failed"
stored=$(echo "$first" | field pages_stored)

# The first snapshot's region, trimmed once it was published, is as large
# as the bare copy of this heap; a draft needs its spare more (common/
# snapshot.c: 256 pages and one in 16 of its copies). Leave in the pool's
# tail half the spare more than the copy: the copy and its images fit,
# the draft does not.
# poolimg.py list: slot, kind, generation, offset, size, name.
read -r copy_bytes tail < <(python3 "$ROOT/tests/lib/poolimg.py" list "$CXLCR_POOL" |
	python3 -c '
import sys
rows = [l.split() for l in sys.stdin]
snap = [int(r[4]) for r in rows if r[1] == "3"]
print(snap[0], int(sys.argv[1]) - max(int(r[3]) + int(r[4]) for r in rows))' \
		"$("$CXLCR" pool info --json | field size)")
spare=$(( (256 + stored / 16) * 4096 ))
want=$(( copy_bytes + spare / 2 ))
filler=$(( (tail - want) / (2 * MIB) * (2 * MIB) ))
say "copy $((copy_bytes / MIB)) MiB, a draft's spare $((spare / MIB)) MiB, pool tail $((tail / MIB)) MiB: a filler of $((filler / MIB)) MiB"
[ "$filler" -gt $((64 * MIB)) ] || die "the pool is too small for the test's filler"
PORT=6380 pod_redis filler h0 "$filler"

# Rewritten: the first 1% of the keys.
kv fill "$parent" $((COUNT / 100)) 0 2
out=$("$CXLCR" snapshot r --full --json) || die "the snapshot without room for a draft failed: $out"
because=$(echo "$out" | field full_because)
case $because in
*"no draft"*) ;;
*) die "the second snapshot had room for a draft after all (full because: $because); the filler is too small" ;;
esac
ok "a snapshot without room for its draft was copied in the freeze ($because)"

# A recovery point is not copied whole in the freeze (a heap-sized freeze,
# and as much pool space again): without room for its draft it is skipped
# before CRIU runs. Its draft's scan has re-armed the heap all the same, so
# the writes since the newest snapshot are no longer known.
pid=$(status_field r pid)
if out=$("$CXLCR" snapshot r --recovery-point --full --json 2>&1); then
	die "a recovery point without room for its draft was taken: $out"
fi
case $out in
*"not taken"*"no draft"*) ;;
*) die "a recovery point without room for its draft failed otherwise: $out" ;;
esac
case $out in *criu*) die "a recovery point without room for its draft ran CRIU: $out" ;; esac
[ "$(status_field r pid)" = "$pid" ] && [ "$(status_field r state)" = running ] || die "r is not running as before"
ok "a recovery point without room for its draft is skipped before any freeze"

# So the next snapshot compares every page with the newest one: still
# incremental on it, where it was a full copy (the heap's size again).
kv fill "$parent" $((COUNT / 100)) $((COUNT / 2)) 3
out=$("$CXLCR" snapshot r --json) || die "the third snapshot failed"
[ "$(echo "$out" | field incremental)" = True ] ||
	die "the snapshot after one copied in the freeze is not incremental: $(echo "$out" | field full_because)"
compared=$(echo "$out" | field draft_compared_because)
[ "$compared" != None ] || die "the snapshot after a skipped point did not compare its pages"
ok "the next snapshot is incremental on it, every page compared ($compared)"

out=$("$CXLCR" fork r --to h1 --json) || die "fork failed: $out"
child=$(echo "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["children"][0]["address"])')
kv verify "$child" $((COUNT / 100)) 0 2 || die "the child does not hold the second round's keys"
kv verify "$child" $((COUNT / 2 - COUNT / 100)) $((COUNT / 100)) 1 || die "the child does not hold the first round's keys"
kv verify "$child" $((COUNT / 100)) $((COUNT / 2)) 3 || die "the child does not hold the third round's keys"
kv verify "$child" $((COUNT / 2 - COUNT / 100)) $((COUNT / 2 + COUNT / 100)) 1 || die "the child does not hold the last keys"
ok "a child forked from it holds every key"
