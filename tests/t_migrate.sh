#!/usr/bin/env bash
# The CXLResume path with real Redis on an emulated pod: migrate h0 -> h1
# -> h0, checkpoint and restore elsewhere, every value read back each
# time; h1 names the pool differently, so its restores rebase the arena's
# mapping onto its own path; and the faults: a host that is not up, a destination daemon that
# is down, a spent checkpoint, a corrupt image set. After each, the
# service runs somewhere with every value intact.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

COUNT=30000
SIZE=1000
TYPES=strings,hashes,lists,sets,zsets
PORT=6379

new_pool 8G
# h1 sees the pool under another name (a hard link: the same file).
ln "$CXLCR_POOL" "$POOL_DIR/pool-h1"
pod_up 2 --host-pool "h1=$POOL_DIR/pool-h1"

# maps_pool PATH: the service maps its arena from the pool named PATH.
maps_pool() {
	on "$(status_field redis host)" grep -q " $1\$" "/proc/$(status_field redis pid)/maps" ||
		die "the service does not map its arena from $1 on $(status_field redis host)"
}

say "cxlcr run --host h0 redis-server"
pod_redis redis h0 1G
[ "$(status_field redis host)" = h0 ] || die "redis is not on h0"
say "fill $COUNT keys at $addr"
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --types $TYPES --seed 3

verify() {
	python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size $SIZE --types $TYPES \
		--seed 3 --quiet || die "values differ after $1"
	[ "$(status_field redis address)" = "$addr" ] || die "the service address changed after $1"
	ok "$1: every value intact at $addr"
}

# migrate TO: a successful migrate, its JSON, and where the service is now.
migrate() {
	local before_epoch out before
	before=$(service_pid redis)
	before_epoch=$(status_field redis owner_epoch)
	out=$("$CXLCR" migrate redis --to "$1" --json) || die "migrate to $1 failed"
	echo "$out" | python3 -c '
import json, sys
j = json.load(sys.stdin)
for k in ("freeze_ms", "checkpoint_ms", "restore_ms", "total_ms", "image_bytes"):
    assert k in j, k
assert j["image_bytes"] < 64 << 20, "the heap was copied into the images"
# The destination accounts for its part of the freeze: its parts and the
# request around them make up restore_ms, and the tasks were frozen for no
# longer than the freeze.
r = j["restore_parts"]
parts = ("request_ms", "fetch_ms", "prepare_ms", "criu_restore_ms", "after_ms")
assert all(r[k] >= 0 for k in parts) and r["criu_restore_ms"] > 0, r
assert abs(sum(r[k] for k in parts) - j["restore_ms"]) < 0.05 * j["restore_ms"] + 0.5, (r, j["restore_ms"])
assert 0 <= r["tracker_ms"] <= r["after_ms"] and 0 < j["frozen_ms"] <= j["freeze_ms"], j
# The last steps of the plugin in the CRIU restore: the take-over and the network
# lock release (the plugin notes them; both run for a pod service).
assert 0 < r["plugin_take_over_ms"] and 0 < r["netlock_release_ms"], r
assert r["plugin_take_over_ms"] + r["netlock_release_ms"] <= r["criu_restore_ms"], r
print("timings: freeze %.1f ms, checkpoint %.1f ms, restore %.1f ms, images %d bytes"
      % (j["freeze_ms"], j["checkpoint_ms"], j["restore_ms"], j["image_bytes"]))' ||
		die "migrate --json: $out"
	[ "$(status_field redis host)" = "$1" ] || die "after migrate, redis is not on $1"
	[ "$(status_field redis state)" = running ] || die "after migrate, redis is not running"
	# (Pids are each host's own: the same number on another host is
	# another process; this machine's pids tell them apart.)
	[ "$(service_pid redis)" != "$before" ] || die "after migrate, the same process"
	[ "$(status_field redis owner_epoch)" -gt "$before_epoch" ] || die "epoch did not move on"
	wait_exit "$before" 30
}

maps_pool "$CXLCR_POOL"
migrate h1
verify "migrate h0 -> h1"
maps_pool "$POOL_DIR/pool-h1"
ok "rebased onto h1's name of the pool"
migrate h0
verify "migrate h1 -> h0"
maps_pool "$CXLCR_POOL"

say "checkpoint on h0, restore on h1"
"$CXLCR" checkpoint redis --json | is_json || die "checkpoint failed"
[ "$(status_field redis state)" = checkpointed ] || die "state is not checkpointed"
"$CXLCR" restore redis --host h1 --json | is_json || die "restore on h1 failed"
[ "$(status_field redis host)" = h1 ] || die "restored redis is not on h1"
verify "checkpoint + restore on h1"

say "a checkpoint that was restored is spent"
if err=$("$CXLCR" restore redis --host h0 2>&1); then die "a second restore succeeded"; fi
[ "$(echo "$err" | wc -l)" -eq 1 ] || die "not one line: $err"
ok "refused: $err"
verify "a refused second restore"

say "migrate to a host that is not up"
if err=$("$CXLCR" migrate redis --to h7 2>&1); then die "migrate to h7 succeeded"; fi
ok "refused: $err"
verify "a migrate to a missing host"

say "migrate while the destination's daemon is down"
h0_daemon=$("$CXLCR" pod up --hosts 2 --json | python3 -c '
import json, sys
print([h["daemon_pid"] for h in json.load(sys.stdin)["hosts"] if h["host"] == "h0"][0])')
kill -KILL "$h0_daemon"
if err=$("$CXLCR" migrate redis --to h0 2>&1); then die "migrate to a dead daemon succeeded"; fi
echo "$err" | grep -q "goes on running on h1" || die "unclear error: $err"
[ "$(status_field redis host)" = h1 ] && [ "$(status_field redis state)" = running ] ||
	die "the source did not resume"
ok "failed cleanly: $err"
verify "a migrate to a dead daemon"
"$CXLCR" pod up --hosts 2 >/dev/null || die "pod up did not bring h0 back"

say "a corrupt image set is refused, not followed"
"$CXLCR" checkpoint redis >/dev/null || die "checkpoint failed"
flip() {
	python3 - "$CXLCR_POOL" <<'PYEOF'
import struct, sys
# The region table (common/pool_format.h): 1024 entries of 256 bytes at 4 KiB.
with open(sys.argv[1], "r+b") as f:
    for i in range(1024):
        f.seek(4096 + 256 * i)
        state, kind, gen, off, size = struct.unpack("<IIQQQ", f.read(32))
        if state == 1 and kind == 2:
            # The first file's contents: after the 512-byte header, the table.
            f.seek(off + 8 + 4)
            count = struct.unpack("<I", f.read(4))[0]
            at = off + 512 + 128 * count + 16
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0x40]))
            break
    else:
        sys.exit("no image set in the pool")
PYEOF
}
flip
if err=$("$CXLCR" restore redis --host h0 2>&1); then die "a corrupt image set was restored"; fi
echo "$err" | grep -q corrupt || die "unclear error: $err"
ok "refused: $err"
flip
"$CXLCR" restore redis --host h0 >/dev/null || die "restore after the repair failed"
verify "a refused corrupt image set"

stop_service redis
ok "stopped"
