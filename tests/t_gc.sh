#!/usr/bin/env bash
# cxlcr gc removes what crashed verbs left, and nothing else: the work
# directory of a checkpoint whose CRIU was killed (its maker is gone), a
# named network namespace of a service that no verb works on, an image
# set of an epoch the service has moved on from, and the draft of a
# snapshot whose worker was killed (with the borrow it held on the earlier
# snapshot it shared pages with), an empty working directory of no service
# of the host (a fork worker killed after making its child's leaves one);
# it leaves a non-empty one, the running
# service, a namespace of no service of this pool, and, with --dry-run,
# everything. gc runs on h0, as on each machine of a pod: work directories
# and named namespaces are a host's own (emulation/hostfs.h).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server ip

PORT=6379
POOLIMG=$ROOT/tests/lib/poolimg.py
new_pool 4G
criu_hook gc
CXLCR_TEST_CRIU_HOOK=$HOOK pod_up 2
on_h0() { "$CXLCR" pod exec h0 -- "$@"; }
pod_redis "$NAME" h0 256M
python3 "$KV" fill --host "$addr" --port $PORT --count 3000 --size 300 --seed 4 --quiet

say "a checkpoint whose CRIU is killed leaves its work directory"
rm -f "$HOOK/criu.pid"
echo post-dump >"$HOOK/kill-at"
"$CXLCR" checkpoint "$NAME" >/dev/null 2>&1 &
verb=$!
criu_reached "$verb" || die "CRIU never reached post-dump"
kill -KILL "$(hook_pid criu.pid)"
wait "$verb" && die "the checkpoint succeeded although CRIU was killed"
rm -f "$HOOK/kill-at"
workdir=$(on_h0 find /var/lib/cxlcr -mindepth 2 -maxdepth 2 -name "dump.$NAME.*" | head -n1)
[ -n "$workdir" ] || die "no work directory was left to collect"

say "a named network namespace of the service, as a restore-prepare of a dead migrate leaves it"
link=$("$CXLCR" status "$NAME" | sed -n 's/.*(link \(cx[0-9a-f]*\)\.\([0-9]*\)).*/\1/p')
[ -n "$link" ] || die "no link in cxlcr status"
stale_ns=cxlcr-$link.999
foreign_ns=cxlcr-cx00000000.1
on_h0 ip netns add "$stale_ns" # in h0's own /run/netns: they go with h0 at pod down
on_h0 ip netns add "$foreign_ns"

say "an image set of an epoch the service moved on from"
"$CXLCR" checkpoint "$NAME" >/dev/null || die "checkpoint failed"
python3 "$POOLIMG" keep "$CXLCR_POOL" "$NAME" "$POOL_DIR/kept" || die "cannot keep the image set"
"$CXLCR" restore "$NAME" --host h1 >/dev/null || die "restore failed"
[ "$(python3 "$POOLIMG" count "$CXLCR_POOL" "$NAME")" = 0 ] || die "the restore left its image set"
python3 "$POOLIMG" put "$CXLCR_POOL" "$POOL_DIR/kept" || die "cannot put the old image set back"
[ "$(python3 "$POOLIMG" count "$CXLCR_POOL" "$NAME")" = 1 ] || die "the old image set is not back"

say "a snapshot whose worker dies after its draft (incremental: it holds the first snapshot)"
snapshots() { python3 "$POOLIMG" kind "$CXLCR_POOL" 3; }
"$CXLCR" snapshot "$NAME" >/dev/null || die "first snapshot failed"
python3 "$KV" fill --host "$(status_field "$NAME" address)" --port $PORT --count 300 --size 300 --seed 4 --quiet
rm -f "$HOOK/go" "$HOOK/criu.pid"
echo pre-dump >"$HOOK/pause-at"
"$CXLCR" snapshot "$NAME" >/dev/null 2>&1 &
verb=$!
criu_reached "$verb" || die "CRIU never reached pre-dump"
criu=$(hook_pid criu.pid)
kill -KILL "$(criu_worker "$criu")" "$criu"
wait "$verb" && die "the snapshot succeeded although its worker was killed"
rm -f "$HOOK/pause-at"
# The daemon takes a killed worker's lease over and ends what it left
# (control/fence.c): gc leaves alone what a live verb works on, so wait
# for that to be done.
for _ in $(seq 200); do
	[ "$("$CXLCR" status "$NAME" --json | python3 -c 'import json,sys; print(json.load(sys.stdin).get("verb"))')" = None ] && break
	python3 -c 'import time; time.sleep(0.05)'
