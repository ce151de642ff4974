#!/usr/bin/env python3
"""bench/redis_sched.py ROUNDS RELAY...: how the relay sleeps and wakes under redis-benchmark
keep-alive (`-c 50 -t set,get`, 50,000 requests a test), for zerocat binaries (`--workers 1`)
and `haproxy` (tcp mode, nbthread 1), interleaved. A RELAY is a path to a zerocat binary
(or a script that execs one) or the word haproxy.

Per run: requests/s (SET, GET); the relay's voluntary and involuntary context switches and
its CPU (all, user); redis-server's voluntary switches; the cores left idle on average
(/proc/stat); TCP segments sent (nstat). The question behind it: why requests/s stays under
HAProxy's while the relay spends less CPU per request (bench/RESULTS.md#relay-sleeping-less-not-kept).
Ad hoc, like redis_ab.py; needs redis-server, redis-benchmark, haproxy and nstat."""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port):
    for _ in range(250):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return
        except OSError:
            time.sleep(0.02)
    raise SystemExit(f"nothing listens on {port}")


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


def run(relay, tmp):
    rport = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--logfile", ""], stdout=subprocess.DEVNULL)
    wait_listening(rport)
    port = free_port()
    if relay == "haproxy":
        cfg = os.path.join(tmp, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(f"global\n nbthread 1\ndefaults\n mode tcp\n timeout connect 5s\n timeout client 60s\n"
                    f" timeout server 60s\nfrontend f\n bind 127.0.0.1:{port}\n default_backend b\n"
                    f"backend b\n server s 127.0.0.1:{rport}\n")
        proc = subprocess.Popen(["haproxy", "-f", cfg, "-db"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    else:
        proc = subprocess.Popen([relay, "relay", "--workers", "1", f"tcp-listen:127.0.0.1:{port}",
                                 f"tcp:127.0.0.1:{rport}"], stderr=subprocess.DEVNULL)
    try:
        wait_listening(port)
        subprocess.run(["nstat", "-n"], check=True)
        r0, s0, i0, t0 = task(proc.pid), task(server.pid), idle_ticks(), time.time()
        out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-q", "-n", "50000",
                              "-c", "50", "-t", "set,get"], capture_output=True, text=True, check=True).stdout
        r1, s1, i1, wall = task(proc.pid), task(server.pid), idle_ticks(), time.time() - t0
        segs = subprocess.run(["nstat", "-z", "TcpOutSegs"], capture_output=True, text=True).stdout.split()
    finally:
        proc.terminate()
        server.terminate()
        proc.wait()
        server.wait()
    rates = dict(re.findall(r"([A-Z_]+): ([\d.]+) requests per second", out.replace("\r", "\n")))
    relay_d = {k: r1[k] - r0[k] for k in r1}
    return (f"SET {float(rates['SET']):,.0f} GET {float(rates['GET']):,.0f} req/s | relay switches "
            f"{relay_d['vol']:,} vol {relay_d['invol']:,} invol, CPU {relay_d['cpu']:.2f} s (user "
            f"{relay_d['user']:.2f}) | redis-server {s1['vol'] - s0['vol']:,} vol | idle cores "
            f"{(i1 - i0) / TICK / wall:.2f} | TcpOutSegs {segs[segs.index('TcpOutSegs') + 1]}")


def main():
    rounds, relays = int(sys.argv[1]), sys.argv[2:]
    with tempfile.TemporaryDirectory(prefix="zcsched") as tmp:
        for i in range(rounds):
            k = i % len(relays)
            for relay in relays[k:] + relays[:k]:
                print(f"{os.path.basename(relay):24} {run(relay, tmp)}", flush=True)


if __name__ == "__main__":
    main()
