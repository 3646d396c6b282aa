#!/usr/bin/env python3
"""Turns bench/out/heap.json and bench/out/throughput.csv (written by
bench/run.sh) into the summary table: printed, and saved as summary.txt and
summary.json in the same directory."""
import argparse
import csv
import json
import os
import platform
import statistics
import sys

TARGET_SHARE = 0.95
TARGET_RATIO = 0.95


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--mode", default="full")
    p.add_argument("--rounds", type=int, default=0)
    p.add_argument("--pinning", default="")
    p.add_argument("--redis", default="")
    p.add_argument("--memcached", default="")
    p.add_argument("--params", default="")
    a = p.parse_args()

    heap = json.load(open(os.path.join(a.out, "heap.json")))
    runs = {}
    with open(os.path.join(a.out, "throughput.csv")) as f:
        for row in csv.DictReader(f):
            key = (row["server"], row["test"])
            runs.setdefault(key, {}).setdefault(row["variant"], []).append(float(row["rps"]))

    lines = []
    say = lines.append
    say("cxlcr benchmark (%s: %d rounds per variant, order alternating AB BA)" % (a.mode, a.rounds))
    say("host: %s, %d CPUs, kernel %s; pinning: %s" % (
        platform.node(), os.cpu_count(), platform.release(), a.pinning))
    say("%s; %s" % (a.redis, a.memcached))
    say("")
    say("a. Heap placement: redis-server under cxlcr run, %d keys, %.0f MiB of values"
        % (heap["keys"], heap["value_bytes"] / 2**20))
    share = heap["arena_share"]
    say("   used_memory (INFO)   %10.1f MiB" % (heap["used_memory"] / 2**20))
    say("   arena_used           %10.1f MiB" % (heap["arena_used"] / 2**20))
    say("   RssShmem (arena)     %10.1f MiB" % (heap["rss_shmem_kb"] / 1024))
    say("   RssAnon              %10.1f MiB" % (heap["rss_anon_kb"] / 1024))
    say("   share in the arena   %10.2f %%   (target >= %.0f%%: %s)" % (
        100 * share, 100 * TARGET_SHARE, "met" if share >= TARGET_SHARE else "NOT MET"))
    say("   glibc fallbacks      %10d" % heap["glibc_fallbacks"])
    say("")
    say("b. Throughput, median requests/s (%s)" % a.params)
    say("   %-10s %-5s %14s %14s %8s  %s" % ("server", "test", "stock", "cxlcr", "ratio",
                                             "target >= %.2f" % TARGET_RATIO))
    results = []
    for server in ("redis", "memcached"):
        for test in ("SET", "GET"):
            r = runs.get((server, test))
            if not r or "stock" not in r or "cxlcr" not in r:
                continue
            s, c = statistics.median(r["stock"]), statistics.median(r["cxlcr"])
            ratio = c / s
            results.append({"server": server, "test": test, "stock_median_rps": s,
                            "cxlcr_median_rps": c, "ratio": ratio,
                            "stock_rps": r["stock"], "cxlcr_rps": r["cxlcr"]})
            say("   %-10s %-5s %14.0f %14.0f %8.3f  %s" % (
                server, test, s, c, ratio, "met" if ratio >= TARGET_RATIO else "NOT MET"))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({"mode": a.mode, "rounds": a.rounds, "pinning": a.pinning,
                   "redis": a.redis, "memcached": a.memcached, "params": a.params,
                   "heap": heap, "throughput": results}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
