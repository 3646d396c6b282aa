#!/usr/bin/env python3
"""A tiny lookup service for tests: a dict of ~100 MB built at start,
answering lookups over TCP (loopback). Standard library only.

    dictserver.py serve --port P [--entries N] [--size B] [--seed S]
    dictserver.py query --port P [--entries N] [--size B] [--seed S] [--step K]

The dict maps "k<i>" to the bytes kvclient.Values(seed, size) derives from
that key, for i in [0, entries). Protocol, one line per request:
    GET <key>     ->  VALUE <len>\\n<bytes>\\n   or   NONE\\n
    SUM           ->  SUM <entries> <crc32 of all values in key order>\\n
    PID           ->  PID <pid>\\n
`query` asks for every step-th key and a few absent ones, asks for SUM, and
checks every answer against what it computes itself; exit 1 on a wrong one.
"""
import argparse
import os
import socket
import socketserver
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kvclient import Values  # noqa: E402


def build(opts):
    vals = Values(opts.seed, opts.size)
    return {"k%d" % i: vals.value(b"k%d" % i, opts.size) for i in range(opts.entries)}


def checksum(table, entries):
    crc = 0
    for i in range(entries):
        crc = zlib.crc32(table["k%d" % i], crc)
    return crc


def serve(opts):
    table = build(opts)
    total = checksum(table, opts.entries)

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            for line in self.rfile:
                words = line.decode(errors="replace").split()
                if len(words) == 2 and words[0] == "GET":
                    v = table.get(words[1])
                    out = b"NONE\n" if v is None else b"VALUE %d\n%s\n" % (len(v), v)
                elif words == ["SUM"]:
                    out = b"SUM %d %d\n" % (len(table), total)
                elif words == ["PID"]:
                    out = b"PID %d\n" % os.getpid()
                else:
                    out = b"ERROR\n"
                self.wfile.write(out)
                self.wfile.flush()

    class Server(socketserver.TCPServer):
        allow_reuse_address = True

    with Server(("127.0.0.1", opts.port), Handler) as srv:
        print("dictserver: %d entries of %d B, listening on 127.0.0.1:%d"
              % (len(table), opts.size, opts.port), flush=True)
        srv.serve_forever()


def query(opts):
    vals = Values(opts.seed, opts.size)
    s = socket.create_connection(("127.0.0.1", opts.port), timeout=60)
    f = s.makefile("rb")
    wrong, asked = [], 0

    def ask(line):
        s.sendall(line.encode() + b"\n")
        head = f.readline()
        if head.startswith(b"VALUE "):
            n = int(head.split()[1])
            data = f.read(n + 1)
            return data[:-1]
        return head.rstrip(b"\n")

    for i in list(range(0, opts.entries, opts.step)) + [opts.entries - 1]:
        key = "k%d" % i
        want = vals.value(key.encode(), opts.size)
        got = ask("GET " + key)
        asked += 1
        if got != want:
            wrong.append("GET %s: %.40r, want %.40r" % (key, got, want))
    for key in ("k%d" % opts.entries, "k-1", "nosuch"):
        got = ask("GET " + key)
        asked += 1
        if got != b"NONE":
            wrong.append("GET %s: %.40r, want NONE" % (key, got))
    crc = 0
    for i in range(opts.entries):
        crc = zlib.crc32(vals.value(b"k%d" % i, opts.size), crc)
    want = b"SUM %d %d" % (opts.entries, crc)
    got = ask("SUM")
    asked += 1
    if got != want:
        wrong.append("SUM: %r, want %r" % (got, want))
    s.close()
    for w in wrong[:10]:
        print("MISMATCH " + w, file=sys.stderr)
    print("dictserver query: %d requests, %d wrong" % (asked, len(wrong)))
    return 1 if wrong else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("verb", choices=["serve", "query"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--entries", type=int, default=350000)
    p.add_argument("--size", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--step", type=int, default=101, help="query: every step-th key")
    opts = p.parse_args()
    if opts.verb == "serve":
        serve(opts)
        return 0
    return query(opts)


if __name__ == "__main__":
    sys.exit(main())
