#!/usr/bin/env python3
"""The FaaS demo's client side (demos/faas/function.py's protocol).

    client.py now                          CLOCK_MONOTONIC in ns (the clock
                                           faas-scale.c times forks with)
    client.py wait --host H --port P --since NS [--timeout S] [--pid PID]
                                           polls with an INVOKE until the
                                           function answers; prints the ms
                                           from NS to that first answer
    client.py invoke --host H --port P [--count N]
                                           N invocations (a fixed list of
                                           words, some unknown), one answer
                                           per line on stdout

Python standard library only.
"""
import argparse
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from function import vocabulary  # noqa: E402

PROBE = "kalomi"   # the word faas-scale's probe invokes, too


def ask(f, sock, line):
    sock.sendall(line.encode() + b"\n")
    answer = f.readline()
    if not answer.endswith(b"\n"):
        raise OSError("connection closed")
    return answer.decode().rstrip("\n")


def words(count):
    """count words: the probe's first (its answer is faas-scale's first one),
    then every 7th of the vocabulary, every 10th one unknown."""
    vocab = vocabulary()
    return [PROBE] + ["nosuch%d" % i if i % 10 == 9 else vocab[i * 7 % len(vocab)]
                      for i in range(1, count)]


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def cmd_wait(a):
    deadline = time.monotonic() + a.timeout
    while True:
        try:
            with socket.create_connection((a.host, a.port), timeout=1) as s:
                answer = ask(s.makefile("rb"), s, "INVOKE " + PROBE)
                if answer.startswith("OK "):
                    print("%.1f" % ((time.monotonic_ns() - a.since) / 1e6))
                    return 0
        except OSError:
            pass
        if a.pid and not alive(a.pid):
            print("client.py: process %d has exited" % a.pid, file=sys.stderr)
            return 1
        if time.monotonic() > deadline:
            print("client.py: no answer from %s:%d within %g s" % (a.host, a.port, a.timeout),
                  file=sys.stderr)
            return 1
        time.sleep(0.005)


def cmd_invoke(a):
    with socket.create_connection((a.host, a.port), timeout=30) as s:
        f = s.makefile("rb")
        for w in words(a.count):
            print("%s %s" % (w, ask(f, s, "INVOKE " + w)))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    sub.add_parser("now")
    s = sub.add_parser("wait")
    s.add_argument("--host", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--since", type=int, required=True)
    s.add_argument("--timeout", type=float, default=300)
    s.add_argument("--pid", type=int)
    s = sub.add_parser("invoke")
    s.add_argument("--host", required=True)
    s.add_argument("--port", type=int, required=True)
    s.add_argument("--count", type=int, default=200)
    a = p.parse_args()
    if a.verb == "now":
        print(time.monotonic_ns())
        return 0
    return {"wait": cmd_wait, "invoke": cmd_invoke}[a.verb](a)


if __name__ == "__main__":
    sys.exit(main())
