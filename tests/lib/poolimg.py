#!/usr/bin/env python3
"""Looks at (and, for tests, replays) the image store of a cxlcr pool.

    poolimg.py count POOL [SERVICE]   live image-set regions (kind 2), of
                                      SERVICE only if given ("SERVICE.EPOCH")
    poolimg.py list POOL              one line per live region: slot, kind,
                                      generation, offset, size, name
    poolimg.py keep POOL SERVICE FILE saves SERVICE's newest image set (its
                                      region table entry and its bytes) in FILE
    poolimg.py kind POOL KIND         how many live regions of kind KIND (3:
                                      snapshots, 5: fork children, ...)
    poolimg.py corrupt-snapshot POOL  flips a byte in the header of the newest
                                      snapshot (its checksum no longer holds)
    poolimg.py data-bytes POOL        bytes of the pool file that hold data
                                      (SEEK_DATA): written pages, not holes nor
                                      blocks only reserved (fallocate)
    poolimg.py fake-region POOL KIND NAME OFFSET SIZE
                                      writes a live region entry into a free
                                      slot, whatever it overlaps (to show that
                                      `cxlcr pool check` finds what is wrong)
    poolimg.py bump-epoch POOL NAME   bumps the owner epoch of the live region
                                      NAME, as a take-over by someone else would
    poolimg.py flip-pod-key POOL      flips a bit of the pod's key (in the host
                                      table's region, pool_format.h): its
                                      checksum no longer holds; twice: as it was
    poolimg.py tombstone POOL ENTRY INCARNATION REASON [HOW]
                                      writes into host table entry ENTRY the
                                      tombstone the kernel module writes as
                                      its host panics (REASON 1) or oopses
                                      (2), with a CRC-32C of this script's
                                      own; HOW: "ok" (default), "bad-crc"
                                      (one bit of it flipped), "index=N" (made
                                      for entry N); INCARNATION "current": the
                                      entry's own
    poolimg.py half-claim POOL NAME   claims a free borrow slot of the published
                                      catalog entry NAME without taking its
                                      reference, as a borrower that died
                                      between the two steps leaves it
    poolimg.py put POOL FILE          writes a kept image set back into the
                                      pool, as it was: only into its own table
                                      slot if that slot is free, and only if
                                      its bytes overlap no live region

`keep` and `put` let a test hold on to an image set that cxlcr has since
reclaimed (a restore frees the checkpoint it used), to check that restoring
such an old checkpoint, after the service moved on, is refused. They edit
the pool without its lock: only for a pool that nothing else uses meanwhile.

The layout is common/pool_format.h's: a table of 1024 entries of 256 bytes
at 4 KiB; an entry starts with state u32, kind u32, generation u64, offset
u64, size u64, name char[64]. Python standard library only.
"""
import json
import os
import struct
import sys

TABLE = 4096
ENTRY = 256
ENTRIES = 1024
LIVE = 1
IMAGES = 2
SNAPSHOT = 3
CATALOG_HEADER = 4096      # the catalog region: CXLCR_CATALOG_HEADER_SIZE, then
CATALOG_ENTRIES = 480      # its entries (struct cxlcr_catalog_entry), each with
CATALOG_ENTRY = 8448       # its borrow slots at 256 (struct cxlcr_catalog_borrow:
CATALOG_BORROWS_AT = 256   # token u64, filled u64, ...)
CATALOG_BORROW = 128
CATALOG_BORROWERS = 64
OWNER_EPOCH = 104   # offsets in an entry (struct cxlcr_region)
SEQ = 252


def entries(f):
    f.seek(TABLE)
    table = f.read(ENTRY * ENTRIES)
    for i in range(ENTRIES):
        raw = table[i * ENTRY:(i + 1) * ENTRY]
        state, kind, gen, off, size = struct.unpack_from("<IIQQQ", raw)
        name = raw[32:96].split(b"\0", 1)[0].decode(errors="replace")
        yield i, raw, state, kind, gen, off, size, name


def crc32c(data):
    """The standard CRC-32C (Castagnoli), bit by bit: a reading of the
    format independent of common/checksum.c and of the kernel's."""
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


