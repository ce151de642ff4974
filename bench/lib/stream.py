"""A stream run, shared by the pipe and tee families: [zcb src |] TOOL, its outputs into
zcb sinks, /dev/null or files, every output checked."""
import os
import subprocess
import time

from . import common
from .checks import Sample, check_devnull, sink_check
from .common import Failed
from .procs import Procs, result, settle, timeout_for


def run_stream(ctx, tool, feed, out="sink", fd3=False, files=()):
    """[zcb src |] TOOL [> zcb sink | > /dev/null] [3> zcb sink], TOOL writing `files`.
    tool=None is the ceiling: the feeder straight into the sink."""
    data, size = ctx["data"], ctx["size"]
    sample = Sample(data, size, ctx["rng"])
    for f in files:
        if os.path.exists(f):
            os.unlink(f)
    ps = Procs(timeout_for(size))
    sinks, close_later = [], []

    def new_sink(label):
        r, w = os.pipe()
        path = os.path.join(ctx["tmp"], f"sample{len(sinks)}")
        p = ps.spawn("sink", [common.ZCB, "sink", sample.arg(), path, "-"], stdin=r, stdout=subprocess.PIPE)
        p.sample_path, p.label = path, label
        os.close(r)
        close_later.append(w)
        sinks.append(p)
        return w
    try:
        out_fd = new_sink("stdout sink") if out == "sink" else os.open("/dev/null", os.O_WRONLY)
        if out != "sink":
            close_later.append(out_fd)
        w3 = new_sink("second sink") if fd3 else None
        argv = [a.replace("{fd3}", str(w3)) for a in tool] if tool else None
        if files:
            settle()
        start = time.perf_counter()
        if feed or tool is None:
            r, w = os.pipe()
            src_out = w if tool else out_fd
            ps.spawn("src", [common.ZCB, "src", data, "0", "-"], stdout=src_out)
            os.close(w)
            if tool:
                ps.spawn("tool", argv, stdin=r, stdout=out_fd, pass_fds=(w3,) if fd3 else ())
            os.close(r)
        else:
            ps.spawn("tool", argv, stdout=out_fd, pass_fds=(w3,) if fd3 else ())
        for fd in close_later:
            os.close(fd)
        close_later = []
        end = ps.wait()
        ps.check_exits()
        for p in sinks:
            sink_check(p, sample)
        for f in files:
            err = sample.check_file(f)
            if err:
                raise Failed(err)
        if out == "devnull":
            check_devnull(ps, size)
        return result(ps, start, end, size)
    finally:
        for fd in close_later:
            os.close(fd)
        ps.close()
