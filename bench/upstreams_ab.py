#!/usr/bin/env python3
"""bench/upstreams_ab.py RUNS [ZEROCAT]: the relay's issue-41 figures, ad hoc (not rows of
bench/run yet), RUNS interleaved rounds each:

1. round-robin over 2 upstreams: redis-benchmark (the redis rows' two modes, keep-alive and
   -k 0) against two redis-servers through `zerocat relay --balance round-robin` and
   HAProxy `balance roundrobin` (tcp mode, one thread): median requests/s and the relay's
   CPU per request;
2. a 10 MiB/s limit's accuracy over 10 s, `--via splice` and `--via userspace`: the bytes an
   unthrottled feeder got through in 10 s (after a first second) over 10 MiB/s;
3. 1,000 connections paced (-L 10K each) vs unpaced (a shaped feeder, 10 KiB/s each), the
   same total rate: the relay's CPU over 10 s.

bench/NOTEBOOK.md#relay-upstreams-and-pacing keeps what it printed."""
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import common  # noqa: E402
from lib.common import Failed  # noqa: E402
from lib.procs import Procs, free_port, proc_cpu, read_line, wait_listening  # noqa: E402
from lib.redis import MODES, round_trip, start_backend  # noqa: E402

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
if len(sys.argv) > 2:
    common.ZC = os.path.abspath(sys.argv[2])
ZC = common.ZC
tmp = tempfile.mkdtemp(prefix="zcup")
rng = random.Random()


def zerocat_relay(ps, args, targets):
    """zerocat ARGS relay tcp-listen:127.0.0.1:0 TARGETS..., listening: (process, port)."""
    p = ps.spawn("tool", [ZC, *args, "relay", "tcp-listen:127.0.0.1:0", *targets], daemon=True)
    m = re.search(r"listening on 127\.0\.0\.1:(\d+)", read_line(p))
    if not m:
        raise Failed("no 'listening on' line from zerocat")
    return p, int(m.group(1))


def haproxy_rr(ps, ports):
    port = free_port()
    cfg = os.path.join(tmp, "rr.cfg")
    servers = "".join(f"    server s{i} 127.0.0.1:{p}\n" for i, p in enumerate(ports))
    with open(cfg, "w") as f:
        f.write("global\n    nbthread 1\n    maxconn 4000\n\ndefaults\n    mode tcp\n    timeout connect 5s\n"
                "    timeout client 120s\n    timeout server 120s\n\n"
                f"listen relay\n    bind 127.0.0.1:{port}\n    balance roundrobin\n{servers}")
    p = ps.spawn("tool", ["haproxy", "-db", "-f", cfg], daemon=True)
    wait_listening(port, proc=p)
    return p, port


def redis_rr(tool, args, n):
    ps = Procs(60 + n / 200)
    try:
        ports = [start_backend(ps)[1] for _ in range(2)]
        if tool == "zerocat":
            relay = ps.spawn("tool", [ZC, "-q", "relay", "--balance", "round-robin", "tcp-listen:127.0.0.1:0",
                                      *[f"tcp:127.0.0.1:{p}" for p in ports]], daemon=True)
            # -q: the listening line still comes (scripts need it).
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", read_line(relay))
            port = int(m.group(1))
        else:
            relay, port = haproxy_rr(ps, ports)
        ps.start_clock()
        bench = ps.spawn("bench", ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-q", "-n", str(n), *args],
                         stdout=subprocess.PIPE)
        out = bench.stdout.read().decode(errors="replace").replace("\r", "\n")
        round_trip(port, rng)
        ps.wait()
        rates = [float(v) for v in re.findall(r"^[A-Z_]+: ([\d.]+) requests per second", out, re.M)]
        t = ps.tool()
        return sum(n / r for r in rates), t.cpu, len(rates)
    finally:
        ps.close()


