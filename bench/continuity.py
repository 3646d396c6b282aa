#!/usr/bin/env python3
"""Helpers of bench/continuity.sh (service continuity during migrate).

    continuity.py size SIZE            SIZE (64M, 1G, 1.5GiB, bytes) -> bytes
    continuity.py field FILE KEY       one field of a JSON object
    continuity.py header               the header line of continuity.csv
    continuity.py row --server S --size BYTES --phase P --load LOAD.json
                      --migrations M1.json,M2.json,... [--ack ACK.json]
                                       CSV rows (one per migration) for
                                       continuity.csv, from the load client's
                                       report and the migrate JSONs
    continuity.py plot --csv TIMELINE.csv --load LOAD.json --png OUT.png
                       --title TITLE   the timeline (latency of every
                                       response, responses per 100 ms, the
                                       migration windows) drawn by gnuplot
    continuity.py report --out DIR [--header TEXT]
                                       the summary table (stdout and
                                       DIR/continuity.txt) and
                                       DIR/continuity.summary.csv from
                                       DIR/continuity.csv

Targets (the issue's): response gap during a migrate <= 100 ms; rate after
>= 95% of the rate before; no acknowledged write lost. Python standard
library only; what the benchmarks' helpers share is in bench/lib/results.py.
"""
import csv
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from results import GIB, MIB, gnuplot, median, publish, run_gnuplot, verbs  # noqa: E402

GAP_TARGET_MS = 100.0
RATIO_TARGET = 0.95
FIELDS = ["server", "size_bytes", "phase", "migration", "from", "to", "gap_ms", "gap_open", "window_ms",
          "freeze_ms", "frozen_ms", "dump_ms", "restore_ms", "total_ms", "rate_before", "rate_after", "ratio",
          "p50_before_ms", "p50_after_ms", "p99_before_ms", "p99_after_ms",
          "errors", "reconnects", "requests", "stale_reads", "lost_writes", "rto_min_us"]


