"""The relay family: zerocat relay --once vs socat (default and 1 MiB buffers), HAProxy
(tcp mode, one thread; with and without `option splice-auto`), the two reference relays of
bench/refrelay.c (blocking, a thread per direction: read/write through 1 MiB, splice through
a 1 MiB pipe) and the feeder connected straight to the sink, over TCP and unix sockets; one
relay holding many idle connections; and many concurrent bulk streams (bench/fan.c) through
--workers 1 and 2."""
import os
import re
import statistics
import resource
import selectors
import signal
import socket
import subprocess
import threading
import time

from . import common
from .checks import Sample, listening_sink, sink_check
from .common import Failed
from .measure import contender, scenario
from .procs import Procs, free_port, listening_addr, proc_cpu, read_line, result, timeout_for, wait_listening

GROUP = "relay"


def haproxy_config(tmp, listen, server, splice=False, name="haproxy.cfg"):
    """An HAProxy config in `tmp` relaying `listen` to `server` (each "127.0.0.1:PORT" or a
    unix socket path; a list of servers: `balance roundrobin` over them) in tcp mode on one
    thread; returns its path. splice: `option splice-auto` (HAProxy splices only when it
    judges it pays; off by default)."""
    path = os.path.join(tmp, name)
    servers = [server] if isinstance(server, str) else server
    balance = "    balance roundrobin\n" if len(servers) > 1 else ""
    with open(path, "w") as f:
        f.write("global\n    nbthread 1\n    maxconn 4000\n\n"
                "defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 120s\n"
                "    timeout server 120s\n" + ("    option splice-auto\n" if splice else "") +
                f"\nlisten relay\n    bind {listen}\n{balance}" +
                "".join(f"    server backend{i} {s}\n" for i, s in enumerate(servers)))
    return path


def start_haproxy(ps, tmp, listen, server, splice=False, role="tool"):
    """HAProxy (a daemon of `ps`) relaying `listen` to `server`, listening when it returns."""
    cfg = haproxy_config(tmp, listen, server, splice)
    p = ps.spawn(role, ["haproxy", "-db", "-f", cfg], daemon=True)
    wait_listening(int(listen.rsplit(":", 1)[1]) if listen.startswith("127.0.0.1:") else listen, proc=p)
    return p


def run_relay(ctx, tool, pair, chunk=0, nbytes=None, pin=None):
    """zcb src -> A [TOOL relays A to B] -> B zcb sink. tool: ("zerocat", via[, more zerocat
    options, e.g. --dump FILE]) |
    ("socat", extra args) | ("ref", "rw" or "splice") | ("haproxy", splice-auto?) |
    None (direct: the feeder connects to the sink). pin: see seed.seed_pinning."""
    a_kind, b_kind = pair.split("-to-")
    data = ctx["seed_data"] if nbytes else ctx["data"]
    size = nbytes or ctx["size"]
    sample = Sample(data, size, ctx["rng"])
    a_path, b_path = os.path.join(ctx["sock"], "a.sock"), os.path.join(ctx["sock"], "b.sock")
    for path in (a_path, b_path):
        if os.path.exists(path):
            os.unlink(path)
    ps = Procs(timeout_for(size), pin)
    try:
        listen = "tcp-listen:127.0.0.1:0" if b_kind == "tcp" else f"unix-listen:{b_path}"
        sink, ready = listening_sink(ps, ctx, sample, listen)
        b = f"tcp:127.0.0.1:{ready}" if b_kind == "tcp" else f"unix:{b_path}"
        if tool is None:
            a = b
        elif tool[0] == "zerocat":
            via = ["--via", tool[1]] if tool[1] else []
            a_listen = "tcp-listen:127.0.0.1:0" if a_kind == "tcp" else f"unix-listen:{a_path}"
            p = ps.spawn("tool", [common.ZC, "--stats", "json", *via, *tool[2:], "relay", "--once", a_listen, b])
            addr = listening_addr(p)
            a = f"tcp:{addr}" if a_kind == "tcp" else f"unix:{a_path}"
        elif tool[0] == "ref":
            a_listen = "tcp-listen:127.0.0.1:0" if a_kind == "tcp" else f"unix-listen:{a_path}"
            p = ps.spawn("tool", [common.REFRELAY, tool[1], a_listen, b], stdout=subprocess.PIPE)
            port = p.stdout.readline().decode().strip()
            if not port:
                raise Failed("refrelay did not listen: " + os.pread(p.errfile.fileno(), 4096, 0).decode(errors="replace"))
            a = f"tcp:127.0.0.1:{port}" if a_kind == "tcp" else f"unix:{a_path}"
        elif tool[0] == "haproxy":
            listen = f"127.0.0.1:{free_port()}" if a_kind == "tcp" else a_path
            server = f"127.0.0.1:{ready}" if b_kind == "tcp" else b_path
            start_haproxy(ps, ctx["tmp"], listen, server, tool[1])
            ps.start_clock()
            a = f"tcp:{listen}" if a_kind == "tcp" else f"unix:{a_path}"
        else:
            port = free_port()
            left = f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr" if a_kind == "tcp" else f"UNIX-LISTEN:{a_path}"
            right = f"TCP:127.0.0.1:{ready}" if b_kind == "tcp" else f"UNIX-CONNECT:{b_path}"
            ps.spawn("tool", ["socat", *tool[1], left, right])
            a = f"tcp:127.0.0.1:{port}" if a_kind == "tcp" else f"unix:{a_path}"
        start = time.perf_counter()
        ps.spawn("src", [common.ZCB, "src", data, str(chunk), a])
        end = ps.wait()
        ps.check_exits()
        sink_check(sink, sample)
        return result(ps, start, end, size)
    finally:
        ps.close()


