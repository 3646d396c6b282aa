# shellcheck shell=bash
# The emulated pod the benchmarks run their servers on (sourced by
# bench/cr.sh, bench/fork.sh and bench/continuity.sh, not run): what they
# check first, the pool and its hosts, Redis and Memcached under cxlcr, the
# memory they need, and the clean-up on exit. One copy, so that the
# benchmarks set up and size their servers the same way.
#
# The caller sets CXLCR (the cxlcr binary), KV (tests/lib/kvclient.py),
# WORK (the run's scratch directory), SERVICES=() (cxlcr services to stop
# on exit), POD=0, and defines say, die and field (FILE KEY: a field of a
# JSON file), and HELP (its bench/*.py, for `size`). The clean-up also stops the pids in PLAIN (with plain_stop of
# criu_plain.sh), kills LC_PID and removes IMAGES, where the caller has them.
#
#   bench_needs CMD...        dies unless every CMD is installed and this runs as root
#   bench_sizes KNOB LIST     SIZE_ARGS (as given) and SIZES (bytes) from LIST
#                             ("64M 1G"); dies naming KNOB if one is not a size
#   bench_servers KNOB LIST   SERVERS from LIST (redis, memcached)
#   server_arena_mb SERVER BYTES  arena (MiB) for BYTES of 1000-byte values
#   mc_limit_mb BYTES         memcached -m for BYTES of values
#   pool_gb MIN BYTES...      pool size (GiB, at least MIN) for the largest
#                             Redis of BYTES... (the largest server's arena)
#   pod_up GIB                formats the pool and starts hosts h0 and h1
#   server_cmd SERVER BYTES PORT [BIND]  the server's command line, in CMD (redis, memcached, faas)
#   status_field NAME KEY     a field of `cxlcr status NAME --json`
#   pod_serve SERVER BYTES NAME ARENA_MB PORT
#                             runs SERVER under cxlcr on h0, waits until it
#                             answers; its address in ADDR
#   need_memory BYTES WHAT    dies unless BYTES of memory are available,
#                             after waiting up to MEM_WAIT seconds (default 0)
#   pod_cleanup [EXT...]      the EXIT trap; on failure shows the end of
#                             WORK/*.EXT (default log)

# The figures are of services without recovery points (a CRIU dump every
# second otherwise: bench/points.sh measures what they cost).
export CXLCR_RECOVERY_INTERVAL_MS=${CXLCR_RECOVERY_INTERVAL_MS:-0}
# A service keeps the 4 KiB mappings of its first snapshot between the
# benchmark's snapshots, however far apart (its daemon would map it with
# 2 MiB pages again after 30 s without one: tracking/idle.c), so that each
# re-snapshot is the incremental one measured; bench/tracking.sh measures
# the remap itself.
export CXLCR_HUGE_AFTER_S=${CXLCR_HUGE_AFTER_S:-0}
# shellcheck disable=SC2034 # set for the caller
CMD=() ADDR='' SIZE_ARGS=() SIZES=() SERVERS=()

bench_needs() { # CMD...
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || die "$c is not installed (make deps)"
	done
	[ "$(id -u)" -eq 0 ] || die "run as root (CRIU and the pod need it)"
}

bench_sizes() { # KNOB LIST
	local s
	read -r -a SIZE_ARGS <<<"$2"
	SIZES=()
	for s in "${SIZE_ARGS[@]}"; do SIZES+=("$(python3 "$HELP" size "$s")") || die "$1: $s"; done
	[ ${#SIZES[@]} -gt 0 ] || die "$1 is empty"
}

bench_servers() { # KNOB LIST
	local s
	read -r -a SERVERS <<<"$2"
	for s in "${SERVERS[@]}"; do
		case $s in redis | memcached) ;; *) die "$1: unknown server $s" ;; esac
	done
}

# Redis's used_memory is ~1.3x the values, Memcached's items ~1.2x
# (1184-byte slab chunks) plus its hash table.
server_arena_mb() { # SERVER BYTES
	case $1 in
	redis) echo $(((($2 * 16 / 10) >> 20) + 512)) ;;
	memcached) echo $(((($2 * 15 / 10) >> 20) + 512)) ;;
	esac
}
mc_limit_mb() { echo $(((($1 * 13 / 10) >> 20) + 64)); } # memcached -m

# The largest arena (Redis's: the larger of the two) and 4 GiB for the
# checkpoints' images and the children beside it.
pool_gb() { # MIN BYTES...
	local min=$1 s a max=0 gb
	shift
	for s in "$@"; do
		a=$(server_arena_mb redis "$s")
		[ "$a" -le "$max" ] || max=$a
	done
	gb=$(((max >> 10) + 4))
	[ "$gb" -ge "$min" ] || gb=$min
	echo "$gb"
}

