"""The pipe family: pipe -> pipe, file -> pipe, file -> /dev/null (zerocat pipe vs cat,
pv, dd, socat and the feeder's ceiling), and a TCP socket into an ext4 file."""
import os
import subprocess
import time

from . import common
from .checks import Sample
from .common import WORK, Failed
from .measure import contender, scenario
from .procs import Procs, result, settle, timeout_for
from .stream import run_stream

GROUP = "pipe"


def run_tcp_in(ctx, argv, out):
    """zcb src (listening) -> TOOL (connects, writes `out`): a socket source into a file.
    `argv` takes the port."""
    data, size = ctx["data"], ctx["size"]
    sample = Sample(data, size, ctx["rng"])
    if os.path.exists(out):
        os.unlink(out)
    ps = Procs(timeout_for(size))
    try:
        src = ps.spawn("src", [common.ZCB, "src", data, "0", "tcp-listen:127.0.0.1:0"], stdout=subprocess.PIPE)
        port = src.stdout.readline().decode().strip()
        if not port:
            raise Failed("feeder did not listen")
        settle()
        start = time.perf_counter()
        ps.spawn("tool", argv(port))
        end = ps.wait()
        ps.check_exits()
        err = sample.check_file(out)
        if err:
            raise Failed(err)
        return result(ps, start, end, size)
    finally:
        ps.close()


def scenarios(ctx):
    d, n = ctx["data"], ctx["size"]
    zc = [common.ZC, "--stats", "json"]
    S = []
    for name, feed, out, src_args in (("pipe -> pipe", True, "sink", []),
                                      ("file -> pipe", False, "sink", [d]),
                                      ("file -> /dev/null", False, "devnull", [d])):
        def runner(tool, feed=feed, out=out):
            return lambda: run_stream(ctx, tool, feed, out)
        f = src_args[0] if src_args else None
        cs = [contender("zerocat", "zerocat", runner([*zc, "pipe", *(src_args or ["-"]), "-"]), ("pipe",)),
              contender("cat", "peer", runner(["cat", *src_args])),
              contender("pv -q", "peer", runner(["pv", "-q", *src_args]), ("pv",)),
              contender("dd bs=1M", "peer", runner(["dd", "bs=1M", "status=none", *([f"if={f}"] if f else [])])),
              contender("socat -u", "peer", runner(["socat", "-u", f"OPEN:{f},rdonly" if f else "STDIN", "STDOUT"]),
                        ("socat",)),
              contender("ceiling (src -> sink)", "ceiling", runner(None))]
        S.append(scenario(GROUP, name, n, cs))
    # a socket into a file (cat and pv read the socket bash opened as their stdin)
    tcp_out = os.path.join(WORK, "tcp.out")

    def tcp_in(argv):
        return lambda: run_tcp_in(ctx, argv, tcp_out)
    by_bash = "exec {} < /dev/tcp/127.0.0.1/{} > {}"
    cs = [contender("zerocat", "zerocat", tcp_in(lambda port: [*zc, "pipe", f"tcp:127.0.0.1:{port}", tcp_out]), ("pipe",)),
          contender("cat", "peer", tcp_in(lambda port: ["bash", "-c", by_bash.format("cat", port, tcp_out)])),
          contender("pv -q", "peer", tcp_in(lambda port: ["bash", "-c", by_bash.format("pv -q", port, tcp_out)]), ("pv",)),
          contender("socat -u", "peer", tcp_in(lambda port: ["socat", "-u", f"TCP:127.0.0.1:{port}",
                                                             f"OPEN:{tcp_out},creat,trunc"]), ("socat",))]
    S.append(scenario(GROUP, "tcp -> file (ext4)", n, cs))
    return S