done
[ "$(snapshots)" -eq 2 ] || die "no snapshot draft was left to collect ($(snapshots) snapshot regions)"

say "a working directory of no service, empty, and one with a file in it"
on_h0 mkdir -p /run/cxlcr/wd/ghost /run/cxlcr/wd/kept
on_h0 touch /run/cxlcr/wd/kept/dump.rdb

say "gc --dry-run names all five and removes nothing"
on_h0 "$CXLCR" gc --dry-run --json >"$POOL_DIR/dry.json" || die "gc --dry-run failed"
python3 - "$POOL_DIR/dry.json" "$workdir" "$stale_ns" <<'PYEOF' || die "gc --dry-run: $(cat "$POOL_DIR/dry.json")"
import json, sys
j = json.load(open(sys.argv[1]))
names = {(x["kind"], x["name"]) for x in j["would_remove"]}
want = {("work-directory", sys.argv[2]), ("network-namespace", sys.argv[3]),
        ("working-directory", "/run/cxlcr/wd/ghost")}
assert not any(n == "/run/cxlcr/wd/kept" for _, n in names), names
assert want <= names, names
assert any(k == "image-set" for k, _ in names), names
assert any(k == "snapshot-draft" for k, _ in names), names
assert not any("cx00000000" in n for _, n in names), names
assert j["foreign_left"] >= 1
PYEOF
on_h0 test -d "$workdir" && on_h0 test -e "/run/netns/$stale_ns" && on_h0 test -d /run/cxlcr/wd/ghost ||
	die "gc --dry-run removed something"
[ "$(python3 "$POOLIMG" count "$CXLCR_POOL" "$NAME")" = 1 ] || die "gc --dry-run freed the image set"
ok "dry run: $(python3 -c 'import json,sys; print(", ".join("%s %s" % (x["kind"], x["why"]) for x in json.load(open(sys.argv[1]))["would_remove"]))' "$POOL_DIR/dry.json")"

say "gc removes them, and leaves the running service and the other pool's namespace"
on_h0 "$CXLCR" gc >"$POOL_DIR/gc.out" || die "gc failed"
! on_h0 test -e "$workdir" || die "the work directory is still there"
! on_h0 test -e "/run/netns/$stale_ns" || die "the stale namespace is still there"
on_h0 test -e "/run/netns/$foreign_ns" || die "gc removed a namespace of no service of this pool without --foreign"
! on_h0 test -e /run/cxlcr/wd/ghost || die "the empty working directory is still there"
on_h0 test -f /run/cxlcr/wd/kept/dump.rdb || die "gc removed a working directory with a file in it"
[ "$(python3 "$POOLIMG" count "$CXLCR_POOL" "$NAME")" = 0 ] || die "the stale image set is still there"
[ "$(snapshots)" -eq 1 ] || die "the snapshot draft is still there ($(snapshots) snapshot regions)"
# The published snapshot keeps its dump, whatever the service's epoch
# since: a child can still be forked from it.
child=$("$CXLCR" fork "$NAME" --to h0 --json 2>"$POOL_DIR/fork.err" | python3 -c 'import json,sys; print(json.load(sys.stdin)["children"][0]["name"])') ||
	die "gc took the published snapshot's dump: $(cat "$POOL_DIR/fork.err")"
"$CXLCR" stop "$child" >/dev/null
# The draft's hold on the first snapshot went with it: replaced by a new
# snapshot that is not incremental on it, the first one goes. (A plain
# snapshot now would be incremental on it, every page compared, since the
# dead draft's scan lost track of the writes: --full.)
"$CXLCR" snapshot "$NAME" --full --json >"$POOL_DIR/snap.json" || die "snapshot after gc failed"
[ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["incremental"])' "$POOL_DIR/snap.json")" = False ] ||
	die "a full snapshot after the dead one is incremental"
[ "$(snapshots)" -eq 1 ] || die "the first snapshot outlived its replacement: the dead draft's borrow on it was kept"
addr=$(status_field "$NAME" address)
python3 "$KV" verify --host "$addr" --port $PORT --count 3000 --size 300 --seed 4 --quiet ||
	die "the service lost values to gc"
"$CXLCR" migrate "$NAME" --to h0 >/dev/null || die "migrate after gc failed"
ok "gc: $(tail -n +1 "$POOL_DIR/gc.out" | tr '\n' ' ')"
