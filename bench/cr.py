#!/usr/bin/env python3
"""Helpers of bench/cr.sh (checkpoint/restore, cxlcr against plain CRIU).

    cr.py size SIZE                 SIZE (64M, 1G, 1.5GiB, bytes) -> bytes
    cr.py spawn --log FILE -- CMD   starts CMD as pid 1 of a new PID namespace
                                    (unshare --pid --fork), detached: its own
                                    session inside the namespace, stdin
                                    /dev/null, stdout and stderr on FILE, no
                                    other fds. Prints its pid (in ours).
    cr.py wait-exit PID [SECONDS]   waits (pidfd, bounded) until PID has exited
    cr.py field FILE KEY...         a field of a JSON object (numbers
                                    index lists)
    cr.py report --out DIR          the table, the ratios and the plot from
                                    DIR/cr.csv and DIR/cr.jsonl

Python standard library only (the plot is drawn by gnuplot); what the
benchmarks' helpers share is in bench/lib/results.py.
"""
import argparse
import csv
import json
import math
import os
import select
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from results import (GIB, MIB, NO_GNUPLOT, gnuplot, median, publish,  # noqa: E402
                     read_jsonl, run_gnuplot, verbs)


def human(n):
    if n >= GIB:
        return "%.3g GiB" % (n / GIB)
    if n >= MIB:
        return "%.4g MiB" % (n / MIB)
    return "%.4g KiB" % (n / 1024)


# ---------------------------------------------------------------- spawn --

def cmd_spawn(a):
    """unshare --pid --fork, then in the namespace: setsid (the session
    leader must be inside the dumped tree), report the pid as seen from
    here, close every fd above 2, exec CMD. The pid comes back through a
    pipe, so no polling."""
    if not a.cmd:
        raise SystemExit("cr.py spawn: no command")
    cmd = a.cmd[1:] if a.cmd[0] == "--" else a.cmd
    r, w = os.pipe()
    log = os.open(a.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open("/dev/null", os.O_RDONLY)
    # unshare is this process's child; it stays the parent of the namespace's
    # init (and reaps it) but is not dumped. Its own session keeps it away
    # from the caller's terminal and process group.
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", sys.executable, os.path.abspath(__file__),
         "_init", str(w), "--"] + cmd,
        stdin=null, stdout=log, stderr=log, pass_fds=(w,), close_fds=True,
        start_new_session=True)
    os.close(w)
    os.close(log)
    os.close(null)
    buf = b""
    while not buf.endswith(b"\n"):
        if not select.select([r], [], [], 30)[0]:
            proc.kill()
            raise SystemExit("cr.py spawn: %s did not start within 30 s" % cmd[0])
        chunk = os.read(r, 64)
        if not chunk:
            proc.wait()
            raise SystemExit("cr.py spawn: %s did not start (see %s)" % (cmd[0], a.log))
        buf += chunk
    print(int(buf))
    # unshare lives on as a child of init once this process has exited.
    return 0


def cmd_init(a):
    w = int(a.fd)
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    os.setsid()
    # /proc is this machine's (no mount namespace of our own): /proc/self
    # names us by our pid in the parent namespace.
    pid = int(os.readlink("/proc/self"))
    os.write(w, b"%d\n" % pid)
    os.closerange(3, os.sysconf("SC_OPEN_MAX"))
    try:
        os.execvp(cmd[0], cmd)
    except OSError as e:
        print("cr.py: cannot run %s: %s" % (cmd[0], e), file=sys.stderr)
        os._exit(127)


# ------------------------------------------------------------ wait-exit --

def cmd_wait_exit(a):
    try:
        fd = os.pidfd_open(int(a.pid))
    except ProcessLookupError:
        return 0
    return 0 if select.select([fd], [], [], float(a.seconds))[0] else 1


# --------------------------------------------------------------- report --

METHODS = {"cxlcr": "cxlcr checkpoint + restore --host h1",
           "cxlcr-migrate": "cxlcr migrate --to h0",
           "criu": "plain CRIU dump + restore (images on disk)"}


def load(out):
    rows = []
    with open(os.path.join(out, "cr.csv")) as f:
        for r in csv.DictReader(f):
            r["size_bytes"] = int(r["size_bytes"])
            for k in ("checkpoint_ms", "restore_ms", "total_ms"):
                r[k] = float(r[k])
            r["image_bytes"] = int(float(r["image_bytes"]))
            rows.append(r)
    path = os.path.join(out, "cr.jsonl")
    return rows, read_jsonl(path) if os.path.exists(path) else []


