#!/usr/bin/env python3
"""Checks from `cxlcr status NAME --json` that a service's heap is in its
arena: RssShmem / (RssShmem + RssAnon) >= --min-share (0.95), arena_used
above --min-used bytes, and no allocation fell back to glibc.

    heapcheck.py STATUS.json [--min-used BYTES] [--min-share 0.95] [--tag T]

Prints one line of figures; exits 1, naming each failed condition, if any.
"""
import argparse
import json
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("status", help="file holding `cxlcr status NAME --json`, or -")
    p.add_argument("--min-used", type=int, default=0)
    p.add_argument("--min-share", type=float, default=0.95)
    p.add_argument("--tag", default="heapcheck")
    a = p.parse_args()
    s = json.load(sys.stdin if a.status == "-" else open(a.status))
    if "rss_shmem_kb" not in s:
        print("%s: FAIL: %s is %s: no memory figures" % (a.tag, s["name"], s["state"]),
              file=sys.stderr)
        return 1
    shmem, anon = s["rss_shmem_kb"], s["rss_anon_kb"]
    share = shmem / (shmem + anon) if shmem + anon else 0.0
    print("%s: %s pid %d: arena_used %.1f MiB, RssShmem %d kB, RssAnon %d kB, "
          "share in arena %.2f%%, glibc_fallbacks %d"
          % (a.tag, s["name"], s["pid"], s["arena_used"] / 2**20, shmem, anon,
             100 * share, s["glibc_fallbacks"]))
    bad = []
    if share < a.min_share:
        bad.append("share of resident memory in the arena %.4f < %.2f" % (share, a.min_share))
    if s["arena_used"] <= a.min_used:
        bad.append("arena_used %d <= %d" % (s["arena_used"], a.min_used))
    if s["glibc_fallbacks"] != 0:
        bad.append("glibc_fallbacks %d != 0" % s["glibc_fallbacks"])
    for b in bad:
        print("%s: FAIL: %s" % (a.tag, b), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
