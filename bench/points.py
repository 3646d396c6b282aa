#!/usr/bin/env python3
"""What recovery points cost a service (issue 16, point 8), run by
bench/points.sh on an emulated pod it set up.

For each size: two Redis services on h0, their heaps in the pool, each
filled with 1000 B values (1,048,576 per GiB): one takes a recovery point
every second (`cxlcr run --recovery-interval 1000`), the other none. Once
the first has its first point (a full one), redis-benchmark loads each with
SETs of random keys of its key space (the fill wrote the benchmark's own
key names, so that its SETs rewrite values in place rather than grow the
heap by another GiB), the two alternating round by round (each goes first
in half the rounds), each round long enough for many points (--requests):
the median throughput of each, the ratio with/without (goal >= 0.95), and
how many points the service with them took in its rounds (a point whose
draft cannot be brought up to date in its freeze is not taken: see
docs/recovery.md). With --writes-per-s N the load is GETs that take what
they can while a paced writer SETs N random keys a second (a read-mostly
service under a write load of its own size), and the figure is GET/s. Then the pool bytes the
points hold beyond the heap (every snapshot region of the service: the
newest point and the older ones it still shares pages with): what of
their regions holds memory in the pool file, and their regions' sizes
(what a devdax device would reserve). Then the
freeze of one point, on the service without periodic points: 1% of its
keys rewritten, `cxlcr snapshot --recovery-point --json`, ROUNDS times
(CRIU's own frozen time, and the pages the point copied). With
--snapshotted a third service, snapshotted once after its fill and never
again (the 4 KiB mappings of a service with points, without the points),
goes round with the other two: how much of the cost is the mappings and
how much the points.

    points.py --cxlcr BUILD/cxlcr --out DIR --sizes 1G,4G --rounds 5

Python standard library only; the Redis client comes from snapshot.py.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
sys.path.insert(0, HERE)
from results import GIB, MIB, median, parse_size, publish_rows, size_label  # noqa: E402
from snapshot import Redis, cxlcr, value, PORT  # noqa: E402

POOLIMG = os.path.join(HERE, "..", "tests", "lib", "poolimg.py")


def start(a, name, size, interval):
    arena = size * 3 // 2 + 64 * MIB
    cxlcr(a, "run", "--host", "h0", "--name", name, "--arena", str(arena),
          "--recovery-interval", str(interval), "--log", os.path.join(a.work, name + ".log"), "--",
          "redis-server", "--port", str(PORT), "--protected-mode", "no", "--save", "", "--appendonly", "no")
    host = cxlcr(a, "status", name, "--json")["address"]
    for _ in range(400):
        try:
            return host, Redis(host)
        except OSError:
            time.sleep(0.05)
    raise SystemExit("points: %s does not answer at %s" % (name, host))


def fill(r, keys, version=0, batch=2000):
    """Values of 1000 B for keys (a count, or a list) under redis-benchmark's
    own names (key:%012d)."""
    keys = list(range(keys)) if isinstance(keys, int) else keys
    for lo in range(0, len(keys), batch):
        ks = keys[lo:lo + batch]
        r.send([[b"SET", b"key:%012d" % k, value(k, version)] for k in ks])
        for _ in ks:
            r.reply()


class PacedWriter(threading.Thread):
    """SETs of random keys of the fill's key space at a fixed rate (a batch
    every 10 ms, each due at its time on the monotonic clock, none skipped),
    beside the saturating GET load of --writes-per-s: a read-mostly service
    under a write load of its own size, rather than a write load that
    takes all the CPU it can."""

    def __init__(self, host, keys, rate):
        super().__init__(daemon=True)
        self.r, self.keys, self.rate = Redis(host), keys, rate
        self.stop, self.sent, self.behind = threading.Event(), 0, 0.0

    def run(self):
        t0, rnd = time.monotonic(), random.Random(7)
        while not self.stop.is_set():
            due = int((time.monotonic() - t0) * self.rate) - self.sent
            if due > 0:
                ks = [rnd.randrange(self.keys) for _ in range(due)]
                self.r.send([[b"SET", b"key:%012d" % k, value(k, 1)] for k in ks])
                for _ in ks:
                    self.r.reply()
                self.sent += due
            self.behind = max(self.behind, (time.monotonic() - t0) * self.rate - self.sent)
            time.sleep(0.01)


def load(a, host, keys):
    """One round over the key space: requests per second. SETs that take
    what they can; or (--writes-per-s) GETs that do, while a PacedWriter
    sets keys at that rate."""
    test = "get" if a.writes_per_s else "set"
    cmd = ["redis-benchmark", "-h", host, "-p", str(PORT), "-t", test, "-n", str(a.requests), "-c", "8",
           "-P", "16", "-r", str(keys), "-d", "1000", "--csv"]
    if os.cpu_count() and os.cpu_count() >= 2:
        cmd = ["taskset", "-c", "1"] + cmd
    writer = None
    if a.writes_per_s:
        writer = PacedWriter(host, keys, a.writes_per_s)
        writer.start()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    finally:
        if writer:
            writer.stop.set()
            writer.join()
    if writer and writer.behind > a.writes_per_s:
        raise SystemExit("points: the paced writer fell %.0f SETs (over a second's) behind %d/s" %
                         (writer.behind, a.writes_per_s))
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if cells and cells[0] == test.upper():
            return float(cells[1])
    raise SystemExit("points: no %s figure from redis-benchmark: %s" % (test.upper(), out))


def points_logged(a, name):
    """Recovery points of name its host's daemon has logged so far."""
    out = subprocess.run([a.cxlcr, "pod", "logs", "h0"], capture_output=True, text=True, check=True).stdout
    return sum(1 for line in out.splitlines() if line.startswith(name + " snapshotted on "))


