#!/usr/bin/env python3
"""bench/reqcost.py [-n ROUNDS] [-m MODES] RELAY...: where a small request's time goes, for
each relay and for its neighbours, under relaycost.sh's redis loads (issue 45).

A RELAY is `haproxy` (tcp mode, nbthread 1, as relaycost.sh configures it), `minrelay`
(bench/minrelay.c: the least a relay can do, the floor; `minrelay-defer`: the same with a
batch's writes after all its reads), `direct` (no relay), or `NAME=ZEROCAT_BINARY[,RELAY ARGS...]` (e.g. `main=/tmp/zc,--workers,1`). MODES:
`ka` (keep-alive `-n 50000 -c 50 -t set,get`), `nc` (`-k 0 -n 20000 -c 20 -t ping_inline`),
`rr` and `rn` (`ka` and `nc` with round-robin over two redis-servers; zerocat `--balance
round-robin`, HAProxy `balance roundrobin`). The processes stay up across rounds (as in relaycost.sh); rounds are
interleaved, and the relays' order rotates each round.

Sessions: a relay's name ending in `@own` (`haproxy@own`, `minrelay@own`, `NAME@own=BINARY...`)
runs in a session of its own, and `--redis-own` runs redis-server so: with the kernel's
autogroups each session is a scheduling group, and relaycost.sh daemonizes haproxy (`-D`) and
redis-server (`--daemonize yes`) into groups of their own while zerocat shares the script's
with redis-benchmark (`haproxy@own main=... --redis-own` is relaycost.sh's arrangement). A new
session's group gets this process's autogroup nice (the niced-autogroup trick carries over).

Per run, per request: the relay's CPU (user+sys over all its threads, /proc/PID/stat) and its
voluntary and involuntary context switches (summed over /proc/PID/task/*/status);
redis-server's CPU and voluntary switches; redis-benchmark's (from wait4's rusage); the
cores left idle (/proc/stat). The load-independent columns are the per-request ones; the
requests/s is redis-benchmark's own figure (all tests: requests over the sum of each test's
time). `with redis`, `with bench`: the share of 2 ms samples (field 39 of /proc/PID/stat) in
which the relay's main thread last ran on the CPU redis-server (the first one) or
redis-benchmark last ran on: on 2 CPUs the three settle into a placement per run that decides
its rate (bench/NOTEBOOK.md, `relay: where it runs`; with `--workers` above 1 the loops are
other threads, and the column says little). Loopback only; needs redis-server,
redis-benchmark and haproxy."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib.procs import free_port, wait_listening  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
MODES = {
    "ka": (["-n", "50000", "-c", "50", "-t", "set,get"], 100_000),
    "nc": (["-n", "20000", "-c", "20", "-k", "0", "-t", "ping_inline"], 20_000),
    "rr": (["-n", "50000", "-c", "50", "-t", "set,get"], 100_000),
    "rn": (["-n", "20000", "-c", "20", "-k", "0", "-t", "ping_inline"], 20_000),
}


def proc_sample(pid):
    """CPU seconds (all threads) and voluntary, involuntary switches summed over threads."""
    stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / TICK
    vol = invol = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            for line in open(f"/proc/{pid}/task/{t}/status"):
                if line.startswith("voluntary_ctxt_switches"):
                    vol += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    invol += int(line.split()[1])
        except FileNotFoundError:
            pass
    return cpu, vol, invol


def runq_wait(pid):
    """Seconds the process's threads spent runnable, waiting for a CPU (schedstat's second field)."""
    ns = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            ns += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[1])
        except (FileNotFoundError, IndexError, ValueError):
            pass
    return ns / 1e9


def out_segs():
    lines = [l.split() for l in open("/proc/net/snmp") if l.startswith("Tcp:")]
    return int(lines[1][lines[0].index("OutSegs")])


def own_session_kwargs(own):
    """Popen arguments that start a process in a session (an autogroup) of its own."""
    return {"start_new_session": True} if own else {}


def give_group_our_nice(proc):
    """A new session's autogroup starts at nice 0: give it the caller's (the niced-autogroup trick)."""
    try:
        nice = open("/proc/self/autogroup").read().split()[-1]
        with open(f"/proc/{proc.pid}/autogroup", "w") as f:
            f.write(nice)
    except OSError as e:
        print(f"note: autogroup nice not set for {proc.pid}: {e}", file=sys.stderr)


def idle_ticks():
    f = open("/proc/stat").readline().split()
    return int(f[4]) + int(f[5])


class Relay:
    def __init__(self, spec, backends, tmp, mode):
        self.proc = None
        head = spec.split("=", 1)[0]
        own = head.endswith("@own")
        if own:
            spec = spec.replace("@own", "", 1)
        self.name = head
        session = own_session_kwargs(own)
        if spec == "direct":
            self.port = backends[0]
            return
        self.port = free_port()
        if spec in ("minrelay", "minrelay-defer"):
            binary = os.path.join(tmp, "minrelay")
            if not os.path.exists(binary):
                here = os.path.dirname(os.path.abspath(__file__))
                subprocess.run(["cc", "-O2", "-o", binary, os.path.join(here, "minrelay.c")], check=True)
            env = dict(os.environ, **({"MINRELAY_DEFER": "1"} if spec.endswith("defer") else {}))
            self.proc = subprocess.Popen([binary, str(self.port), *map(str, backends)], env=env, **session)
        elif spec == "haproxy":
            servers = "\n".join(f"  server s{i} 127.0.0.1:{p}" for i, p in enumerate(backends))
            balance = "  balance roundrobin\n" if len(backends) > 1 else ""
            cfg = os.path.join(tmp, f"hap{self.port}.cfg")
            with open(cfg, "w") as f:
                f.write(f"global\n  maxconn 8192\n  nbthread 1\ndefaults\n  mode tcp\n  timeout connect 5s\n"
                        f"  timeout client 120s\n  timeout server 120s\nlisten redis\n  bind 127.0.0.1:{self.port}\n"
                        f"{balance}{servers}\n")
            self.proc = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL, **session)
        else:
            _, rest = spec.split("=", 1)
            binary, *args = rest.split(",")
            ups = [f"tcp:127.0.0.1:{p}" for p in backends]
            if len(backends) > 1:
                args += ["--balance", "round-robin"]
            self.proc = subprocess.Popen([binary, "-q", "relay", *args, f"tcp-listen:127.0.0.1:{self.port}", *ups],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **session)
        if own:
            give_group_our_nice(self.proc)
        wait_listening(self.port, proc=self.proc)

    def close(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait()


def last_cpu(pid):
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[36])
    except (OSError, IndexError, ValueError):
        return None


def sample_placement(relay_pid, redis_pid, bench_pid, stop, out):
    """Every 2 ms until `stop`: is the relay on redis's CPU, on the client's? -> out."""
    same_redis = same_bench = n = 0
    while not stop.is_set():
        r, s, b = last_cpu(relay_pid), last_cpu(redis_pid), last_cpu(bench_pid)
        if None not in (r, s, b):
            n += 1
            same_redis += r == s
            same_bench += r == b
        time.sleep(0.002)
    if n:
        out.update(with_redis=same_redis / n, with_bench=same_bench / n)


def bench(port, args, relay_pid=None, redis_pid=None, placement=None):
    p = subprocess.Popen(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-q", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    stop = threading.Event()
    sampler = None
    if relay_pid and placement is not None:
        sampler = threading.Thread(target=sample_placement,
                                   args=(relay_pid, redis_pid, p.pid, stop, placement))
        sampler.start()
    out = p.stdout.read()
    stop.set()
    if sampler:
        sampler.join()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = status
    rates = [float(v) for v in re.findall(r"([\d.]+) requests per second", out.replace("\r", "\n"))]
    return rates, ru


def run(relay, redis, args, n):
    r0 = proc_sample(relay.proc.pid) if relay.proc else None
    s0 = [proc_sample(p.pid) for p in redis]
    q0 = [runq_wait(relay.proc.pid) if relay.proc else 0, sum(runq_wait(p.pid) for p in redis)]
    o0 = out_segs()
    i0, t0 = idle_ticks(), time.time()
    placement = {}
    rates, ru = bench(relay.port, args, relay.proc.pid if relay.proc else None, redis[0].pid, placement)
    wall = time.time() - t0
    r1 = proc_sample(relay.proc.pid) if relay.proc else None
    s1 = [proc_sample(p.pid) for p in redis]
    q1 = [runq_wait(relay.proc.pid) if relay.proc else 0, sum(runq_wait(p.pid) for p in redis)]
    o1 = out_segs()
    i1 = idle_ticks()
    per_test = n / len(rates)
    rps = n / sum(per_test / r for r in rates) if rates else 0.0
    us = 1e6 / n
    row = {"rps": rps, "idle": (i1 - i0) / TICK / wall,
           "bench_cpu": (ru.ru_utime + ru.ru_stime) * us, "bench_vol": ru.ru_nvcsw / n,
           "redis_cpu": sum(b[0] - a[0] for a, b in zip(s0, s1)) * us,
           "redis_vol": sum(b[1] - a[1] for a, b in zip(s0, s1)) / n,
           "redis_rq": (q1[1] - q0[1]) * us, "segs": (o1 - o0) / n}
    if r0:
        row.update(relay_cpu=(r1[0] - r0[0]) * us, relay_vol=(r1[1] - r0[1]) / n, relay_invol=(r1[2] - r0[2]) / n,
                   relay_rq=(q1[0] - q0[0]) * us)
        row.update(placement)
    return row


COLS = [("rps", "req/s", "{:,.0f}"), ("relay_cpu", "relay µs", "{:.1f}"), ("relay_vol", "relay vol", "{:.3f}"),
        ("relay_invol", "relay invol", "{:.3f}"), ("relay_rq", "relay rq µs", "{:.1f}"),
        ("redis_cpu", "redis µs", "{:.1f}"), ("redis_rq", "redis rq µs", "{:.1f}"),
        ("redis_vol", "redis vol", "{:.3f}"), ("bench_cpu", "bench µs", "{:.1f}"),
        ("bench_vol", "bench vol", "{:.3f}"), ("idle", "idle cores", "{:.2f}"),
        ("with_redis", "with redis", "{:.2f}"), ("with_bench", "with bench", "{:.2f}"), ("segs", "segs", "{:.2f}")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("-m", default="ka,nc")
    ap.add_argument("--redis-own", action="store_true", help="redis-server in a session of its own")
    ap.add_argument("relays", nargs="+")
    o = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="reqcost") as tmp:
        for mode in o.m.split(","):
            args, n = MODES[mode]
            ports = [free_port() for _ in range(2 if mode in ("rr", "rn") else 1)]
            redis = [subprocess.Popen(["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "",
                                       "--appendonly", "no", "--logfile", ""], stdout=subprocess.DEVNULL,
                                      **own_session_kwargs(o.redis_own))
                     for p in ports]
            if o.redis_own:
                for r in redis:
                    give_group_our_nice(r)
            for p, r in zip(ports, redis):
                wait_listening(p, proc=r)
            relays = [Relay(s, ports, tmp, mode) for s in o.relays]
            try:
                for i in range(o.n):
                    k = i % len(relays)
                    for relay in relays[k:] + relays[:k]:
                        row = run(relay, redis, args, n)
                        results.setdefault((mode, relay.name), []).append(row)
                        print(f"{mode} {relay.name:10} " + " ".join(
                            f"{h} {fmt.format(row[c])}" for c, h, fmt in COLS if c in row), flush=True)
            finally:
                for r in relays:
                    r.close()
                for r in redis:
                    r.terminate()
                    r.wait()
    load = open("/proc/loadavg").read().split()[:3]
    print(f"\n# medians of {o.n} interleaved rounds, load {' '.join(load)} at the end")
    print("| mode | relay | " + " | ".join(h for _, h, _ in COLS) + " |")
    print("|---|---|" + "---:|" * len(COLS))
    for (mode, name), rows in results.items():
        cells = []
        for c, _, fmt in COLS:
            vals = [r[c] for r in rows if c in r]
            cells.append(fmt.format(statistics.median(vals)) if vals else "–")
        print(f"| {mode} | {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
