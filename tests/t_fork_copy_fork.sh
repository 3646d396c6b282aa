#!/usr/bin/env bash
# A copy-mode child that forks (Redis's BGSAVE) while its pager still
# fetches its pages in the background.
#
# While a fork's UFFD_EVENT_FORK waits in the child's userfaultfd, the
# kernel refuses every copy into the child with EAGAIN, and the forking
# thread sleeps until the pager reads the event. The pager's main thread,
# which alone reads events, retried such a copy in place: it waited for
# itself, spinning, the child's fork never returned, and nothing bounded
# it. Now a copy refused so is put off until the event is read.
#
# While the file CXLCR_TEST_BG_HOLD names exists, the background fetch
# installs its first chunk again and again, so BGSAVE's fork meets it:
# BGSAVE must return, its dump must hold every value (the grandchild's
# pages were served), the child must still hold every value, and the fetch
# must end once the file is gone.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli timeout

COUNT=10000
SIZE=1000
TYPES=strings,hashes,lists,sets,zsets
PORT=6379

verify() { python3 "$KV" verify --host "$1" --port "$2" --count $COUNT --size $SIZE --types $TYPES \
	--seed 5 --quiet; }

new_pool 4G
export CXLCR_TEST_BG_HOLD=$POOL_DIR/hold
touch "$CXLCR_TEST_BG_HOLD"
pod_up 2

say "cxlcr run --host h0 redis-server, $COUNT keys, a snapshot"
pod_redis redis h0 512M
python3 "$KV" fill --host "$addr" --port $PORT --count $COUNT --size $SIZE --types $TYPES --seed 5
"$CXLCR" snapshot redis >/dev/null || die "cxlcr snapshot failed"

out=$("$CXLCR" fork redis --to h1 --mode copy --json) || die "cxlcr fork --mode copy failed"
read -r kid addr pid < <(echo "$out" | kids_of)
SERVICES+=("$kid")

say "BGSAVE in $kid while its background fetch runs"
bgsave_dumps "$addr" "$kid" --count $COUNT --size $SIZE --types $TYPES --seed 5
ok "$kid forked (BGSAVE) during its background fetch; the dump holds every value"

verify "$addr" $PORT || die "$kid does not hold its parent's values after its fork"
rm -f "$CXLCR_TEST_BG_HOLD"
# The fetch goes on once the file is gone: its end is logged as it comes
# (stopping the child first would end the pager before it).
fetch_done() { "$CXLCR" pod logs h1 pager | grep -q " $kid (pid $pid): background fetch done: "; }
until_true 60 fetch_done || die "the background fetch of $kid did not end once the hold was gone"
"$CXLCR" stop "$kid" >/dev/null || die "cxlcr stop $kid failed"
line=
for _ in $(seq 100); do
	line=$("$CXLCR" pod logs h1 pager | grep " $kid (pid $pid): ended " | tail -n 1) && [ -n "$line" ] && break
	sleep 0.1 # polling a condition, bounded: not a synchronisation
done
[ -n "$line" ] || die "the pager of $kid logged no end line"
echo "$line" | grep -q "in the background (done in" || die "the background fetch of $kid did not end: $line"
ok "$kid held every value; its pager's background fetch ended once let go: ${line#*; }"
