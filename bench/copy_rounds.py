#!/usr/bin/env python3
"""zerocat copy vs cp, cat > and xcp: median of N runs, GiB/s and CPU s/GiB.

usage: bench/copy_rounds.py [--runs 5] [--ext4 DIR] [--shm DIR] [--only big|tree]
Needs a release build (cargo build --release). The 1 GiB source is read once first so
the runs are warm; each destination is removed between runs (not timed).
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZEROCAT = os.path.join(ROOT, "target", "release", "zerocat")
GIB = 1 << 30


def timed(cmd, shell=False):
    """Wall seconds and CPU seconds (user + sys of the children) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, shell=shell, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def measure(rows, dst, nbytes, runs):
    """Runs every row once per round, `runs` rounds (round-robin: load from other work on
    the machine falls on every tool alike), then prints each row's medians."""
    walls = {name: [] for name, _, _ in rows}
    cpus = {name: [] for name, _, _ in rows}
    for _ in range(runs):
        for name, make_cmd, shell in rows:
            remove(dst)
            os.sync()
            wall, cpu = timed(make_cmd(), shell=shell)
            walls[name].append(wall)
            cpus[name].append(cpu)
    remove(dst)
    gib = nbytes / GIB
    for name, _, _ in rows:
        wall = statistics.median(walls[name])
        cpu = statistics.median(cpus[name])
        print(
            f"  {name:<28} median {wall * 1000:8.1f} ms  {gib / wall:7.2f} GiB/s  "
            f"{cpu / gib:6.3f} CPU s/GiB   (runs: {', '.join(f'{w * 1000:.0f}' for w in walls[name])} ms)",
            flush=True,
        )


def big_file(where, label, runs):
    src = os.path.join(where, "zerocat-bench-src")
    dst = os.path.join(where, "zerocat-bench-dst")
    if not os.path.exists(src) or os.path.getsize(src) != GIB:
        with open(src, "wb") as f:
            for _ in range(1024):
                f.write(os.urandom(1 << 20))
    subprocess.run(["cat", src], stdout=subprocess.DEVNULL, check=True)  # warm
    print(f"1 GiB file on {label} ({where})")
    rows = [
        ("zerocat copy", lambda: [ZEROCAT, "-q", "copy", src, dst], False),
        ("cp", lambda: ["cp", src, dst], False),
        ("cat >", lambda: f"cat '{src}' > '{dst}'", True),
        ("xcp", lambda: ["xcp", "--no-progress", src, dst], False),
    ]
    measure(rows, dst, GIB, runs)
    remove(src)


def small_tree(where, label, runs, count=10_000, size=4096):
    src = os.path.join(where, "zerocat-bench-tree")
    dst = os.path.join(where, "zerocat-bench-tree-copy")
    remove(src)
    os.makedirs(src)
    per_dir = 100
    for i in range(count):
        d = os.path.join(src, f"d{i // per_dir:03}")
        if i % per_dir == 0:
            os.makedirs(d)
        with open(os.path.join(d, f"f{i:05}"), "wb") as f:
            f.write(os.urandom(size))
    subprocess.run(["cat"] + [os.path.join(src, "d000", f) for f in os.listdir(os.path.join(src, "d000"))],
                   stdout=subprocess.DEVNULL, check=True)
    subprocess.run(["du", "-s", src], stdout=subprocess.DEVNULL, check=True)  # warm the dentries
    print(f"{count} x {size // 1024} KiB files in {count // per_dir} dirs on {label} ({where})")
    rows = [
        ("zerocat copy -r", lambda: [ZEROCAT, "-q", "copy", "-r", src, dst], False),
        ("cp -r", lambda: ["cp", "-r", src, dst], False),
        ("xcp -r", lambda: ["xcp", "--no-progress", "-r", src, dst], False),
    ]
    measure(rows, dst, count * size, runs)
    remove(src)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--ext4", default=os.path.join(ROOT, "target", "tmp"))
    ap.add_argument("--shm", default="/dev/shm")
    ap.add_argument("--only", choices=["big", "tree"])
    args = ap.parse_args()
    if not os.path.exists(ZEROCAT):
        sys.exit("build first: cargo build --release")
    os.makedirs(args.ext4, exist_ok=True)
    print(f"load average before: {os.getloadavg()}")
    if args.only in (None, "big"):
        big_file(args.ext4, "ext4", args.runs)
        big_file(args.shm, "tmpfs", args.runs)
    if args.only in (None, "tree"):
        small_tree(args.ext4, "ext4", args.runs)
        small_tree(args.shm, "tmpfs", args.runs)
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
