#!/usr/bin/env bash
# CPython with PYTHONMALLOC=malloc under `cxlcr run`: a stdlib TCP server
# (tests/lib/dictserver.py) builds a ~100 MB dict at start and answers
# lookups; the answers are checked, and its heap must be in the arena.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"

# The interpreter itself, not a wrapper such as a pyenv shim: a shim would
# be the arena's owner and start python as a process of its own.
PY=$(python3 -c 'import sys; print(sys.executable)')
ENTRIES=350000   # x 200 B values, ~120 MB of Python objects with keys and dict
SIZE=200

new_pool 8G
port=$(free_port)

say "cxlcr run $PY dictserver.py on port $port (PYTHONMALLOC=malloc)"
PYTHONMALLOC=malloc run_service pydict 1G "$PY" "$ROOT/tests/lib/dictserver.py" serve \
	--port "$port" --entries $ENTRIES --size $SIZE --seed 3
wait_up pydict "$port" tcp
pid=$(status_field pydict pid)
[ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$PY")" ] ||
	die "the arena's owner, pid $pid, is $(readlink "/proc/$pid/exe"), not $PY"
tr '\0' '\n' <"/proc/$pid/environ" | grep -qx PYTHONMALLOC=malloc ||
	die "pid $pid does not run with PYTHONMALLOC=malloc"

say "query it"
python3 "$ROOT/tests/lib/dictserver.py" query --port "$port" --entries $ENTRIES --size $SIZE --seed 3
if python3 "$ROOT/tests/lib/dictserver.py" query --port "$port" --entries $ENTRIES --size $SIZE \
	--seed 4 --step 100000 >/dev/null 2>&1; then
	die "query did not notice wrong answers"
fi
ok "answers correct"

check_heap pydict $((80 * 1000 * 1000))
ok "python heap in the arena"

stop_service pydict
ok "stopped, arena freed"
