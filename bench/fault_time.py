#!/usr/bin/env python3
"""Helpers of bench/fault_time.sh (the service time of one fault served by
a copy-mode child's pager, issue 17 point 5).

    fault_time.py size SIZE | field FILE KEY...   (bench/lib/results.py)
    fault_time.py gets FILE N KEYS SEED   N "GET kv:str:K" lines, K uniform
                                          in [0, KEYS), into FILE
    fault_time.py pager LINE              the fault times of a pager's end
                                          line (pager/pager.c,
                                          fault_times_text()) as JSON:
                                          {"cxl": {"n", "p50", "p99",
                                          "max"}, "cold": ..., "zero": ...}
    fault_time.py rtt LINE                tier_tool rtt's line as JSON
                                          {"n", "p50", "p99"}
    fault_time.py report --out DIR --keys N --gets N --uptime-before T
                         --uptime-after T the table (DIR/fault_time.txt)
                                          from DIR/fault_time.jsonl

Python standard library only.
"""
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from results import median, publish, read_jsonl, verbs  # noqa: E402

SOURCES = ("cxl", "cold", "zero")
PAGER_RE = re.compile(r"\b(cxl|cold|zero) n=(\d+)(?: p50=([\d.]+) p99=([\d.]+) max=([\d.]+))?")
RTT_RE = re.compile(r"redis round trips (\d+) p50_us ([\d.]+) p99_us ([\d.]+)")


def cmd_gets(a):
    rng = random.Random(a.seed)
    with open(a.file, "w") as f:
        for _ in range(a.n):
            f.write("GET kv:str:%d\n" % rng.randrange(a.keys))
    return 0


def cmd_pager(a):
    text = a.line.partition("fault service us")[2]
    if not text:
        raise SystemExit("fault_time.py: not a pager end line with fault times: %r" % a.line)
    d = {}
    for m in PAGER_RE.finditer(text):
        src, n = m.group(1), int(m.group(2))
        d[src] = {"n": n}
        if m.group(3) is not None:
            d[src].update(p50=float(m.group(3)), p99=float(m.group(4)), max=float(m.group(5)))
    if set(d) != set(SOURCES):
        raise SystemExit("fault_time.py: the end line does not give every source: %r" % a.line)
    print(json.dumps(d))
    return 0


def cmd_rtt(a):
    m = RTT_RE.search(a.line)
    if not m:
        raise SystemExit("fault_time.py: not a line of tier_tool rtt: %r" % a.line)
    print(json.dumps({"n": int(m.group(1)), "p50": float(m.group(2)), "p99": float(m.group(3))}))
    return 0


def cmd_report(a):
    rows = read_jsonl(os.path.join(a.out, "fault_time.jsonl"))
    cxl = [r for r in rows if r["kind"] == "cxl"]
    cold = [r for r in rows if r["kind"] == "cold"]
    rtt = [r["ping"] for r in rows if r["kind"] == "rtt"]

    def col(rs, src, k):
        return median([r["faults"][src][k] for r in rs if r["faults"][src]["n"]])

    def per_round(rs, src):
        return " ".join("%.1f/%.1f" % (r["faults"][src]["p50"], r["faults"][src]["p99"]) for r in rs)
    lines = [
        "Service time of one fault served by a copy-mode child's pager (--fetch lazy), from the read of "
        "its userfaultfd message to the wake, beside a Redis round trip; medians of %d rounds" % len(rtt),
        "Redis %s keys x 1000 B, %s random GETs per child at most; uptime before: %s; after: %s"
        % (a.keys, a.gets, a.uptime_before, a.uptime_after),
        "%-46s %10s %10s %10s" % ("", "faults", "p50 us", "p99 us"),
        "%-46s %10d %10.1f %10.1f" % ("CXL fault (UFFDIO_COPY from the snapshot)", median([r["faults"]["cxl"]["n"] for r in cxl]),
                                      col(cxl, "cxl", "p50"), col(cxl, "cxl", "p99")),
        "%-46s %10d %10.1f %10.1f" % ("cold fault (RMA read + CRC + UFFDIO_COPY)", median([r["faults"]["cold"]["n"] for r in cold]),
                                      col(cold, "cold", "p50"), col(cold, "cold", "p99")),
        "%-46s %10d %10.1f %10.1f" % ("zero fault (UFFDIO_ZEROPAGE; both children)",
                                      median([r["faults"]["zero"]["n"] for r in cxl + cold]),
                                      col(cxl + cold, "zero", "p50"), col(cxl + cold, "zero", "p99")),
        "%-46s %10d %10.1f %10.1f" % ("Redis PING round trip, h1 -> the parent on h0", median([r["n"] for r in rtt]),
                                      median([r["p50"] for r in rtt]), median([r["p99"] for r in rtt])),
        "cold / CXL fault p50 %.1fx; cold fault p50 / PING p50 %.1fx; CXL fault p50 / PING p50 %.2fx" % (
            col(cold, "cold", "p50") / col(cxl, "cxl", "p50"),
            col(cold, "cold", "p50") / median([r["p50"] for r in rtt]),
            col(cxl, "cxl", "p50") / median([r["p50"] for r in rtt])),
        "per round p50/p99 us: CXL %s; cold %s; PING %s" % (
            per_round(cxl, "cxl"), per_round(cold, "cold"), " ".join("%.1f/%.1f" % (r["p50"], r["p99"]) for r in rtt)),
        "the cold child's faults from CXL (pages hot in its 1 ms window), per round: %s"
        % " ".join(str(r["faults"]["cxl"]["n"]) for r in cold),
    ]
    publish(lines, os.path.join(a.out, "fault_time.txt"))
    return 0


def main():
    p, sub, run = verbs(__doc__, "fault_time.py")
    s = sub.add_parser("gets")
    s.add_argument("file")
    s.add_argument("n", type=int)
    s.add_argument("keys", type=int)
    s.add_argument("seed", type=int)
    sub.add_parser("pager").add_argument("line")
    sub.add_parser("rtt").add_argument("line")
    s = sub.add_parser("report")
    s.add_argument("--out", required=True)
    s.add_argument("--keys", required=True)
    s.add_argument("--gets", required=True)
    s.add_argument("--uptime-before", required=True)
    s.add_argument("--uptime-after", required=True)
    a = p.parse_args()
    rc = run(a)
    if rc is not None:
        return rc
    return {"gets": cmd_gets, "pager": cmd_pager, "rtt": cmd_rtt, "report": cmd_report}[a.verb](a)


if __name__ == "__main__":
    sys.exit(main())
