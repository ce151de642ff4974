"""The tls family: a TLS terminator in front of a plain TCP service, the way people put TLS
on a quick relay. Bulk: a file sent by `zerocat pipe FILE tls:` (the same client for every
row) through the terminator to the zcb sink; the terminator is zerocat `relay --once
tls-listen:… tcp:`, socat `OPENSSL-LISTEN`, `ncat --ssl -l --sh-exec 'ncat …'` and HAProxy
`bind … ssl crt` (tcp mode, one thread). Requests: redis-benchmark through a zerocat
originator (`relay tcp-listen: tls:`, the same for every row) into the terminator in front of
redis-server. Rows report the terminator's CPU. The certificates are made once per run with
openssl (a CA, a server certificate for localhost)."""
import os
import statistics
import subprocess
import sys
import time

from . import common
from .checks import Sample, listening_sink, sink_check
from .common import Failed
from .measure import contender, scenario
from .procs import Procs, free_port, listening_addr, result, timeout_for, wait_listening
from .redis import MODES, round_trip, start_backend
from .table import status

GROUP = "tls"
HANDSHAKES = os.path.join(common.BENCH, "handshakes.py")
# the handshake rows: client processes at once, connections each (full run / --check), and
# the terminator's threads (zerocat --workers, HAProxy nbthread)
HS_CLIENTS, HS_CONNS, HS_CONNS_CHECK, HS_THREADS = 3, 1000, 100, 2
HS_NAME = f"full TLS handshakes, {HS_CLIENTS} clients at once"


def pki(tmp):
    """A CA and a server certificate for localhost / 127.0.0.1 in tmp/pki: (ca, cert, key,
    cert+key in one file for HAProxy)."""
    d = os.path.join(tmp, "pki")
    files = tuple(os.path.join(d, n) for n in ("ca.pem", "server.pem", "server.key", "both.pem"))
    if os.path.exists(files[-1]):
        return files
    os.makedirs(d, exist_ok=True)
    script = """set -e
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=bench CA"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr -subj "/CN=localhost"
printf "subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n" > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext
cat server.pem server.key > both.pem
"""
    subprocess.run(["sh", "-c", script], cwd=d, check=True, capture_output=True)
    return files


def start_terminator(ps, tool, tmp, backend_port, threads=1):
    """The terminator `tool` ("zerocat", "socat", "ncat", "haproxy") listening for TLS on
    127.0.0.1 in front of backend_port; its port. once: it serves one connection (bulk).
    threads: zerocat's --workers, HAProxy's nbthread (the handshake rows)."""
    ca, cert, key, both = pki(tmp)
    backend = f"127.0.0.1:{backend_port}"
    if tool[0] == "zerocat":
        once = ["--once"] if tool[1] else []
        workers = ["--workers", str(threads)] if threads > 1 else []
        p = ps.spawn("tool", [common.ZC, "--stats", "json", "relay", *once, *workers,
                              f"tls-listen:127.0.0.1:0,cert={cert},key={key}", f"tcp:{backend}"],
                     daemon=not tool[1])
        return int(listening_addr(p).rsplit(":", 1)[1])
    port = free_port()
    if tool[0] == "socat":
        fork = [] if tool[1] else [",fork,backlog=4096"]
        argv = ["socat", f"OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,cert={cert},key={key},verify=0"
                + "".join(fork), f"TCP:{backend}"]
    elif tool[0] == "ncat":
        keep = [] if tool[1] else ["-k"]
        argv = ["ncat", "--ssl", "--ssl-cert", cert, "--ssl-key", key, "-l", *keep, "127.0.0.1", str(port),
                "--sh-exec", f"exec ncat 127.0.0.1 {backend_port}"]
    else:
        cfg = os.path.join(tmp, "haproxy-tls.cfg")
        with open(cfg, "w") as f:
            f.write(f"global\n    nbthread {threads}\n    maxconn 4000\n\n"
                    "defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 120s\n"
                    f"    timeout server 120s\n\nlisten tls\n    bind 127.0.0.1:{port} ssl crt {both}\n"
                    f"    server backend {backend}\n")
        argv = ["haproxy", "-db", "-f", cfg]
    p = ps.spawn("tool", argv, daemon=tool[0] == "haproxy" or not tool[1])
    wait_listening(port, proc=p)
    if tool[0] == "haproxy":
        ps.start_clock()
    return port


