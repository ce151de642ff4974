"""The trees family (issue 17, `copy -j`): zerocat copy -r with its default -j (the CPUs
available, at most 8) and with -j 1, against xcp -r (its default parallel driver) and
cp -r, on a tree of many small files and a tree of fewer big ones, each on ext4
(bench/work) and on tmpfs (/dev/shm), the copy on the source's filesystem. The source is
warm; what earlier runs left dirty is flushed before each run, outside the clock (settle).

Each run of a small tree on ext4 copies into a directory of its own, and the copies are
removed only when the group ends: on ext4 without a journal (this machine's), an inode freed less
than ~30 s earlier is skipped by the allocator (`recently_deleted()` in find_inode_bit),
so after an `rm -rf` of the previous run's 10,000 files every create scanned past them:
perf put 71% of a copy's samples there and the same command took 2 s or 6 s depending on
how recent the removal was (bench/NOTEBOOK.md, "copy: trees without the last run's
inodes"). The big trees (200 inodes) are removed before each run, as before. The copies
are removed when the run ends, and the next run's first tree waits until 40 s have passed
since (wait_out_deletions).
Targets: >= 1.2x xcp -r and >= 1.5x cp -r (the xref column: peer time / zerocat time)."""
import os
import random
import shutil
import time

from . import common
from .common import KiB, MiB, WORK, log
from .copy import run_copy
from .measure import contender, scenario

GROUP = "trees"

# The targets of issues 17 and 27: zerocat's default against each peer (peer time /
# zerocat time); on the tree of empty files cpz's is 1.0 (EMPTY_TARGETS).
TARGETS = {"xcp -r": 1.2, "cp -r": 1.5, "cpz": 1.1}
EMPTY_TARGETS = dict(TARGETS, cpz=1.0)
# Issue 27: zerocat's peak RSS on the tree of empty files, with text stats.
EMPTY_RSS_KIB = 16 * 1024
REF = "zerocat -q"


def make_tree(root, files, size, per_dir=100):
    """`files` files of `size` bytes, `per_dir` to a directory; size None: issue 27's tree,
    files of 0-16 KiB, 20 to a directory, in three levels (for 100,000: 20 x 25 x 10
    directories); size 0: empty files, 100 to a directory, 100 directories to one above
    (1,000,000: 100 x 100 x 100). Each file a different slice of one random pool (a mix-up
    between files cannot compare equal); reused when the stamp next to it says the same
    shape."""
    stamp = root + ".stamp"
    shape = f"{files}:{size}:{per_dir}" if size is not None else f"mixed:{files}"
    if os.path.isdir(root) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read() == shape:
                return
    shutil.rmtree(root, ignore_errors=True)
    what = f"{size:,} B" if size is not None else "0-16 KiB, in three levels,"
    log(f"making a tree of {files:,} files of {what} in {root}")
    rng = random.Random(13 if size else 27)
    pool = rng.randbytes(max(2 * (size or 0), 1 * MiB))
    for i in range(files):
        if size == 0:
            top, rest = divmod(i, per_dir * per_dir)
            d, name = os.path.join(root, f"e{top:03}", f"d{rest // per_dir:03}"), f"f{i % per_dir:03}"
            if i % per_dir == 0:
                os.makedirs(d, exist_ok=True)
            open(os.path.join(d, name), "wb").close()
            continue
        if size:
            d, name, n = os.path.join(root, f"d{i // per_dir:03}"), f"f{i:05}", size
            at = (i * 65_537) % (len(pool) - n + 1)
        else:
            leaf, k = divmod(i, 20)
            a, rest = divmod(leaf, 250)
            b, c = divmod(rest, 10)
            d, name = os.path.join(root, f"a{a:02}", f"b{b:02}", f"c{c}"), f"f{k:02}"
            n = rng.randrange(0, 16 * KiB + 1)
            at = rng.randrange(0, len(pool) - n + 1)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, name), "wb") as f:
            f.write(pool[at:at + n])
    with open(stamp, "w") as f:
        f.write(shape)


# The floor's processes: as many as zerocat's default -j here.
FLOOR_JOBS = min(os.cpu_count() or 1, 8)
# Trees up to this size are copied into a fresh directory each run (see the module's docs);
# issue 27's tree (100,000 files, ~800 MiB) too: copied over a removed copy, every tool's
# run took 60 s and more on ext4 here instead of 3-4, the allocator scanning past the
# inodes the removal had just freed.
FRESH_UP_TO = 1024 * MiB
RUNS = iter(range(1_000_000))
# When cleanup last removed copies from ext4: the next run waits until the allocator no
# longer skips those inodes (ext4's window is 30 s, 35 while the inode block is dirty).
DELETED = os.path.join(WORK, ".trees-deleted")
RECENT = 40


def wait_out_deletions():
    """Outside the clock: until RECENT seconds after cleanup's last removal."""
    try:
        with open(DELETED) as f:
            left = float(f.read()) + RECENT - time.time()
    except (OSError, ValueError):
        return
    if left > 0:
        log(f"waiting {left:.0f} s for ext4 to stop skipping the inodes removed last")
        time.sleep(left)


