"""The udp family: datagrams through a relay, and a file sent as datagrams.

`relay`: bench/udpb.c sends COUNT datagrams of one size (64 B, 1,400 B, 64 KiB) as fast as
sendmmsg goes to the tool, which relays them to udpb's sink: zerocat `relay udp-listen udp`
vs `socat UDP-LISTEN,fork UDP`, and udpb straight into the sink (the ceiling). `pipe`: a
file sent as datagrams, `zerocat pipe FILE udp:` (65,507-byte datagrams) vs `nc -u -q 0 <
FILE` (netcat-openbsd, which sends what each read gives).

UDP drops what it cannot take, so a row's figure is what was delivered: the sink counts
datagrams and bytes from the first to the last, and the time a row shows is the time the
whole COUNT would take at that delivered rate (so GiB/s and x-ref compare delivered
throughput; the note gives datagrams/s and the share of the bytes that arrived). A
zerocat run fails if a datagram arrived out of order, cut or altered; a peer's note
counts those (see udp_result)."""
import os
import subprocess
import time

from . import common
from .common import Failed
from .measure import contender, scenario
from .procs import Procs, free_port, listening_addr, timeout_for

GROUP = "udp"
SIZES = (64, 1400, 65507)


def udp_result(ps, sink, count, total_bytes):
    """The row's result from what the sink saw. zerocat (and the ceiling) must deliver
    every datagram whole and in order; a peer that does not is measured all the same, and
    its note says how many datagrams came out of order or cut (socat's fork relay reorders
    some; nc -u sends what each read gives, so its datagrams are not the file's)."""
    out = sink.stdout.read().decode().split()
    if len(out) < 4:
        raise Failed("the sink said nothing")
    got, nbytes, seconds, bad = int(out[0]), int(out[1]), max(float(out[2]), 1e-6), int(out[3])
    if got == 0:
        raise Failed("no datagram arrived")
    t = ps.tool()
    ours = t is None or t.argv[0] == common.ZC
    if bad and ours:
        raise Failed(f"{bad} datagrams out of order, cut or altered")
    cpu = None
    if t is not None:
        cpu = t.cpu if t.daemon else t.rusage.ru_utime + t.rusage.ru_stime
    note = f"{got / seconds:,.0f} datagrams/s delivered, {nbytes / total_bytes:.1%} of the bytes"
    if bad:
        note += f"; {bad:,} datagrams out of order or cut"
    return {"seconds": seconds * total_bytes / max(nbytes, 1), "cpu": cpu,
            "path": "userspace" if t is not None and t.argv[0] == common.ZC else "", "note": note}


def run_relay(ctx, tool, size, count):
    ps = Procs(timeout_for(count * size))
    try:
        sink = ps.spawn("sink", [common.UDPB, "sink"], stdout=subprocess.PIPE)
        port = sink.stdout.readline().decode().strip()
        if not port:
            raise Failed("udpb sink did not bind")
        if tool == "zerocat":
            p = ps.spawn("tool", [common.ZC, "--stats", "json", "relay", "udp-listen:127.0.0.1:0",
                                  f"udp:127.0.0.1:{port}"], daemon=True)
            target = listening_addr(p)
        elif tool == "socat":
            lport = free_port()
            p = ps.spawn("tool", ["socat", f"UDP-LISTEN:{lport},bind=127.0.0.1,fork,reuseaddr",
                                  f"UDP:127.0.0.1:{port}"], daemon=True)
            time.sleep(0.2)
            target = f"127.0.0.1:{lport}"
        else:
            target = f"127.0.0.1:{port}"
        ps.start_clock()
        ps.spawn("src", [common.UDPB, "send", target, str(size), str(count)])
        ps.wait()
        ps.check_exits()
        return udp_result(ps, sink, count, count * size)
    finally:
        ps.close()


def run_pipe(ctx, tool, nbytes):
    """A file of `nbytes` (udpb's pattern, 65,507-byte datagrams) sent by TOOL to the sink."""
    data = os.path.join(ctx["tmp"], "udp.dat")
    size = 65507
    count = nbytes // size
    if not os.path.exists(data) or os.path.getsize(data) != count * size:
        with open(data, "wb") as f:
            for seq in range(count):
                f.write(seq.to_bytes(8, "big") + bytes([seq & 0xFF]) * (size - 8))
    ps = Procs(timeout_for(count * size))
    stdin = open(data, "rb")
    try:
        sink = ps.spawn("sink", [common.UDPB, "sink"], stdout=subprocess.PIPE)
        port = sink.stdout.readline().decode().strip()
        if tool == "zerocat":
            argv = [common.ZC, "--stats", "json", "pipe", data, f"udp:127.0.0.1:{port}"]
        else:
            argv = ["nc", "-u", "-q", "0", "127.0.0.1", port]
        ps.spawn("tool", argv, stdin=stdin)
        ps.wait()
        ps.check_exits()
        return udp_result(ps, sink, count, count * size)
    finally:
        stdin.close()
        ps.close()


def scenarios(ctx):
    check = ctx["size"] <= 64 * common.MiB
    S = []
    for size in SIZES:
        count = min(ctx["size"] // size, 50_000 if check else 1_000_000)

        def runner(tool, size=size, count=count):
            return lambda: run_relay(ctx, tool, size, count)
        cs = [contender("zerocat", "zerocat", runner("zerocat"), ("relay",)),
              contender("socat UDP-LISTEN,fork", "peer", runner("socat"), ("socat",)),
              contender("direct (udpb -> sink)", "ceiling", runner(None))]
        S.append(scenario(GROUP, f"relay udp-listen -> udp, {count:,} x {size} B", count * size, cs))
    nbytes = min(ctx["size"], 256 * common.MiB)
    cs = [contender("zerocat", "zerocat", lambda: run_pipe(ctx, "zerocat", nbytes), ("pipe",)),
          contender("nc -u", "peer", lambda: run_pipe(ctx, "nc", nbytes), ("nc",))]
    S.append(scenario(GROUP, "file -> udp (pipe FILE udp: vs nc -u < FILE)", nbytes // 65507 * 65507, cs))
    return S
