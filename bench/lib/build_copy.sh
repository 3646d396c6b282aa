# shellcheck shell=bash
# A private copy of the build for a long benchmark (sourced by bench/cr.sh,
# bench/fork.sh and bench/tier_fork.sh): build/ may be rebuilt by `make`
# while the benchmark runs, and binaries replaced under running daemons
# break them. cxlcr finds cxlcrd, cxlcr-memd, the preload and the CRIU
# plugin (criu/) next to itself, so the copy holds all of them.
#
#   copy_build BUILD DEST     copies them from BUILD into DEST (made)

copy_build() { # BUILD DEST
	local f
	mkdir -p "$2/criu"
	for f in cxlcr cxlcrd cxlcr-memd libcxlcr-preload.so; do
		[ -f "$1/$f" ] || die "$1/$f is missing: build first (make)"
		cp "$1/$f" "$2/"
	done
	cp -L "$1/criu/cxlcr_criu.so" "$2/criu/"
}