def scenarios(ctx):
    S = []
    small = (f"{ctx['tree_files']:,} x 4 KiB", ctx["tree_files"], 4 * KiB)
    big = (f"{ctx['big_files']:,} x {ctx['big_size'] // MiB or ctx['big_size'] // KiB}"
           f" {'MiB' if ctx['big_size'] >= MiB else 'KiB'}", ctx["big_files"], ctx["big_size"])
    mixed = (f"{ctx['mixed_files']:,} x 0-16 KiB, three levels", ctx["mixed_files"], None)
    empty = (f"{ctx['empty_files']:,} empty files", ctx["empty_files"], 0)
    for label, files, size in (small, big, mixed, empty):
        for fs, base in (("ext4", WORK), ("tmpfs", ctx["tmpfs"])):
            if size == 0 and fs == "ext4":
                continue  # issue 27's row of empty files is on tmpfs
            shape = f"{files}x{size}" if size is not None else f"{files}mixed"
            src = os.path.join(base, f"tree-{shape}.src")
            dst = os.path.join(base, f"tree-{shape}.out")
            # The mixed tree's bytes: 8 KiB a file on average (the rate column is rough).
            nbytes = files * (8 * KiB if size is None else size) or 1

            # Fresh directories on ext4 only: tmpfs frees an inode at once, and there the
            # copies piling up (30 of 10,000 files a tree) slowed every tool by 1.4-1.8x.
            fresh = fs == "ext4" and nbytes <= FRESH_UP_TO

            def runner(argv, src=src, dst=dst, files=files, size=size, nbytes=nbytes, fresh=fresh):
                def run():
                    make_tree(src, files, size)  # once, outside the clock
                    wait_out_deletions()
                    out = f"{dst}.{next(RUNS)}" if fresh else dst
                    argv_out = [out if a == dst else a for a in argv]
                    return run_copy(ctx, argv_out, src, out, tree=True, nbytes=nbytes, rss=size == 0)
                return run
            zc = [common.ZC, "-q", "copy", "-r"]
            cs = [contender(REF, "zerocat", runner([*zc, src, dst]), ("copy",)),
                  contender("zerocat -q -j 1", "zerocat", runner([*zc, "-j", "1", src, dst]), ("copy",)),
                  contender("xcp -r", "peer", runner(["xcp", "-r", src, dst]), ("xcp",)),
                  contender("cpz", "peer", runner(["cpz", src, dst]), ("cpz",)),
                  contender("cp -r", "peer", runner(["cp", "-r", src, dst])),
                  contender(f"floor: C, {FLOOR_JOBS} processes", "ceiling",
                            runner([common.FLOOR, str(FLOOR_JOBS), src, dst]))]
            S.append(scenario(GROUP, f"copy tree {label} ({fs})", nbytes, cs, ref=REF, files=files))
    return S


def cleanup(ctx):
    """The trees on ext4 stay for the next run (their stamps say what they hold); the copies go."""
    removed = False
    for name in os.listdir(WORK):
        if name.startswith("tree-") and ".out" in name:
            shutil.rmtree(os.path.join(WORK, name), ignore_errors=True)
            removed = True
    if removed:
        os.sync()  # the freed inodes' blocks written back, not under writeback in the next run
        with open(DELETED, "w") as f:
            f.write(str(time.time()))


def summary(rows, meta):
    """RESULTS.md's lines under the trees table: each scenario against the targets."""
    L = ["Targets (issue 17): zerocat's default `-j` at least 1.2x `xcp -r` and 1.5x `cp -r` "
         "(xref above: per repetition, the peer's time over zerocat's, then the median). "
         "The floor is bench/floorcopy.c: processes that make only the six syscalls a small "
         "file needs and nothing else (no metadata, report or checks); below 1.00 it is faster. "
         f"Load average {meta['load0']} at the start, {meta['load1']} at the end "
         "(other engineers' builds and tests share the machine's cores).\n",
         "Issue 27: at least 1.1x cpz on the trees of 0-16 KiB files, 1.0x on the empty ones, "
         "with a peak RSS of 16 MiB at most there (from /usr/bin/time -f %M, text stats).\n",
         "| scenario | zerocat default -j | vs -j 1 | vs xcp -r (>= 1.2) | vs cp -r (>= 1.5) "
         "| vs cpz (>= 1.1; empty: 1.0) | the floor (C) | peak RSS |",
         "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for scn in dict.fromkeys(r["scenario"] for r in rows if r["group"] == GROUP):
        by = {r["tool"]: r for r in rows if r["scenario"] == scn}
        ref = by.get(REF)
        if not ref or ref["median"] is None:
            continue

        targets = EMPTY_TARGETS if "empty" in scn else TARGETS

        def vs(tool):
            r = by.get(tool)
            if not r or r["ratio"] is None:
                return (r and (r["skip"] or r["error"])) or "–"
            mark = "" if tool not in targets else (" ok" if r["ratio"] >= targets[tool] else " **missed**")
            return f"{r['ratio']:.2f}x{mark}"
        floor = f"floor: C, {FLOOR_JOBS} processes"
        rss = "–"
        if ref.get("rss_kib"):
            peers = ", ".join(f"{t} {by[t]['rss_kib'] / 1024:.1f}" for t in ("cpz", "cp -r")
                              if t in by and by[t].get("rss_kib"))
            ok = " ok" if ref["rss_kib"] <= EMPTY_RSS_KIB else " **missed**"
            rss = f"{ref['rss_kib'] / 1024:.1f} MiB{ok}" + (f" ({peers})" if peers else "")
        L.append(f"| {scn} | {ref['median'] * 1000:.0f} ms | {vs('zerocat -q -j 1')} | {vs('xcp -r')} | {vs('cp -r')} "
                 f"| {vs('cpz')} | {vs(floor)} | {rss} |")
    L.append("")
    return L
