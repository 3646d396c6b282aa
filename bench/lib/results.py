"""What the benchmarks' helpers share (imported by bench/cr.py, bench/fork.py
and bench/continuity.py; not run): sizes on the command line, fields of the
cxlcr verbs' JSON, rounds kept as JSON lines, medians, gnuplot, and the
table both printed and saved. Python standard library only.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

GIB = 1 << 30
MIB = 1 << 20
NO_GNUPLOT = "gnuplot is not installed (scripts/install-deps.sh): no plot"


def parse_size(text, prog):
    """64M, 1G, 1.5GiB, 4096 -> bytes; anything else ends the program with
    one line naming prog."""
    t = text.strip().upper()
    if t.endswith("IB"):
        t = t[:-2]
    elif t.endswith("B"):
        t = t[:-1]
    mult = {"K": 1 << 10, "M": MIB, "G": GIB, "T": 1 << 40}.get(t[-1:], 1)
    try:
        v = int(float(t[:-1] if mult > 1 else t) * mult)
    except ValueError:
        raise SystemExit("%s: not a size: %r" % (prog, text))
    if v <= 0:
        raise SystemExit("%s: not a size: %r" % (prog, text))
    return v


def print_field(path, keys, null="None"):
    """Prints one field of the JSON in path, for the shell: each key may be
    a dotted path; in a list, a key is an index. A JSON null prints as null."""
    with open(path) as f:
        v = json.load(f)
    for key in keys:
        for k in key.split("."):
            v = v[int(k)] if isinstance(v, list) else v[k]
    print(null if v is None else v)
    return 0


def read_jsonl(path):
    """Every object of a JSON-lines file (one round or step a line)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def gnuplot():
    """gnuplot's path, or None."""
    return shutil.which("gnuplot")


def run_gnuplot(script, gpfile, temps=()):
    """Writes script (a list of lines) to gpfile and runs gnuplot on it;
    gpfile and the data files in temps are removed afterwards, whatever
    happened. None, or why no plot came out."""
    gp = gnuplot()
    if not gp:
        return NO_GNUPLOT
    try:
        with open(gpfile, "w") as f:
            f.write("\n".join(script) + "\n")
        res = subprocess.run([gp, gpfile], capture_output=True, text=True, timeout=60)
    finally:
        for p in list(temps) + [gpfile]:
            if os.path.exists(p):
                os.unlink(p)
    if res.returncode != 0:
        return "gnuplot failed: %s" % res.stderr.strip()
    return None


def publish(lines, path):
    """The report's lines: printed, and saved in path."""
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    with open(path, "w") as f:
        f.write(text)


def size_label(size):
    """64M, 1G: a size as the tables print it."""
    return "%dM" % (size // MIB) if size < GIB else "%dG" % (size // GIB)


def publish_rows(lines, out, name, rows):
    """The report (publish) in OUT/NAME.txt and its rows in OUT/NAME.jsonl."""
    os.makedirs(out, exist_ok=True)
    publish(lines, os.path.join(out, name + ".txt"))
    with open(os.path.join(out, name + ".jsonl"), "w") as f:
        for x in rows:
            f.write(json.dumps(x) + "\n")


def verbs(doc, prog, null="None"):
    """The command line of a helper: an argparse parser with the verbs
    every helper has (size SIZE; field FILE KEY...), and its subparsers for
    the helper's own verbs. run(parsed) runs size or field (a JSON null
    printed as null) and returns its exit status, or None for another verb."""
    p = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="verb", required=True)
    sub.add_parser("size").add_argument("size")
    s = sub.add_parser("field")
    s.add_argument("file")
    s.add_argument("keys", nargs="+")

    def run(a):
        if a.verb == "size":
            print(parse_size(a.size, prog))
            return 0
        if a.verb == "field":
            return print_field(a.file, a.keys, null)
        return None
    return p, sub, run
