#!/usr/bin/env python3
"""Helpers of bench/fork.sh (remote fork figures).

    fork.py size SIZE                  SIZE (64M, 1G, bytes) -> bytes
    fork.py field FILE KEY...          a field of a JSON object (numbers
                                       index lists)
    fork.py now | since NS             CLOCK_MONOTONIC in ns; ms since NS
    fork.py raw FILE FIG SIZE ROUND [K=V | K=@JSON]...
                                       appends one round to FILE (JSON lines)
    fork.py load --host H --port P --keys N --ops N --set-pct P --size B
                                       a read-mostly Redis load: ops requests,
                                       uniform over keys kv:str:0..N-1,
                                       set-pct% SETs; prints a JSON summary
    fork.py report --out DIR ...       the table, fork.csv and fork.png from
                                       DIR/fork.jsonl

Python standard library only (the plot is drawn by gnuplot); what the
benchmarks' helpers share is in bench/lib/results.py.
"""
import json
import os
import random
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from results import (GIB, MIB, NO_GNUPLOT, gnuplot, median, publish,  # noqa: E402
                     read_jsonl, run_gnuplot, verbs)

TARGET_GROWTH = 1.2   # a: largest / smallest heap
TARGET_SPEEDUP = 3.0  # b: plain CRIU / cxlcr fork
TARGET_SHARE = 15.0   # c: child's RssAnon, % of the parent's heap


