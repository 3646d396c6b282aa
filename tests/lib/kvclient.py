#!/usr/bin/env python3
"""Fill a Redis or Memcached server with deterministic data, and verify it.

Every value is derived from its key and a seed, so `verify` needs no stored
copy of what `fill` wrote: it reads back every key and recomputes what the
key must hold.

    kvclient.py fill   --port 6379 --count 200000 --size 1000 [--proto redis]
                       [--types strings,hashes,lists,sets,zsets] [--seed 1]
    kvclient.py verify (the same options) [--expect present|absent|any]
    kvclient.py wait   --port 6379 [--proto redis|memcached|tcp] [--pid PID]

`wait` polls until the server answers (Redis PING, Memcached version, or a
bare TCP connect), at most --tries attempts (default 600) a poll interval
apart, and fails early if process --pid has gone.

Keys are PREFIX:TYPE:N for N in [start, start+count); key N has type
types[N % len(types)]. A string key holds `size` bytes. A hash, list, set or
sorted set holds `elems` elements of about size/elems bytes each (so about
`size` bytes per key whatever the type):
    hash   field fJ -> value of element J
    list   element J at index J
    set    member J
    zset   member J with score J
Memcached keys are all strings (text protocol, one `set` per key).

--size-dist chooses the size of string values (both protocols):
    fixed   every value is --size bytes (the default)
    small   10..99 bytes
    large   100..899 KiB (below Memcached's default 1 MiB item limit)
    mixed   16 B..512 KiB, log-uniform (every slab class gets some)
A value's size is derived from its key alone (a checksum of it), so fill and
verify agree without being told more. mean_value_size() gives the mean of a
distribution, to turn a byte budget into a key count.

Memcached only: --exptime N stores the items with that expiry (seconds, as
the `set` command takes it; 0 never expires). `verify --expect` says what a
key must be: present (with its value; the default), absent (a hit is wrong:
the item should have expired), or any (a hit must hold its value, a miss is
counted as missing but is not wrong). The summary counts the misses.

Requests are pipelined in batches (--batch commands, default 1000) with two
batches in flight, over --jobs connections in parallel processes. Python
standard library only. Usable as a module: fill(opts) and verify(opts) take
the parsed options (see make_parser) and return a Result.
"""
import argparse
import json
import math
import os
import random
import socket
import sys
import time
import zlib

TYPES = {  # --types name -> abbreviation in the key
    "strings": "str",
    "hashes": "hash",
    "lists": "list",
    "sets": "set",
    "zsets": "zset",
}
ALIASES = {"string": "strings", "hash": "hashes", "list": "lists", "set": "sets",
           "zset": "zsets", "sorted-sets": "zsets", "sortedsets": "zsets", "all": None}
MAX_SHOWN = 10         # mismatches listed by verify
BATCH_BYTES = 4 << 20  # at most this much value data in one batch
MC_KEYS_PER_GET = 50   # keys in one memcached multi-get

# --size-dist name -> (smallest, largest) value size; see value_size().
SIZE_DISTS = {
    "fixed": None,
    "small": (10, 99),
    "large": (100 << 10, (900 << 10) - 1),
    "mixed": (16, 512 << 10),
}

