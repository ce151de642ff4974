"""Paths, sizes and small helpers every module of bench/run uses."""
import argparse
import os
import re
import subprocess
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
WORK = os.path.join(BENCH, "work")  # scratch: data, built helpers, --quick and --check outputs
RESULTS = os.path.join(BENCH, "results")  # kept snapshots, one folder per run, indexed in its README.md
ZCB = os.path.join(WORK, "zcb")
UDPB = os.path.join(WORK, "udpb")  # bench/udpb.c: the UDP sender and the sink that checks order
REFRELAY = os.path.join(WORK, "refrelay")  # bench/refrelay.c: the two reference relays
FLOOR = os.path.join(WORK, "floorcopy")  # bench/floorcopy.c: the least a tree copier does
FAN = os.path.join(WORK, "fan")  # bench/fan.c: many concurrent bulk streams, every byte checked
MINRELAY = os.path.join(WORK, "minrelay")  # bench/minrelay.c: the least a relay does a request
MINLOG = os.path.join(WORK, "minlog")  # bench/minlog.c: the least an `nc -lk >> log` does a connection
# The zerocat under test: this checkout's release build, or --zerocat PATH (set by
# peers.setup before any run; read it as common.ZC, never import the name).
ZC = os.path.join(ROOT, "target", "release", "zerocat")
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


class Failed(Exception):
    """A run that did not move the right bytes (or did not end)."""


def log(*a):
    print("bench:", *a, file=sys.stderr, flush=True)


def parse_size(s):
    m = re.fullmatch(r"(\d+)\s*([kmg]?)(i?b)?", s.strip().lower())
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {s!r} (e.g. 1G, 64M, 1048576)")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2)]


def human(n):
    return f"{n / GiB:g} GiB" if n >= GiB else f"{n / MiB:g} MiB"


def quiet(argv, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def first_line(argv, having=""):
    """The first non-empty line of argv's output that holds `having`, for a version."""
    try:
        out = quiet(argv, timeout=10).stdout.strip().splitlines()
        return next((line for line in out if line.strip() and having in line), f"{os.path.basename(argv[0])} ?")
    except (OSError, subprocess.SubprocessError):
        return f"{os.path.basename(argv[0])} not installed"


def checkout():
    """This checkout's short commit, "+dirty" when tracked files differ from it."""
    root = ["git", "-C", ROOT]
    commit = quiet([*root, "rev-parse", "--short", "HEAD"]).stdout.strip() or "?"
    return commit + ("+dirty" if quiet([*root, "status", "--porcelain", "--untracked-files=no"]).stdout.strip() else "")
