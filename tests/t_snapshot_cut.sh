#!/usr/bin/env bash
# Snapshots from written pages only are consistent cuts. A writer changes
# random keys of a Redis as fast as it can (one request at a time, each
# acknowledged value logged) while snapshots are taken in a loop with
# write tracking on; a child is forked from each, and in every child each
# key holds the last value acknowledged before the snapshot began or one
# sent while it ran: never an older one, never one sent after it returned.
# Then the same with the tracker killed (tracking lost): the snapshot says
# it compared instead, and is as correct.
set -euo pipefail
# shellcheck source=tests/lib/common.sh
. "$(dirname "$0")/lib/common.sh"
need redis-server redis-cli

ROUNDS=6
KEYS=2000
PORT=6379

new_pool 8G
pod_up 2
pod_redis cut h0 256M
[ "$(status_field cut write_tracking)" = True ] || die "write tracking is not on for a new service"
# Writes the kernel would not track: through a second mapping of the heap's
# pool bytes (there must be none: each piece of the pool is mapped once, by
# the heap) or by write(2) into it (nothing but the service's own threads
# write its memory; its fork children are counted, see tracking/since.c).
python3 - "$(service_pid cut)" "$CXLCR_POOL" <<'PYEOF' || die "the service maps pool bytes twice"
import sys
pid, pool = sys.argv[1], sys.argv[2]
seen = []
for line in open("/proc/%s/maps" % pid):
    f = line.split()
    if len(f) >= 6 and f[5] == pool:
        lo, hi = (int(x, 16) for x in f[0].split("-"))
        off = int(f[2], 16)
        for (a, b) in seen:
            if off < b and a < off + (hi - lo):
                sys.exit("pool bytes %d..%d mapped twice" % (off, off + hi - lo))
        seen.append((off, off + hi - lo))
print("the service maps %d pieces of the pool, each once" % len(seen))
PYEOF

python3 - "$CXLCR" "$addr" $PORT $KEYS $ROUNDS "$POOL_DIR" "$(service_pid cut)" <<'PYEOF' ||
	die "a child does not hold a consistent cut"
import json, random, socket, subprocess, sys, threading

cxlcr, addr, port, nkeys, rounds, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]

def resp(cmd):
    out = b"*%d\r\n" % len(cmd)
    for a in cmd:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out

class Conn:
    def __init__(self, host):
        self.s = socket.create_connection((host, port), timeout=20)
        self.f = self.s.makefile("rb")
    def call(self, *cmd):
        self.s.sendall(resp(cmd))
        line = self.f.readline()
        if line.startswith(b"$"):
            n = int(line[1:])
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data
        if line.startswith(b"-"):
            raise RuntimeError(line.decode().strip())
        return line.strip()

# The writer: value n goes to a random key; sent[n] = key; acked is the
# highest n whose OK came back (one request at a time: at most acked + 1
# is in flight).
lock = threading.Lock()
state = {"sent": 0, "acked": 0, "stop": False}
last_acked = {}       # key -> its last acknowledged value
history = {}          # key -> [values sent to it, ascending]
def writer():
    c = Conn(addr)
    rnd = random.Random(7)
    n = 0
    while not state["stop"]:
        n += 1
        k = "k%d" % rnd.randrange(nkeys)
        with lock:
            state["sent"] = n
            history.setdefault(k, []).append(n)
        assert c.call("SET", k, n) == b"+OK"
        with lock:
            state["acked"] = n
            last_acked[k] = n

c0 = Conn(addr)
for i in range(nkeys):          # every key exists before the first cut
    c0.call("SET", "k%d" % i, 0)
t = threading.Thread(target=writer, daemon=True)
t.start()

def run(*args):
    return subprocess.run([cxlcr] + list(args), check=True, capture_output=True, text=True).stdout