def resident(fd, lo, hi):
    """Bytes of [lo, hi) of the pool file that hold memory (SEEK_DATA):
    not holes (a snapshot's unused room is punched out once it is
    published: cxlcr_snapshot_trim)."""
    n, at = 0, lo
    while at < hi:
        try:
            d = os.lseek(fd, at, os.SEEK_DATA)
        except OSError:
            break
        if d >= hi:
            break
        h = min(os.lseek(fd, d, os.SEEK_HOLE), hi)
        n += h - d
        at = h
    return n


def census(a, name):
    """Where the points' space goes (tests/snapshot_tool points): per
    region its bytes, the pages copied into it, and the pages of the
    newest point that lie in it."""
    tool = os.path.join(os.path.dirname(a.cxlcr), "tests", "snapshot_tool")
    out = subprocess.run([tool, "points", name], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        f = line.split()
        if len(f) == 7 and f[1] == "size":
            rows.append({"region": f[0], "size": int(f[2]), "own": int(f[4]), "live": int(f[6])})
    return rows


def point_bytes(a, name):
    """Bytes of the pool in the service's snapshot regions (kind 3): their
    regions' sizes (what a devdax device reserves) and what of them holds
    memory in the pool file."""
    pool = os.environ["CXLCR_POOL"]
    out = subprocess.run([sys.executable, POOLIMG, "list", pool], capture_output=True,
                         text=True, check=True).stdout
    reserved = held = regions = 0
    fd = os.open(pool, os.O_RDONLY)
    try:
        for line in out.splitlines():
            f = line.split()
            if len(f) >= 6 and f[1] == "3" and f[5].startswith(name + "."):
                off, size = int(f[3]), int(f[4])
                reserved += size
                held += resident(fd, off, off + size)
                regions += 1
    finally:
        os.close(fd)
    return reserved, held, regions


def freezes(a, name, r, size, keys):
    """The freeze of a point, taken by hand on a service without periodic
    ones, after 1% of its keys were rewritten: CRIU's frozen ms, CRIU's
    whole ms and the pages copied, a.rounds times (after a first, full)."""
    rng = random.Random(size)
    frozen, whole, copied = [], [], []
    for rnd in range(a.rounds + 1):
        if rnd:
            picked = rng.sample(range(keys), keys // 100)
            fill(r, picked, rnd)
        snap = cxlcr(a, "snapshot", name, "--recovery-point", "--json")
        if rnd:
            frozen.append(snap["frozen_ms"])
            whole.append(snap["freeze_ms"])
            copied.append(snap["pages_copied"])
    return frozen, whole, copied


def freeze_only(a, size, keys, rows):
    """--freeze-only: one service, the freeze of its points alone (half the
    memory: for a size whose two services this machine cannot hold)."""
    name = "pf" + size_label(size).lower()
    _, r = start(a, name, size, 0)
    fill(r, keys)
    frozen, whole, copied = freezes(a, name, r, size, keys)
    rows.append({"size": size, "heap_used": cxlcr(a, "status", name, "--json")["arena_used"],
                 "point_frozen_ms": median(frozen), "point_criu_ms": median(whole),
                 "point_pages_copied": median(copied), "rounds": a.rounds, "raw": {"frozen": frozen}})
    cxlcr(a, "stop", name)


def pin_apart():
    """--pin: the services on CPU 0, and cxlcr's own work (the daemons, and
    everything they start from now on: the points' workers and CRIU) on
    CPU 1 with the load client and the paced writer, as an operator keeps a
    daemon off its services' CPUs: the points' CPU time then competes with
    the client, not with the service (on a 2-CPU machine both are needed
    whole, so either way the figure is the machine's: docs/recovery.md)."""
    for comm, cpu in (("cxlcrd", "1"), ("redis-server", "0")):
        pids = subprocess.run(["pgrep", "-x", comm], capture_output=True, text=True).stdout.split()
        for pid in pids:
            subprocess.run(["taskset", "-a", "-p", "-c", cpu, pid], capture_output=True)
    os.sched_setaffinity(0, {1})  # this process, and so its paced writer, with the client


def daemon_cpu(host="h0"):
    """CPU seconds of host's daemon and of the processes it started and
    reaped (each point's worker, and the CRIU that worker ran): what the
    points cost beside the service's own time. None if not found."""
    tick = os.sysconf("SC_CLK_TCK")
    for pid in subprocess.run(["pgrep", "-x", "cxlcrd"], capture_output=True, text=True).stdout.split():
        try:
            if not open("/proc/%s/cgroup" % pid).read().rstrip().endswith("/" + host):
                continue
            stat = open("/proc/%s/stat" % pid).read()
            ppid = stat.rsplit(")", 1)[1].split()[1]
            if open("/proc/%s/comm" % ppid).read().strip() == "cxlcrd":
                continue  # a worker, not the daemon
            f = stat.rsplit(")", 1)[1].split()
            return sum(int(x) for x in f[11:15]) / tick  # utime, stime, cutime, cstime
        except OSError:
            continue
    return None


def start_filled(a, name, size, keys, interval):
    """A service started and filled: its address and a client."""
    host, r = start(a, name, size, interval)
    t0 = time.monotonic()
    fill(r, keys)
    print("points: %s: %d keys written in %.1f s" % (name, keys, time.monotonic() - t0), flush=True)
    return host, r


def snapshot_once(a, name):
    """Snapshotted once, never again: the 4 KiB mappings every service with
    points has (docs/tracking.md), without the points."""
    cxlcr(a, "snapshot", name, "--json")
    if not cxlcr(a, "status", name, "--json").get("small_pages"):
        raise SystemExit("points: %s has no 4 KiB mappings after its snapshot" % name)


def first_point(a, name, host, keys):
    """Waits for the service's first (full) point, then, with --warm-s,
    lets its points run under a paced writer for that long."""
    t0 = time.monotonic()
    while not cxlcr(a, "status", name, "--json").get("recovery_point"):
        if time.monotonic() - t0 > 600:
            raise SystemExit("points: %s has no recovery point after 600 s" % name)
        time.sleep(0.2)
    print("points: %s: first recovery point after %.1f s" % (name, time.monotonic() - t0), flush=True)
    if a.warm_s <= 0:
        return
    # The rounds measure a service whose points have run a while: a fresh
    # pool's first points land on memory the host has not touched yet (on
    # a guest, each page faulted in and zeroed: the first rounds' points
    # took 2-3 times the CPU of the later ones).
    logged, c0 = points_logged(a, name), daemon_cpu()
    writer = PacedWriter(host, keys, a.writes_per_s or 10000)
    writer.start()
    time.sleep(a.warm_s)
    writer.stop.set()
    writer.join()
    n, c1 = points_logged(a, name) - logged, daemon_cpu()
    print("points: %s: warmed for %d s under %d SETs/s: %d points%s" %
          (name, a.warm_s, a.writes_per_s or 10000, n,
           ", the daemon's CPU %.0f ms a point" % ((c1 - c0) * 1000 / n) if n and c0 is not None and c1 is not None
           else ""), flush=True)


class PointRounds:
    """The rounds of the service with points: its throughput, and the
    points it took in each round, a second and their CPU."""

    def __init__(self, a, name):
        self.a, self.name = a, name
        self.rps, self.taken, self.per_s, self.cpu_ms = [], [], [], []

    def round(self, host, keys):
        logged = points_logged(self.a, self.name)
        t0, c0 = time.monotonic(), daemon_cpu()
        self.rps.append(load(self.a, host, keys))
        self.taken.append(points_logged(self.a, self.name) - logged)
        self.per_s.append(self.taken[-1] / (time.monotonic() - t0))
        c1 = daemon_cpu()
        cpu = ""
        if c0 is not None and c1 is not None and self.taken[-1]:
            self.cpu_ms.append((c1 - c0) * 1000 / self.taken[-1])
            cpu = ", the daemon's CPU %.0f ms a point" % self.cpu_ms[-1]
        return "%d points, %.2f a second%s" % (self.taken[-1], self.per_s[-1], cpu)

    def row(self, a, size, without, snapped):
        """The size's row, taken while the service with points still runs
        (its pool bytes and census), with the freezes measured on the
        service without (without["frozen"], "whole", "copied"),
        without["rps"] and snapped (rps lists, or None)."""
        st = cxlcr(a, "status", self.name, "--json")
        pool = cxlcr(a, "pool", "info", "--json")
        reserved, held, regions = point_bytes(a, self.name)
        where = census(a, self.name)
        for x in where:
            print("points: %s: %d MiB, %d pages copied, %d of them the newest point's" %
                  (x["region"], x["size"] // MIB, x["own"], x["live"]), flush=True)
        none = without["rps"]
        row = {"size": size, "rps_points": median(self.rps), "rps_none": median(none),
               "heap_used": st["arena_used"], "points_bytes": held, "points_reserved": reserved,
               "points_regions": regions, "points_census": where, "point_frozen_ms": median(without["frozen"]),
               "point_criu_ms": median(without["whole"]), "point_pages_copied": median(without["copied"]),
               "points_per_s": median(self.per_s), "interval_ms": a.interval_ms, "warm_s": a.warm_s,
               "pool_held": pool["memory_held"],
               "daemon_cpu_ms_per_point": median(self.cpu_ms) if self.cpu_ms else None,
               "pool_keeps_memory": pool["keeps_memory"], "sequential": a.sequential,
               "rps_snapshotted": median(snapped) if snapped else None,
               # The same two ratios round by round (each round's loads
               # ran back to back), their medians: steadier than the ratio
               # of the medians when the machine's speed drifts between
               # rounds. Not so for --sequential, whose rounds did not.
               "snapshotted_over_none": median([x / y for x, y in zip(snapped, none)]) if snapped else None,
               "points_over_snapshotted": median([x / y for x, y in zip(self.rps, snapped)]) if snapped else None,
               "rounds": a.rounds, "raw": {"rps_points": self.rps, "rps_none": none, "frozen": without["frozen"],
                                           "points_taken": self.taken}}
        if a.sequential:
            row["snapshotted_over_none"] = median(snapped) / median(none) if snapped else None
            row["points_over_snapshotted"] = median(self.rps) / median(snapped) if snapped else None
            row["raw"]["rps_none_before"], row["raw"]["rps_none_after"] = without["before"], without["after"]
        return row


def save_log(a, tag):
    """The daemon's log, for where the points' time went (each point's
    draft, freeze and pages; the points not taken)."""
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "points-%s-h0.log" % tag.lower()), "w") as f:
        f.write(subprocess.run([a.cxlcr, "pod", "logs", "h0"], capture_output=True, text=True).stdout)


def one_size(a, size, rows):
    tag = size_label(size)
    keys = size // GIB * 1048576 if size >= GIB else size // 1024
    if a.freeze_only:
        return freeze_only(a, size, keys, rows)
    if a.sequential:
        return one_size_sequential(a, size, keys, rows)
    with_pts, without, snapped = "pt" + tag.lower(), "pn" + tag.lower(), "ps" + tag.lower()
    hosts = {}
    names = [with_pts, without] + ([snapped] if a.snapshotted else [])
    for name in names:
        hosts[name], _ = start_filled(a, name, size, keys, a.interval_ms if name == with_pts else 0)
    if a.pin:
        pin_apart()
    if a.snapshotted:
        snapshot_once(a, snapped)
    first_point(a, with_pts, hosts[with_pts], keys)
    pts = PointRounds(a, with_pts)
    rps = {name: [] for name in names if name != with_pts}
    for rnd in range(a.rounds):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        said = ""
        for name in order:
            if name == with_pts:
                said = pts.round(hosts[name], keys)
            else:
                rps[name].append(load(a, hosts[name], keys))
        print("points: %s round %d: %.0f %s/s with points (%s), %.0f without%s" %
              (tag, rnd, pts.rps[-1], a.measured, said, rps[without][-1],
               ", %.0f snapshotted once" % rps[snapped][-1] if a.snapshotted else ""), flush=True)
    frozen, whole, copied = freezes(a, without, Redis(hosts[without]), size, keys)
    rows.append(pts.row(a, size, {"rps": rps[without], "frozen": frozen, "whole": whole, "copied": copied},
                        rps[snapped] if a.snapshotted else None))
    save_log(a, tag)
    for name in names:
        cxlcr(a, "stop", name)


def one_size_sequential(a, size, keys, rows):
    """--sequential: the services one after the other, each stopped before
    the next starts, so that a size whose services this machine cannot
    hold at once (4 GiB: two heaps and the points) is measured: the one
    without points (its rounds, then the freezes of points taken by hand
    on it), the one snapshotted once (--snapshotted), the one with points,
    and the one without again, whose rounds with the first's show how far
    the machine drifted meanwhile. Medians of all rounds of each; the
    ratios are of the medians (no round of one ran beside a round of the
    other)."""
    tag = size_label(size)
    with_pts, without, snapped = "pt" + tag.lower(), "pn" + tag.lower(), "ps" + tag.lower()
    none = {"before": [], "after": []}
    snapped_rps = [] if a.snapshotted else None
    pts = PointRounds(a, with_pts)
    for name, interval in [(without, 0)] + ([(snapped, 0)] if a.snapshotted else []) + \
            [(with_pts, a.interval_ms), (without + "b", 0)]:
        host, r = start_filled(a, name, size, keys, interval)
        if a.pin:
            pin_apart()
        if name == snapped:
            snapshot_once(a, name)
        if name == with_pts:
            first_point(a, name, host, keys)
        for rnd in range(a.rounds):
            if name == with_pts:
                said = "with points (%s)" % pts.round(host, keys)
                rate = pts.rps[-1]
            else:
                rate = load(a, host, keys)
                kind = "before" if name == without else "after" if name == without + "b" else None
                if kind:
                    none[kind].append(rate)
                    said = "without points (%s the service with them)" % kind
                else:
                    snapped_rps.append(rate)
                    said = "snapshotted once, no points"
            print("points: %s %s round %d: %.0f %s/s %s" % (tag, name, rnd, rate, a.measured, said), flush=True)
        if name == without:
            none["frozen"], none["whole"], none["copied"] = freezes(a, without, r, size, keys)
        if name == with_pts:
            none["rps"] = none["before"]  # the row's figures are finished below
            row = pts.row(a, size, none, snapped_rps)
            save_log(a, tag)
        cxlcr(a, "stop", name)
    none["rps"] = none["before"] + none["after"]
    row["rps_none"] = median(none["rps"])
    row["raw"]["rps_none"] = none["rps"]
    row["raw"]["rps_none_after"] = none["after"]
    if snapped_rps:
        row["snapshotted_over_none"] = median(snapped_rps) / row["rps_none"]
    rows.append(row)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cxlcr", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--sizes", default="1G,4G")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=3000000)  # ~15 s a round here: many points
    p.add_argument("--freeze-only", action="store_true")
    p.add_argument("--writes-per-s", type=int, default=0)  # 0: saturating SETs; N: GETs beside N SETs/s
    p.add_argument("--pin", action="store_true")  # services on CPU 0, cxlcr's daemons and the client on CPU 1
    p.add_argument("--interval-ms", type=int, default=1000)  # the service's --recovery-interval
    p.add_argument("--warm-s", type=int, default=0)  # points under SETs for this long before the rounds
    p.add_argument("--snapshotted", action="store_true")  # a third service, snapshotted once: 4 KiB mappings, no points
    p.add_argument("--sequential", action="store_true")  # the services one after the other (less memory at once)
    a = p.parse_args()
    a.measured = "GET" if a.writes_per_s else "SET"
    rows = []
    for size in [parse_size(s, "points") for s in a.sizes.split(",")]:
        one_size(a, size, rows)
    lines = ["size  %s/s points  %s/s none  ratio  points/s  points' pool bytes / heap  (reserved, regions)  point frozen_ms  criu_ms  pages copied" % (a.measured, a.measured),
             "----  ------------  ----------  -----  --------  -------------------------  -------------------  ---------------  -------  ------------"]
    for x in rows:
        if "rps_points" not in x:
            lines.append("%-4s  %12s  %10s  %5s  %8s  %8s MiB / %5.0f MiB  %19s  %15.1f  %7.1f  %12d" %
                         (size_label(x["size"]), "-", "-", "-", "-", "-", x["heap_used"] / MIB, "-",
                          x["point_frozen_ms"], x["point_criu_ms"], x["point_pages_copied"]))
            continue
        lines.append("%-4s  %12.0f  %10.0f  %5.3f  %8.2f  %8.0f MiB / %5.0f MiB  %10.0f MiB, %3d  %15.1f  %7.1f  %12d" %
                     (size_label(x["size"]),
                      x["rps_points"], x["rps_none"], x["rps_points"] / x["rps_none"], x["points_per_s"],
                      x["points_bytes"] / MIB, x["heap_used"] / MIB, x["points_reserved"] / MIB,
                      x["points_regions"], x["point_frozen_ms"], x["point_criu_ms"],
                      x["point_pages_copied"]))
    for x in rows:
        if x.get("rps_snapshotted"):
            lines.append("%s: snapshotted once, no points (4 KiB mappings): %.0f %s/s, %.3f of none; with points "
                         "%.3f of it (what the points cost beyond the mappings; %s)" %
                         (size_label(x["size"]), x["rps_snapshotted"], a.measured, x["snapshotted_over_none"],
                          x["points_over_snapshotted"],
                          "ratios of the medians" if x.get("sequential") else "medians of the rounds' ratios"))
    for x in rows:
        if x.get("sequential"):
            lines.append("%s: one service after the other; without points %.0f %s/s before the service with them "
                         "and %.0f after (medians): how far the machine drifted meanwhile" %
                         (size_label(x["size"]), median(x["raw"]["rps_none_before"]), a.measured,
                          median(x["raw"]["rps_none_after"])))
    for x in rows:
        if x.get("daemon_cpu_ms_per_point"):
            lines.append("%s: each point took %.0f ms of CPU in its host's daemon, its worker and CRIU "
                         "(the service's own time apart)" % (size_label(x["size"]), x["daemon_cpu_ms_per_point"]))
    for x in rows:
        if "pool_held" in x:
            lines.append("%s: the pool (%s) held %.0f MiB of memory after the rounds, %s" %
                         (size_label(x["size"]), "keeps its memory" if x["pool_keeps_memory"] else "gives memory back",
                          x["pool_held"] / MIB, "the service with points' heap included (it ran alone)"
                          if x.get("sequential") else "every service's heap included"))
    lines.append("(medians of %d rounds%s; points every %d ms; %s; ratio goal >= 0.95)" %
                 (a.rounds, " after %d s of points" % a.warm_s if a.warm_s else "", a.interval_ms,
                  "saturating SETs" if not a.writes_per_s else
                  "saturating GETs beside %d SETs/s" % a.writes_per_s))
    publish_rows(lines, a.out, "points", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
