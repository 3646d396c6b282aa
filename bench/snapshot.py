#!/usr/bin/env python3
"""Snapshots with 1% of the heap written since the previous one (issue 14,
point 5), run by bench/snapshot.sh on an emulated pod it set up.

For each size and write pattern: a Redis (its heap in the pool) is filled
with 1000 B values (1,048,576 per GiB); a first snapshot copies the heap
(full); then, ROUNDS times, 1% of the keys get new values and a snapshot
is taken (incremental: it copies only what was written since the one
before). The keys are picked at random over the whole key space
(`random`: each SET also frees the old value and rewrites its dict entry,
on pages of their own, so about 9% of the heap's pages are written), or
are the next 1% of the key space in the order the fill wrote it
(`clustered`: about 1% of the heap's pages written). After every snapshot
a child is forked on h1 (copy mode: it maps nothing of the snapshot, as on
a devdax pool, so any snapshot can be forked) and every key is checked in
it. Printed, per size: the parent's freeze
(median of the incremental rounds), the whole time of a re-snapshot
against the full one, and the pool bytes a re-snapshot adds against the
heap; then the freeze at the largest size against the smallest.

    snapshot.py --cxlcr BUILD/cxlcr --out DIR --sizes 64M,1G,4G --rounds 5

Python standard library only; shared helpers in bench/lib/results.py.
"""
import argparse
import itertools
import json
import os
import random
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from results import GIB, MIB, median, parse_size, publish_rows, size_label  # noqa: E402

VALUE = 1000
PORT = 6379