HOSTS_HEADER = 256        # CXLCR_HOSTS_HEADER_SIZE
HOST_ENTRY = 256          # sizeof(struct cxlcr_host_entry)
HOST_INCARNATION = 64 + 64 + 48 + 4 + 4   # id.incarnation in an entry
TOMBSTONE = 216           # offsetof(struct cxlcr_host_entry, tombstone)
TOMBSTONE_MAGIC = 0x42544d4f544c4358


def write_tombstone(f, entry, incarnation, reason, how):
    for i, raw, state, kind, gen, off, size, name in entries(f):
        if state == LIVE and name == "hosts":
            at = off + HOSTS_HEADER + entry * HOST_ENTRY
            if incarnation == "current":
                f.seek(at + HOST_INCARNATION)
                incarnation = struct.unpack("<Q", f.read(8))[0]
            index = int(how[6:]) if how.startswith("index=") else entry
            body = struct.pack("<QQQII", TOMBSTONE_MAGIC, int(incarnation), 1, reason, index)
            crc = crc32c(body) ^ (1 if how == "bad-crc" else 0)
            f.seek(at + TOMBSTONE)
            f.write(body + struct.pack("<II", crc, 0))
            return 0
    print("no host table", file=sys.stderr)
    return 1


def names_service(name, service):
    head, dot, epoch = name.rpartition(".")
    return dot and head == service and epoch.isdigit()


def count(pool, service=None):
    with open(pool, "rb") as f:
        return sum(1 for _, _, state, kind, _, _, _, name in entries(f)
                   if state == LIVE and kind == IMAGES and (service is None or names_service(name, service)))