def run_bulk(ctx, tool):
    """zcb sink listens; the terminator in front of it; `zerocat pipe DATA tls:` sends."""
    data, size = ctx["data"], ctx["size"]
    sample = Sample(data, size, ctx["rng"])
    ps = Procs(timeout_for(size))
    try:
        sink, ready = listening_sink(ps, ctx, sample)
        ca = pki(ctx["tmp"])[0]
        if tool is None:
            target = [f"tcp:127.0.0.1:{ready}"]
        else:
            port = start_terminator(ps, (tool, True), ctx["tmp"], ready)
            target = [f"tls:localhost:{port},cafile={ca}"]
        start = time.perf_counter()
        ps.spawn("src", [common.ZC, "-q", "pipe", data, *target])
        end = ps.wait()
        ps.check_exits()
        sink_check(sink, sample)
        return result(ps, start, end, size)
    finally:
        ps.close()


def run_requests(ctx, tool, args, requests):
    """redis-benchmark -> zerocat originator (tcp-listen -> tls:) -> the terminator ->
    redis-server; requests/s and the terminator's CPU per request."""
    ps = Procs(120)
    try:
        _, rport = start_backend(ps)
        port = start_terminator(ps, (tool, False), ctx["tmp"], rport)
        ca = pki(ctx["tmp"])[0]
        orig = ps.spawn("originator", [common.ZC, "-q", "relay", "tcp-listen:127.0.0.1:0",
                                       f"tls:localhost:{port},cafile={ca}"], daemon=True)
        oport = int(listening_addr(orig).rsplit(":", 1)[1])
        round_trip(oport, ctx["rng"])
        ps.start_clock()
        start = time.perf_counter()
        out = subprocess.run(["redis-benchmark", "-p", str(oport), "-n", str(requests), "-q", *args],
                             capture_output=True, text=True, timeout=300)
        end = time.perf_counter()
        rates = [float(line.split(":")[1].split()[0]) for line in out.stdout.replace("\r", "\n").splitlines()
                 if "requests per second" in line]
        if not rates:
            raise Failed("redis-benchmark said nothing: " + out.stderr[-200:])
        ps.stop_daemons()
        t = ps.tool()
        return {"seconds": sum(requests / r for r in rates), "cpu": t.cpu if t is not None else None,
                "path": "", "elapsed": end - start}
    finally:
        ps.close()


def run_handshakes(ctx, tool, conns):
    """HS_CLIENTS `handshakes.py client` processes at once, `conns` full handshakes each
    (each with a 16-byte round trip, checked), through the terminator (HS_THREADS threads)
    to `handshakes.py echo`; the time from the first client's start to the last's exit."""
    ps = Procs(60 + HS_CLIENTS * conns / 50)
    try:
        echo = ps.spawn("backend", [sys.executable, HANDSHAKES, "echo"], stdout=subprocess.PIPE, daemon=True)
        bport = int(echo.stdout.readline() or 0)
        if not bport:
            raise Failed("handshakes.py echo printed no port")
        port = start_terminator(ps, (tool, False), ctx["tmp"], bport, threads=HS_THREADS)
        ca = pki(ctx["tmp"])[0]
        ps.start_clock()
        start = time.perf_counter()
        clients = [ps.spawn("client", [sys.executable, HANDSHAKES, "client", str(port), str(conns), ca],
                            stdout=subprocess.PIPE) for _ in range(HS_CLIENTS)]
        done = [c.stdout.read().strip() for c in clients]
        end = ps.wait()
        ps.check_exits()
        if done != [str(conns).encode()] * HS_CLIENTS:
            raise Failed(f"handshake clients reported {done}, expected {conns} each")
        t = ps.tool()
        return {"seconds": end - start, "cpu": t.cpu if t is not None else None, "path": ""}
    finally:
        ps.close()


