"""The nc family (issue 40): nc's small daily jobs against zerocat. `zerocat probe -q` of
1,000 loopback ports (10 listening) vs `nc -z` (OpenBSD netcat, one port after another);
and `zerocat pipe --keep-open tcp-listen: file:log,append` taking 1,000 connections of 1 KiB
one after another (a client at a time) vs `nc -dlk` and `ncat -lk --recv-only` writing the
log through their stdout, then 8 clients at a time vs ncat (nc -lk loses connections there:
its backlog overflows while it serves one, 392 KiB of 1,000 KiB in the log when tried).
Each keep-open row has a floor, bench/minlog.c (accept, read, write to the log, close: the
least a server can do), so the time the bench's own Python clients take is measured, not
guessed: ncat's time over the floor's is the most any server could beat ncat by.
Rows are times (the table's "bytes" is the count of ports or connections); every run is
checked: probe says the 10 listened ports open and no other, each connection's block is
whole in the log. The targets of issue 40 (both ≥ 2x) are said under the table."""
import os
import socket
import statistics
import subprocess
import threading
import time

from . import common
from .common import WORK, Failed
from .measure import contender, scenario
from .procs import Procs, free_port, proc_cpu

GROUP = "nc"
NC = "nc.openbsd"
FLOOR = "minlog (the floor)"
# One listening port every OPEN_EVERY of the probed range.
OPEN_EVERY = 100


class PortBlock:
    """`width` consecutive ports of 127.0.0.1 free when made, a listener on every
    OPEN_EVERY-th (backlog 4096, never accepting: a probe's connection waits in the queue,
    and the queue holds every run's)."""

    def __init__(self, width):
        for lo in range(20000, 60000 - width, width):
            held = []
            try:
                for p in range(lo, lo + width):
                    s = socket.socket()
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(("127.0.0.1", p))
                    held.append(s)
            except OSError:
                for s in held:
                    s.close()
                continue
            self.lo, self.hi = lo, lo + width - 1
            self.listeners = []
            for i, s in enumerate(held):
                if i % OPEN_EVERY:
                    s.close()
                else:
                    s.listen(4096)
                    self.listeners.append(s)
            self.open = {s.getsockname()[1] for s in self.listeners}
            return
        raise Failed(f"no free block of {width} ports")

    def close(self):
        for s in self.listeners:
            s.close()


def run_probe(block, argv, want_code):
    """One timed probe (its CPU from wait4); its exit code must be `want_code`."""
    ps = Procs(30)
    try:
        start = time.perf_counter()
        ps.spawn("tool", argv)
        end = ps.wait()
        tool = ps.tool()
        if ps.timed_out:
            raise Failed("timed out")
        if tool.returncode != want_code:
            raise Failed(f"{os.path.basename(argv[0])} exited {tool.returncode}, not {want_code}")
        return {"seconds": end - start, "cpu": tool.rusage.ru_utime + tool.rusage.ru_stime, "path": ""}
    finally:
        ps.close()


def check_probe(block):
    """Outside the clock: zerocat's lines say open for exactly the listened ports."""
    out = subprocess.run([common.ZC, "probe", f"tcp:127.0.0.1:{block.lo}-{block.hi}"],
                         capture_output=True, text=True, timeout=30).stdout
    said = {int(ln.split()[0].rsplit(":", 1)[1]) for ln in out.splitlines() if " open (" in ln}
    if said != block.open or len(out.splitlines()) != block.hi - block.lo + 1:
        raise Failed(f"probe said open {sorted(said)}, listening {sorted(block.open)}")


def block_bytes(i, size):
    head = f"{i:08d}".encode()
    return head + bytes([65 + i % 26]) * (size - len(head))


def send_blocks(port, ids, size):
    for i in ids:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(block_bytes(i, size))