def main(argv):
    if len(argv) >= 2 and argv[0] == "count":
        print(count(argv[1], argv[2] if len(argv) > 2 else None))
        return 0
    if len(argv) == 2 and argv[0] == "list":
        with open(argv[1], "rb") as f:
            for i, _, state, kind, gen, off, size, name in entries(f):
                if state == LIVE:
                    print(i, kind, gen, off, size, name)
        return 0
    if len(argv) == 3 and argv[0] == "kind":
        with open(argv[1], "rb") as f:
            print(sum(1 for e in entries(f) if e[2] == LIVE and e[3] == int(argv[2])))
        return 0
    if len(argv) == 2 and argv[0] == "corrupt-snapshot":
        with open(argv[1], "r+b") as f:
            snaps = [e for e in entries(f) if e[2] == LIVE and e[3] == SNAPSHOT]
            if not snaps:
                sys.exit("poolimg: no snapshot in %s" % argv[1])
            newest = max(snaps, key=lambda e: e[4])
            at = newest[5] + 40  # inside the header's name, covered by its checksum
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0x5a]))
        print(newest[7])
        return 0
    if len(argv) == 4 and argv[0] == "keep":
        pool, service, out = argv[1:]
        with open(pool, "rb") as f:
            best = None
            for e in entries(f):
                i, raw, state, kind, gen, off, size, name = e
                if state == LIVE and kind == IMAGES and names_service(name, service):
                    if best is None or int(name.rpartition(".")[2]) > int(best[7].rpartition(".")[2]):
                        best = e
            if best is None:
                sys.exit("poolimg: no image set of %s in %s" % (service, pool))
            i, raw, _, _, gen, off, size, name = best
            f.seek(off)
            data = f.read(size)
        with open(out, "wb") as o:
            o.write(json.dumps({"slot": i, "name": name, "generation": gen, "offset": off,
                                "size": size}).encode() + b"\n")
            o.write(raw)
            o.write(data)
        print(name)
        return 0
    if len(argv) == 6 and argv[0] == "fake-region":
        pool, kind, name, off, size = argv[1], int(argv[2]), argv[3], int(argv[4]), int(argv[5])
        with open(pool, "r+b") as f:
            free = [e for e in entries(f) if e[2] == 0]
            gen = max(e[4] for e in entries(f)) + 1000
            raw = bytearray(ENTRY)
            struct.pack_into("<IIQQQ", raw, 0, LIVE, kind, gen, off, size)
            raw[32:32 + len(name)] = name.encode()
            f.seek(TABLE + ENTRY * free[0][0])
            f.write(raw)
        print(free[0][0])
        return 0
    if len(argv) == 3 and argv[0] == "half-claim":
        pool, want = argv[1], argv[2]
        with open(pool, "r+b") as f:
            cat = [e for e in entries(f) if e[2] == LIVE and e[7] == "catalog"]
            if not cat:
                sys.exit("poolimg: no catalog in %s" % pool)
            base = cat[0][5]
            for i in range(CATALOG_ENTRIES):
                at = base + CATALOG_HEADER + i * CATALOG_ENTRY
                f.seek(at)
                head = f.read(CATALOG_BORROWS_AT)
                status, holders = struct.unpack_from("<QQ", head)
                name = head[64:128].split(b"\0", 1)[0].decode(errors="replace")
                if status & 0xff != 1 or name != want:   # CXLCR_CATALOG_PUBLISHED
                    continue
                for slot in range(CATALOG_BORROWERS):
                    f.seek(at + CATALOG_BORROWS_AT + slot * CATALOG_BORROW)
                    if struct.unpack("<Q", f.read(8))[0] == 0 and not holders >> slot & 1:
                        f.seek(at + CATALOG_BORROWS_AT + slot * CATALOG_BORROW)
                        f.write(struct.pack("<QQ", 0x1234567, 0))   # token, filled
                        print(slot)
                        return 0
                sys.exit("poolimg: no free borrow slot in '%s'" % want)
        sys.exit("poolimg: no published snapshot '%s' in %s" % (want, pool))
    if len(argv) == 2 and argv[0] == "data-bytes":
        fd = os.open(argv[1], os.O_RDONLY)
        end, at, total = os.fstat(fd).st_size, 0, 0
        try:
            while at < end:
                try:
                    lo = os.lseek(fd, at, os.SEEK_DATA)
                except OSError:
                    break
                at = os.lseek(fd, lo, os.SEEK_HOLE)
                total += at - lo
        finally:
            os.close(fd)
        print(total)
        return 0
    if len(argv) == 2 and argv[0] == "flip-pod-key":
        with open(argv[1], "r+b") as f:
            for i, raw, state, kind, gen, off, size, name in entries(f):
                if state == LIVE and name == "hosts":
                    at = off + 64 + 16   # CXLCR_HOSTS_KEY_OFFSET, then magic, version, checksum
                    f.seek(at)
                    b = f.read(1)
                    f.seek(at)
                    f.write(bytes([b[0] ^ 1]))
                    return 0
        print("no host table", file=sys.stderr)
        return 1
    if len(argv) in (5, 6) and argv[0] == "tombstone":
        with open(argv[1], "r+b") as f:
            return write_tombstone(f, int(argv[2]), argv[3], int(argv[4]), argv[5] if len(argv) == 6 else "ok")
    if len(argv) == 3 and argv[0] == "bump-epoch":
        with open(argv[1], "r+b") as f:
            for i, raw, state, kind, gen, off, size, name in entries(f):
                if state == LIVE and name == argv[2]:
                    epoch, = struct.unpack_from("<Q", raw, OWNER_EPOCH)
                    seq, = struct.unpack_from("<I", raw, SEQ)
                    at = TABLE + ENTRY * i
                    f.seek(at + SEQ)
                    f.write(struct.pack("<I", (seq | 1)))
                    f.flush()
                    f.seek(at + OWNER_EPOCH)
                    f.write(struct.pack("<Q", epoch + 1))
                    f.flush()
                    f.seek(at + SEQ)
                    f.write(struct.pack("<I", (seq | 1) + 1))
                    print(epoch + 1)
                    return 0
        sys.exit("poolimg: no live region %s in %s" % (argv[2], argv[1]))
    if len(argv) == 3 and argv[0] == "put":
        pool, kept = argv[1:]
        with open(kept, "rb") as o:
            meta = json.loads(o.readline())
            raw = o.read(ENTRY)
            data = o.read()
        lo, hi = meta["offset"], meta["offset"] + meta["size"]
        with open(pool, "r+b") as f:
            for i, _, state, kind, gen, off, size, name in entries(f):
                if state != LIVE:
                    continue
                if i == meta["slot"]:
                    sys.exit("poolimg: table slot %d is taken (%s)" % (i, name))
                if off < hi and lo < off + size:
                    sys.exit("poolimg: the bytes of %s are now used by %s" % (meta["name"], name))
            # The contents first, the entry (state LIVE) last.
            f.seek(lo)
            f.write(data)
            f.flush()
            f.seek(TABLE + ENTRY * meta["slot"])
            f.write(raw)
        print(meta["name"])
        return 0
    print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