def scenarios(ctx):
    n = ctx["size"]
    S = []
    for pair in ("tcp-to-tcp", "unix-to-unix", "tcp-to-unix"):
        def runner(tool, pair=pair):
            return lambda: run_relay(ctx, tool, pair)
        cs = [contender("zerocat", "zerocat", runner(("zerocat", None)), ("relay",)),
              contender("socat", "peer", runner(("socat", [])), ("socat",)),
              contender("socat -b1048576", "peer", runner(("socat", ["-b1048576"])), ("socat",)),
              contender("haproxy", "peer", runner(("haproxy", False)), ("haproxy",)),
              contender("haproxy splice-auto", "peer", runner(("haproxy", True)), ("haproxy",)),
              contender("ref rw 1M", "peer", runner(("ref", "rw"))),
              contender("ref splice 1M", "peer", runner(("ref", "splice"))),
              contender("direct (src -> sink)", "ceiling", runner(None))]
        S.append(scenario(GROUP, f"relay {pair.replace('-to-', ' -> ')}", n, cs))
    return S


def idle_relay(conns, seconds):
    """`conns` connections through one relay (a listener) to an echo backend, each checked
    with a 4-byte round trip, then left idle: the relay's peak RSS (VmHWM) and its CPU
    (utime+stime) over `seconds`. SIGINT then ends the relay, which must exit 130."""
    need = 2 * conns + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            return {"error": f"RLIMIT_NOFILE hard limit {hard} < {need}"}
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))  # the relay inherits it
    listener = socket.create_server(("127.0.0.1", 0), backlog=conns)
    stop = threading.Event()

    def echo_backend():
        sel = selectors.DefaultSelector()
        sel.register(listener, selectors.EVENT_READ)
        held = []
        while not stop.is_set():
            for key, _ in sel.select(0.05):
                if key.fileobj is listener:
                    c, _ = listener.accept()
                    held.append(c)
                    sel.register(c, selectors.EVENT_READ)
                else:
                    data = key.fileobj.recv(4096)
                    if data:
                        key.fileobj.sendall(data)
                    else:
                        sel.unregister(key.fileobj)
        for c in held:
            c.close()

    backend = threading.Thread(target=echo_backend, daemon=True)
    backend.start()
    ps = Procs(60 + 2 * seconds)
    clients = []
    try:
        p = ps.spawn("tool", [common.ZC, "--stats", "json", "relay", "tcp-listen:127.0.0.1:0",
                              f"tcp:127.0.0.1:{listener.getsockname()[1]}"])
        m = re.search(r"listening on (\S+):(\d+)", read_line(p))
        if not m:
            raise Failed("no 'listening on' line from zerocat")
        for _ in range(conns):
            clients.append(socket.create_connection((m.group(1), int(m.group(2))), timeout=20))
        for i, c in enumerate(clients):
            c.sendall(i.to_bytes(4, "big"))
        for i, c in enumerate(clients):
            got = b""
            while len(got) < 4:
                chunk = c.recv(4 - len(got))
                if not chunk:
                    raise Failed(f"connection {i} closed before its echo")
                got += chunk
            if got != i.to_bytes(4, "big"):
                raise Failed(f"connection {i} echoed {got!r}")
        time.sleep(0.5)
        cpu0 = proc_cpu(p.pid)
        time.sleep(seconds)
        cpu1 = proc_cpu(p.pid)
        with open(f"/proc/{p.pid}/status") as f:
            rss = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
        for c in clients:
            c.close()
        clients = []
        os.kill(p.pid, signal.SIGINT)
        ps.wait()
        if p.returncode != 130:
            raise Failed(f"relay exited {p.returncode} after SIGINT, not 130")
        return {"conns": conns, "seconds": seconds, "rss_kib": rss, "cpu_s": cpu1 - cpu0}
    except (Failed, OSError) as e:
        return {"error": str(e)}
    finally:
        for c in clients:
            c.close()
        stop.set()
        backend.join()
        listener.close()
        ps.close()


