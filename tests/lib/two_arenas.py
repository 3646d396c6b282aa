#!/usr/bin/env python3
"""A service of two processes with an arena each (run under `cxlcr run`):

    two_arenas.py ARENA

this process uses the service's arena; it starts a child Python whose
environment names another arena, ARENA (64 MiB), which the child's preload
makes and takes (without CXLCR_ARENA_OWNER the child is no descendant that
runs on glibc). Both fill a little of their heap and wait for a signal.
Standard library only.
"""
import os
import signal
import subprocess
import sys

env = dict(os.environ)
env.pop("CXLCR_ARENA_OWNER", None)
env.pop("CXLCR_READY_FD", None)
env["CXLCR_ARENA"] = sys.argv[1]
env["CXLCR_ARENA_SIZE"] = "64M"
child = subprocess.Popen([sys.executable, "-c",
                          "import signal\nkeep = [bytes([i % 251]) * 4096 for i in range(256)]\nsignal.pause()\n"],
                         env=env)
keep = [bytes([i % 241]) * 4096 for i in range(256)]
signal.pause()
