"""The redis family: small requests and responses through a relay, the traffic most relays
carry. redis-benchmark against redis-server on loopback, straight or through zerocat relay,
HAProxy (tcp mode, one thread) or socat fork; keep-alive (`-c 50 -t set,get`) and one
connection per request (`-k 0 -c 20 -t ping_inline`). Rows are requests/s (redis-benchmark's
own figure) and the relay's CPU per request; every run also checks a 64 KiB value's round
trip (SET, then GET through the relay, compared byte for byte)."""
import re
import socket
import statistics
import subprocess

from . import common
from .common import Failed, quiet
from .measure import contender, scenario
from .procs import Procs, free_port, read_line, wait_listening
from .relay import start_haproxy
from .table import status

GROUP = "redis"
# (name, redis-benchmark arguments, requests per test full / --check)
MODES = [("keep-alive -c 50 set,get", ["-c", "50", "-t", "set,get"], 50_000, 2_000),
         ("one connection per request -k 0 -c 20 ping_inline", ["-k", "0", "-c", "20", "-t", "ping_inline"], 20_000, 500)]


def resp(*args):
    out = [f"*{len(args)}\r\n".encode()]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += [f"${len(a)}\r\n".encode(), a, b"\r\n"]
    return b"".join(out)


def round_trip(port, rng):
    """SET a 64 KiB random value through the relay on `port`, GET it back: same bytes."""
    value = rng.randbytes(64 << 10)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(resp("SET", "zerocat-bench", value) + resp("GET", "zerocat-bench"))
        want = b"+OK\r\n" + f"${len(value)}\r\n".encode() + value + b"\r\n"
        got = b""
        while len(got) < len(want):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            got += chunk
    if got != want:
        raise Failed(f"round trip through the relay: {len(got)} bytes back, expected {len(want)}"
                     + ("" if len(got) != len(want) else " (bytes differ)"))


def start_backend(ps):
    """A fresh redis-server on loopback, a daemon of `ps`, listening when it returns: its
    process and port."""
    rport = free_port()
    backend = ps.spawn("backend", ["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                                   "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no",
                                   "--logfile", ""], daemon=True)
    wait_listening(rport, proc=backend)
    return backend, rport


def start_relay(ctx, ps, tool, rport):
    """`tool` relaying a loopback port to redis on `rport`, listening when it returns: the
    relay's process (None: direct) and the port clients use. tool: ("zerocat", extra relay
    args) | ("haproxy",) | ("socat",) | None (direct)."""
    if tool is None:
        return None, rport
    if tool[0] == "zerocat":
        p = ps.spawn("tool", [common.ZC, "relay", *tool[1], "tcp-listen:127.0.0.1:0", f"tcp:127.0.0.1:{rport}"],
                     daemon=True)
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", read_line(p))
        if not m:
            raise Failed("no 'listening on 127.0.0.1:PORT' line from zerocat")
        return p, int(m.group(1))
    port = free_port()
    if tool[0] == "haproxy":
        return start_haproxy(ps, ctx["tmp"], f"127.0.0.1:{port}", f"127.0.0.1:{rport}"), port
    p = ps.spawn("tool", ["socat", f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,backlog=1024",
                          f"TCP:127.0.0.1:{rport}"], daemon=True)
    wait_listening(port, proc=p)
    return p, port


def run_redis(ctx, tool, args, n):
    """redis-benchmark -n `n` `args` against a fresh redis-server, through `tool` (see
    start_relay)."""
    ps = Procs(60 + n / 200)
    try:
        _, rport = start_backend(ps)
        _, port = start_relay(ctx, ps, tool, rport)
        return bench_through(ctx, ps, port, args, n)
    finally:
        ps.close()


