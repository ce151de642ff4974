#!/usr/bin/env python3
"""bench/redis_sched.py ROUNDS RELAY...: how the relay sleeps and wakes under redis-benchmark
keep-alive (`-c 50 -t set,get`, 50,000 requests a test), for zerocat binaries (`--workers 1`)
and `haproxy` (tcp mode, nbthread 1), interleaved. A RELAY is a path to a zerocat binary
(or a script that execs one) or the word haproxy.

Per run: requests/s (SET, GET); the relay's voluntary and involuntary context switches and
its CPU (all, user); redis-server's voluntary switches; the cores left idle on average
(/proc/stat); TCP segments sent (nstat). The question behind it: why requests/s stays under
HAProxy's while the relay spends less CPU per request (bench/NOTEBOOK.md#relay-sleeping-less-not-kept).
Ad hoc, like redis_ab.py; needs redis-server, redis-benchmark, haproxy and nstat."""
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import common  # noqa: E402
from lib.procs import Procs  # noqa: E402
from lib.redis import start_backend, start_relay  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def task(pid):
    """Voluntary and involuntary switches, CPU and user CPU of a process's main thread."""
    out = {}
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("voluntary_ctxt_switches"):
            out["vol"] = int(line.split()[1])
        elif line.startswith("nonvoluntary_ctxt_switches"):
            out["invol"] = int(line.split()[1])
    stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    out["cpu"] = (int(stat[11]) + int(stat[12])) / TICK
    out["user"] = int(stat[11]) / TICK
    return out


def idle_ticks():
    f = open("/proc/stat").readline().split()
    return int(f[4]) + int(f[5])


def run(relay, ctx):
    ps = Procs(120)
    try:
        server, rport = start_backend(ps)
        if relay == "haproxy":
            proc, port = start_relay(ctx, ps, ("haproxy",), rport)
        else:
            common.ZC = relay
            proc, port = start_relay(ctx, ps, ("zerocat", ["--workers", "1"]), rport)
        subprocess.run(["nstat", "-n"], check=True)
        r0, s0, i0, t0 = task(proc.pid), task(server.pid), idle_ticks(), time.time()
        out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-q", "-n", "50000",
                              "-c", "50", "-t", "set,get"], capture_output=True, text=True, check=True).stdout
        r1, s1, i1, wall = task(proc.pid), task(server.pid), idle_ticks(), time.time() - t0
        segs = subprocess.run(["nstat", "-z", "TcpOutSegs"], capture_output=True, text=True).stdout.split()
    finally:
        ps.close()
    rates = dict(re.findall(r"([A-Z_]+): ([\d.]+) requests per second", out.replace("\r", "\n")))
    relay_d = {k: r1[k] - r0[k] for k in r1}
    return (f"SET {float(rates['SET']):,.0f} GET {float(rates['GET']):,.0f} req/s | relay switches "
            f"{relay_d['vol']:,} vol {relay_d['invol']:,} invol, CPU {relay_d['cpu']:.2f} s (user "
            f"{relay_d['user']:.2f}) | redis-server {s1['vol'] - s0['vol']:,} vol | idle cores "
            f"{(i1 - i0) / TICK / wall:.2f} | TcpOutSegs {segs[segs.index('TcpOutSegs') + 1]}")


def main():
    rounds, relays = int(sys.argv[1]), [r if r == "haproxy" else os.path.abspath(r) for r in sys.argv[2:]]
    with tempfile.TemporaryDirectory(prefix="zcsched") as tmp:
        ctx = {"tmp": tmp}
        for i in range(rounds):
            k = i % len(relays)
            for relay in relays[k:] + relays[:k]:
                print(f"{os.path.basename(relay):24} {run(relay, ctx)}", flush=True)


if __name__ == "__main__":
    main()