def human(n):
    if n >= GIB and n % (GIB // 4) == 0:
        return "%g GiB" % (n / GIB)
    return "%g MiB" % (n / MIB)


def cmd_row(a):
    load = json.load(open(a.load))
    migs = [json.load(open(p)) for p in a.migrations.split(",") if p]
    lost = ""
    if a.ack:
        ack = json.load(open(a.ack))
        lost = ack["lost"] + ack["bad"]
    w = csv.DictWriter(sys.stdout, fieldnames=FIELDS, lineterminator="\n")
    wins = load["windows"]
    for i, m in enumerate(migs):
        win = wins[i] if i < len(wins) else {}
        before, after = win.get("rate_before"), win.get("rate_after")
        w.writerow({
            "server": a.server, "size_bytes": a.size, "phase": a.phase, "migration": i + 1,
            "from": m.get("from", ""), "to": m.get("to", ""),
            "gap_ms": "%.3f" % win["gap_ms"] if win else "",
            "gap_open": ("1" if win.get("gap_open") else "0") if win else "",
            "window_ms": "%.3f" % win["window_ms"] if win else "",
            "freeze_ms": m["freeze_ms"], "frozen_ms": m.get("frozen_ms", ""), "dump_ms": m.get("dump_ms", ""), "restore_ms": m["restore_ms"],
            "total_ms": m["total_ms"], "rate_before": "" if before is None else before,
            "rate_after": "" if after is None else after,
            "ratio": "%.4f" % (after / before) if before else "",
            "p50_before_ms": win.get("p50_before_ms", ""), "p50_after_ms": win.get("p50_after_ms", ""),
            "p99_before_ms": win.get("p99_before_ms", ""), "p99_after_ms": win.get("p99_after_ms", ""),
            "errors": win.get("errors", ""), "reconnects": win.get("reconnects", ""),
            "requests": load["requests"], "stale_reads": load["stale_reads"], "lost_writes": lost,
            "rto_min_us": load.get("rto_min_us", ""),
        })
    return 0


def cmd_plot(a):
    if not gnuplot():
        print("continuity.py: gnuplot is not installed: no %s" % a.png, file=sys.stderr)
        return 0
    load = json.load(open(a.load))
    base = os.path.splitext(a.png)[0]
    lat_ok, lat_bad, bins = base + ".lat.dat", base + ".err.dat", base + ".rate.dat"
    counts = {}
    t_max = 0.0
    with open(a.csv) as f, open(lat_ok, "w") as ok, open(lat_bad, "w") as bad:
        for r in csv.DictReader(f):
            t = float(r["t_s"])
            t_max = max(t_max, t)
            if r["status"] in ("ok", "miss"):
                ok.write("%s %s\n" % (r["t_s"], max(float(r["latency_ms"]), 0.001)))
                b = int(t * 10)
                counts[b] = counts.get(b, 0) + 1
            else:
                bad.write("%s %s\n" % (r["t_s"], max(float(r["latency_ms"]), 0.001)))
    with open(bins, "w") as f:
        for b in range(int(t_max * 10) + 1):
            f.write("%.2f %d\n" % (b / 10.0 + 0.05, counts.get(b, 0) * 10))
    rects = []
    for i, w in enumerate(load["windows"]):
        rects.append('set object %d rect from %.6f, graph 0 to %.6f, graph 1 fc rgb "#f5cba7" '
                     'fs solid 0.6 noborder behind' % (i + 1, w["start_s"], w["end_s"]))
        rects.append('set label %d "gap %.0f ms" at %.6f, graph 0.97 font ",9" tc rgb "#a04000"'
                     % (i + 1, w["gap_ms"], w["end_s"] + 0.05))
    has_bad = os.path.getsize(lat_bad) > 0
    script = "\n".join([
        'set terminal pngcairo size 1200,520 font "DejaVu Sans,10"',
        'set output "%s"' % a.png,
        'set title "%s"' % a.title.replace('"', "'"),
        'set xlabel "time since the load started (s)"',
        'set ylabel "response latency (ms, log)"',
        'set y2label "responses per second (100 ms bins)"',
        'set logscale y',
        'set yrange [0.005:*]',
        'set y2range [0:*]',
        'set ytics nomirror',
        'set y2tics',
        'set key below horizontal',
        'set grid xtics ytics lc rgb "#dddddd"',
    ] + rects + [
        'plot "%s" using 1:2 with points pt 7 ps 0.25 lc rgb "#2471a3" title "latency of a response", \\'
        % lat_ok,
        ('     "%s" using 1:2 with points pt 2 ps 1.0 lc rgb "#c0392b" title "error / reconnect", \\'
         % lat_bad) if has_bad else "",
        '     "%s" using 1:2 axes x1y2 with steps lw 1.5 lc rgb "#1e8449" title "responses/s"' % bins,
    ])
    problem = run_gnuplot([l for l in script.split("\n") if l], base + ".gp", [lat_ok, lat_bad, bins])
    if problem:
        print("continuity.py: %s" % problem, file=sys.stderr)
        return 1
    return 0


def cmd_report(a):
    rows = list(csv.DictReader(open(os.path.join(a.out, "continuity.csv"))))
    groups = {}
    for r in rows:
        groups.setdefault((r["server"], int(r["size_bytes"]), r["phase"]), []).append(r)
    lines = []
    if a.header:
        lines.append(a.header)
    lines.append("targets: response gap <= %.0f ms; rate after >= %.0f%% of the rate before; no lost "
                 "acknowledged write" % (GAP_TARGET_MS, RATIO_TARGET * 100))
    lines.append("")
    hdr = ("%-9s %-8s %-8s %3s  %9s %9s  %9s %9s  %9s %9s %6s %6s  %13s  %4s %5s %5s  %s"
           % ("server", "data", "phase", "n", "gap med", "gap max", "freeze", "frozen", "rate bef", "rate aft",
              "ratio", "(min)", "p50 bef/aft", "err", "recon", "lost", "targets"))
    lines.append(hdr)
    lines.append("-" * len(hdr))
    summary = []
    for (server, size, phase), rs in sorted(groups.items(), key=lambda x: (x[0][0], x[0][1], x[0][2])):
        gaps = [float(r["gap_ms"]) for r in rs if r["gap_ms"]]
        freeze = [float(r["freeze_ms"]) for r in rs]
        frozen = [float(r["frozen_ms"]) for r in rs if r.get("frozen_ms")]
        before = [float(r["rate_before"]) for r in rs if r["rate_before"]]
        after = [float(r["rate_after"]) for r in rs if r["rate_after"]]
        ratios = [float(r["ratio"]) for r in rs if r["ratio"]]
        p50b = [float(r["p50_before_ms"]) for r in rs if r.get("p50_before_ms")]
        p50a = [float(r["p50_after_ms"]) for r in rs if r.get("p50_after_ms")]
        errors = sum(int(r["errors"] or 0) for r in rs)
        recon = sum(int(r["reconnects"] or 0) for r in rs)
        lost = rs[0]["lost_writes"]
        gap_ok = gaps and max(gaps) <= GAP_TARGET_MS
        # A gap still open when the load stopped lasted at least that long.
        gap_open = any(r.get("gap_open") == "1" for r in rs)
        ratio_ok = ratios and min(ratios) >= RATIO_TARGET
        lost_ok = lost in ("", "0")
        verdict = "gap %s, rate %s%s" % ("ok" if gap_ok else "MISSED", "ok" if ratio_ok else "MISSED",
                                         "" if lost == "" else ", writes %s" % ("ok" if lost_ok else "LOST"))
        s = {
            "server": server, "size_bytes": size, "phase": phase, "migrations": len(rs),
            "gap_median_ms": median(gaps) if gaps else None,
            "gap_max_ms": max(gaps) if gaps else None,
            "gap_max_open": gap_open,
            "freeze_median_ms": median(freeze),
            "frozen_median_ms": median(frozen) if frozen else None,
            "rate_before": statistics.mean(before) if before else None,
            "rate_after": statistics.mean(after) if after else None,
            "ratio_median": median(ratios) if ratios else None,
            "ratio_min": min(ratios) if ratios else None,
            "p50_before_ms": median(p50b) if p50b else None,
            "p50_after_ms": median(p50a) if p50a else None,
            "errors": errors, "reconnects": recon, "lost_writes": lost,
            "rto_min_us": rs[0]["rto_min_us"],
            "gap_target_met": bool(gap_ok), "rate_target_met": bool(ratio_ok),
        }
        summary.append(s)
        lines.append("%-9s %-8s %-8s %3d  %6.0f ms %s%5.0f ms  %6.0f ms %6.1f ms  %9.0f %9.0f %6.3f %6.3f  %5.3f/%5.3f ms  %4d %5d %5s  %s"
                     % (server, human(size), phase, len(rs), s["gap_median_ms"] or 0, ">" if gap_open else " ",
                        s["gap_max_ms"] or 0,
                        s["freeze_median_ms"], s["frozen_median_ms"] or 0, s["rate_before"] or 0, s["rate_after"] or 0,
                        s["ratio_median"] or 0, s["ratio_min"] or 0, s["p50_before_ms"] or 0,
                        s["p50_after_ms"] or 0, errors, recon, lost if lost != "" else "-", verdict))
    lines.append("")
    lines.append("gap: longest interval between two successful responses that overlaps the migrate "
                 "(median and max over the migrations; '>': still open when the load stopped); freeze: the migrate's freeze_ms (median: from its freeze to the restored service running, CRIU's start-up included); "
                 "frozen: its frozen_ms (median: the service's tasks frozen, CRIU's own figure and the rest of the freeze after its dump); "
                 "rates: successful responses/s in the pause before and after each migrate (mean; "
                 "after: from the first response that ends the gap); ratio: after/before (median, "
                 "and the worst migration); p50: median latency before and after (median over the "
                 "migrations)")
    publish(lines, os.path.join(a.out, "continuity.txt"))
    with open(os.path.join(a.out, "continuity.summary.csv"), "w") as f:
        w = csv.DictWriter(f, fieldnames=list(summary[0].keys()) if summary else ["server"],
                           lineterminator="\n")
        w.writeheader()
        for s in summary:
            w.writerow(s)
    return 0


def main(argv=None):
    p, sub, common = verbs(__doc__, "continuity.py", null="")
    sub.add_parser("header")
    r = sub.add_parser("row")
    r.add_argument("--server", required=True)
    r.add_argument("--size", type=int, required=True)
    r.add_argument("--phase", required=True)
    r.add_argument("--load", required=True)
    r.add_argument("--migrations", required=True)
    r.add_argument("--ack")
    g = sub.add_parser("plot")
    g.add_argument("--csv", required=True)
    g.add_argument("--load", required=True)
    g.add_argument("--png", required=True)
    g.add_argument("--title", default="")
    s = sub.add_parser("report")
    s.add_argument("--out", required=True)
    s.add_argument("--header", default="")
    a = p.parse_args(argv)
    if a.verb == "header":
        print(",".join(FIELDS))
        return 0
    rc = common(a)
    if rc is not None:
        return rc
    return {"row": cmd_row, "plot": cmd_plot, "report": cmd_report}[a.verb](a)


if __name__ == "__main__":
    sys.exit(main())