def scenarios(ctx):
    n = ctx["size"]
    S = []

    def bulk(tool):
        return lambda: run_bulk(ctx, tool)
    cs = [contender("zerocat", "zerocat", bulk("zerocat"), ("openssl",)),
          contender("socat OPENSSL-LISTEN", "peer", bulk("socat"), ("socat", "openssl")),
          contender("ncat --ssl", "peer", bulk("ncat"), ("ncat", "openssl")),
          contender("haproxy ssl crt", "peer", bulk("haproxy"), ("haproxy", "openssl")),
          contender("plain (no TLS, src -> sink)", "ceiling", bulk(None))]
    S.append(scenario(GROUP, "file -> tls terminator -> tcp", n, cs))
    for name, args, full, check in MODES[:1]:
        requests = check if ctx.get("check") else full

        def req(tool, args=args, requests=requests):
            return lambda: run_requests(ctx, tool, args, requests)
        need = ("redis-server", "redis-benchmark", "openssl")
        cs = [contender("zerocat", "zerocat", req("zerocat"), need),
              contender("socat OPENSSL-LISTEN fork", "peer", req("socat"), ("socat", *need)),
              contender("haproxy ssl crt", "peer", req("haproxy"), ("haproxy", *need))]
        tests = len(args[args.index("-t") + 1].split(","))
        scn = scenario(GROUP, f"redis {name} -> tls terminator", requests * tests, cs)
        scn["requests"] = True
        S.append(scn)
    conns = HS_CONNS_CHECK if ctx.get("check") else HS_CONNS

    def hs(tool):
        return lambda: run_handshakes(ctx, tool, conns)
    cs = [contender(f"zerocat --workers {HS_THREADS}", "zerocat", hs("zerocat"), ("openssl",)),
          contender(f"haproxy ssl crt nbthread {HS_THREADS}", "peer", hs("haproxy"), ("haproxy", "openssl"))]
    scn = scenario(GROUP, HS_NAME, HS_CLIENTS * conns, cs, ref=cs[0]["label"])
    scn["requests"] = True
    S.append(scn)
    return S


def table(rows):
    """RESULTS.md's TLS sections: the redis requests rows, then the handshake rows."""
    hs = [r for r in rows if r["group"] == GROUP and r["scenario"] == HS_NAME]
    rs = [r for r in rows if r["group"] == GROUP and r.get("requests") and r not in hs]
    return requests_table(rs) + handshakes_table(hs)


def handshakes_table(rs):
    """RESULTS.md's TLS handshake rows: handshakes/s and the terminator's CPU per handshake."""
    if not rs:
        return []
    L = ["## tls: full TLS handshakes per second\n",
         f"{HS_CLIENTS} `bench/handshakes.py client` processes at once, each making connections one after "
         "the other: a full TLS 1.3 handshake (new session, P-256 ECDSA certificate checked against the CA), "
         "16 random bytes out and back through the terminator to a one-thread echo backend, checked. "
         f"Terminators: `zerocat relay --workers {HS_THREADS} tls-listen:…` and HAProxy `bind … ssl crt`, "
         f"`nbthread {HS_THREADS}`, mode tcp; clients, terminator and backend share the machine's cores. "
         "handshakes/s: connections over the time from the first client's start to the last's exit, "
         "median; CPU: the terminator's user+sys per handshake; **×ref**: per repetition, this tool's "
         "time over zerocat's, median (above 1: zerocat was faster).\n",
         "| scenario | tool | handshakes/s | min–max | terminator CPU µs/handshake | ×ref | note |",
         "|---|---|---:|---:|---:|---:|---|"]
    for r in rs:
        if r["median"] is None:
            L.append(f"| {r['scenario']} | {r['tool']} | | | | | {status(r)} |")
            continue
        cpus = [x["cpu"] for x in r["runs"] if x["cpu"] is not None]
        cpu = f"{statistics.median(cpus) / r['bytes'] * 1e6:.0f}" if cpus else "–"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else ""
        L.append(f"| {r['scenario']} | {r['tool']} | {r['bytes'] / r['median']:,.0f} | {r['bytes'] / r['hi']:,.0f}–"
                 f"{r['bytes'] / r['lo']:,.0f} | {cpu} | {ratio} | {status(r)} |")
    L.append("")
    return L


def requests_table(rs):
    if not rs:
        return []
    L = ["## tls: small requests through a TLS terminator\n",
         "redis-benchmark -> `zerocat relay tcp-listen: tls:` (the same originator for every row) -> the "
         "terminator (`tls-listen:` / `OPENSSL-LISTEN,fork` / HAProxy `ssl crt`, one thread) -> redis-server, "
         "all on 127.0.0.1. requests/s: redis-benchmark's figure, median; CPU: the terminator's user+sys per "
         "request; **×ref**: this tool's time over zerocat's, median.\n",
         "| scenario | tool | requests/s | terminator CPU µs/request | ×ref | note |",
         "|---|---|---:|---:|---:|---|"]
    for r in rs:
        if r["median"] is None:
            L.append(f"| {r['scenario']} | {r['tool']} | | | | {status(r)} |")
            continue
        cpus = [x["cpu"] for x in r["runs"] if x["cpu"] is not None]
        cpu = f"{statistics.median(cpus) / r['bytes'] * 1e6:.1f}" if cpus else "–"
        ratio = f"{r['ratio']:.2f}" if r["ratio"] else ""
        L.append(f"| {r['scenario']} | {r['tool']} | {r['bytes'] / r['median']:,.0f} | {cpu} | {ratio} | {status(r)} |")
    L.append("")
    return L
