#!/usr/bin/env bash
# A dump never freezes a service midway through growing its heap. Growing
# opens files (/proc of the service, the pool's metadata) for a moment, and
# a checkpoint whose freeze fell in that moment carried the open file; the
# restore then failed ("Can't open file proc/668/stat on restore": the pid
# was the old process's), with the service checkpointed and stopped: seen
# in t_fault_ckrestore under its writer. Verbs now fence growth off before
# they dump (pool_format.h, grow_fence).
#
# A Redis with a 64 MiB arena is filled past it; its first growth is held
# midway by the test hook of preload/grow.c ($CXLCR_TEST_GROW_HOLD), with a
# /proc file open:
#  - checkpoint and snapshot refuse, in one line, and the service goes on
#    (before: the checkpoint went ahead and its restore failed);
#  - let go, the growth ends and the fill completes; then a checkpoint and
#    a restore on the other host work, every value read back.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server

PORT=6379
COUNT=90000   # x 1000 B: past a 64 MiB arena

new_pool 4G
HOLD=$POOL_DIR/grow-hold
pod_up 2
SERVICES+=(gf)
"$CXLCR" run --host h0 --name gf --arena 64M --log "$POOL_DIR/gf.log" --env "CXLCR_TEST_GROW_HOLD=$HOLD" -- \
	redis-server --port $PORT --protected-mode no --save '' --appendonly no --dir "$POOL_DIR" >/dev/null ||
	die "cxlcr run failed"
addr=$(status_field gf address)
python3 "$KV" wait --host "$addr" --port $PORT >/dev/null || die "redis does not answer at $addr"

say "fill $COUNT x 1000 B into its 64 MiB arena; its first growth is held"
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size 1000 --seed 5 --quiet --timeout 120 &
FILL=$!
on_exit "kill $FILL 2>/dev/null"
for _ in $(seq 1 1200); do
	[ -e "$HOLD.held" ] && break
	kill -0 $FILL 2>/dev/null || break
	sleep 0.05
done
[ -e "$HOLD.held" ] || die "the arena never began to grow"
ok "a growth is under way (held with a /proc file open)"

for verb in checkpoint snapshot; do
	set +e
	out=$("$CXLCR" $verb gf 2>&1)
	rc=$?
	set -e
	[ $rc -ne 0 ] || die "$verb went ahead while the heap was growing: $out"
	[ "$(echo "$out" | wc -l)" -eq 1 ] || die "$verb failed with more than one line: $out"
	echo "$out" | grep -q "its heap has been growing" || die "$verb failed otherwise: $out"
	[ "$(status_field gf state)" = running ] || die "$verb left gf $(status_field gf state)"
	ok "$verb refused: $out"
done

touch "$HOLD"
wait $FILL || die "the fill failed after the growth went on"
[ "$(status_field gf arena_extents)" -gt 1 ] || die "the arena did not grow"
ok "the growth went on, the fill completed ($(status_field gf arena_extents) extents)"

say "checkpoint it, restore it on h1"
"$CXLCR" checkpoint gf >/dev/null || die "checkpoint after the growth failed"
"$CXLCR" restore gf --host h1 >/dev/null || die "restore after the growth failed"
addr=$(status_field gf address)
python3 "$KV" verify --host "$addr" --port $PORT --count $COUNT --size 1000 --seed 5 --quiet ||
	die "values lost"
ok "checkpointed and restored on h1, every value read back"