def idle_summary(idle):
    """The log line of idle_relay's result."""
    return "relay idle connections: " + (f"FAILED: {idle['error']}" if "error" in idle else
                                         f"{idle['conns']} connections, peak RSS {idle['rss_kib'] / 1024:.1f} MiB, "
                                         f"{idle['cpu_s']:.2f} s CPU over {idle['seconds']} s idle")


def idle_table(idle):
    """RESULTS.md's lines for idle_relay's result, under the relay table."""
    L = [f"### relay: {idle.get('conns', '')} idle connections\n",
         "One relay (`tcp-listen` to an echo backend), every connection checked with a 4-byte "
         "round trip, then left idle; VmHWM is the relay's peak RSS over the whole run.\n",
         "| connections | peak RSS (VmHWM) | CPU while idle | exit on SIGINT |", "|---:|---:|---:|---:|"]
    L.append(f"| FAILED: {idle['error']} | | | |" if "error" in idle else
             f"| {idle['conns']} | {idle['rss_kib'] / 1024:.1f} MiB | {idle['cpu_s']:.2f} s over "
             f"{idle['seconds']} s | 130 |")
    L.append("")
    return L


def fan_run(conns, nbytes, workers, rate=None, relay_args=(), spread=False):
    """One run of bench/fan.c: `conns` streams of `nbytes` each at once through one relay
    (`--workers`, then `relay_args`) into fan's checking backend; rate: each stream's
    bytes/s, held by fan itself (spread: the streams' sends spread over each 100 ms, not in
    step). Returns seconds, the relay's CPU and peak RSS (VmHWM); SIGINT then ends the
    relay, which must exit 130."""
    fan = subprocess.Popen([common.FAN, str(conns), str(nbytes), *([str(rate)] if rate else []),
                            *(["spread"] if spread else [])],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    ps = Procs(120)
    try:
        backend = int(fan.stdout.readline())
        p = ps.spawn("tool", [common.ZC, "-q", "relay", "--workers", str(workers), *relay_args,
                              "tcp-listen:127.0.0.1:0", f"tcp:127.0.0.1:{backend}"])
        m = re.search(r"listening on (\S+):(\d+)", read_line(p))
        if not m:
            raise Failed("no 'listening on' line from zerocat")
        fan.stdin.write(m.group(2) + "\n")
        fan.stdin.flush()
        got = fan.stdout.readline().split()
        if not got or got[0] != "ok":
            raise Failed("fan: " + " ".join(got))
        cpu = proc_cpu(p.pid)
        with open(f"/proc/{p.pid}/status") as f:
            rss = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
        os.kill(p.pid, signal.SIGINT)
        ps.wait()
        if p.returncode != 130:
            raise Failed(f"relay exited {p.returncode} after SIGINT, not 130")
        return {"seconds": float(got[3]), "bytes": int(got[2]), "cpu_s": cpu, "rss_kib": rss}
    finally:
        fan.kill()
        fan.wait()
        ps.close()


def fan_relay(conns, nbytes, runs):
    """fan_run with --workers 1 and 2, interleaved, `runs` times each: medians, the largest
    RSS, or the first error."""
    out = {"conns": conns, "nbytes": nbytes, "runs": runs}
    try:
        got = {1: [], 2: []}
        for _ in range(runs):
            for w in (1, 2):
                got[w].append(fan_run(conns, nbytes, w))
    except (Failed, OSError, ValueError) as e:
        return {"error": str(e)}
    for w, rs in got.items():
        out[w] = {"seconds": statistics.median(r["seconds"] for r in rs),
                  "gibs": statistics.median(r["bytes"] / r["seconds"] / 2**30 for r in rs),
                  "cpu_s": statistics.median(r["cpu_s"] for r in rs),
                  "rss_kib": max(r["rss_kib"] for r in rs)}
    return out


def fan_summary(fan):
    if "error" in fan:
        return f"relay concurrent bulk streams: FAILED: {fan['error']}"
    return "relay concurrent bulk streams: " + "; ".join(
        f"--workers {w} {fan[w]['gibs']:.2f} GiB/s, peak RSS {fan[w]['rss_kib'] / 1024:.1f} MiB" for w in (1, 2))


def fan_table(fan):
    """RESULTS.md's lines for fan_relay's result, under the relay table."""
    if "error" in fan:
        return ["### relay: concurrent bulk streams\n", f"FAILED: {fan['error']}\n"]
    L = [f"### relay: {fan['conns']:,} concurrent bulk streams\n",
         f"bench/fan.c opens {fan['conns']:,} connections at once through one relay and sends "
         f"{fan['nbytes'] // 1024:,} KiB on each; its backend checks every byte of every stream. "
         f"Medians of {fan['runs']} interleaved runs; peak RSS is the largest VmHWM of the relay "
         "(target: < 64 MiB). fan itself (one thread, a copy and a compare per byte) shares the "
         "machine's cores with the relay.\n",
         "| --workers | aggregate GiB/s | seconds | relay CPU s | relay peak RSS |", "|---:|---:|---:|---:|---:|"]
    for w in (1, 2):
        r = fan[w]
        L.append(f"| {w} | {r['gibs']:.2f} | {r['seconds']:.2f} | {r['cpu_s']:.2f} | {r['rss_kib'] / 1024:.1f} MiB |")
    L.append("")
    return L


def stalled_relay(slow, requests):
    """Ordinary requests beside `slow` clients that ask for a 20 MiB download and never read
    (4 KiB receive buffers): the latency of `requests` one-line echoes through one relay
    before and beside them (tests/audit/relay.rs asserts only that every one is answered;
    how fast is this row's question). SIGINT then ends the relay, which must exit 130."""
    need = 2 * slow + 256
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            return {"error": f"RLIMIT_NOFILE hard limit {hard} < {need}"}
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))  # the relay inherits it
    listener = socket.create_server(("127.0.0.1", 0), backlog=slow + 16)

    def serve(c):
        with c:
            f = c.makefile("rb")
            for line in f:
                if line == b"DOWNLOAD\n":
                    chunk = b"x" * (1 << 20)
                    try:
                        for _ in range(20):
                            c.sendall(chunk)
                    except OSError:
                        pass
                    return
                try:
                    c.sendall(line)
                except OSError:
                    return

    def backend():
        while True:
            try:
                c, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=backend, daemon=True).start()
    ps = Procs(120)
    clients = []

    def echo(addr, i):
        t0 = time.perf_counter()
        with socket.create_connection(addr, timeout=10) as s:
            line = f"ordinary request {i}\n".encode()
            s.sendall(line)
            got = b""
            while len(got) < len(line):
                chunk = s.recv(len(line) - len(got))
                if not chunk:
                    raise Failed(f"request {i}: closed before its echo")
                got += chunk
            if got != line:
                raise Failed(f"request {i} echoed {got!r}")
        return time.perf_counter() - t0

    try:
        p = ps.spawn("tool", [common.ZC, "-q", "relay", "tcp-listen:127.0.0.1:0,backlog=4096",
                              f"tcp:127.0.0.1:{listener.getsockname()[1]}"])
        m = re.search(r"listening on (\S+):(\d+)", read_line(p))
        if not m:
            raise Failed("no 'listening on' line from zerocat")
        addr = (m.group(1), int(m.group(2)))
        before = [echo(addr, i) for i in range(requests)]
        for _ in range(slow):
            c = socket.socket()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            c.connect(addr)
            c.sendall(b"DOWNLOAD\n")
            clients.append(c)
        time.sleep(1.5)  # the downloads fill every buffer they can
        beside = [echo(addr, i) for i in range(requests)]
        for c in clients:
            c.close()
        clients = []
        os.kill(p.pid, signal.SIGINT)
        ps.wait()
        if p.returncode != 130:
            raise Failed(f"relay exited {p.returncode} after SIGINT, not 130")
        return {"slow": slow, "requests": requests,
                "before_ms": statistics.median(before) * 1e3,
                "median_ms": statistics.median(beside) * 1e3, "max_ms": max(beside) * 1e3}
    except (Failed, OSError) as e:
        return {"error": str(e)}
    finally:
        for c in clients:
            c.close()
        listener.close()
        ps.close()


