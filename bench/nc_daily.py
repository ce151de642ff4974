#!/usr/bin/env python3
"""nc's daily jobs, timed against zerocat (issue 40): interleaved runs, medians.

  probe:     zerocat probe -q tcp:127.0.0.1:LO-HI  vs  nc -z 127.0.0.1 LO-HI
             (1,000 loopback ports, 10 of them open)
  keep-open: zerocat pipe --keep-open tcp-listen:P file:log,append  vs  nc -dlk P >> log,
             ncat -lk --recv-only P >> log  (1,000 short connections of 1 KiB, 8 clients
             at a time; the clock runs from the first connect until the log holds every byte)

  bench/nc_daily.py [--zerocat PATH] [--runs N]

Every run's bytes are checked (the log's length and each connection's block whole).
"""
import argparse
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port_block(n):
    """A run of n ports that are closed now (bound and released)."""
    for lo in range(41000, 60000, n):
        socks = []
        try:
            for p in range(lo, lo + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return lo
        except OSError:
            pass
        finally:
            for s in socks:
                s.close()
    raise SystemExit("no free block of ports")


def time_probe(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    dt = time.perf_counter() - t
    # 10 ports open of 1,000: both must say "not all open" (zerocat 1) / "some open" (nc 0).
    return dt, r.returncode


def probe_rows(zerocat, runs):
    lo = free_port_block(1000)
    hi = lo + 999
    listeners = []
    for p in range(lo, hi + 1, 100):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", p))
        s.listen(1024)
        listeners.append(s)
    stop = threading.Event()

    def drain(s):
        s.settimeout(0.2)
        while not stop.is_set():
            try:
                c, _ = s.accept()
                c.close()
            except OSError:
                pass

    threads = [threading.Thread(target=drain, args=(s,), daemon=True) for s in listeners]
    for t in threads:
        t.start()
    tools = {
        "zerocat probe": [zerocat, "probe", "-q", f"tcp:127.0.0.1:{lo}-{hi}"],
        "nc -z": ["nc", "-z", "127.0.0.1", f"{lo}-{hi}"],
    }
    times = {k: [] for k in tools}
    for _ in range(runs):
        for name, cmd in tools.items():
            times[name].append(time_probe(cmd)[0])
    # The lines say the same: 10 open.
    out = subprocess.run(tools["zerocat probe"][:2] + tools["zerocat probe"][3:],
                         capture_output=True, text=True).stdout
    assert out.count(" open (") == 10, out
    stop.set()
    return times


def feed(addr, ids, size):
    for i in ids:
        s = socket.create_connection(addr)
        s.sendall(block(i, size))
        s.close()


def block(i, size):
    head = f"{i:08d}".encode()
    return head + bytes([65 + i % 26]) * (size - len(head))


def time_keep_open(server_cmd, port, log, conns, size, clients):
    open(log, "wb").close()
    with open(log, "ab") as out:
        srv = subprocess.Popen(server_cmd, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            break
        except OSError:
            if time.time() > deadline:
                srv.kill()
                raise SystemExit(f"{server_cmd[0]} never listened")
            time.sleep(0.01)
    # The readiness probe above was one (empty) connection.
    want = conns * size
    t = time.perf_counter()
    per = [list(range(c, conns, clients)) for c in range(clients)]
    threads = [threading.Thread(target=feed, args=(("127.0.0.1", port), ids, size))
               for ids in per]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    while os.path.getsize(log) < want and time.perf_counter() - t < 60:
        time.sleep(0.0005)
    dt = time.perf_counter() - t
    srv.terminate()
    srv.wait()
    data = open(log, "rb").read()
    assert len(data) == want, (server_cmd[0], len(data), want)
    seen = set()
    for off in range(0, want, size):
        i = int(data[off:off + 8])
        assert data[off:off + size] == block(i, size), (server_cmd[0], "block", i)
        seen.add(i)
    assert len(seen) == conns
    return dt


def keep_open_rows(zerocat, runs, conns=1000, size=1024, clients=8):
    work = tempfile.mkdtemp(prefix="nc_daily")
    log = os.path.join(work, "log")
    port = free_port_block(1)
    tools = {
        "zerocat pipe --keep-open": [zerocat, "-q", "pipe", "--keep-open",
                                     f"tcp-listen:{port}", f"file:{log},append"],
        # nc -dlk is not a row: with 8 clients at a time it lost connections (392 KiB of
        # 1,000 KiB in the log, 2026-11-27): its backlog overflows while it serves one.
        "ncat -lk": ["ncat", "-lk", "--recv-only", "127.0.0.1", str(port)],
    }
    # zerocat writes the log itself; the others through their stdout (opened O_APPEND).
    times = {k: [] for k in tools}
    for _ in range(runs):
        for name, cmd in tools.items():
            times[name].append(time_keep_open(cmd, port, log, conns, size, clients))
    return times


def show(title, times, ref):
    print(f"\n{title}")
    ref_med = statistics.median(times[ref])
    for name, ts in times.items():
        med = statistics.median(ts)
        ratios = [b / a for a, b in zip(times[ref], ts)]
        print(f"  {name:28s} median {med * 1000:8.1f} ms  (min {min(ts) * 1000:.1f}, "
              f"max {max(ts) * 1000:.1f})  x{statistics.median(ratios):.2f} vs {ref}"
              if name != ref else
              f"  {name:28s} median {med * 1000:8.1f} ms  (min {min(ts) * 1000:.1f}, "
              f"max {max(ts) * 1000:.1f})")
    return ref_med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zerocat", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "zerocat"))
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    print(f"zerocat: {a.zerocat}; load: {open('/proc/loadavg').read().strip()}; "
          f"{a.runs} interleaved runs")
    show("probe of 1,000 loopback ports (10 open)", probe_rows(a.zerocat, a.runs),
         "zerocat probe")
    show("1,000 connections of 1 KiB into one log, 8 clients at a time",
         keep_open_rows(a.zerocat, a.runs), "zerocat pipe --keep-open")
    print(f"\nload after: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
