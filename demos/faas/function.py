#!/usr/bin/env python3
"""The FaaS demo's function: a warm state in the heap, invocations over TCP.

    function.py --port P [--size 256M] [--seed 1]

At start it builds a deterministic "catalogue" of about --size bytes of
Python objects: records (name, text of six words, a vector of 8 floats) and
an inverted index word -> record numbers. That is the function's warm-up;
only then does it listen. With PYTHONMALLOC=malloc every object goes
through malloc, so under `cxlcr run` the whole warm state is in the arena,
and a fork child gets it from the pool instead of building it again.

Protocol, one line each way per request, any number per connection:
    INVOKE WORD   ->  OK n=<records with WORD> top=<3 best names> sum=<score sum>
    STATS         ->  OK records=<N> words=<V> build_s=<seconds> pid=<pid>
    PING          ->  PONG
The answer to INVOKE depends only on the catalogue and WORD: the same
--size and --seed give the same answers in any process.

Python standard library only.
"""
import argparse
import gc
import os
import random
import signal
import socketserver
import sys
import time
import zlib

VOCAB = 4096          # distinct words
WORDS_PER_RECORD = 6
DIM = 8               # floats per vector
# Heap bytes per record (record tuple, name, text, vector, floats, its index
# entries), measured as RSS growth with PYTHONMALLOC=malloc on CPython 3.11:
# turns --size into a number of records.
BYTES_PER_RECORD = 776
SYLLABLES = ["ka", "lo", "mi", "re", "su", "ta", "ne", "po", "vi", "da", "ru", "sho",
             "ze", "ba", "qui", "fe"]


def parse_size(text):
    t = text.strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    return int(float(t[:-1] if mult > 1 else t) * mult)


def vocabulary():
    """VOCAB pronounceable words: three syllables each, all distinct."""
    n = len(SYLLABLES)
    return [SYLLABLES[i % n] + SYLLABLES[i // n % n] + SYLLABLES[i // (n * n) % n]
            for i in range(VOCAB)]


def build(size, seed):
    """The catalogue: (records, index). records[i] = (name, text, vector)."""
    rng = random.Random(seed)
    words = vocabulary()
    count = max(1000, size // BYTES_PER_RECORD)
    records = []
    index = {w: [] for w in words}
    for i in range(count):
        picked = [words[rng.randrange(VOCAB)] for _ in range(WORDS_PER_RECORD)]
        vec = tuple(rng.uniform(-1.0, 1.0) for _ in range(DIM))
        records.append(("item-%d" % i, " ".join(picked), vec))
        for w in set(picked):
            index[w].append(i)
    return records, index


def query_vector(word):
    """A vector derived from the word alone (crc32, not hash(): that one is
    salted per process)."""
    rng = random.Random(zlib.crc32(word.encode()))
    return [rng.uniform(-1.0, 1.0) for _ in range(DIM)]


def invoke(records, index, word):
    q = query_vector(word)
    scored = []
    for r in index.get(word, ()):
        name, _, vec = records[r]
        scored.append((sum(a * b for a, b in zip(vec, q)), name))
    scored.sort(reverse=True)
    top = ",".join(name for _, name in scored[:3]) or "-"
    return "OK n=%d top=%s sum=%.9f" % (len(scored), top, sum(s for s, _ in scored))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--size", type=parse_size, default=parse_size("256M"))
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    # With Python's own allocator (pymalloc) small objects live in arenas it
    # mmaps itself, outside the cxlcr arena: the warm state would not be in
    # the pool, and a fork child would not have it.
    if os.environ.get("PYTHONMALLOC") != "malloc":
        sys.exit("function: run me with PYTHONMALLOC=malloc, so that my heap is in the cxlcr arena")

    # Under `cxlcr run --host` this is pid 1 of its PID namespace, for which
    # SIGTERM does nothing unless handled: `cxlcr stop` would wait for its
    # SIGKILL.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    t0 = time.monotonic()
    records, index = build(a.size, a.seed)
    build_s = time.monotonic() - t0
    # The catalogue never changes now. gc.freeze() moves it out of the
    # collector's sight: a collection would otherwise write into the header
    # of every object, and a fork child would copy its whole heap.
    gc.collect()
    gc.freeze()
    print("function: %d records, %d words built in %.2f s; listening on port %d"
          % (len(records), len(index), build_s, a.port), flush=True)

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            for line in self.rfile:
                words = line.decode(errors="replace").split()
                if len(words) == 2 and words[0] == "INVOKE":
                    out = invoke(records, index, words[1])
                elif words == ["STATS"]:
                    out = "OK records=%d words=%d build_s=%.3f pid=%d" % (
                        len(records), len(index), build_s, os.getpid())
                elif words == ["PING"]:
                    out = "PONG"
                else:
                    out = "ERR unknown request"
                self.wfile.write(out.encode() + b"\n")
                self.wfile.flush()

    class Server(socketserver.ThreadingTCPServer):
        allow_reuse_address = True
        daemon_threads = True

    with Server(("0.0.0.0", a.port), Handler) as srv:
        srv.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
