# shellcheck shell=bash
# Plain CRIU, the baseline the benchmarks compare cxlcr with (sourced by
# bench/cr.sh and bench/fork.sh, not run): a server without the preload
# (heap in private memory), pid 1 of its own PID namespace so that its pid
# is free again for a restore, dumped to image files on local disk and
# restored from them. One copy of how that is done, so that both
# benchmarks measure the same baseline.
#
# The caller sets CRIU (the binary), CRIU_TIMEOUT (seconds, every criu
# call), OUT (where a failed call's log is kept), FAIL_PREFIX (its name
# there: OUT/FAIL_PREFIX-fail-NAME-STEP.log), and defines die.
#
#   plain_spawn LOG CMD...    starts CMD detached in a new PID namespace;
#                             prints its pid (as this namespace sees it)
#   plain_stop PID            SIGTERM, then SIGKILL; bounded
#   plain_wait_exit PID SECS  waits (pidfd, bounded) until PID has exited
#   plain_dump_cmd PID DIR    the criu dump command line, in PLAIN_CMD
#   plain_restore_cmd DIR     the criu restore command line (detached; the
#                             pid in DIR/restored.pid), in PLAIN_CMD; removes
#                             the pid file of an earlier restore of DIR
#   plain_failed DIR STEP NAME  keeps criu's log of STEP (dump, restore)
#                             in OUT, shows its end, and dies
#   plain_image_bytes DIR     bytes of images in DIR (criu's logs not counted)

PLAIN_HELP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/cr.py # spawn, wait-exit
# shellcheck disable=SC2034 # set here, run by the caller
PLAIN_CMD=()

plain_spawn() { # LOG CMD...
	local log=$1
	shift
	python3 "$PLAIN_HELP" spawn --log "$log" -- "$@"
}

plain_wait_exit() { # PID SECONDS
	python3 "$PLAIN_HELP" wait-exit "$1" "$2"
}

plain_stop() { # PID
	kill "$1" 2>/dev/null || return 0
	plain_wait_exit "$1" 15 || { kill -KILL "$1" 2>/dev/null; plain_wait_exit "$1" 15; } || true
}

# --tcp-established: a client connected at the dump would otherwise make
# it fail; the images of a server with none are the same.
# shellcheck disable=SC2034
plain_dump_cmd() { # PID DIR
	PLAIN_CMD=(timeout "$CRIU_TIMEOUT" "$CRIU" dump -t "$1" -D "$2" -o dump.log -v2 --tcp-established)
}

# criu refuses to write over an existing pid file (and fails the restore).
# shellcheck disable=SC2034
plain_restore_cmd() { # DIR
	rm -f "$1/restored.pid"
	PLAIN_CMD=(timeout "$CRIU_TIMEOUT" "$CRIU" restore -D "$1" -d -o restore.log -v2 --tcp-established
		--pidfile "$1/restored.pid")
}

plain_failed() { # DIR dump|restore NAME
	cp "$1/$2.log" "$OUT/$FAIL_PREFIX-fail-$3-$2.log" 2>/dev/null
	echo "--- last lines of $1/$2.log:" >&2
	tail -n 15 "$1/$2.log" >&2
	die "criu $2 of $3 failed (log: bench/out/$FAIL_PREFIX-fail-$3-$2.log)"
}

plain_image_bytes() { # DIR
	du -sb --exclude='*.log' "$1" | cut -f1
}
