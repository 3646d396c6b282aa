#!/usr/bin/env bash
# Incremental snapshots with 1% of the heap written between two (issue 14,
# point 5): the parent's freeze at each size, a re-snapshot's whole time
# against a full one, the pool bytes it adds; every key checked in a child
# forked from every snapshot. See bench/snapshot.py.
#
#   bench/snapshot.sh                       (SIZES=64M,1G,4G ROUNDS=5 PATTERNS=random,clustered)
#   SIZES=64M,256M ROUNDS=3 PATTERNS=random bench/snapshot.sh
#   HEAP_DIFF=1 SIZES=1G ROUNDS=3 bench/snapshot.sh   also reads the parent's
#       heap before and after each round's rewrites and counts the pages
#       whose content changed: what a snapshot of whole pages cannot add
#       less than, beside what the snapshot added
# Output: a table on stdout and bench/out/snapshot.txt, snapshot.jsonl.
# Needs root, CRIU, redis-server; run it on a quiet machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CXLCR=${CXLCR_BUILD:-$ROOT/build}/cxlcr
SIZES=${SIZES:-64M,1G,4G}
ROUNDS=${ROUNDS:-5}
PATTERNS=${PATTERNS:-random,clustered}

die() { printf 'snapshot: error: %s\n' "$*" >&2; exit 1; }
# shellcheck source=bench/lib/scratch_pod.sh
. "$ROOT/bench/lib/scratch_pod.sh"
scratch_pod snapbench 16G 2
python3 "$ROOT/bench/snapshot.py" --cxlcr "$CXLCR" --out "$ROOT/bench/out" --work "$WORK" \
	--sizes "$SIZES" --rounds "$ROUNDS" --patterns "$PATTERNS" ${HEAP_DIFF:+--heap-diff}
