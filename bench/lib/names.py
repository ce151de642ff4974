"""The names family (issue 43): zerocat answering as nc, tee and pv against those tools,
same command lines: a file through `nc -N HOST PORT` into a TCP sink and a connection
through `nc -l PORT` into a file (vs OpenBSD netcat), stdin through `tee` into two pipes
(vs GNU tee), and `pv -q` / `pv -q -L` from a pipe into a pipe (vs pv). The zerocat rows
ask for zerocat's report with --zerocat-report=json (the path column); the receive row
also runs zerocat's own `pipe tcp-listen: -`, the engine without the name."""
import os
import subprocess
import time

from . import common
from .checks import Sample, listening_sink, sink_check
from .common import WORK, Failed
from .measure import contender, scenario
from .procs import Procs, free_port, result, timeout_for, wait_listening
from .stream import run_stream

GROUP = "names"

NC = "nc.openbsd"


def run_nc_send(ctx, tool):
    """zcb sink listens; TOOL(sink_port) reads the data file on stdin and sends it."""
    data, size = ctx["data"], ctx["size"]
    sample = Sample(data, size, ctx["rng"])
    ps = Procs(timeout_for(size))
    stdin = None
    try:
        sink, ready = listening_sink(ps, ctx, sample)
        stdin = open(data, "rb")
        start = time.perf_counter()
        if tool is None:
            ps.spawn("src", [common.ZCB, "src", data, "0", f"tcp:127.0.0.1:{ready}"])
        else:
            ps.spawn("tool", tool(ready), stdin=stdin)
        end = ps.wait()
        ps.check_exits()
        sink_check(sink, sample)
        return result(ps, start, end, size)
    finally:
        if stdin:
            stdin.close()
        ps.close()


def run_nc_receive(ctx, tool, out):
    """TOOL(port) listens and writes one connection to `out`; zcb src connects and sends."""
    data, size = ctx["data"], ctx["size"]
    sample = Sample(data, size, ctx["rng"])
    if os.path.exists(out):
        os.unlink(out)
    ps = Procs(timeout_for(size))
    try:
        port = free_port()
        with open(out, "wb") as f:
            proc = ps.spawn("tool", tool(port), stdout=f, stdin=subprocess.DEVNULL)
        wait_listening(port, proc=proc)
        start = time.perf_counter()
        ps.spawn("src", [common.ZCB, "src", data, "0", f"tcp:127.0.0.1:{port}"])
        end = ps.wait()
        ps.check_exits()
        err = sample.check_file(out)
        if err:
            raise Failed(err)
        return result(ps, start, end, size)
    finally:
        ps.close()


def scenarios(ctx):
    n = ctx["size"]
    zc = common.ZC
    report = "--zerocat-report=json"
    S = []

    def send(tool):
        return lambda: run_nc_send(ctx, tool)
    cs = [contender("zerocat as nc", "zerocat", send(lambda s: [zc, "nc", report, "-N", "127.0.0.1", s])),
          contender("nc (OpenBSD)", "peer", send(lambda s: [NC, "-N", "127.0.0.1", s]), (NC,)),
          contender("direct (src -> sink)", "ceiling", send(None))]
    S.append(scenario(GROUP, "file | nc -N -> tcp", n, cs, ref="zerocat as nc"))

    out = os.path.join(WORK, "nc.out")

    def receive(tool):
        return lambda: run_nc_receive(ctx, tool, out)
    cs = [contender("zerocat as nc", "zerocat",
                    receive(lambda p: [zc, "nc", report, "-l", "127.0.0.1", str(p)])),
          contender("nc (OpenBSD)", "peer", receive(lambda p: [NC, "-l", "127.0.0.1", str(p)]), (NC,)),
          # The engine without the name: what nc -l's relay (both ways) costs over a pipe.
          contender("zerocat pipe tcp-listen: -", "zerocat",
                    receive(lambda p: [zc, "--stats", "json", "pipe", f"tcp-listen:127.0.0.1:{p}", "-"]))]
    S.append(scenario(GROUP, "tcp -> nc -l > file (ext4)", n, cs, ref="zerocat as nc"))

    cs = [contender("zerocat as tee", "zerocat",
                    lambda: run_stream(ctx, [zc, "compat", "tee", report, "/dev/fd/{fd3}"], True, fd3=True)),
          contender("tee (GNU)", "peer", lambda: run_stream(ctx, ["tee", "/dev/fd/{fd3}"], True, fd3=True)),
          contender("ceiling (src -> sink)", "ceiling", lambda: run_stream(ctx, None, True))]
    S.append(scenario(GROUP, "tee -> 2 pipes (as tee)", n, cs, ref="zerocat as tee"))

    cs = [contender("zerocat as pv", "zerocat", lambda: run_stream(ctx, [zc, "pv", report, "-q"], True)),
          contender("pv -q", "peer", lambda: run_stream(ctx, ["pv", "-q"], True), ("pv",)),
          contender("ceiling (src -> sink)", "ceiling", lambda: run_stream(ctx, None, True))]
    S.append(scenario(GROUP, "pipe -> pv -q -> pipe", n, cs, ref="zerocat as pv"))

    # At 1 GiB: 4 s at the limit; the row says how close each holds to it.
    rate = "256m"
    cs = [contender("zerocat as pv -L", "zerocat",
                    lambda: run_stream(ctx, [zc, "pv", report, "-q", "-L", rate], True)),
          contender("pv -q -L", "peer", lambda: run_stream(ctx, ["pv", "-q", "-L", rate], True), ("pv",))]
    S.append(scenario(GROUP, f"pipe -> pv -L {rate} -> pipe", n, cs, ref="zerocat as pv -L"))
    return S
