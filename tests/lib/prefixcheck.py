#!/usr/bin/env python3
"""Checks that a service holds exactly a prefix of one writer's writes.

    prefixcheck.py --host ADDR --port PORT ACKLOG [--at-least N] [--json]

ACKLOG is what `bench/loadclient --ack-log` wrote (one connection, one
request at a time, so the server applies its SETs in the order of the
log): "KEY VERSION" per acknowledged SET, "? KEY VERSION" for one sent but
never answered. A service restored from a snapshot taken at one instant
holds the writes up to some point of that order and none after it: for
every key, the value the last write up to that point gave it (or nothing,
if none did). This finds the point from the values (the latest write that
any key shows) and checks that every key agrees with it.

--at-least N: the point must lie at or after the first N lines (writes
acknowledged before a recovery point known to be older must be there).

Prints one line (or JSON): the point, the acknowledged writes after it
(lost: they were acknowledged after the snapshot), and the keys that
disagree. Exit status 0 if the values are such a prefix (and reach N), 1
if not, 2 on a bad command line or an unreadable server. Python standard
library only; uses ackcheck.py's readers.
"""
import argparse
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ackcheck  # noqa: E402


def read_log(path):
    """[(key, version, acknowledged)] in the order of the log."""
    out = []
    with open(path, "rb") as f:
        for n, line in enumerate(f, 1):
            parts = line.split()
            if not parts:
                continue
            if parts[0] == b"?" and len(parts) == 3:
                out.append((parts[1], int(parts[2]), False))
            elif len(parts) == 2:
                out.append((parts[0], int(parts[1]), True))
            else:
                raise ackcheck.CheckError("%s:%d: not an ack-log line: %r" % (path, n, line[:80]))
    return out


def check(opts):
    writes = read_log(opts.acklog)
    keys = sorted({k for k, _, _ in writes})
    pos = {(k, v): i for i, (k, v, _) in enumerate(writes)}
    have = {}
    sock = socket.create_connection((opts.host, opts.port), timeout=30)
    with sock:
        f = sock.makefile("rb")
        for i in range(0, len(keys), ackcheck.BATCH):
            got = ackcheck.redis_get(f, sock, keys[i:i + ackcheck.BATCH])
            for k, v in got.items():
                if v is not None:
                    ver = ackcheck.parse_value(k, v)
                    if ver is None or (k, ver) not in pos:
                        raise ackcheck.CheckError("%s holds a value nobody wrote: %r" % (k.decode(), v[:60]))
                    have[k] = ver
    cut = max((pos[(k, v)] for k, v in have.items()), default=-1)
    # What each key would hold after the writes up to the cut.
    want = {}
    for k, v, _ in writes[:cut + 1]:
        want[k] = v
    wrong = [k for k in keys if want.get(k) != have.get(k)]
    lost = sum(1 for _, _, acked in writes[cut + 1:] if acked)
    return {"writes": len(writes), "cut": cut + 1, "acknowledged_after_cut": lost,
            "keys": len(keys), "disagree": len(wrong),
            "shown": ["%s: holds %s, the prefix gives %s" % (k.decode(), have.get(k), want.get(k))
                      for k in wrong[:10]]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("acklog")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--at-least", type=int, default=0)
    p.add_argument("--json", action="store_true")
    opts = p.parse_args(argv)
    try:
        res = check(opts)
    except (ackcheck.CheckError, OSError) as e:
        print("prefixcheck: %s" % e, file=sys.stderr)
        return 2
    ok = not res["disagree"] and res["cut"] >= opts.at_least
    if opts.json:
        print(json.dumps(res))
    else:
        print("prefixcheck: %d writes, the values are %s the first %d (at least %d wanted); %d acknowledged "
              "after it; %d keys disagree" % (res["writes"], "exactly" if not res["disagree"] else "NOT",
                                             res["cut"], opts.at_least, res["acknowledged_after_cut"],
                                             res["disagree"]), file=sys.stdout if ok else sys.stderr)
        for s in res["shown"]:
            print("  " + s, file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
