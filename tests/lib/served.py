#!/usr/bin/env python3
"""Wait until a Redis or Memcached server has served N more GETs and SETs.

    served.py --host ADDR --port PORT [--proto redis|memcached] --more N
              [--timeout S]

The tests use it instead of sleeping: "the load went on after the migrate"
is a count the server itself keeps (Redis INFO commandstats, Memcached
stats cmd_get + cmd_set; the polls themselves are not counted), read on a
connection of its own. Exit status 0 once the count has grown by N; 1 if it
did not within --timeout seconds (default 30: a bound, not a measurement).
"""
import argparse
import socket
import sys
import time


def redis_count(f, sock):
    sock.sendall(b"*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
    head = f.readline()
    if not head.startswith(b"$"):
        raise RuntimeError("unexpected INFO reply: %r" % head)
    body = f.read(int(head[1:]) + 2).decode()
    total = 0
    for line in body.splitlines():
        name, _, rest = line.partition(":")
        if name in ("cmdstat_get", "cmdstat_set"):
            total += int(rest.split(",")[0].split("=")[1])
    return total


def memcached_count(f, sock):
    sock.sendall(b"stats\r\n")
    total = 0
    while True:
        line = f.readline()
        if not line or line.startswith(b"END"):
            break
        parts = line.split()
        if len(parts) == 3 and parts[1] in (b"cmd_get", b"cmd_set"):
            total += int(parts[2])
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--proto", choices=["redis", "memcached"], default="redis")
    p.add_argument("--more", type=int, required=True)
    p.add_argument("--timeout", type=float, default=30.0)
    a = p.parse_args()
    count = redis_count if a.proto == "redis" else memcached_count
    deadline = time.monotonic() + a.timeout
    sock = socket.create_connection((a.host, a.port), timeout=a.timeout)
    f = sock.makefile("rb")
    start = count(f, sock)
    now = start
    while now - start < a.more:
        if time.monotonic() >= deadline:
            print("served.py: %s:%d served %d requests in %.0f s, waited for %d"
                  % (a.host, a.port, now - start, a.timeout, a.more), file=sys.stderr)
            return 1
        time.sleep(0.01)  # poll interval; the condition is the count
        now = count(f, sock)
    return 0


if __name__ == "__main__":
    sys.exit(main())