# Printable alphabet for values: 64 characters, so bytes.translate maps any
# random byte onto it.
_ALPHABET = (b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
_TABLE = bytes(_ALPHABET[i % 64] for i in range(256))


class KVError(Exception):
    """The server refused a command or the connection broke."""


class Values:
    """Deterministic values: key + '=' + a slice of a seeded random block,
    the slice's offset given by a checksum of the key."""

    def __init__(self, seed, size):
        self.seed = seed & 0xFFFFFFFF
        n = max(1 << 16, 2 * size + 64)
        self.block = random.Random(seed).randbytes(n).translate(_TABLE)

    def value(self, key, size):
        head = key + b"="
        if size <= len(head):
            return head[:size]
        body = size - len(head)
        off = zlib.crc32(key, self.seed) % (len(self.block) - body)
        return head + self.block[off:off + body]


def key_name(prefix, types, i):
    return b"%s:%s:%d" % (prefix, TYPES[types[i % len(types)]].encode(), i)


def value_size(opts, key):
    """Bytes of the string value of key: --size, or drawn from --size-dist
    by a checksum of the key (deterministic, independent of the seed)."""
    dist = getattr(opts, "size_dist", "fixed")
    if dist == "fixed":
        return opts.size
    lo, hi = SIZE_DISTS[dist]
    u = zlib.crc32(key, 0x51ce) / 4294967296.0  # uniform in [0, 1)
    if dist == "mixed":
        return min(hi, int(lo * (hi / lo) ** u))
    return lo + int(u * (hi - lo + 1))


def mean_value_size(dist, size=1000):
    """Mean string value size of a --size-dist (size: --size, for fixed)."""
    if dist == "fixed":
        return float(size)
    lo, hi = SIZE_DISTS[dist]
    if dist == "mixed":  # log-uniform
        return (hi - lo) / math.log(hi / lo)
    return (lo + hi) / 2.0


def max_value_size(opts):
    dist = getattr(opts, "size_dist", "fixed")
    return opts.size if dist == "fixed" else SIZE_DISTS[dist][1]


def elem_size(opts, key):
    """Bytes of one element of a compound key: big enough that every
    element is unique (it starts with key#J=)."""
    return max(opts.size // opts.elems, len(key) + 12)


def elements(opts, vals, key):
    es = elem_size(opts, key)
    return [vals.value(b"%s#%d" % (key, j), es) for j in range(opts.elems)]


# ---------------------------------------------------------------- Redis --

def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RedisError(object):
    __slots__ = ("msg",)

    def __init__(self, msg):
        self.msg = msg

    def __repr__(self):
        return "error reply '%s'" % self.msg


def read_resp(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise KVError("connection closed by the server")
    t = line[:1]
    if t == b"$":
        n = int(line[1:-2])
        if n < 0:
            return None
        data = f.read(n + 2)
        if len(data) != n + 2:
            raise KVError("connection closed by the server")
        return data[:-2]
    if t == b"+":
        return line[1:-2]
    if t == b":":
        return int(line[1:-2])
    if t == b"*":
        n = int(line[1:-2])
        if n < 0:
            return None
        return [read_resp(f) for _ in range(n)]
    if t == b"-":
        return RedisError(line[1:-2].decode(errors="replace"))
    raise KVError("protocol error: unexpected reply %r" % line[:80])


def redis_fill_cmds(opts, vals, i):
    """(request bytes, number of replies) that write key i."""
    key = key_name(opts.prefix, opts.types, i)
    t = opts.types[i % len(opts.types)]
    if t == "strings":
        return resp(b"SET", key, vals.value(key, value_size(opts, key))), 1
    el = elements(opts, vals, key)
    if t == "hashes":
        args = [b"HSET", key]
        for j, v in enumerate(el):
            args += [b"f%d" % j, v]
    elif t == "lists":
        args = [b"RPUSH", key] + el
    elif t == "sets":
        args = [b"SADD", key] + el
    else:
        args = [b"ZADD", key]
        for j, v in enumerate(el):
            args += [b"%d" % j, v]
    return resp(b"DEL", key) + resp(*args), 2


def redis_read_cmd(opts, i):
    key = key_name(opts.prefix, opts.types, i)
    t = opts.types[i % len(opts.types)]
    if t == "strings":
        return resp(b"GET", key)
    if t == "hashes":
        return resp(b"HGETALL", key)
    if t == "lists":
        return resp(b"LRANGE", key, b"0", b"-1")
    if t == "sets":
        return resp(b"SMEMBERS", key)
    return resp(b"ZRANGE", key, b"0", b"-1", b"WITHSCORES")


def describe(got, want):
    if got is None:
        return "missing"
    if isinstance(got, RedisError):
        return repr(got)
    if isinstance(got, bytes) and isinstance(want, bytes):
        if len(got) != len(want):
            return "%d bytes, want %d" % (len(got), len(want))
        at = next(k for k in range(len(got)) if got[k] != want[k])
        return "differs from byte %d: %r, want %r" % (at, got[at:at + 16], want[at:at + 16])
    return "got %.60r, want %.60r" % (got, want)


def redis_check(opts, vals, i, got):
    """None if key i holds what fill wrote, else what is wrong."""
    key = key_name(opts.prefix, opts.types, i)
    t = opts.types[i % len(opts.types)]
    if isinstance(got, RedisError):
        return repr(got)
    if t == "strings":
        want = vals.value(key, value_size(opts, key))
        return None if got == want else describe(got, want)
    if got is None or got == []:
        return "missing"
    el = elements(opts, vals, key)
    if t == "hashes":
        want = {b"f%d" % j: v for j, v in enumerate(el)}
        have = dict(zip(got[0::2], got[1::2])) if len(got) % 2 == 0 else None
        if have == want:
            return None
        if have is None or set(have) != set(want):
            return "fields %s, want f0..f%d" % (sorted(have or [])[:5], len(el) - 1)
        f = next(k for k in sorted(want) if have[k] != want[k])
        return "field %s: %s" % (f.decode(), describe(have[f], want[f]))
    if t == "lists":
        if got == el:
            return None
        if len(got) != len(el):
            return "%d elements, want %d" % (len(got), len(el))
        j = next(k for k in range(len(el)) if got[k] != el[k])
        return "element %d: %s" % (j, describe(got[j], el[j]))
    if t == "sets":
        if sorted(got) == sorted(el):
            return None
        extra, lost = set(got) - set(el), set(el) - set(got)
        return "%d members, want %d (%d unexpected, %d missing)" % (
            len(got), len(el), len(extra), len(lost))
    want = []
    for j, v in enumerate(el):
        want += [v, b"%d" % j]
    if got == want:
        return None
    return "sorted set of %d entries differs (want %d)" % (len(got) // 2, len(el))


# ------------------------------------------------------------ Memcached --

def mc_read_line(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise KVError("connection closed by the server")
    return line[:-2]


def mc_fill_cmd(opts, vals, i):
    key = key_name(opts.prefix, opts.types, i)
    v = vals.value(key, value_size(opts, key))
    return b"set %s 0 %d %d\r\n%s\r\n" % (key, opts.exptime, len(v), v)


def mc_read_get(f):
    """Reads one multi-get reply: {key: value}."""
    out = {}
    while True:
        line = mc_read_line(f)
        if line == b"END":
            return out
        parts = line.split()
        if len(parts) < 4 or parts[0] != b"VALUE":
            raise KVError("protocol error: unexpected reply %r" % line[:80])
        n = int(parts[3])
        data = f.read(n + 2)
        if len(data) != n + 2:
            raise KVError("connection closed by the server")
        out[parts[1]] = data[:-2]


# ------------------------------------------------------------- workers --

class Result:
    def __init__(self):
        self.keys = 0
        self.bytes = 0          # value bytes written or checked
        self.bad = 0
        self.missing = 0        # verify --expect absent|any: keys not found
        self.shown = []         # (key, problem), at most MAX_SHOWN

    def add(self, other):
        self.keys += other.keys
        self.bytes += other.bytes
        self.bad += other.bad
        self.missing += other.missing
        self.shown = (self.shown + other.shown)[:MAX_SHOWN]

    def mismatch(self, key, why):
        self.bad += 1
        if len(self.shown) < MAX_SHOWN:
            self.shown.append((key.decode(errors="replace"), why))


def connect(opts):
    s = socket.create_connection((opts.host, opts.port), timeout=opts.timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s, s.makefile("rb", buffering=1 << 20)


def batches(opts, lo, hi):
    size = mean_value_size(getattr(opts, "size_dist", "fixed"), opts.size)
    per = max(1, min(opts.batch, int(BATCH_BYTES // max(size, 1))))
    for b in range(lo, hi, per):
        yield range(b, min(b + per, hi))


def value_bytes(opts, i):
    key = key_name(opts.prefix, opts.types, i)
    if opts.types[i % len(opts.types)] == "strings":
        return value_size(opts, key)
    return elem_size(opts, key) * opts.elems


def run_pipelined(opts, lo, hi, make, collect):
    """Sends make(batch) -> (bytes, token) with two batches in flight;
    collect(f, token) reads one batch's replies."""
    sock, f = connect(opts)
    try:
        pending = []
        for rng in batches(opts, lo, hi):
            data, token = make(rng)
            sock.sendall(data)
            pending.append(token)
            if len(pending) > 1:
                collect(f, pending.pop(0))
        for token in pending:
            collect(f, token)
    finally:
        f.close()
        sock.close()


def work(opts, verb, lo, hi):
    vals = Values(opts.seed, max_value_size(opts))
    res = Result()
    redis = opts.proto == "redis"

    if verb == "fill":
        def make(rng):
            if redis:
                parts, n = [], 0
                for i in rng:
                    data, k = redis_fill_cmds(opts, vals, i)
                    parts.append(data)
                    n += k
                return b"".join(parts), (rng, n)
            return b"".join(mc_fill_cmd(opts, vals, i) for i in rng), (rng, len(rng))

        def collect(f, token):
            rng, n = token
            for _ in range(n):
                if redis:
                    r = read_resp(f)
                    if isinstance(r, RedisError):
                        raise KVError("fill: server refused a write: %s" % r.msg)
                else:
                    line = mc_read_line(f)
                    if line != b"STORED":
                        raise KVError("fill: server refused a write: %s" %
                                      line.decode(errors="replace"))
            for i in rng:
                res.keys += 1
                res.bytes += value_bytes(opts, i)
    else:
        def make(rng):
            if redis:
                return b"".join(redis_read_cmd(opts, i) for i in rng), rng
            keys = [key_name(opts.prefix, opts.types, i) for i in rng]
            cmds = [b"get " + b" ".join(keys[k:k + MC_KEYS_PER_GET]) + b"\r\n"
                    for k in range(0, len(keys), MC_KEYS_PER_GET)]
            return b"".join(cmds), rng

        def collect(f, rng):
            if redis:
                for i in rng:
                    why = redis_check(opts, vals, i, read_resp(f))
                    res.keys += 1
                    res.bytes += value_bytes(opts, i)
                    if why:
                        res.mismatch(key_name(opts.prefix, opts.types, i), why)
                return
            got = {}
            for _ in range(0, len(rng), MC_KEYS_PER_GET):
                got.update(mc_read_get(f))
            expect = getattr(opts, "expect", "present")
            for i in rng:
                key = key_name(opts.prefix, opts.types, i)
                have = got.get(key)
                res.keys += 1
                if have is None and expect != "present":
                    res.missing += 1
                    continue
                if expect == "absent":
                    res.mismatch(key, "present (%d bytes), should have expired" % len(have))
                    continue
                want = vals.value(key, value_size(opts, key))
                res.bytes += len(want)
                if have != want:
                    res.mismatch(key, describe(have, want))

    run_pipelined(opts, lo, hi, make, collect)
    return res


def run(opts, verb):
    """Runs verb over keys [start, start+count) on opts.jobs connections."""
    lo, hi = opts.start, opts.start + opts.count
    jobs = max(1, min(opts.jobs, opts.count))
    if jobs == 1:
        return work(opts, verb, lo, hi)
    bounds = [lo + (hi - lo) * k // jobs for k in range(jobs + 1)]
    children = []
    for k in range(jobs):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            code = 0
            try:
                res = work(opts, verb, bounds[k], bounds[k + 1])
                msg = {"keys": res.keys, "bytes": res.bytes, "bad": res.bad,
                       "missing": res.missing, "shown": res.shown}
            except Exception as e:  # reported by the parent
                msg = {"error": "%s: %s" % (type(e).__name__, e)}
                code = 1
            with os.fdopen(w, "w") as out:
                json.dump(msg, out)
            os._exit(code)
        os.close(w)
        children.append((pid, r))
    total, errors = Result(), []
    for pid, r in children:
        with os.fdopen(r) as inp:
            text = inp.read()
        os.waitpid(pid, 0)
        try:
            msg = json.loads(text)
        except ValueError:
            errors.append("worker %d died" % pid)
            continue
        if "error" in msg:
            errors.append(msg["error"])
            continue
        part = Result()
        part.keys, part.bytes, part.bad = msg["keys"], msg["bytes"], msg["bad"]
        part.missing = msg["missing"]
        part.shown = [tuple(x) for x in msg["shown"]]
        total.add(part)
    if errors:
        raise KVError(errors[0])
    return total


def fill(opts):
    return run(opts, "fill")


def pid_alive(pid):
    """False once pid has exited (a zombie counts as exited)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def answers(opts):
    """True if the server at opts.port answers its protocol's ping."""
    try:
        s = socket.create_connection((opts.host, opts.port), timeout=5)
    except OSError:
        return False
    try:
        if opts.proto == "tcp":
            return True
        f = s.makefile("rb")
        if opts.proto == "redis":
            s.sendall(resp(b"PING"))
            return f.readline() == b"+PONG\r\n"
        s.sendall(b"version\r\n")
        return f.readline().startswith(b"VERSION ")
    except OSError:
        return False
    finally:
        s.close()


def wait(opts):
    """Polls until the server answers: True, or False after opts.tries
    attempts or once opts.pid has exited."""
    for _ in range(opts.tries):
        if answers(opts):
            return True
        if opts.pid and not pid_alive(opts.pid):
            return False
        time.sleep(opts.interval)  # poll interval, bounded by --tries
    return False


def verify(opts):
    return run(opts, "verify")


# ------------------------------------------------------------------ CLI --

def parse_types(text):
    out = []
    for name in text.split(","):
        name = name.strip().lower()
        if not name:
            continue
        name = ALIASES.get(name, name)
        if name is None:
            out += [t for t in TYPES if t not in out]
            continue
        if name not in TYPES:
            raise argparse.ArgumentTypeError(
                "unknown type '%s' (one of %s)" % (name, ", ".join(TYPES)))
        if name not in out:
            out.append(name)
    if not out:
        raise argparse.ArgumentTypeError("no type given")
    return out


def parse_size(text):
    t = text.strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(t[-1:], 1)
    try:
        return int(float(t[:-1] if mult > 1 else t) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError("not a size: %s" % text)


def make_parser():
    p = argparse.ArgumentParser(
        description="Fill a Redis or Memcached server with deterministic data and verify it.")
    p.add_argument("verb", choices=["fill", "verify", "wait"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--proto", choices=["redis", "memcached", "tcp"], default="redis",
                   help="tcp: wait for a bare connect (wait only)")
    p.add_argument("--count", type=int, help="number of keys (fill, verify)")
    p.add_argument("--start", type=int, default=0, help="first key number")
    p.add_argument("--size", type=parse_size, default=1000,
                   help="value bytes per key (default 1000)")
    p.add_argument("--types", type=parse_types, default=["strings"],
                   help="comma-separated: strings,hashes,lists,sets,zsets or all "
                        "(Redis only; default strings)")
    p.add_argument("--size-dist", choices=list(SIZE_DISTS), default="fixed",
                   help="string value sizes: fixed (--size), small (10-99 B), "
                        "large (100-899 KiB), mixed (16 B-512 KiB); per key, from the key")
    p.add_argument("--exptime", type=int, default=0,
                   help="memcached: expiry of the items set, in seconds (default 0: never)")
    p.add_argument("--expect", choices=["present", "absent", "any"], default="present",
                   help="verify, memcached: keys must be present (default), absent "
                        "(expired), or either (a miss is counted, a wrong value is not allowed)")
    p.add_argument("--elems", type=int, default=8,
                   help="elements per hash, list, set or zset key (default 8)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--prefix", default="kv")
    p.add_argument("--batch", type=int, default=1000, help="commands per pipelined batch")
    p.add_argument("--jobs", type=int, default=1, help="parallel connections (processes)")
    p.add_argument("--timeout", type=float, default=60.0, help="socket timeout in seconds")
    p.add_argument("--pid", type=int, help="wait: give up once this process has exited")
    p.add_argument("--tries", type=int, default=600, help="wait: attempts (default 600)")
    p.add_argument("--interval", type=float, default=0.05,
                   help="wait: seconds between attempts (default 0.05)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    return p


def parse_args(argv=None):
    p = make_parser()
    opts = p.parse_args(argv)
    if opts.verb != "wait" and opts.count is None:
        p.error("%s needs --count" % opts.verb)
    if opts.verb != "wait" and opts.proto == "tcp":
        p.error("--proto tcp is for wait only")
    if opts.count is None:
        opts.count = 0
    if opts.proto == "memcached" and opts.types != ["strings"]:
        p.error("--types: memcached holds strings only")
    if opts.proto != "memcached" and (opts.exptime or opts.expect != "present"):
        p.error("--exptime and --expect are for memcached only")
    if opts.exptime < 0:
        p.error("--exptime must not be negative")
    if opts.count < 0 or opts.start < 0 or opts.size < 1 or opts.elems < 1 or opts.batch < 1:
        p.error("--count, --start, --size, --elems and --batch must be positive")
    opts.prefix = opts.prefix.encode()
    return opts


def main(argv=None):
    opts = parse_args(argv)
    if opts.verb == "wait":
        if wait(opts):
            return 0
        print("kvclient wait: %s on port %d %s" % (
            opts.proto, opts.port, "exited (pid %d)" % opts.pid
            if opts.pid and not pid_alive(opts.pid) else
            "did not answer after %d attempts" % opts.tries), file=sys.stderr)
        return 1
    t0, started_at = time.monotonic(), time.time()
    try:
        res = run(opts, opts.verb)
    except (KVError, OSError) as e:
        print("kvclient %s: %s" % (opts.verb, e), file=sys.stderr)
        return 2
    secs, finished_at = time.monotonic() - t0, time.time()
    if res.bad:
        for key, why in res.shown:
            print("MISMATCH %s: %s" % (key, why), file=sys.stderr)
        print("kvclient verify: %d of %d keys wrong (first %d listed)" %
              (res.bad, res.keys, len(res.shown)), file=sys.stderr)
    if opts.json:
        # started_at/finished_at: wall clock (epoch seconds), e.g. to know
        # when items written with --exptime must have expired.
        print(json.dumps({"verb": opts.verb, "proto": opts.proto, "keys": res.keys,
                          "value_bytes": res.bytes, "wrong": res.bad,
                          "missing": res.missing, "seconds": round(secs, 3),
                          "started_at": round(started_at, 3),
                          "finished_at": round(finished_at, 3)}))
    elif not opts.quiet or res.bad:
        if res.bad:
            outcome = "%d wrong" % res.bad
        elif opts.verb != "verify":
            outcome = "written"
        elif opts.expect == "absent":
            outcome = "all absent"
        else:
            outcome = "all correct"
        if opts.verb == "verify" and opts.expect == "any":
            outcome += ", %d missing" % res.missing
        print("kvclient %s: %d keys, %.1f MiB of values, %s, %.1f s (%s port %d)" % (
            opts.verb, res.keys, res.bytes / (1 << 20), outcome, secs, opts.proto, opts.port))
    return 1 if res.bad else 0


if __name__ == "__main__":
    sys.exit(main())