def bench_through(ctx, ps, port, args, n):
    """redis-benchmark -n `n` `args` against `port` (the relay of `ps`, whose backends are
    up), then a 64 KiB round trip: the run's result, with each test's requests/s."""
    ps.start_clock()
    bench = ps.spawn("bench", ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-q", "-n", str(n), *args],
                     stdout=subprocess.PIPE)
    out = bench.stdout.read().decode(errors="replace").replace("\r", "\n")
    round_trip(port, ctx["rng"])
    ps.wait()
    ps.check_exits()
    rates = {t: float(v) for t, v in re.findall(r"^([A-Z_]+): ([\d.]+) requests per second", out, re.M)}
    tests = args[args.index("-t") + 1].upper().split(",")
    if sorted(rates) != sorted(tests):
        raise Failed(f"redis-benchmark reported {sorted(rates)}, expected {tests}: {out.strip()[-200:]!r}")
    t = ps.tool()
    return {"seconds": sum(n / r for r in rates.values()), "cpu": t.cpu if t is not None else None, "path": "",
            "rates": rates}


def workers_option():
    """True when this zerocat's relay has --workers (issue 15): then rows for 1 and 2."""
    return "--workers" in quiet([common.ZC, "relay", "--help"]).stdout


def scenarios(ctx):
    S = []
    for name, args, full, check in MODES:
        n = check if ctx.get("check") else full
        tests = len(args[args.index("-t") + 1].split(","))

        def runner(tool, args=args, n=n):
            return lambda: run_redis(ctx, tool, args, n)
        cs = [contender("zerocat", "zerocat", runner(("zerocat", [])), ("relay",))]
        if workers_option():
            cs += [contender("zerocat --workers 1", "zerocat", runner(("zerocat", ["--workers", "1"])), ("relay",)),
                   contender("zerocat --workers 2", "zerocat", runner(("zerocat", ["--workers", "2"])), ("relay",))]
        cs += [contender("haproxy", "peer", runner(("haproxy",)), ("haproxy", "redis-server", "redis-benchmark")),
               contender("socat fork", "peer", runner(("socat",)), ("socat", "redis-server", "redis-benchmark")),
               contender("direct (no relay)", "ceiling", runner(None), ("redis-server", "redis-benchmark"))]
        for c in cs:
            if c["kind"] == "zerocat":
                c["needs"] = c["needs"] + ("redis-server", "redis-benchmark")
        S.append(scenario(GROUP, f"redis {name}", n * tests, cs))
    return S


def table(rows):
    """RESULTS.md's redis section: requests/s rows (not GiB/s)."""
    rs = [r for r in rows if r["group"] == GROUP]
    if not rs:
        return []
    return requests_table(rs, "## redis: small requests through the relay\n", "`redis-benchmark -q -n N ARGS` against `redis-server` on 127.0.0.1, straight or through the relay "
         "(zerocat relay with a listener, HAProxy tcp mode `nbthread 1`, `socat ... fork`). requests/s: "
         "the median over the runs of redis-benchmark's own figure (all tests of the row together: total "
         "requests over the sum of each test's time; each test's median beside it); relay CPU: user+sys of "
         "the relay process (and its children, for socat fork) per request, median; **×ref**: per "
         "repetition, this tool's time over zerocat's, median (above 1: zerocat was faster). redis-server, "
         "redis-benchmark and the relay share the machine's cores. Each run also checked a 64 KiB value's "
         "SET/GET round trip through the relay byte for byte.\n")


def requests_table(rs, title, intro):
    """A table of requests/s rows (redis-benchmark through a relay) under `title`."""
    L = [title, intro,
         "| scenario | tool | requests/s | min–max | relay CPU µs/request | ×ref | each test (requests/s) | note |",
         "|---|---|---:|---:|---:|---:|---|---|"]
    for r in rs:
        if r["median"] is None:
            L.append(f"| {r['scenario']} | {r['tool']} | | | | | | {status(r)} |")
            continue
        cpus = [x["cpu"] for x in r["runs"] if x["cpu"] is not None]
        cpu = f"{statistics.median(cpus) / r['bytes'] * 1e6:.1f}" if cpus else "–"
        tests = sorted({t for x in r["runs"] for t in x.get("rates", {})})
        each = ", ".join(f"{t} {statistics.median(x['rates'][t] for x in r['runs']):,.0f}" for t in tests)
        L.append(f"| {r['scenario']} | {r['tool']} | {r['bytes'] / r['median']:,.0f} | {r['bytes'] / r['hi']:,.0f}–"
                 f"{r['bytes'] / r['lo']:,.0f} | {cpu} | " + (f"{r['ratio']:.2f}" if r["ratio"] else "")
                 + f" | {each} | {status(r)} |")
    L.append("")
    return L