def stalled_summary(st):
    """The log line of stalled_relay's result."""
    return "relay beside stalled clients: " + (f"FAILED: {st['error']}" if "error" in st else
                                               f"{st['requests']} echoes beside {st['slow']} non-reading clients: "
                                               f"median {st['median_ms']:.1f} ms, max {st['max_ms']:.1f} ms "
                                               f"(alone: {st['before_ms']:.1f} ms)")


def stalled_table(st):
    """RESULTS.md's lines for stalled_relay's result, under the relay table."""
    L = [f"### relay: ordinary requests beside {st.get('slow', '')} non-reading clients\n",
         "Each non-reading client asks the backend for 20 MiB with a 4 KiB receive buffer and "
         "never reads; then one-line echoes through the same relay, each on a new connection "
         "(connect + round trip). tests/audit/relay.rs asserts only that every one is answered.\n",
         "| non-reading clients | echoes | alone (median) | beside them (median) | beside them (max) |",
         "|---:|---:|---:|---:|---:|"]
    L.append(f"| FAILED: {st['error']} | | | | |" if "error" in st else
             f"| {st['slow']} | {st['requests']} | {st['before_ms']:.1f} ms | {st['median_ms']:.1f} ms | "
             f"{st['max_ms']:.1f} ms |")
    L.append("")
    return L