def one_round(r, expect_tracked, expect_incremental):
    with lock:
        before = dict(last_acked)        # acknowledged before the snapshot began
        acked_before = state["acked"]
    if not t.is_alive():
        sys.exit("the writer stopped")
    snap = json.loads(run("snapshot", "cut", "--json"))
    with lock:
        sent_by_end = state["sent"]      # nothing sent later can be in the cut
    if snap["write_tracking"] != expect_tracked:
        sys.exit("round %d: write_tracking %s, expected %s (%s)" % (r, snap["write_tracking"], expect_tracked,
                                                                   snap.get("compared_because")))
    if snap["incremental"] != expect_incremental:
        sys.exit("round %d: incremental %s, expected %s (%s)" % (r, snap["incremental"], expect_incremental,
                                                                 snap.get("full_because")))
    fork = json.loads(run("fork", "cut", "--to", "h1", "--json"))
    child = fork["children"][0]
    c = Conn(child["address"])
    bad = 0
    for i in range(nkeys):
        k = "k%d" % i
        v = c.call("GET", k)
        v = int(v) if v is not None else -1
        lo = before.get(k, 0)
        sent_to_k = history.get(k, [])
        ok = v == lo or (v > lo and v <= sent_by_end and v in sent_to_k)
        if not ok:
            bad += 1
            if bad <= 5:
                print("round %d: %s holds %d; acknowledged before: %d; last sent by the end: %d"
                      % (r, k, v, lo, sent_by_end))
    run("stop", child["name"])
    with lock:
        if state["acked"] <= acked_before:
            sys.exit("round %d: the writer wrote nothing while the snapshot ran" % r)
    print("round %d: snapshot (tracked %s, incremental %s: %d of %d pages copied; %d written, %d refreshed in "
          "the freeze, frozen %.1f ms): %d keys checked, %d wrong"
          % (r, snap["write_tracking"], snap["incremental"], snap["pages_copied"], snap["pages_stored"],
             snap["pages_written"], snap["pages_refreshed"], snap["freeze_ms"], nkeys, bad))
    if bad:
        sys.exit(1)
    return snap

# The first snapshot copies the heap; each later one is taken on the one
# before it and copies only what the writer changed since.
for r in range(rounds):
    one_round(r, True, r > 0)

# Back to 2 MiB mappings while the writer writes (cxlcr huge-pages lifts
# the heap's registration for a moment): the next snapshot compares its
# draft with the newest one, says so, and is as right; the one after it
# takes tracking's word again.
huge = json.loads(run("huge-pages", "cut", "--json"))
if not huge["remapped"] or not huge.get("huge_mapped_bytes"):
    sys.exit("huge-pages did not map the heap with 2 MiB pages: %s" % huge)
print("huge-pages: %d MiB on 2 MiB pages in %.1f ms" % (huge["huge_mapped_bytes"] >> 20, huge["total_ms"]))
snap = one_round(rounds, True, True)
if not snap.get("draft_compared_because"):
    sys.exit("the snapshot after huge-pages took tracking's word: %s" % snap)
snap = one_round(rounds + 1, True, True)
if snap.get("draft_compared_because") or snap.get("small_pages_ms", 0) != 0:
    sys.exit("the second snapshot after huge-pages was not exact on small pages: %s" % snap)
rounds += 2

# Tracking lost: the tracker of the service is killed; the next snapshot
# compares, says why, and is just as right.
# (this machine's pid of it, as its /proc names it: the status pid is h0's)
pid = int(sys.argv[7])
import os, signal
killed = 0
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        if open("/proc/%s/comm" % p).read().strip() != "cxlcr-tracker":
            continue
        # ours holds a pidfd of this service (fdinfo says "Pid: N")
        for fd in os.listdir("/proc/%s/fdinfo" % p):
            if "Pid:\t%d\n" % pid in open("/proc/%s/fdinfo/%s" % (p, fd)).read():
                os.kill(int(p), signal.SIGKILL)
                killed += 1
                break
    except OSError:
        continue
if killed != 1:
    sys.exit("found %d trackers of pid %d" % (killed, pid))
one_round(rounds, False, False)
state["stop"] = True
t.join()
print("writer: %d values written" % state["acked"])
if state["acked"] < 1000:
    sys.exit("the writer wrote only %d values" % state["acked"])
PYEOF
ok "every child held a consistent cut, tracked, after huge-pages and untracked"
