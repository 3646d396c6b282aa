#!/usr/bin/env bash
# Real redis-server under `cxlcr run`: ~200 MB of mixed-type data written
# and read back through the protocol, with the heap in the arena; and the
# fork-persistence warning for a redis-server that keeps RDB snapshots on.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

COUNT=200000   # x 1000 B of values: ~190 MiB
SIZE=1000
TYPES=strings,hashes,lists,sets,zsets

new_pool 8G
port=$(free_port)

say "cxlcr run redis-server on port $port"
run_service redis 2G redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$POOL_DIR"
if grep -q 'fork-based persistence' "$POOL_DIR/redis.run.err"; then
	die "fork-persistence warning for a redis-server started with --save '' --appendonly no"
fi
wait_up redis "$port" redis
[ "$(status_field redis state)" = running ] || die "cxlcr status does not say running"

say "fill $COUNT keys of $SIZE B ($TYPES)"
python3 "$KV" fill --port "$port" --count $COUNT --size $SIZE --types $TYPES --seed 7
say "verify every key"
python3 "$KV" verify --port "$port" --count $COUNT --size $SIZE --types $TYPES --seed 7
# ... and the check catches a wrong value.
redis-cli -p "$port" set kv:str:0 wrong >/dev/null
if python3 "$KV" verify --port "$port" --count 10 --size $SIZE --types $TYPES --seed 7 \
	>/dev/null 2>&1; then
	die "verify did not notice a changed value"
fi
ok "every value read back as written"

check_heap redis $((150 * 1000 * 1000))
ok "heap in the arena"

say "pool format --force while the service maps the pool: refused"
if out=$("$CXLCR" pool format --force 2>&1); then
	die "the pool was formatted under a running service"
fi
[ "$(echo "$out" | wc -l)" -eq 1 ] || die "more than one line: $out"
python3 "$KV" verify --port "$port" --count 1000 --size $SIZE --types $TYPES --seed 7 --start 10 >/dev/null ||
	die "the service lost values after the refused format"
ok "refused: $out"

say "redis-server with fork-based persistence left on"
port2=$(free_port)
run_service redis-save 256M redis-server --port "$port2" --bind 127.0.0.1 --appendonly no \
	--dir "$POOL_DIR"
grep -q "warning: .*fork-based persistence" "$POOL_DIR/redis-save.run.err" ||
	die "no fork-persistence warning on stderr (got: $(cat "$POOL_DIR/redis-save.run.err"))"
ok "fork-persistence warning: $(head -c 100 "$POOL_DIR/redis-save.run.err")..."
stop_service redis-save

stop_service redis
ok "stopped, arenas freed"
