#!/usr/bin/env python3
"""bench/workers_ab.py [RUNS]: how relay workers should share a listener (issue 15: "one
SO_REUSEPORT listener per worker, or a shared listener with EPOLLEXCLUSIVE -- measure both,
choose one"). `exclusive`: one zerocat, `--workers 2`, both event loops on the one listening
socket (EPOLLEXCLUSIVE, what zerocat does). `reuseport`: two zerocat processes, `--workers
1` each, each with a listening socket of its own on the same port (`tcp-listen:...,reuseport`:
the kernel hashes each new connection to one of them). For each, RUNS interleaved rounds
of redis-benchmark through the relay (keep-alive `-c 50 -t set,get`, then `-k 0 -c 20 -t
ping_inline`): requests/s (median), the relays' CPU per request, and how the connections
were spread (from `--log`: the share of the busiest worker or process). redis-server,
redis-benchmark and the relays share the machine's cores. Output: a markdown table on stdout."""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import common  # noqa: E402
from lib.procs import free_port, proc_cpu, wait_listening  # noqa: E402

MODES = {"ka": ["-n", "50000", "-c", "50", "-t", "set,get"], "k0": ["-n", "20000", "-k", "0", "-c", "20", "-t", "ping_inline"]}
REQUESTS = {"ka": 100_000, "k0": 20_000}


def relays(mode, rport, tmp):
    port = free_port()
    target = f"tcp:127.0.0.1:{rport}"
    if mode == "exclusive":
        specs = [(["--workers", "2"], f"tcp-listen:127.0.0.1:{port}")]
    else:
        specs = [(["--workers", "1"], f"tcp-listen:127.0.0.1:{port},reuseport")] * 2
    ps = []
    for i, (extra, listen) in enumerate(specs):
        log = os.path.join(tmp, f"{mode}-{i}.log")
        if os.path.exists(log):
            os.unlink(log)
        ps.append((subprocess.Popen([common.ZC, "-q", "relay", *extra, "--log", log, listen, target],
                                    stderr=subprocess.DEVNULL), log))
        # The log's start line is written as it starts (just before it binds): then a
        # moment for the bind, since the port may already answer for the other one.
        deadline = time.monotonic() + 10
        while not (os.path.exists(log) and os.path.getsize(log) > 0):
            if time.monotonic() > deadline or ps[-1][0].poll() is not None:
                raise RuntimeError(f"relay {i} did not start")
            time.sleep(0.01)
        wait_listening(port, proc=ps[-1][0])
        time.sleep(0.3)
    return port, ps


def round_(mode, tmp):
    rport = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--protected-mode", "no", "--logfile", ""],
                             stdout=subprocess.DEVNULL)
    try:
        wait_listening(rport, proc=redis)
        port, ps = relays(mode, rport, tmp)
        out = {}
        for name, args in MODES.items():
            cpu0 = sum(proc_cpu(p.pid) for p, _ in ps)
            got = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-q", *args],
                                 capture_output=True, text=True, timeout=300).stdout.replace("\r", "\n")
            cpu = sum(proc_cpu(p.pid) for p, _ in ps) - cpu0
            rates = [float(x) for x in re.findall(r"([\d.]+) requests per second", got)]
            n = int(args[args.index("-n") + 1])
            secs = sum(n / r for r in rates)
            out[name] = {"rps": len(rates) * n / secs, "cpu_us": cpu / REQUESTS[name] * 1e6}
        for p, _ in ps:
            p.send_signal(signal.SIGINT)
            p.wait(timeout=20)
        counts = {}
        for i, (_, log) in enumerate(ps):
            for line in open(log):
                j = json.loads(line)
                if j.get("event") == "connection":
                    key = (i, j["worker"])
                    counts[key] = counts.get(key, 0) + 1
        total = sum(counts.values())
        out["busiest"] = max(counts.values()) / total if total else None
        out["conns"] = total
        return out
    finally:
        redis.terminate()
        redis.wait()


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    common.ZC = os.environ.get("ZC", os.path.join(common.ROOT, "target", "release", "zerocat"))
    tmp = tempfile.mkdtemp(prefix="zcworkers")
    res = {"exclusive": [], "reuseport": []}
    for i in range(runs):
        for mode in (("exclusive", "reuseport") if i % 2 == 0 else ("reuseport", "exclusive")):
            res[mode].append(round_(mode, tmp))
    print(f"RUNS={runs}, zerocat {common.ZC}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| listener sharing | keep-alive requests/s | relay CPU µs/request | -k 0 requests/s | relay CPU µs/connection "
          "| busiest worker's share of the connections |")
    print("|---|---:|---:|---:|---:|---:|")
    for mode, rs in res.items():
        med = lambda f: statistics.median(f(r) for r in rs)
        print(f"| {mode} | {med(lambda r: r['ka']['rps']):,.0f} | {med(lambda r: r['ka']['cpu_us']):.1f} "
              f"| {med(lambda r: r['k0']['rps']):,.0f} | {med(lambda r: r['k0']['cpu_us']):.1f} "
              f"| {med(lambda r: r['busiest']):.0%} (of {rs[0]['conns']:,}) |")


if __name__ == "__main__":
    main()