def human(n):
    if n >= GIB and n % GIB == 0:
        return "%d GiB" % (n // GIB)
    if n >= GIB:
        return "%.3g GiB" % (n / GIB)
    return "%.4g MiB" % (n / MIB)


# ------------------------------------------------------------------ raw --

def cmd_raw(a):
    d = {"fig": a.fig, "size": int(a.size), "round": int(a.round)}
    for kv in a.fields:
        k, _, v = kv.partition("=")
        if v.startswith("@"):
            with open(v[1:]) as f:
                d[k] = json.load(f)
        else:
            d[k] = float(v) if "." in v else int(v)
    with open(a.file, "a") as f:
        f.write(json.dumps(d) + "\n")
    return 0


# ----------------------------------------------------------------- load --

def read_reply(f):
    line = f.readline()
    if not line:
        raise OSError("connection closed")
    kind = line[:1]
    if kind == b"$":
        n = int(line[1:])
        if n >= 0:
            f.read(n + 2)
        return n >= 0
    if kind == b"-":
        raise OSError("redis: " + line.decode().strip())
    return True


def cmd_load(a):
    """Pipelined in batches of 100, one connection: GETs of random keys,
    set_pct% SETs of a new value of the same size."""
    rng = random.Random(a.seed)
    value = b"x" * a.size
    s = socket.create_connection((a.host, a.port), timeout=60)
    f = s.makefile("rb")
    gets = sets = misses = 0
    t0 = time.monotonic()
    left = a.ops
    while left:
        n = min(100, left)
        left -= n
        out = []
        for _ in range(n):
            key = b"kv:str:%d" % rng.randrange(a.keys)
            if rng.random() * 100 < a.set_pct:
                out.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(value), value))
                sets += 1
            else:
                out.append(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(key), key))
                gets += 1
        s.sendall(b"".join(out))
        for _ in range(n):
            if not read_reply(f):
                misses += 1
    secs = time.monotonic() - t0
    s.close()
    print(json.dumps({"ops": a.ops, "gets": gets, "sets": sets, "misses": misses, "seconds": secs}))
    if misses:
        print("fork.py load: %d GETs found no value" % misses, file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------- report --

def figures(rounds, sizes, mid, children):
    """-> list of (figure, size, metric, values, unit): every round's value."""
    rows = []

    def add(fig, size, metric, values, unit):
        if values:
            rows.append((fig, size, metric, values, unit))

    def of(fig, size):
        return [r for r in rounds if r["fig"] == fig and r["size"] == size]

    for size in sorted({r["size"] for r in rounds if r["fig"] == "a"}):
        rs = of("a", size)
        add("a", size, "first_answer_ms", [r["fork"]["children"][0]["first_answer_ms"] for r in rs], "ms")
        add("a", size, "api_reply_ms", [r["fork"]["request_ms"] for r in rs], "ms")
        add("a", size, "child_restore_ms", [r["fork"]["children"][0]["restore_ms"] for r in rs], "ms")
        add("a", size, "parent_arena_used", [r["arena_used"] for r in rs], "bytes")
        ss = of("s", size)
        add("a", size, "snapshot_total_ms", [r["snapshot"]["total_ms"] for r in ss], "ms")
        add("a", size, "snapshot_freeze_ms", [r["snapshot"]["freeze_ms"] for r in ss], "ms")
        add("a", size, "snapshot_copy_ms", [r["snapshot"]["snapshot_ms"] for r in ss], "ms")
        add("a", size, "snapshot_bytes", [r["snapshot"]["snapshot_bytes"] for r in ss], "bytes")
        # the newest snapshot's: prefetched into every child of (a)
        add("a", size, "pages_changed", [ss[-1]["snapshot"].get("pages_changed", 0)] if ss else [], "pages")
    rs = of("b", mid)
    add("b", mid, "criu_first_answer_ms", [r["restore"]["first_answer_ms"] for r in rs], "ms")
    add("b", mid, "criu_restore_cmd_ms", [r["restore"]["cmd_ms"] for r in rs], "ms")
    add("b", mid, "criu_dump_ms", [r["dump_ms"] for r in rs], "ms")
    add("b", mid, "criu_image_bytes", [r["image_bytes"] for r in rs], "bytes")
    rs = of("c", mid)
    add("c", mid, "child_rss_anon_after_fork", [r["before"]["rss_anon_kb"] * 1024 for r in rs], "bytes")
    add("c", mid, "child_rss_anon_after_load", [r["after"]["rss_anon_kb"] * 1024 for r in rs], "bytes")
    add("c", mid, "parent_arena_used", [r["arena_used"] for r in rs], "bytes")
    add("c", mid, "child_share_pct", [100.0 * r["after"]["rss_anon_kb"] * 1024 / r["arena_used"] for r in rs], "%")
    rs = of("d", mid)
    add("d", mid, "last_first_answer_ms",
        [max(c["first_answer_ms"] for c in r["fork"]["children"]) for r in rs], "ms")
    add("d", mid, "api_reply_ms", [r["fork"]["request_ms"] for r in rs], "ms")
    add("d", mid, "per_child_first_answer_ms",
        [c["first_answer_ms"] for r in rs for c in r["fork"]["children"]], "ms")
    add("d", mid, "per_child_restore_ms", [c["restore_ms"] for r in rs for c in r["fork"]["children"]], "ms")
    for copy, mode in ((0, "share"), (1, "copy"), (2, "eager")):
        rs = [r for r in of("e", mid) if r["copy"] == copy]
        add("e", mid, mode + "_first_answer_ms", [r["fork"]["children"][0]["first_answer_ms"] for r in rs], "ms")
        add("e", mid, mode + "_restore_ms", [r["fork"]["children"][0]["restore_ms"] for r in rs], "ms")
        add("e", mid, mode + "_rss_anon", [r["after"]["rss_anon_kb"] * 1024 for r in rs], "bytes")
        add("e", mid, mode + "_rss_anon_settled", [r["settled"]["rss_anon_kb"] * 1024 for r in rs], "bytes")
        add("e", mid, mode + "_settled_ms", [r["settled"]["ms"] for r in rs], "ms")
        add("e", mid, mode + "_parent_arena_used", [r["arena_used"] for r in rs], "bytes")
    return rows


def plot(out, table, sizes, mid, children, rounds):
    if not gnuplot():
        return NO_GNUPLOT
    a_sizes = sorted(s for (f, s, m) in table if f == "a" and m == "first_answer_ms")
    if not a_sizes:
        return "nothing to plot"
    dat = os.path.join(out, "fork-a.dat")
    with open(dat, "w") as f:
        for s in a_sizes:
            f.write("%.6f %.3f %.3f %.3f\n" % (s / GIB, table[("a", s, "first_answer_ms")],
                                               table[("a", s, "snapshot_total_ms")],
                                               table[("a", s, "snapshot_freeze_ms")]))
    dat_d = os.path.join(out, "fork-d.dat")
    per_child = {}
    for r in rounds:
        if r["fig"] == "d":
            for i, c in enumerate(r["fork"]["children"]):
                per_child.setdefault(i + 1, []).append(c["first_answer_ms"])
    with open(dat_d, "w") as f:
        for i in sorted(per_child):
            f.write("%d %.3f\n" % (i, median(per_child[i])))
    criu = table.get(("b", mid, "criu_first_answer_ms"))
    one = table.get(("a", mid, "first_answer_ms"))
    png = os.path.join(out, "fork.png")
    lo, hi = a_sizes[0] / GIB, a_sizes[-1] / GIB
    ys = [table[("a", s, k)] for s in a_sizes for k in ("first_answer_ms", "snapshot_total_ms")]
    ymax = max(ys + ([criu] if criu else [])) * 1.25
    script = [
        'set terminal pngcairo size 1300,560 enhanced font "DejaVu Sans,12"',
        'set output "%s"' % png,
        "set multiplot layout 1,2",
        'set title "a, b. Fork: request to the child\'s first answer"',
        'set xlabel "Redis heap (values held; log scale)"',
        'set ylabel "ms"',
        "set logscale x 2",
        "set xrange [%g:%g]" % (lo / 1.5, hi * 1.5),
        "set yrange [0:%g]" % ymax,
        "set xtics (%s)" % ", ".join('"%s" %g' % (human(s), s / GIB) for s in a_sizes),
        "set grid ytics",
        "set key top left box opaque",
    ]
    plots = ['"%s" using 1:2 with linespoints lw 2 pt 7 lc rgb "#c0392b" title "cxlcr fork, from a snapshot"' % dat,
             '"%s" using 1:3 with linespoints lw 2 pt 5 dt 2 lc rgb "#7f8c8d" title "snapshot (taken before)"' % dat,
             '"%s" using 1:4 with linespoints lw 2 pt 9 dt 3 lc rgb "#2471a3" title "parent frozen (part of it)"' % dat]
    if criu:
        script.append('set label "%.0f ms" at %g,%g offset 1.5,0' % (criu, mid / GIB, criu))
        plots.append("'+' using (%g):(%g) every ::0::0 with points pt 13 ps 2.2 lc rgb \"#000000\" "
                     "title \"plain CRIU restore from disk, %s\"" % (mid / GIB, criu, human(mid)))
    script.append("plot " + ", ".join(plots))
    script += [
        "unset logscale x", "unset label", "set xrange [0.3:%g]" % (len(per_child) + 0.7 if per_child else 1),
        "set xtics 1", 'set xlabel "child"',
        # room above the bars for the key
        "set yrange [0:%g]" % (max([median(v) for v in per_child.values()] + [one or 0, 1]) * 1.45),
        'set title "d. %d children of a %s parent from one snapshot at once"' % (children, human(mid)),
        "set style fill solid 0.6", "set boxwidth 0.6",
    ]
    plots = ['"%s" using 1:2 with boxes lc rgb "#c0392b" title "request to this child\'s first answer"' % dat_d]
    if one:
        plots.append("%g with lines dt 2 lw 2 lc rgb \"#000000\" title \"one child alone (a)\"" % one)
    script.append("plot " + ", ".join(plots))
    script.append("unset multiplot")
    return run_gnuplot(script, os.path.join(out, "fork.gp"), [dat, dat_d])


def cmd_report(a):
    rounds = read_jsonl(os.path.join(a.out, "fork.jsonl"))
    sizes = [int(s) for s in a.sizes.split()]
    mid = int(a.mid)
    rows = figures(rounds, sizes, mid, a.children)
    table = {(f, s, m): median(v) for f, s, m, v, _ in rows}
    spread = {(f, s, m): (min(v), max(v)) for f, s, m, v, _ in rows if v}
    n = max([len(v) for f, s, m, v, _ in rows if f == "a"] or [0])
    lines = []
    say = lines.append
    say("Remote fork with Redis (1000-byte values), heap in an emulated CXL pool; medians of %d round%s."
        % (n, "" if n == 1 else "s"))
    if a.header:
        say(a.header)
    say("")
    say("a. Fork latency: fork request -> the child's first answer (GET), from an existing snapshot")
    say("   %-9s %10s %13s %13s %10s %10s %8s | %9s %8s %8s" % (
        "heap", "arena_used", "first answer", "(rounds)", "API reply", "restore", "changed", "snapshot", "frozen",
        "copy"))
    a_sizes = sorted(s for (f, s, m) in table if f == "a" and m == "first_answer_ms")
    for s in a_sizes:
        g = lambda m: table[("a", s, m)]  # noqa: E731
        lo_ms, hi_ms = spread[("a", s, "first_answer_ms")]
        say("   %-9s %6.0f MiB %10.1f ms %13s %7.1f ms %7.1f ms %8d | %6.0f ms %5.0f ms %5.0f ms" % (
            human(s), g("parent_arena_used") / MIB, g("first_answer_ms"), "%.1f..%.1f" % (lo_ms, hi_ms),
            g("api_reply_ms"),
            g("child_restore_ms"), table.get(("a", s, "pages_changed"), 0), g("snapshot_total_ms"),
            g("snapshot_freeze_ms"), g("snapshot_copy_ms")))
    summary = {}
    own = [s for s in sizes if ("a", s, "first_answer_ms") in table]
    if len(own) > 1:
        lo, hi = min(own), max(own)
        ratio = table[("a", hi, "first_answer_ms")] / table[("a", lo, "first_answer_ms")]
        summary["a_ratio"] = ratio
        say("   %s / %s: %.2fx (target <= %.1f): %s" % (human(hi), human(lo), ratio, TARGET_GROWTH,
                                                       "met" if ratio <= TARGET_GROWTH else "NOT met"))
    say("   (restore: the daemon's restore of the child; changed: pages the parent changed between its last")
    say("   two snapshots, prefetched into each child; snapshot: `cxlcr snapshot`, taken before the forks,")
    say("   the parent frozen for 'frozen' ms of it, of which 'copy' copying heap pages into the pool)")
    say("")
    criu, fork1 = table.get(("b", mid, "criu_first_answer_ms")), table.get(("a", mid, "first_answer_ms"))
    if criu and fork1:
        say("b. At %s: request -> first answer" % human(mid))
        say("   plain CRIU, restore from image files on local disk: %8.1f ms  (criu restore ran %.1f ms;" % (
            criu, table[("b", mid, "criu_restore_cmd_ms")]))
        say("      dumped once in %.0f ms, %.0f MiB of images, synced, still in the page cache)" % (
            table[("b", mid, "criu_dump_ms")], table[("b", mid, "criu_image_bytes")] / MIB))
        say("   cxlcr fork from a snapshot:                          %8.1f ms" % fork1)
        summary["b_ratio"] = criu / fork1
        say("   plain CRIU / cxlcr fork: %.1fx (target >= %.0fx): %s" % (
            criu / fork1, TARGET_SPEEDUP, "met" if criu / fork1 >= TARGET_SPEEDUP else "NOT met"))
        say("")
    share = table.get(("c", mid, "child_share_pct"))
    if share is not None:
        say("c. At %s: a child's private memory after %s over the whole key space" % (human(mid), a.load))
        say("   RssAnon %.1f MiB (%.1f MiB right after the fork) of a parent heap of %.0f MiB: %.1f%% "
            "(target <= %.0f%%): %s" % (
                table[("c", mid, "child_rss_anon_after_load")] / MIB, table[("c", mid, "child_rss_anon_after_fork")] / MIB,
                table[("c", mid, "parent_arena_used")] / MIB, share, TARGET_SHARE,
                "met" if share <= TARGET_SHARE else "NOT met"))
        summary["c_share_pct"] = share
        say("")
    last = table.get(("d", mid, "last_first_answer_ms"))
    if last:
        per = [v for f, s, m, v, _ in rows if f == "d" and m == "per_child_first_answer_ms"][0]
        say("d. %d children of the %s parent from one snapshot at once (one request)" % (a.children, human(mid)))
        say("   request -> the last child's first answer: %.1f ms (API reply %.1f ms); %.1f ms per child" % (
            last, table[("d", mid, "api_reply_ms")], last / a.children))
        say("   each child: first answer %.1f ms median (%.1f..%.1f), restore %.1f ms median; one alone (a): %s" % (
            median(per), min(per), max(per), table[("d", mid, "per_child_restore_ms")],
            "%.1f ms" % fork1 if fork1 else "-"))
        summary["d_last_ms"] = last
        say("")
    copy, share = table.get(("e", mid, "copy_first_answer_ms")), table.get(("e", mid, "share_first_answer_ms"))
    if copy and share:
        say("e. At %s: copy mode (copy: hot pages first, the rest in the background; eager: every page before" % human(mid))
        say("   it runs) against share mode, rounds in rotating order: request -> first answer, the child's")
        say("   private memory (RssAnon) right after it, and once it stops growing, that many ms after the request")
        for mode in ("share", "copy", "eager"):
            if ("e", mid, mode + "_first_answer_ms") not in table:
                continue
            g = lambda m: table[("e", mid, mode + "_" + m)]  # noqa: E731
            then = "" if g("settled_ms") < 0 else ", then %7.1f MiB at %7.0f ms" % (
                g("rss_anon_settled") / MIB, g("settled_ms"))
            say("   %-5s first answer %8.1f ms (child restored in %7.1f ms), RssAnon %7.1f MiB%s" % (
                mode, g("first_answer_ms"), g("restore_ms"), g("rss_anon") / MIB, then))
        extra = table[("e", mid, "copy_rss_anon_settled")] - table[("e", mid, "share_rss_anon")]
        say("   copy / share: first answer %.2fx; a copy-mode child owns %.1f MiB more (the parent's heap: %.0f MiB)"
            % (copy / share, extra / MIB, table[("e", mid, "copy_parent_arena_used")] / MIB))
        summary["e_copy_over_share"] = copy / share
        say("")
    problem = plot(a.out, table, sizes, mid, a.children, rounds)
    say("Wrote %s/fork.csv%s" % (a.out, "" if problem else " and fork.png"))
    if problem:
        say("plot: " + problem)
    publish(lines, os.path.join(a.out, "fork.txt"))
    with open(os.path.join(a.out, "fork.csv"), "w") as f:
        f.write("figure,size_bytes,metric,median,unit,rounds,values\n")
        for fig, size, metric, values, unit in rows:
            f.write("%s,%d,%s,%.3f,%s,%d,%s\n" % (fig, size, metric, median(values), unit, len(values),
                                                 " ".join("%.3f" % v for v in values)))
        for k, v in summary.items():
            f.write("summary,0,%s,%.3f,%s,1,%.3f\n" % (k, v, "%" if k.endswith("pct") else
                                                       "ms" if k.endswith("ms") else "x", v))
    return 0


def main():
    p, sub, common = verbs(__doc__, "fork.py")
    sub.add_parser("now")
    s = sub.add_parser("since")
    s.add_argument("ns", type=int)
    s = sub.add_parser("raw")
    s.add_argument("file")
    s.add_argument("fig")
    s.add_argument("size")
    s.add_argument("round")
    s.add_argument("fields", nargs="*")
    s = sub.add_parser("load")
    s.add_argument("--host", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--keys", type=int, required=True)
    s.add_argument("--ops", type=int, default=20000)
    s.add_argument("--set-pct", type=float, default=1.0)
    s.add_argument("--size", type=int, default=1000)
    s.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("report")
    s.add_argument("--out", required=True)
    s.add_argument("--sizes", required=True)
    s.add_argument("--mid", required=True)
    s.add_argument("--children", type=int, default=8)
    s.add_argument("--load", default="")
    s.add_argument("--header", default="")
    a = p.parse_args()
    rc = common(a)
    if rc is not None:
        return rc
    if a.verb == "now":
        print(time.monotonic_ns())
        return 0
    if a.verb == "since":
        print("%.1f" % ((time.monotonic_ns() - a.ns) / 1e6))
        return 0
    return {"raw": cmd_raw, "load": cmd_load, "report": cmd_report}[a.verb](a)


if __name__ == "__main__":
    sys.exit(main())
