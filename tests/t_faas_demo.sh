#!/usr/bin/env bash
# The FaaS demo, small: demos/faas/run.sh with DEMO_SIZE=16M and three
# children, on a pool of its own. It must succeed; every child's answers
# must equal the parent's (checked here again from the answer files it
# leaves), each child must have answered through faas-scale (the fork API
# over TCP), and no service and no pod may be left behind.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need ip iptables nsenter criu cmp
[ -f "$ROOT/build/criu/cxlcr_criu.so" ] || die "the CRIU plugin is not built (build/criu/cxlcr_criu.so)"
[ -x "$ROOT/build/demos/faas-scale" ] || die "build/demos/faas-scale is not built (make)"
[ "$ROOT/build/cxlcr" -ef "$CXLCR" ] || skip "the demo runs build/cxlcr, this test was given $CXLCR"

CHILDREN=3
INVOKES=200
POOL_DIR=$(mktemp -d /dev/shm/cxlcr-test-XXXX) # removed on exit (common.sh)
POOL=$POOL_DIR/faas/pool
OUTD=$POOL_DIR/out
on_exit "CXLCR_POOL=$POOL '$CXLCR' pod down >/dev/null 2>&1"

say "demos/faas/run.sh with DEMO_SIZE=16M, $CHILDREN children"
rc=0
DEMO_SIZE=16M DEMO_CHILDREN=$CHILDREN DEMO_INVOKES=$INVOKES CXLCR_POOL=$POOL DEMO_OUT=$OUTD \
	"$ROOT/demos/faas/run.sh" >"$POOL_DIR/demo.out" 2>&1 </dev/null || rc=$?
if [ $rc -ne 0 ]; then
	tail -n 40 "$POOL_DIR/demo.out" >&2
	die "the FaaS demo failed (exit status $rc)"
fi
[ "$(tail -n 1 "$POOL_DIR/demo.out")" = "faas demo: OK" ] || die "the demo did not end with 'faas demo: OK'"

# The answers, once more: the parent's INVOKES, and each child's the same.
[ "$(grep -c ' OK n=' "$OUTD/parent.answers")" -eq $INVOKES ] ||
	die "the parent gave $(grep -c ' OK n=' "$OUTD/parent.answers") answers, not $INVOKES"
mapfile -t kids < <(python3 -c 'import json, sys
for c in json.load(open(sys.argv[1]))["children"]:
    assert c["first_answer_ms"] > 0, c
    print(c["name"])' "$OUTD/scale.json") || die "faas-scale's output: $(cat "$OUTD/scale.json")"
[ ${#kids[@]} -eq $CHILDREN ] || die "faas-scale made ${#kids[@]} children, not $CHILDREN"
for k in "${kids[@]}"; do
	cmp -s "$OUTD/parent.answers" "$OUTD/$k.answers" || die "$k's answers differ from its parent's"
done
ok "$CHILDREN children forked through the API, each gave the parent's $INVOKES answers"
grep -E '^    demo-faas\.[0-9]+ +at .*first answer' "$POOL_DIR/demo.out" | sed 's/^ */    /'

left=$(CXLCR_POOL=$POOL "$CXLCR" ps --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["services"]))')
[ "$left" -eq 0 ] || die "$left services left in the demo's pool"
out=$(CXLCR_POOL=$POOL "$CXLCR" pod down 2>&1) || die "cxlcr pod down failed: $out"
echo "$out" | grep -q '^no pod' || die "the demo's pod was still up: $out"
ok "nothing left: no service, no pod"
