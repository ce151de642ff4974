"""The proxy family: a file sent to a TCP sink through a SOCKS5 proxy on 127.0.0.1
(microsocks, which copies 1 KiB per read, and Dante's danted): zerocat `tcp:...,socks5=` vs
`ncat --proxy --proxy-type socks5` and OpenBSD `nc -X 5 -x`, and the feeder straight to
the sink (no proxy) as the ceiling. The proxy is the same program for every tool, so a row
says what each tool adds on top of it (the CPU column most of all)."""
import os
import time

from . import common
from .checks import Sample, listening_sink, sink_check
from .measure import contender, scenario
from .procs import Procs, free_port, result, timeout_for, wait_listening

GROUP = "proxy"


def start_proxy(ps, kind, tmp):
    """A SOCKS5 proxy of `kind` (microsocks, danted) on a free 127.0.0.1 port, listening
    when this returns; its port."""
    port = free_port()
    if kind == "microsocks":
        argv = ["microsocks", "-i", "127.0.0.1", "-p", str(port)]
    else:
        conf = os.path.join(tmp, "danted.conf")
        with open(conf, "w") as f:
            f.write(f"logoutput: stderr\ninternal: 127.0.0.1 port = {port}\nexternal: 127.0.0.1\n"
                    "socksmethod: none\nclientmethod: none\nuser.privileged: root\n"
                    "user.unprivileged: nobody\nclient pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }\n"
                    "socks pass { from: 127.0.0.0/8 to: 0.0.0.0/0 }\n")
        argv = ["danted", "-f", conf, "-N", "1"]
    wait_listening(port, proc=ps.spawn("proxy", argv, daemon=True))
    return port


def run_proxied(ctx, kind, tool):
    """zcb sink listens; a proxy of `kind` on a free port; TOOL(proxy_port, sink_port) reads the
    data file (as its argument or its stdin) and sends it through the proxy. tool=None:
    the feeder connects straight to the sink."""
    data, size = ctx["data"], ctx["size"]
    sample = Sample(data, size, ctx["rng"])
    ps = Procs(timeout_for(size))
    stdin = None
    try:
        sink, ready = listening_sink(ps, ctx, sample)
        if tool is None:
            start = time.perf_counter()
            ps.spawn("src", [common.ZCB, "src", data, "0", f"tcp:127.0.0.1:{ready}"])
        else:
            port = start_proxy(ps, kind, ctx["tmp"])
            ps.start_clock()
            stdin = open(data, "rb")
            start = time.perf_counter()
            ps.spawn("tool", tool(port, ready), stdin=stdin)
        end = ps.wait()
        ps.check_exits()
        sink_check(sink, sample)
        return result(ps, start, end, size)
    finally:
        if stdin:
            stdin.close()
        ps.close()


def scenarios(ctx):
    d, n = ctx["data"], ctx["size"]
    zc = [common.ZC, "--stats", "json"]
    S = []
    for kind in ("microsocks", "danted"):
        def via(tool, kind=kind):
            return lambda: run_proxied(ctx, kind, tool)
        cs = [contender("zerocat", "zerocat",
                        via(lambda p, s: [*zc, "pipe", d, f"tcp:127.0.0.1:{s},socks5=127.0.0.1:{p}"]),
                        ("pipe", kind)),
              contender("zerocat --via userspace", "zerocat",
                        via(lambda p, s: [*zc, "--via", "userspace", "pipe", d,
                                          f"tcp:127.0.0.1:{s},socks5=127.0.0.1:{p}"]), ("pipe", kind)),
              contender("ncat --proxy", "peer",
                        via(lambda p, s: ["ncat", "--send-only", "--proxy", f"127.0.0.1:{p}", "--proxy-type",
                                          "socks5", "127.0.0.1", s]), ("ncat", kind)),
              contender("nc -X 5", "peer",
                        via(lambda p, s: ["nc", "-N", "-X", "5", "-x", f"127.0.0.1:{p}", "127.0.0.1", s]),
                        ("nc", kind)),
              contender("direct (src -> sink, no proxy)", "ceiling", via(None))]
        S.append(scenario(GROUP, f"file -> socks5 ({kind}) -> tcp", n, cs))
    return S