def plot(out, rows, servers, sizes):
    if not gnuplot():
        return NO_GNUPLOT
    series = []  # (title, data file, style)
    styles = {("redis", "cxlcr"): 'lc rgb "#c0392b" lw 2 pt 7 ps 1.3 dt 1',
              ("redis", "criu"): 'lc rgb "#c0392b" lw 2 pt 5 ps 1.3 dt 2',
              ("memcached", "cxlcr"): 'lc rgb "#2471a3" lw 2 pt 9 ps 1.5 dt 1',
              ("memcached", "criu"): 'lc rgb "#2471a3" lw 2 pt 13 ps 1.5 dt 2'}
    names = {"cxlcr": "cxlcr (heap in the pool)", "criu": "plain CRIU (images on disk)"}
    for server in servers:
        for method in ("cxlcr", "criu"):
            pts = sorted((r["size_bytes"], r["total_ms"]) for r in rows
                         if r["server"] == server and r["method"] == method)
            if not pts:
                continue
            dat = os.path.join(out, "cr-%s-%s.dat" % (server, method))
            with open(dat, "w") as f:
                for size, ms in pts:
                    f.write("%.6f %.3f\n" % (size / GIB, ms))
            series.append(("%s, %s" % (server, names[method]), dat,
                           styles.get((server, method), "lw 2")))
    if not series:
        return "nothing to plot"
    png = os.path.join(out, "cr.png")
    lo, hi = min(sizes) / GIB, max(sizes) / GIB
    times = [r["total_ms"] for r in rows if r["method"] in ("cxlcr", "criu") and r["total_ms"] > 0]
    ylo, yhi = min(times) / 1.6, max(times) * 1.6
    yt, k = [], 10 ** math.floor(math.log10(ylo))
    while k <= yhi * 10:
        yt += [m * k for m in (1, 2, 5) if ylo <= m * k <= yhi]
        k *= 10
    # Values next to the points: Redis's on the left, Memcached's on the
    # right, so that close points of the two servers stay readable.
    labels = []
    for title, dat, style in series:
        left = title.startswith("redis")
        with open(dat) as f:
            for line in f:
                x, y = map(float, line.split())
                labels.append('set label "%s" at %g,%g %s offset %s,0.3 font ",10" tc rgb "#444444"'
                              % (("%.0f" % y) if y >= 10 else ("%.1f" % y), x, y,
                                 "right" if left else "left", "-1" if left else "1"))
    script = [
        'set terminal pngcairo size 1100,720 enhanced font "DejaVu Sans,13"',
        'set output "%s"' % png,
        'set title "Checkpoint + restore time against the data held (log-log)"',
        'set xlabel "values held (1000-byte values)"',
        'set ylabel "checkpoint + restore, wall clock (ms)"',
        "set logscale xy",
        "set xrange [%g:%g]" % (lo / 1.5, hi * 1.5),
        "set yrange [%g:%g]" % (ylo, yhi),
        "set xtics (%s)" % ", ".join('"%s" %g' % (human(s), s / GIB) for s in sizes),
        "set ytics (%s)" % ", ".join('"%g" %g' % (t, t) for t in yt),
        "set grid xtics ytics",
        "set key top left box opaque",
    ] + labels + [
        "plot " + ", \\\n     ".join(
            '"%s" using 1:2 with linespoints title "%s" %s' % (dat, title, style)
            for title, dat, style in series),
    ]
    return run_gnuplot(script, os.path.join(out, "cr.gp"), [dat for title, dat, style in series])