def feeder(port, seconds, stop, counter, rate=None):
    """Sends to the relay as fast as it takes (or at `rate` B/s); counts what went."""
    s = socket.create_connection(("127.0.0.1", port))
    chunk = bytes(64 << 10) if rate is None else bytes(max(1, rate // 10))
    try:
        while not stop.is_set():
            if rate is None:
                counter[0] += s.send(chunk)
            else:
                s.sendall(chunk)
                counter[0] += len(chunk)
                time.sleep(0.1)
    except OSError:
        pass
    finally:
        s.close()


def sink():
    """A TCP server that reads and counts everything; (port, counter)."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(2048)
    got = [0]
    lock = threading.Lock()

    def serve(c):
        while True:
            b = c.recv(1 << 20)
            if not b:
                break
            with lock:
                got[0] += len(b)
        c.close()

    def accept():
        while True:
            c, _ = ls.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    return ls.getsockname()[1], got


def limit_accuracy(via, rate=10 << 20, seconds=10.0):
    port_s, got = sink()
    ps = Procs(seconds + 30)
    try:
        _, port = zerocat_relay(ps, ["-q", "--via", via, "-L", str(rate)], [f"tcp:127.0.0.1:{port_s}"])
        stop, sent = threading.Event(), [0]
        threading.Thread(target=feeder, args=(port, seconds, stop, sent), daemon=True).start()
        time.sleep(1)
        b0, t0 = got[0], time.monotonic()
        time.sleep(seconds)
        b1, t1 = got[0], time.monotonic()
        stop.set()
        return (b1 - b0) / (t1 - t0) / rate
    finally:
        ps.close()


def paced_cpu(paced, conns=1000, each=10 << 10, seconds=10.0):
    port_s, got = sink()
    ps = Procs(seconds + 60)
    try:
        relay = ps.spawn("tool", [ZC, "-q", *(["-L", str(each)] if paced else []), "relay", "--max-conns",
                                  str(conns + 10), "tcp-listen:127.0.0.1:0,backlog=2048", f"tcp:127.0.0.1:{port_s}"],
                         daemon=True)
        port = int(re.search(r":(\d+)", read_line(relay)).group(1))
        stop = threading.Event()
        # Paced: each feeder sends as fast as it can, the relay holds it to `each`; unpaced:
        # each feeder holds itself to `each`. The same total either way.
        for _ in range(conns):
            threading.Thread(target=feeder, args=(port, seconds, stop, [0], None if paced else each),
                             daemon=True).start()
        time.sleep(2)
        c0, b0, t0 = proc_cpu(relay.pid), got[0], time.monotonic()
        time.sleep(seconds)
        c1, b1, t1 = proc_cpu(relay.pid), got[0], time.monotonic()
        stop.set()
        return c1 - c0, (b1 - b0) / (t1 - t0)
    finally:
        ps.close()


print(f"zerocat {ZC}; load {os.getloadavg()}", flush=True)
for name, args, n, _ in MODES:
    res = {"zerocat": [], "haproxy": []}
    for i in range(runs):
        order = ["zerocat", "haproxy"] if i % 2 == 0 else ["haproxy", "zerocat"]
        for tool in order:
            res[tool].append(redis_rr(tool, args, n))
    for tool, rs in res.items():
        total = [n * k for _, _, k in rs]
        rps = [t / s for (s, _, _), t in zip(rs, total)]
        cpu = [c / t * 1e6 for (_, c, _), t in zip(rs, total)]
        print(f"round-robin over 2, {name}: {tool}: {statistics.median(rps):,.0f} requests/s "
              f"({min(rps):,.0f}-{max(rps):,.0f}), relay CPU {statistics.median(cpu):.1f} us/request", flush=True)
for via in ["splice", "userspace"]:
    ratios = [limit_accuracy(via) for _ in range(runs)]
    print(f"-L 10M over 10 s, --via {via}: measured/limit " + ", ".join(f"{r:.4f}" for r in ratios), flush=True)
for i in range(runs):
    for paced in ([True, False] if i % 2 == 0 else [False, True]):
        cpu, rate = paced_cpu(paced)
        print(f"1,000 connections {'paced -L 10K' if paced else 'unpaced (feeders at 10 KiB/s)'}: relay CPU "
              f"{cpu:.2f} s over 10 s, {rate / 1024:,.0f} KiB/s in all", flush=True)
