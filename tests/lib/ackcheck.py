#!/usr/bin/env python3
"""Checks that every acknowledged write is still there.

    ackcheck.py --host ADDR --port PORT [--proto redis|memcached] ACKLOG...
                [--json] [--quiet]

ACKLOG is what `bench/loadclient --ack-log` wrote: one line "KEY VERSION"
per acknowledged SET, in the order of the acknowledgements, and
"? KEY VERSION" for a SET that was sent but never answered (its connection
failed: it may or may not have been applied). Several logs are read in the
order given (a later run's versions are higher).

Every key must hold its last acknowledged version: the value loadclient
wrote, "KEY|VERSION|" followed by nothing but '.' padding. A key may also
hold the version of a later unanswered SET of the same key (applied, but its
answer was lost): that is counted, not wrong. Anything else is a lost write
(missing, or an older version) or a bad value (not what loadclient writes).

Prints one summary line (or JSON with --json); exit status 0 if no
acknowledged write is lost, 1 otherwise, 2 on a bad command line or when
the server cannot be read. Python standard library only.
"""
import argparse
import json
import socket
import sys

BATCH = 500
MAX_SHOWN = 10


class CheckError(Exception):
    pass


def read_logs(paths):
    """key -> (last acknowledged version, set of later unanswered versions),
    and the number of acknowledged writes."""
    last = {}
    unacked = {}
    acks = 0
    for path in paths:
        with open(path, "rb") as f:
            for n, line in enumerate(f, 1):
                parts = line.split()
                if not parts:
                    continue
                try:
                    if parts[0] == b"?" and len(parts) == 3:
                        unacked.setdefault(parts[1], set()).add(int(parts[2]))
                    elif len(parts) == 2:
                        last[parts[0]] = int(parts[1])
                        acks += 1
                    else:
                        raise ValueError
                except ValueError:
                    raise CheckError("%s:%d: not an ack-log line: %r" % (path, n, line[:80]))
    later = {}
    for key, vs in unacked.items():
        base = last.get(key, -1)
        keep = {v for v in vs if v > base}
        if keep:
            later[key] = keep
    return last, later, acks


def parse_value(key, value):
    """The version in a value loadclient wrote for key, or None."""
    head = key + b"|"
    if not value.startswith(head):
        return None
    rest = value[len(head):]
    bar = rest.find(b"|")
    if bar <= 0 or not rest[:bar].isdigit():
        return None
    if rest[bar + 1:].strip(b".") != b"":
        return None
    return int(rest[:bar])


def read_line(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise CheckError("connection closed by the server")
    return line[:-2]


def redis_get(f, sock, keys):
    out = []
    for k in keys:
        out.append(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k))
    sock.sendall(b"".join(out))
    got = {}
    for k in keys:
        line = read_line(f)
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                got[k] = None
                continue
            data = f.read(n + 2)
            if len(data) != n + 2:
                raise CheckError("connection closed by the server")
            got[k] = data[:-2]
        elif line[:1] == b"-":
            raise CheckError("GET %s: %s" % (k.decode(errors="replace"), line.decode(errors="replace")))
        else:
            raise CheckError("unexpected reply %r" % line[:80])
    return got


def mc_get(f, sock, keys):
    sock.sendall(b"get " + b" ".join(keys) + b"\r\n")
    got = dict.fromkeys(keys)
    while True:
        line = read_line(f)
        if line == b"END":
            return got
        parts = line.split()
        if len(parts) < 4 or parts[0] != b"VALUE":
            raise CheckError("unexpected reply %r" % line[:80])
        n = int(parts[3])
        data = f.read(n + 2)
        if len(data) != n + 2:
            raise CheckError("connection closed by the server")
        got[parts[1]] = data[:-2]


def check(opts):
    last, later, acks = read_logs(opts.acklog)
    res = {"keys": len(last), "acknowledged_writes": acks, "ok": 0, "unanswered_applied": 0,
           "lost": 0, "bad": 0, "shown": []}
    keys = sorted(last)
    try:
        sock = socket.create_connection((opts.host, opts.port), timeout=opts.timeout)
    except OSError as e:
        raise CheckError("cannot connect to %s:%d: %s" % (opts.host, opts.port, e))
    with sock:
        f = sock.makefile("rb")
        get = redis_get if opts.proto == "redis" else mc_get
        for i in range(0, len(keys), BATCH):
            batch = keys[i:i + BATCH]
            got = get(f, sock, batch)
            for k in batch:
                want = last[k]
                v = got.get(k)
                have = None if v is None else parse_value(k, v)
                if v is not None and have is None:
                    res["bad"] += 1
                    why = "not a loadclient value: %r" % v[:60]
                elif have == want:
                    res["ok"] += 1
                    continue
                elif have is not None and have in later.get(k, ()):
                    res["unanswered_applied"] += 1
                    continue
                else:
                    res["lost"] += 1
                    why = "missing" if v is None else "holds version %d" % have
                if len(res["shown"]) < MAX_SHOWN:
                    res["shown"].append("%s: last acknowledged version %d, %s"
                                        % (k.decode(errors="replace"), want, why))
    return res


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("acklog", nargs="+", help="ack logs of bench/loadclient, oldest first")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--proto", choices=["redis", "memcached"], default="redis")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing when no write is lost")
    opts = p.parse_args(argv)
    try:
        res = check(opts)
    except (CheckError, OSError) as e:
        print("ackcheck: %s" % e, file=sys.stderr)
        return 2
    failed = res["lost"] or res["bad"]
    if opts.json:
        print(json.dumps(res))
    elif failed:
        print("ackcheck: %d of %d keys lost their last acknowledged write, %d hold a bad value "
              "(%d acknowledged writes):" % (res["lost"], res["keys"], res["bad"],
                                             res["acknowledged_writes"]), file=sys.stderr)
        for s in res["shown"]:
            print("  " + s, file=sys.stderr)
    elif not opts.quiet:
        print("ackcheck: %d keys, %d acknowledged writes: every key holds its last acknowledged "
              "version (%d hold a later unanswered one)" % (res["keys"], res["acknowledged_writes"],
                                                            res["unanswered_applied"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
