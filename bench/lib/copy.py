"""The copy family: zerocat copy vs cp, cat > and xcp on one big file (ext4 warm, tmpfs).
Trees are the trees family's (trees.py), which runs its copies through run_copy."""
import os
import shutil
import time

from . import common
from .checks import Sample, check_tree
from .common import Failed, human
from .measure import contender, scenario
from .procs import Procs, result, settle, timeout_for

GROUP = "copy"


def run_copy(ctx, argv, src, dst, redirect=False, tree=False, nbytes=None, rss=False):
    """TOOL SRC DST (or TOOL SRC > DST); dst removed first, outside the clock. nbytes: what
    a tree holds (a file: the run's size). rss: the tool's peak RSS too (`rss_kib`), from
    /usr/bin/time -f %M when it is there: a child Python forks reports Python's own RSS
    in wait4's ru_maxrss, not the tool's."""
    rss_file = None
    if rss and os.path.exists("/usr/bin/time"):
        rss_file = os.path.join(ctx["tmp"], "rss")
        argv = ["/usr/bin/time", "-f", "%M", "-o", rss_file, *argv]
    if os.path.isdir(dst):
        shutil.rmtree(dst)
    elif os.path.exists(dst):
        os.unlink(dst)
    size = nbytes or ctx["size"]
    sample = None if tree else Sample(src, size, ctx["rng"])
    ps = Procs(timeout_for(size) + (60 if tree else 0))
    out = None
    try:
        settle()
        start = time.perf_counter()
        if redirect:
            out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            ps.spawn("tool", argv, stdout=out)
            os.close(out)
            out = None
        else:
            ps.spawn("tool", argv)
        end = ps.wait()
        ps.check_exits()
        err = check_tree(src, dst, ctx["rng"]) if tree else sample.check_file(dst)
        if err:
            raise Failed(err)
        r = result(ps, start, end, size)
        if rss_file:
            with open(rss_file) as f:
                r["rss_kib"] = int(f.read().split()[-1])
        return r
    finally:
        if out is not None:
            os.close(out)
        ps.close()


def scenarios(ctx):
    d, dt, n = ctx["data"], ctx["data_tmpfs"], ctx["size"]
    zc = [common.ZC, "--stats", "json"]
    S = []
    for fs, src in (("ext4, warm", d), ("tmpfs", dt)):
        dst = os.path.join(os.path.dirname(src), "copy.out")

        def runner(argv, redirect=False, src=src, dst=dst):
            return lambda: run_copy(ctx, argv, src, dst, redirect)
        cs = [contender("zerocat", "zerocat", runner([*zc, "copy", src, dst]), ("copy",)),
              contender("cp", "peer", runner(["cp", src, dst])),
              contender("cat >", "peer", runner(["cat", src], redirect=True)),
              contender("xcp", "peer", runner(["xcp", src, dst]), ("xcp",))]
        S.append(scenario(GROUP, f"copy {human(n)} ({fs})", n, cs))
    return S