def cmd_report(a):
    rows, raw = load(a.out)
    servers = [s for s in ("redis", "memcached") if any(r["server"] == s for r in rows)]
    sizes = sorted({r["size_bytes"] for r in rows})
    by = {(r["server"], r["size_bytes"], r["method"]): r for r in rows}
    freeze = {}  # (server, size) -> freeze_ms of every migrate round
    for x in raw:
        if x.get("step") == "migrate" and "freeze_ms" in x.get("result", {}):
            freeze.setdefault((x["server"], x["size_bytes"]), []).append(x["result"]["freeze_ms"])
    rounds = max([len(v) for v in freeze.values()] or [1])
    lines = []
    say = lines.append
    say("Checkpoint/restore: cxlcr (heap in the pool) against plain CRIU (heap in private")
    say("memory, images on local disk). 1000-byte values; times in ms, wall clock,")
    say("each the median of %d round%s." % (rounds, "" if rounds == 1 else "s"))
    if a.header:
        say(a.header)
    say("")
    say("%-10s %-9s %-14s %12s %11s %11s %13s %10s" % (
        "server", "values", "method", "checkpoint", "restore", "sum/total", "image_bytes", "freeze"))
    for server in servers:
        for size in sizes:
            for method in ("cxlcr", "cxlcr-migrate", "criu"):
                r = by.get((server, size, method))
                if not r:
                    continue
                fz = ""
                if method == "cxlcr-migrate" and (server, size) in freeze:
                    fz = "%.1f" % median(freeze[(server, size)])
                say("%-10s %-9s %-14s %12.1f %11.1f %11.1f %13d %10s" % (
                    server, human(size), method, r["checkpoint_ms"], r["restore_ms"],
                    r["total_ms"], r["image_bytes"], fz))
        say("")
    say("methods: " + "; ".join("%s = %s" % kv for kv in METHODS.items()))
    say("cxlcr's sum: checkpoint_ms + restore_ms of each round; cxlcr-migrate's total: its total_ms "
        "(freeze = freeze_ms).")
    say("")
    say("Plain CRIU / cxlcr, checkpoint + restore:")
    summary = {"ratios": [], "growth": []}
    for server in servers:
        for size in sizes:
            c, p = by.get((server, size, "cxlcr")), by.get((server, size, "criu"))
            if c and p and c["total_ms"] > 0:
                ratio = p["total_ms"] / c["total_ms"]
                summary["ratios"].append({"server": server, "size_bytes": size, "plain_over_cxlcr": ratio})
                say("   %-10s %-9s %9.1f ms / %7.1f ms = %7.1fx" % (
                    server, human(size), p["total_ms"], c["total_ms"], ratio))
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        say("")
        say("Growth of cxlcr's time from %s to %s (%.0fx the data):" % (human(lo), human(hi), hi / lo))
        for server in servers:
            for method, what in (("cxlcr", "checkpoint + restore"), ("cxlcr-migrate", "migrate total"),
                                 ("criu", "plain CRIU, for comparison")):
                a0, a1 = by.get((server, lo, method)), by.get((server, hi, method))
                if not a0 or not a1 or a0["total_ms"] <= 0:
                    continue
                g = 100.0 * (a1["total_ms"] - a0["total_ms"]) / a0["total_ms"]
                summary["growth"].append({"server": server, "method": method, "from_bytes": lo,
                                          "to_bytes": hi, "growth_pct": g})
                say("   %-10s %-28s %9.1f ms -> %9.1f ms: %+7.1f %%" % (
                    server, what, a0["total_ms"], a1["total_ms"], g))
    problem = plot(a.out, rows, servers, sizes) if not a.no_plot else None
    say("")
    say("Wrote %s/cr.csv%s" % (a.out, "" if problem or a.no_plot else " and cr.png"))
    if problem:
        say("plot: " + problem)
    publish(lines, os.path.join(a.out, "cr.txt"))
    with open(os.path.join(a.out, "cr.summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    return 0


def main():
    p, sub, common = verbs(__doc__, "cr.py")
    s = sub.add_parser("spawn")
    s.add_argument("--log", required=True)
    s.add_argument("cmd", nargs=argparse.REMAINDER)
    s = sub.add_parser("_init")
    s.add_argument("fd")
    s.add_argument("cmd", nargs=argparse.REMAINDER)
    s = sub.add_parser("wait-exit")
    s.add_argument("pid")
    s.add_argument("seconds", nargs="?", default="30")
    s = sub.add_parser("report")
    s.add_argument("--out", required=True)
    s.add_argument("--header", default="")
    s.add_argument("--no-plot", action="store_true")
    a = p.parse_args()
    rc = common(a)
    if rc is not None:
        return rc
    return {"spawn": cmd_spawn, "_init": cmd_init, "wait-exit": cmd_wait_exit,
            "report": cmd_report}[a.verb](a)


if __name__ == "__main__":
    sys.exit(main())