pod_up() { # GIB
	"$CXLCR" pool format --size "$1G" >/dev/null || die "cxlcr pool format failed"
	POD=1
	"$CXLCR" pod up --hosts 2 >/dev/null || die "cxlcr pod up failed" # a pod of this pool's own
}

server_cmd() { # SERVER BYTES PORT [BIND]
	local bind=()
	case $1 in
	redis)
		[ -z "${4:-}" ] || bind=(--bind "$4")
		CMD=(redis-server --port "$3" "${bind[@]}" --protected-mode no --save '' --appendonly no)
		;;
	memcached)
		[ -z "${4:-}" ] || bind=(-l "$4")
		CMD=(memcached -U 0 -p "$3" "${bind[@]}" -m "$(mc_limit_mb "$2")" -t 4 -u root)
		;;
	faas) # the FaaS demo's function, a catalogue of BYTES (needs PYTHONMALLOC=malloc in the daemons)
		CMD=("$(python3 -c 'import sys; print(sys.executable)')" "$ROOT/demos/faas/function.py" --port "$3"
			--size "$2")
		;;
	esac
}

status_field() { # NAME KEY
	"$CXLCR" status "$1" --json >"$WORK/status.json" && field "$WORK/status.json" "$2"
}

pod_serve() { # SERVER BYTES NAME ARENA_MB PORT
	local server=$1 name=$3 port=$5 pid
	SERVICES+=("$name")
	server_cmd "$server" "$2" "$port"
	"$CXLCR" run --host h0 --name "$name" --arena "$4M" --log "$WORK/$name.log" -- "${CMD[@]}" \
		>/dev/null 2>"$WORK/$name.run.err" || { cat "$WORK/$name.run.err" >&2; die "cxlcr run $name failed"; }
	ADDR=$(status_field "$name" address)
	# (its status pid is h0's own: this machine's for the wait)
	pid=$(python3 "$ROOT/tests/lib/hostpid.py" machine h0 "$(status_field "$name" pid)") ||
		die "$name is not found on h0"
	# An earlier server of the run had this address with another MAC; an
	# ARP entry for it still marked REACHABLE here would send the first
	# connections nowhere for up to ~45 s (cxlcr run announces no new MAC).
	# Only the start-up is concerned, not what is measured.
	ip neigh flush to "$ADDR" >/dev/null 2>&1 || true
	# The function listens once its catalogue is built: a connection is
	# its answer, after up to minutes.
	local wait=(--proto "$server")
	[ "$server" = faas ] && wait=(--proto tcp --tries 12000)
	python3 "$KV" wait "${wait[@]}" --host "$ADDR" --port "$port" --pid "$pid" ||
		die "$name does not answer at $ADDR:$port"
}

# The machine may be shared with other runs: with MEM_WAIT, the memory
# may come free while this waits.
need_memory() { # BYTES WHAT
	local avail waited=0 limit=${MEM_WAIT:-0}
	while :; do
		# kB, in the shell's arithmetic: mawk's printf %d stops at 2^31 - 1.
		avail=$(($(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) * 1024))
		[ "$avail" -lt "$1" ] || return 0
		[ "$waited" -lt "$limit" ] ||
			die "$2 needs about $(($1 >> 20)) MiB of memory, $((avail >> 20)) MiB available"
		[ "$waited" -gt 0 ] || say "   $2 needs about $(($1 >> 20)) MiB of memory, $((avail >> 20)) MiB available: waiting (up to $limit s)"
		sleep 10
		waited=$((waited + 10))
	done
}

# Everything the run started goes, whatever ended it; the exit status is
# the run's own.
pod_cleanup() { # [EXT...]
	local rc=$? n p e exts=("${@:-log}")
	trap - EXIT
	set +e
	[ -n "${LC_PID:-}" ] && kill -KILL "$LC_PID" 2>/dev/null
	for n in "${SERVICES[@]}"; do timeout 60 "$CXLCR" stop "$n" >/dev/null 2>&1; done
	for p in "${PLAIN[@]}"; do plain_stop "$p"; done
	[ "$POD" = 1 ] && timeout 120 "$CXLCR" pod down >/dev/null 2>&1
	if [ $rc -ne 0 ]; then
		for e in "${exts[@]}"; do
			for n in "$WORK"/*."$e"; do
				[ -s "$n" ] && { echo "--- last lines of $(basename "$n"):" >&2; tail -n 8 "$n" >&2; }
			done
		done
	fi
	rm -rf "$WORK" ${IMAGES:+"$IMAGES"}
	exit $rc
}