def run_keep_open(server, conns, size, clients):
    """`server(port, log)` -> (argv, writes the log itself?); `clients` threads connect
    `conns` times in all, each sending one block; timed from the first connect until the
    log holds every byte; the server's CPU over that time (from /proc)."""
    log = os.path.join(WORK, "nc-keep-open.log")
    open(log, "wb").close()
    port = free_port()
    argv, own_log = server(port, log)
    # nc -dlk takes ~60 ms a connection here (ncat ~25): 1,000 of them need minutes.
    ps = Procs(600)
    try:
        with open(log, "ab") as out:
            proc = ps.spawn("tool", argv, stdout=subprocess.DEVNULL if own_log else out, daemon=True)
        # Ready once it accepts: this first connection is empty, so the log does not change.
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise Failed(f"{os.path.basename(argv[0])} never listened")
                time.sleep(0.01)
        want = conns * size
        ps.start_clock()
        cpu0 = proc_cpu(proc.pid, children=True)
        start = time.perf_counter()
        ids = [list(range(c, conns, clients)) for c in range(clients)]
        threads = [threading.Thread(target=send_blocks, args=(port, part, size)) for part in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        while os.path.getsize(log) < want and time.perf_counter() - start < 300:
            time.sleep(0.0005)
        end = time.perf_counter()
        cpu = proc_cpu(proc.pid, children=True) - cpu0
        ps.wait()
        data = open(log, "rb").read()
        if len(data) != want:
            raise Failed(f"the log holds {len(data)} bytes of {want}")
        seen = set()
        for off in range(0, want, size):
            i = int(data[off:off + 8])
            if data[off:off + size] != block_bytes(i, size) or i in seen:
                raise Failed(f"connection {i}'s block is not whole at offset {off}")
            seen.add(i)
        return {"seconds": end - start, "cpu": cpu, "path": ""}
    finally:
        ps.close()
        if os.path.exists(log):
            os.unlink(log)


def scenarios(ctx):
    zc = common.ZC
    S = []
    width = 1000
    state = {}

    def block():
        if "block" not in state:
            state["block"] = PortBlock(width)
            check_probe(state["block"])
        return state["block"]

    def probe(argv_of, code):
        def run():
            b = block()
            return run_probe(b, argv_of(b), code)
        return run
    # Not all 1,000 open: zerocat exits 1; nc -z exits 0 when any port answered.
    cs = [contender("zerocat probe", "zerocat",
                    probe(lambda b: [zc, "probe", "-q", f"tcp:127.0.0.1:{b.lo}-{b.hi}"], 1)),
          contender("nc -z", "peer", probe(lambda b: [NC, "-z", "127.0.0.1", f"{b.lo}-{b.hi}"], 0), (NC,))]
    scn = scenario(GROUP, f"probe {width:,} loopback ports (10 open)", width, cs, ref="zerocat probe")
    scn["requests"] = True
    S.append(scn)

    conns = 50 if ctx["check"] else 1000
    size = 1024

    def keep_open(server, clients):
        return lambda: run_keep_open(server, conns, size, clients)
    zerocat = lambda p, log: ([zc, "-q", "pipe", "--keep-open", f"tcp-listen:127.0.0.1:{p}",  # noqa: E731
                               f"file:{log},append"], True)
    floor = lambda p, log: ([common.MINLOG, str(p), log], True)  # noqa: E731
    nc = lambda p, log: ([NC, "-dlk", "127.0.0.1", str(p)], False)  # noqa: E731
    ncat = lambda p, log: (["ncat", "-lk", "--recv-only", "127.0.0.1", str(p)], False)  # noqa: E731
    for clients, tools in ((1, (("nc -dlk", nc, NC), ("ncat -lk", ncat, "ncat"))),
                           (8, (("ncat -lk", ncat, "ncat"),))):
        cs = [contender("zerocat pipe --keep-open", "zerocat", keep_open(zerocat, clients))]
        cs += [contender(label, "peer", keep_open(server, clients), (need,)) for label, server, need in tools]
        cs.append(contender(FLOOR, "floor", keep_open(floor, clients)))
        who = "one client at a time" if clients == 1 else f"{clients} clients at a time"
        scn = scenario(GROUP, f"--keep-open: {conns:,} connections of 1 KiB, {who}", conns, cs,
                       ref="zerocat pipe --keep-open")
        scn["requests"] = True
        S.append(scn)
    return S


def summary(rows):
    """RESULTS.md's lines for the nc group: times and CPU per row, then issue 40's targets."""
    rs = [r for r in rows if r["group"] == GROUP]
    if not rs:
        return []

    def fmt(x, spec="{:.2f}"):
        return spec.format(x) if x is not None else "–"
    L = ["### nc: times (lower is better)\n",
         "Each row: the median wall time of the timed runs, min–max, the tool's CPU (user+sys) a run, "
         "and ×ref, per repetition the tool's time over zerocat's, then the median (above 1: zerocat was "
         "faster). probe: the whole command, start-up included (CPU from wait4); --keep-open: from the "
         "first connect until the log holds every byte (the server's CPU from /proc, in 10 ms ticks).\n",
         "| scenario | tool | ms | min–max | CPU ms | ×ref | note |", "|---|---|---:|---:|---:|---:|---|"]
    for r in rs:
        if r["median"] is None:
            L.append(f"| {r['scenario']} | {r['tool']} | | | | | {r['skip'] or r['error']} |")
            continue
        cpus = [x["cpu"] for x in r["runs"] if x["cpu"] is not None]
        L.append(f"| {r['scenario']} | {r['tool']} | {r['median'] * 1e3:.1f} | {r['lo'] * 1e3:.1f}–"
                 f"{r['hi'] * 1e3:.1f} | {fmt(statistics.median(cpus) * 1e3 if cpus else None, '{:.1f}')} | "
                 f"{fmt(r['ratio'])} | |")
    L += ["", "### nc: issue 40's targets\n",
          "The floor (bench/minlog.c) is the least a server can do a connection; a peer's time over the "
          "floor's is the most any server could beat that peer by with the bench's clients.\n",
          "| target | measured | at most possible (peer / floor) | met? |", "|---|---|---|---|"]
    floors = {r["scenario"]: r for r in rs if r["kind"] == "floor" and r["median"]}
    for r in rs:
        if r["kind"] != "peer":
            continue
        met = "–" if r["ratio"] is None else ("yes" if r["ratio"] >= 2.0 else "no")
        floor = floors.get(r["scenario"])
        bound = "–"
        if floor and r["median"]:
            bound = f"{r['median'] / floor['median']:.2f}x"
        L.append(f"| {r['scenario']}: zerocat ≥ 2x faster than {r['tool']} | {fmt(r['ratio'])}x | {bound} | {met} |")
    L.append("")
    return L
