#!/usr/bin/env bash
# A pool on a file system that is nearly full (issue 12 point 6): a region
# gets its blocks when it is made (fallocate), so a service never meets a
# full tmpfs at the first touch of a heap page (a SIGBUS), and one that
# cannot have its arena is refused at start with one clear line. A 256 MiB
# tmpfs holds a 240 MiB pool and, beside it, 120 MiB of another tenant:
#  - a process asking for a 192 MiB arena is refused at start, naming the
#    free room, and leaves no region behind (before: it started and died of
#    SIGBUS writing 150 MB);
#  - a process with a 64 MiB arena that writes 150 MB gets what fits in its
#    arena and the rest from glibc, since no extent can be made: it ends
#    well (before: the extent was made sparse and the write died of SIGBUS).
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

PY=$(python3 -c 'import sys; print(sys.executable)')
POOL_DIR=$(mktemp -d /dev/shm/cxlcr-test-XXXX)
small=$POOL_DIR/small
mkdir "$small"
mount -t tmpfs -o size=256M,mode=0700 cxlcr-test-small "$small" || skip "cannot mount a tmpfs"
on_exit "umount '$small'"
export CXLCR_POOL=$small/pool
"$CXLCR" pool format --size 240M >/dev/null || die "cxlcr pool format on a 256 MiB tmpfs failed"
fallocate -l 120M "$small/other-tenant"
free_mb() { df -m --output=avail "$small" | tail -1 | tr -d ' '; }
say "pool of 240 MiB and 120 MiB of another tenant on a 256 MiB tmpfs: $(free_mb) MiB free"

# under_preload ARENA SIZE MB: a Python under the preload with arena ARENA
# of SIZE that writes MB megabytes and reads them back.
under_preload() {
	env CXLCR_POOL="$CXLCR_POOL" CXLCR_ARENA="$1" CXLCR_ARENA_SIZE="$2" \
		LD_PRELOAD="$ROOT/build/libcxlcr-preload.so" "$PY" -c "
import sys
b = bytearray(b'x') * ($3 << 20)
assert b.count(b'x') == len(b)
print('wrote', len(b) >> 20, 'MiB')
"
}
regions() { python3 "$ROOT/tests/lib/poolimg.py" kind "$CXLCR_POOL" "$1"; }

rc=0
under_preload big 192M 150 >"$POOL_DIR/big.out" 2>"$POOL_DIR/big.err" || rc=$?
[ $rc -ne 0 ] || die "a 192 MiB arena was made with $(free_mb) MiB free"
[ $rc -ne 135 ] || die "the service died of SIGBUS (its arena was made without room for it)"
[ $rc -eq 69 ] || die "exit status $rc, not 69 (no arena): $(cat "$POOL_DIR/big.err")"
grep -q "no room on its file system" "$POOL_DIR/big.err" || die "unclear refusal: $(cat "$POOL_DIR/big.err")"
[ "$(wc -l <"$POOL_DIR/big.err")" -eq 1 ] || die "not one line: $(cat "$POOL_DIR/big.err")"
[ "$(regions 1)" -eq 0 ] || die "the refused arena left a region behind"
ok "refused at start: $(cat "$POOL_DIR/big.err")"

rc=0
under_preload small 64M 150 >"$POOL_DIR/small.out" 2>"$POOL_DIR/small.err" || rc=$?
[ $rc -ne 135 ] || die "the service died of SIGBUS when its arena grew"
[ $rc -eq 0 ] || die "exit status $rc: $(cat "$POOL_DIR/small.err")"
grep -q "wrote 150 MiB" "$POOL_DIR/small.out" || die "the service did not write its 150 MiB"
ok "a 64 MiB arena whose extents do not fit: the service wrote 150 MiB (the rest on glibc), $(regions 6) extent(s) made"

# Memory a service frees is punched out of the pool (preload/release.c);
# its blocks must stay the arena's, or the next touch of those pages finds
# them taken by another tenant that filled the file system meanwhile.
say "freed heap, a full file system, the heap used again"
"$CXLCR" stop small >/dev/null 2>&1 || true
rm -f "$small/other-tenant"
rc=0
env CXLCR_POOL="$CXLCR_POOL" CXLCR_ARENA=reuse CXLCR_ARENA_SIZE=64M MIMALLOC_DECOMMIT_DELAY=0 \
	MIMALLOC_SEGMENT_DECOMMIT_DELAY=0 MIMALLOC_PURGE_DELAY=0 CXLCR="$CXLCR" SMALL="$small" \
	LD_PRELOAD="$ROOT/build/libcxlcr-preload.so" "$PY" -c '
import json, os, subprocess, sys
def released():
    out = subprocess.run([os.environ["CXLCR"], "status", "reuse", "--json"], capture_output=True, text=True,
                         env={k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}).stdout
    return json.loads(out)["arena_released"]
blocks = [bytearray(b"y") * (1 << 20) for _ in range(40)]
del blocks
for i in range(2000):                      # a service that goes on working
    x = [bytearray(64) for _ in range(100)]
if released() < (16 << 20):
    print("only %d bytes were given back" % released(), file=sys.stderr)
    sys.exit(3)
st = os.statvfs(os.environ["SMALL"])
with open(os.path.join(os.environ["SMALL"], "other-tenant"), "wb") as f:
    os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize)   # the file system is full now
blocks = [bytearray(b"z") * (1 << 20) for _ in range(40)]
assert all(b.count(b"z") == len(b) for b in blocks)
print("used 40 MiB again")
' >"$POOL_DIR/reuse.out" 2>"$POOL_DIR/reuse.err" || rc=$?
[ $rc -ne 135 ] || die "the service died of SIGBUS using freed heap again on a full file system"
[ $rc -eq 0 ] || die "exit status $rc: $(cat "$POOL_DIR/reuse.err")"
grep -q "used 40 MiB again" "$POOL_DIR/reuse.out" || die "the service did not use its heap again"
ok "freed heap given back, the file system filled by another tenant, the heap used again: no SIGBUS"
