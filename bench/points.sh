#!/usr/bin/env bash
# What recovery points cost a service (issue 16, point 8): Redis SET
# throughput with a recovery point every second against none, the pool
# bytes the points hold, and one point's freeze; see bench/points.py.
#
#   bench/points.sh                         (SIZES=1G,4G ROUNDS=5)
#   SIZES=256M ROUNDS=3 bench/points.sh
#   FREEZE_ONLY=1 SIZES=4G bench/points.sh  one service, the freeze of its
#                                           points alone (half the memory)
#   WRITES_PER_S=10000 bench/points.sh      GET throughput (saturating) while
#                                           SETs come at that rate: a
#                                           read-mostly service's write load
#   REQUESTS=1000000 bench/points.sh        requests a round (default 3,000,000)
#   INTERVAL_MS=4000 bench/points.sh        a point every 4 s instead of every
#                                           second: what the interval trades
#   WARM_S=60 bench/points.sh               a minute of points under 10,000
#                                           SETs/s before the rounds: a pool
#                                           past its first touch of memory
#   SNAPSHOTTED=1 bench/points.sh           a third service, snapshotted once
#                                           and never again: 4 KiB mappings
#                                           without points, beside the two
#   POOL_FLAGS=--keep-memory bench/points.sh  on a pool file that keeps its
#                                           memory as a device does
#   POOL_SIZE=40G SIZES=4G bench/points.sh  a larger pool (default 20G): at
#                                           4 GiB the two services' arenas
#                                           and the points (~3 times the
#                                           heap) need ~25 GiB or more
#   SEQUENTIAL=1 SIZES=4G bench/points.sh   the services one after the other
#                                           (without points, with, without
#                                           again): one heap and its points
#                                           at a time, for a machine that
#                                           cannot hold two
# Output: a table on stdout and bench/out/points.txt, points.jsonl.
# Needs root, CRIU, redis-server, redis-benchmark; run it on a quiet machine.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CXLCR=${CXLCR_BUILD:-$ROOT/build}/cxlcr
SIZES=${SIZES:-1G,4G}
ROUNDS=${ROUNDS:-5}

die() { printf 'points: error: %s\n' "$*" >&2; exit 1; }
command -v redis-benchmark >/dev/null || die "redis-benchmark is not installed (make deps)"
# shellcheck source=bench/lib/scratch_pod.sh
. "$ROOT/bench/lib/scratch_pod.sh"
scratch_pod pointbench "${POOL_SIZE:-20G}" 2
python3 "$ROOT/bench/points.py" --cxlcr "$CXLCR" --out "$ROOT/bench/out" --work "$WORK" \
	--sizes "$SIZES" --rounds "$ROUNDS" ${REQUESTS:+--requests "$REQUESTS"} ${FREEZE_ONLY:+--freeze-only} --writes-per-s "${WRITES_PER_S:-0}" \
	--interval-ms "${INTERVAL_MS:-1000}" --warm-s "${WARM_S:-0}" ${SNAPSHOTTED:+--snapshotted} ${SEQUENTIAL:+--sequential} ${PIN:+--pin}
