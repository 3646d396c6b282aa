#!/usr/bin/env python3
"""Reads an arena header (common/pool_format.h, struct cxlcr_arena_header):
in the pool, or as a process sees it at its address.

    arenahdr.py address POOL ARENA   the address where ARENA's owner maps its
                                     header (heap_address - 2 MiB)
    arenahdr.py read PID ADDRESS     the header at ADDRESS in process PID
                                     (/proc/PID/mem), as one line of JSON
    arenahdr.py maps PID ADDRESS POOL
                                     what process PID maps at ADDRESS: the
                                     kind and name of the pool region, or
                                     "anon", or "other"
    arenahdr.py punches POOL ARENA   the arena's punch counters and log, as
                                     JSON: begun, done, and how many of the
                                     last min(begun, 256) punches the log
                                     holds with their own seq ("logged")

Python standard library only.
"""
import json
import os
import struct
import sys

TABLE = 4096
ENTRY = 256
ENTRIES = 1024
LIVE = 1
ARENA = 1
HEAP_OFFSET = 2 << 20
MAGIC = 0x414e455241434c58
COMMAND = 8320       # 2 cache lines, then 128 stat slots of 64 bytes
COMMAND_MAX = 1024
SIZE = 11432
PUNCHES = 11440      # punches_begun, punches_done (u64 each)
PUNCH_LOG = 11552    # 64 entries of {seq, lo, hi} (u64 each)
PUNCH_LOG_LEN = 256


def region_at(pool, offset):
    with open(pool, "rb") as f:
        f.seek(TABLE)
        table = f.read(ENTRY * ENTRIES)
    for i in range(ENTRIES):
        raw = table[i * ENTRY:(i + 1) * ENTRY]
        state, kind, _, off, size = struct.unpack_from("<IIQQQ", raw)
        if state == LIVE and off <= offset < off + size:
            return "%d %s" % (kind, raw[32:96].split(b"\0", 1)[0].decode())
    return "none"


def mapping(pid, at, pool):
    pool_ino = os.stat(pool).st_ino
    with open("/proc/%s/maps" % pid) as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= at < hi:
                if len(parts) < 6 and parts[4] == "0":
                    return "anon"
                if int(parts[4]) != pool_ino:
                    return "other"
                return region_at(pool, int(parts[2], 16) + at - lo)
    return "unmapped"


def region_offset(pool, arena):
    with open(pool, "rb") as f:
        f.seek(TABLE)
        table = f.read(ENTRY * ENTRIES)
    for i in range(ENTRIES):
        raw = table[i * ENTRY:(i + 1) * ENTRY]
        state, kind, _, off = struct.unpack_from("<IIQQ", raw)
        if state == LIVE and kind == ARENA and raw[32:96].split(b"\0", 1)[0].decode() == arena:
            return off
    sys.exit("arenahdr: no arena %s in %s" % (arena, pool))


def fields(raw):
    magic, = struct.unpack_from("<Q", raw, 0)
    heap_address, heap_size = struct.unpack_from("<QQ", raw, 40)
    shed_request, shed_done = struct.unpack_from("<II", raw, 96)
    extent_count, doorbell = struct.unpack_from("<II", raw, COMMAND + COMMAND_MAX + 8)
    command = raw[COMMAND:COMMAND + COMMAND_MAX].split(b"\0", 1)[0].decode(errors="replace")
    return {"magic_ok": magic == MAGIC, "heap_address": heap_address, "heap_size": heap_size,
            "shed_request": shed_request, "shed_done": shed_done, "extent_count": extent_count,
            "doorbell": doorbell, "command": command}


def main(argv):
    if len(argv) == 3 and argv[0] == "address":
        off = region_offset(argv[1], argv[2])
        with open(argv[1], "rb") as f:
            f.seek(off)
            h = fields(f.read(SIZE))
        if not h["magic_ok"]:
            sys.exit("arenahdr: arena %s has no header" % argv[2])
        print(h["heap_address"] - HEAP_OFFSET)
        return 0
    if len(argv) == 3 and argv[0] == "read":
        with open("/proc/%s/mem" % argv[1], "rb") as f:
            f.seek(int(argv[2]))
            print(json.dumps(fields(f.read(SIZE))))
        return 0
    if len(argv) == 3 and argv[0] == "punches":
        off = region_offset(argv[1], argv[2])
        with open(argv[1], "rb") as f:
            f.seek(off)
            raw = f.read(PUNCH_LOG + 24 * PUNCH_LOG_LEN)
        begun, done = struct.unpack_from("<QQ", raw, PUNCHES)
        logged = 0
        for n in range(max(0, begun - PUNCH_LOG_LEN), begun):
            seq, lo, hi = struct.unpack_from("<QQQ", raw, PUNCH_LOG + 24 * (n % PUNCH_LOG_LEN))
            logged += seq == n + 1 and lo < hi
        print(json.dumps({"begun": begun, "done": done, "logged": logged}))
        return 0
    if len(argv) == 4 and argv[0] == "maps":
        print(mapping(argv[1], int(argv[2]), argv[3]))
        return 0
    print(__doc__.strip().split("\n\n")[0], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
