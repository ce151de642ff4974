"""The command family: a command as a relay side, inetd style. One client (bench/zcb.c
`echo`) sends the data file over TCP and reads it back through `cat` behind the tool:
zerocat `relay --once tcp-listen exec:cat` (both directions spliced to and from the
child's pipes, grown to 1 MiB) vs socat `TCP-LISTEN EXEC:cat`. Each tool's CPU includes
cat's, which it reaps.

Two peers are not rows, because they cannot do this job (seen here, 2026-11-24):
`socat -b1048576 ... EXEC:cat` deadlocks on a large echo (a blocking 1 MiB write into
cat's 64 KiB stdin while cat blocks writing its stdout, which socat is not reading: 512
MiB timed out; 1 MiB passes), and `ncat -l --exec /bin/cat` drops what cat had not
answered when the client half-closes (100,000 bytes sent, 32,768 came back)."""
import os
import subprocess
import time

from . import common
from .checks import Sample, sink_check
from .measure import contender, scenario
from .procs import Procs, free_port, listening_addr, result, timeout_for, wait_listening

GROUP = "exec"


def run_echo(ctx, tool):
    """zcb echo -> TOOL (listening on 127.0.0.1) -> cat -> back to zcb echo."""
    data, size = ctx["data"], ctx["size"]
    sample = Sample(data, size, ctx["rng"])
    ps = Procs(timeout_for(2 * size))
    try:
        if tool[0] == "zerocat":
            p = ps.spawn("tool", [common.ZC, "--stats", "json", *tool[1], "relay", "--once",
                                  "tcp-listen:127.0.0.1:0", "exec:cat"])
            target = f"tcp:{listening_addr(p)}"
        else:
            port = free_port()
            argv = ["socat", *tool[1], f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr", "EXEC:cat"]
            p = ps.spawn("tool", argv)
            wait_listening(port, proc=p)
            target = f"tcp:127.0.0.1:{port}"
        start = time.perf_counter()
        client = ps.spawn("client", [common.ZCB, "echo", data, sample.arg(),
                                     os.path.join(ctx["tmp"], "sample0"), target], stdout=subprocess.PIPE)
        client.sample_path, client.label = client.argv[4], "echo client"
        end = ps.wait()
        ps.check_exits()
        sink_check(client, sample)
        return result(ps, start, end, size)
    finally:
        ps.close()


def scenarios(ctx):
    n = ctx["size"]

    def runner(tool):
        return lambda: run_echo(ctx, tool)
    cs = [contender("zerocat", "zerocat", runner(("zerocat", [])), ("relay",)),
          contender("zerocat --via userspace", "zerocat", runner(("zerocat", ["--via", "userspace"])), ("relay",)),
          contender("socat", "peer", runner(("socat", [])), ("socat",))]
    return [scenario(GROUP, "tcp -> exec:cat -> tcp (echo, each byte both ways)", n, cs)]
