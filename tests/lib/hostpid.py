#!/usr/bin/env python3
"""Processes of the emulated pod's hosts, as this machine sees them.

Each emulated host has a pid namespace of its own (emulation/hostpid.h): a
pid that a host says (`cxlcr status`'s pid, a lease holder's, CRIU's in the
hook's files) is that host's own. The tests run on this machine, which sees
every process of every host under another pid; a process is host hI's when
it lives in hI's cgroup (<cgroup2>/cxlcr/podN/hI, emulation/hostgroup.h:
everything the host runs stays there), and its pid there is the second of
its NSpid (the first is this machine's).

    hostpid.py machine HOST PID   this machine's pid of HOST's process PID
                                  (exit 1 if HOST has none)
    hostpid.py where PID          "HOST PID" of this machine's process PID
                                  ("machine PID" outside every host)
    hostpid.py mappers            "HOST:PID" of every process that maps the
                                  pool ($CXLCR_POOL), but trackers and
                                  daemons (see pool_mappers in common.sh),
                                  ascending, each followed by a space

The pod is the one of $CXLCR_POOL (/run/cxlcr/podN/pool names it).
"""
import os
import sys


def pod_index():
    pool = os.path.realpath(os.environ["CXLCR_POOL"])
    for d in os.listdir("/run/cxlcr"):
        try:
            with open("/run/cxlcr/%s/pool" % d) as f:
                if f.read().strip() == pool and d.startswith("pod"):
                    return int(d[3:])
        except (OSError, ValueError):
            pass
    sys.exit("no pod is up for pool %s" % pool)


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def where(pid, pod):
    """(host, pid there) of this machine's process pid, or None if it is gone."""
    status = read("/proc/%d/status" % pid)
    if not status:
        return None
    nspid = [int(x) for line in status.splitlines() if line.startswith("NSpid:") for x in line.split()[1:]]
    prefix = "/cxlcr/pod%d/" % pod
    for line in read("/proc/%d/cgroup" % pid).splitlines():
        if line.startswith("0::") and line[3:].startswith(prefix) and len(nspid) >= 2:
            return line[3:][len(prefix):].split("/")[0], nspid[1]
    return "machine", pid


def pids():
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "machine":
        pod, host, pid = pod_index(), sys.argv[2], int(sys.argv[3])
        for p in pids():
            if where(p, pod) == (host, pid):
                print(p)
                return 0
        return 1
    if len(sys.argv) == 3 and sys.argv[1] == "where":
        w = where(int(sys.argv[2]), pod_index())
        if not w:
            return 1
        print(w[0], w[1])
        return 0
    if len(sys.argv) == 2 and sys.argv[1] == "mappers":
        pod, pool = pod_index(), os.environ["CXLCR_POOL"]
        found = []
        for p in pids():
            if pool not in read("/proc/%d/maps" % p):
                continue
            comm = read("/proc/%d/comm" % p).strip()
            w = where(p, pod)
            if comm in ("cxlcr-tracker", "cxlcrd", "cxlcr-keeper") or not w:
                continue
            found.append("%s:%d" % w)
        print("".join(s + " " for s in sorted(found, key=lambda s: (s.split(":")[0], int(s.split(":")[1])))),
              end="")
        return 0
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
