#!/usr/bin/env bash
# Real memcached under `cxlcr run`: ~200 MB of values written and read back
# through the text protocol, with the heap (its slab pages) in the arena.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need memcached

COUNT=200000   # x 1000 B of values: ~190 MiB
SIZE=1000

new_pool 8G
port=$(free_port)
user=()
[ "$(id -u)" -eq 0 ] && user=(-u root)   # memcached refuses to run as root without it

say "cxlcr run memcached on port $port"
run_service memcached 2G memcached -U 0 -l 127.0.0.1 -p "$port" -m 1024 -t 4 "${user[@]}"
wait_up memcached "$port" memcached
[ "$(status_field memcached state)" = running ] || die "cxlcr status does not say running"

say "fill $COUNT keys of $SIZE B"
python3 "$KV" fill --proto memcached --port "$port" --count $COUNT --size $SIZE --seed 11
say "verify every key"
python3 "$KV" verify --proto memcached --port "$port" --count $COUNT --size $SIZE --seed 11
if python3 "$KV" verify --proto memcached --port "$port" --count 10 --size $SIZE --seed 12 \
	>/dev/null 2>&1; then
	die "verify did not notice wrong values"
fi
ok "every value read back as written"

say "kvclient: --size-dist, --exptime, --expect"
kv() { python3 "$KV" "$@" --proto memcached --port "$port" --count 50 --seed 11 --quiet; }
for d in small large mixed; do
	kv fill --size-dist $d --prefix $d --exptime 3600
	kv verify --size-dist $d --prefix $d || die "--size-dist $d: values read back differ"
done
if kv verify --size-dist small --prefix mixed >/dev/null 2>&1; then
	die "verify did not notice values of other sizes"
fi
if kv verify --size-dist small --prefix small --expect absent >/dev/null 2>&1; then
	die "verify --expect absent did not notice items that are there"
fi
missing=$(python3 "$KV" verify --proto memcached --port "$port" --count 50 --prefix never --expect any --json |
	python3 -c 'import json, sys; print(json.load(sys.stdin)["missing"])') ||
	die "verify --expect any failed on items never written"
[ "$missing" -eq 50 ] || die "verify --expect any counted $missing missing items, want 50"
kv verify --prefix never --expect absent || die "verify --expect absent failed on items never written"
ok "sized and expiring items written and checked"

check_heap memcached $((150 * 1000 * 1000))
ok "heap in the arena"

stop_service memcached
ok "stopped, arena freed"
