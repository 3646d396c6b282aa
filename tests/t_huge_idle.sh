#!/usr/bin/env bash
# 2 MiB mappings again for a service that is not snapshotted any more
# (tracking/huge_again.c, tracking/idle.c, `cxlcr huge-pages`):
#   a. a service that was never snapshotted keeps its mappings: the verb
#      says why and changes nothing;
#   b. after a snapshot (4 KiB mappings), its host's daemon, CXLCR_HUGE_AFTER_S
#      (here 1) seconds after the last scan, maps the heap with 2 MiB pages
#      again: status says small_pages false, no heap mapping keeps
#      VM_NOHUGEPAGE, some of the heap is on 2 MiB pages, and the log says
#      so;
#   c. the next snapshot compares its draft with the newest one (its JSON
#      says why), and a child forked from it has every value, new and old.
# (t_snapshot_cut runs the verb under a writer, checks the cut, and that
# the snapshot after the compared one takes tracking's word again; its pod
# leaves the remap to the verb, as every other test's does.)
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

PORT=6379
new_pool 4G
CXLCR_WRITE_TRACKING=1 CXLCR_HUGE_AFTER_S=1 pod_up 2

pod_redis r h0 256M
python3 "$KV" fill --host "$addr" --port $PORT --count 20000 --size 1000 --seed 3
wait_tracked r

out=$("$CXLCR" huge-pages r --json) || die "a: huge-pages of a service never snapshotted failed"
[ "$(json remapped <<<"$out")" = False ] || die "a: a service never snapshotted was remapped: $out"
json why_not <<<"$out" | grep -q "2 MiB pages already" || die "a: no reason given: $out"
ok "a: a service never snapshotted keeps its mappings: $(json why_not <<<"$out")"

"$CXLCR" snapshot r >/dev/null || die "b: snapshot failed"
wait_status r small_pages False 60 || die "b: still on 4 KiB mappings a minute after its snapshot"
read -r vmas nh pmd <<<"$(heap_maps r)"
[ "$nh" -eq 0 ] || die "b: $nh of $vmas heap mappings keep VM_NOHUGEPAGE"
[ "$pmd" -gt 0 ] || die "b: no part of the heap is on 2 MiB pages"
"$CXLCR" pod logs h0 | grep -q "r: no snapshot for .* its heap gets 2 MiB mappings again" ||
	die "b: the daemon's log does not say it"
[ "$(status_field r write_tracking)" = True ] || die "b: r is not tracked after the remap"
ok "b: its daemon mapped the heap with 2 MiB pages again (${pmd} KiB), still tracked"

python3 "$KV" fill --host "$addr" --port $PORT --count 300 --size 1000 --seed 4
out=$("$CXLCR" snapshot r --json) || die "c: snapshot after the remap failed"
json draft_compared_because <<<"$out" | grep -q "2 MiB mappings" ||
	die "c: the snapshot after the remap took tracking's word: $out"
[ "$(json incremental <<<"$out")" = True ] || die "c: not incremental on the first snapshot: $out"
kid=$("$CXLCR" fork r --to h1 --json | json children 0 name) || die "c: fork failed"
SERVICES+=("$kid")
kaddr=$(status_field "$kid" address)
python3 "$KV" verify --host "$kaddr" --port $PORT --count 300 --size 1000 --seed 4 --quiet ||
	die "c: the child's new values are wrong"
python3 "$KV" verify --host "$kaddr" --port $PORT --start 300 --count 19700 --size 1000 --seed 3 --quiet ||
	die "c: the child's older values are wrong"
ok "c: the next snapshot compared its draft, and a child has every value"