def value(key, version):
    """The value of key after `version` rewrites (0: the fill)."""
    head = b"%d:%d:" % (key, version)
    return (head * (VALUE // len(head) + 1))[:VALUE]


class Redis:
    """A pipelining RESP client: just what this benchmark sends."""

    def __init__(self, host):
        self.s = socket.create_connection((host, PORT), timeout=120)
        self.f = self.s.makefile("rb", buffering=1 << 20)

    def send(self, cmds):
        out = []
        for c in cmds:
            out.append(b"*%d\r\n" % len(c))
            for a in c:
                a = a if isinstance(a, bytes) else str(a).encode()
                out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))

    def reply(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t in (b"+", b":"):
            return rest
        if t == b"-":
            raise RuntimeError("redis: " + rest.decode())
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RuntimeError("redis: bad reply %r" % line)


def set_keys(r, items, batch=2000):
    # In batches as they come: a list of a GiB of values first cost the
    # benchmark a GiB of its own memory (points.sh was killed for it).
    items = iter(items)
    while True:
        chunk = list(itertools.islice(items, batch))
        if not chunk:
            return
        r.send([[b"SET", b"k%d" % k, v] for k, v in chunk])
        for _ in chunk:
            r.reply()


def check_all(host, keys, versions):
    r = Redis(host)
    bad = 0
    for lo in range(0, keys, 1000):
        hi = min(keys, lo + 1000)
        r.send([[b"MGET"] + [b"k%d" % k for k in range(lo, hi)]])
        got = r.reply()
        for k, v in zip(range(lo, hi), got):
            if v != value(k, versions.get(k, 0)):
                bad += 1
    return bad


# Run inside the service's host (its PID namespace): a short digest of
# every 4 KiB page of the arena's mappings, in address order, as hex.
HASH_PAGES = r"""
import hashlib, sys
pid, lo, hi = int(sys.argv[1]), int(sys.argv[2], 16), int(sys.argv[3], 16)
out = []
with open("/proc/%d/maps" % pid) as m, open("/proc/%d/mem" % pid, "rb", buffering=0) as f:
    for line in m:
        if line.split()[1][0] != "r":
            continue  # the arena's reservation for growth: read, it would fault zero pages in
        a, b = (int(x, 16) for x in line.split()[0].split("-"))
        a, b = max(a, lo), min(b, hi)
        for at in range(a, b, 64 << 20):
            f.seek(at)
            buf = f.read(min(64 << 20, b - at))
            out += [hashlib.blake2b(buf[i:i + 4096], digest_size=6).hexdigest() for i in range(0, len(buf), 4096)]
sys.stdout.write("\n".join(out))
"""


def heap_pages(a, name):
    """The digests of the arena's pages of service name (HEAP_DIFF=1)."""
    st = cxlcr(a, "status", name, "--json")
    lo = int(st["arena_address"], 16)
    out = subprocess.run([a.cxlcr, "pod", "exec", st["host"], "--", "python3", "-c", HASH_PAGES, str(st["pid"]),
                          "%x" % lo, "%x" % (lo + st["arena_max"])], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("snapshot: reading %s's heap failed: %s" % (name, out.stderr.strip()))
    return out.stdout.split()


def cxlcr(a, *args):
    p = subprocess.run([a.cxlcr] + list(args), capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("snapshot: cxlcr %s failed: %s" % (" ".join(args), p.stderr.strip()))
    return json.loads(p.stdout) if "--json" in args else p.stdout


def one_size(a, size, pattern, rows):
    name = "snap%d%s" % (size // MIB, pattern[0])
    keys = size // GIB * 1048576 if size >= GIB else size // 1024
    arena = size * 3 // 2 + 64 * MIB
    env = []
    for kv in filter(None, os.environ.get("BENCH_SERVICE_ENV", "").split()):
        env += ["--env", kv]
    cxlcr(a, "run", "--host", "h0", "--name", name, "--arena", str(arena), *env, "--log",
          os.path.join(a.work, name + ".log"), "--", "redis-server", "--port", str(PORT),
          "--protected-mode", "no", "--save", "", "--appendonly", "no")
    host = cxlcr(a, "status", name, "--json")["address"]
    r = None
    for _ in range(200):
        try:
            r = Redis(host)
            break
        except OSError:
            time.sleep(0.05)
    t0 = time.monotonic()
    set_keys(r, ((k, value(k, 0)) for k in range(keys)))
    print("snapshot: %s: %d keys written in %.1f s" % (name, keys, time.monotonic() - t0), flush=True)
    versions = {}
    changed = None
    rng = random.Random(size)
    for rnd in range(a.rounds + 1):
        if rnd:
            if pattern == "random":
                picked = rng.sample(range(keys), keys // 100)
            else:
                n = keys // 100
                picked = [(rnd * n + i) % keys for i in range(n)]
            before = heap_pages(a, name) if a.heap_diff else None
            set_keys(r, ((k, value(k, rnd)) for k in picked))
            if before is not None:
                after = heap_pages(a, name)
                changed = sum(1 for x, y in zip(before, after) if x != y) + abs(len(after) - len(before))
            for k in picked:
                versions[k] = rnd
        snap = cxlcr(a, "snapshot", name, "--json")
        fork = cxlcr(a, "fork", name, "--to", "h1", "--mode", "copy", "--json")
        child = fork["children"][0]
        bad = check_all(child["address"], keys, versions)
        cxlcr(a, "stop", child["name"])
        row = {"size": size, "pattern": pattern, "round": rnd, "incremental": snap["incremental"],
               "pages_changed_content": changed if rnd and a.heap_diff else None,
               "shed_ms": snap.get("shed_ms"), "seal_ms": snap.get("seal_ms"),
               "precopy_passes": snap.get("precopy_passes"), "precopy_pages": snap.get("precopy_pages"),
               "freeze_ms": snap["frozen_ms"], "criu_ms": snap["freeze_ms"], "snapshot_ms": snap["snapshot_ms"],
               "total_ms": snap["total_ms"], "draft_ms": snap["draft_ms"],
               "bytes_added": snap["pages_copied"] * 4096, "heap_used": cxlcr(a, "status", name, "--json")["arena_used"],
               "keys": keys, "bad": bad, "punches_logged": snap.get("punches_logged"),
               "draft_compared_because": snap.get("draft_compared_because"),
               "compared_because": snap.get("compared_because"),
               "verb": snap}  # the snapshot verb's whole --json, for where its time went
        rows.append(row)
        print("snapshot: %s round %d: %s, frozen %.1f ms (criu ran %.1f ms; snapshot part %.2f ms: %d pages written since the "
              "draft, %d copied again; %s), whole %.1f ms (draft %.1f ms%s), %.1f MiB added, %d keys checked in a "
              "child, %d wrong" %
              (name, rnd, "incremental" if row["incremental"] else "full (%s)" % snap.get("full_because"),
               row["freeze_ms"], row["criu_ms"], row["snapshot_ms"], snap["pages_written"], snap["pages_refreshed"],
               "compared every page: %s" % row["compared_because"] if row["compared_because"]
               else "%s punches from the log" % row["punches_logged"],
               row["total_ms"], row["draft_ms"],
               ", compared every page: %s" % row["draft_compared_because"] if row["draft_compared_because"] else "",
               row["bytes_added"] / MIB, keys, bad),
              flush=True)
        if bad:
            raise SystemExit("snapshot: %s round %d: %d keys wrong in the child" % (name, rnd, bad))
    cxlcr(a, "stop", name)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cxlcr", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--sizes", default="64M,1G,4G")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--patterns", default="random,clustered")
    p.add_argument("--heap-diff", action="store_true",
                   help="also count the heap pages whose content the rewrites changed (read before and after)")
    a = p.parse_args()
    sizes = [parse_size(s, "snapshot") for s in a.sizes.split(",")]
    patterns = a.patterns.split(",")
    rows = []
    for pattern in patterns:
        for size in sizes:
            one_size(a, size, pattern, rows)
    lines = ["size      pattern    frozen_ms  criu_ms  snap_part_ms  full_ms  resnap_ms  resnap/full  added/heap  incremental",
             "--------  ---------  ---------  -------  ------------  -------  ---------  -----------  ----------  -----------"]
    for pattern in patterns:
        freeze = {}
        for size in sizes:
            mine = [x for x in rows if x["size"] == size and x["pattern"] == pattern]
            full = mine[0]
            inc = [x for x in mine[1:]]
            f = median([x["freeze_ms"] for x in inc])
            t = median([x["total_ms"] for x in inc])
            added = median([x["bytes_added"] for x in inc])
            freeze[size] = f
            lines.append("%-8s  %-9s  %9.1f  %7.1f  %12.2f  %7.1f  %9.1f  %10.1f%%  %9.2f%%  %d of %d" %
                         (size_label(size), pattern, f,
                          median([x["criu_ms"] for x in inc]), median([x["snapshot_ms"] for x in inc]),
                          full["total_ms"], t,
                          100.0 * t / full["total_ms"], 100.0 * added / full["heap_used"],
                          sum(1 for x in inc if x["incremental"]), len(inc)))
            if a.heap_diff:
                lines.append("%-8s  %-9s  pages whose content changed: %.2f%% of the heap (a snapshot of whole pages "
                             "adds no less), the snapshot added %.2f%%" %
                             (size_label(size), pattern,
                              100.0 * median([x["pages_changed_content"] for x in inc]) * 4096 / full["heap_used"],
                              100.0 * added / full["heap_used"]))
        lines.append("%s: frozen (CRIU's own figure) at %s against %s: %.2fx (medians of %d rounds; every key checked "
                     "in a child after every snapshot)" % (pattern, a.sizes.split(",")[-1], a.sizes.split(",")[0],
                                                           freeze[sizes[-1]] / freeze[sizes[0]], a.rounds))
    publish_rows(lines, a.out, "snapshot", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
