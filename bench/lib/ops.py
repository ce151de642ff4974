"""The ops family (issue 41: a relay people run in front of real services), against the
issue's targets:

- round-robin over 2 upstreams: redis-benchmark (the redis rows' two modes) against two
  redis-servers through `zerocat relay --workers 1 --balance round-robin`, HAProxy `balance
  roundrobin` (tcp mode, `nbthread 1`) and bench/minrelay.c (the least a read/write relay
  does a request, round-robin too: the floor of the CPU per request);
- pacing: 1,000 connections at 10 KiB/s each through one relay (`--workers 1`), paced by
  the relay (`-L 10K`, each client sending as fast as it can) vs unpaced (each client of
  bench/fan.c holding itself to 10 KiB/s, a tenth every 100 ms: all clients in step, or
  spread over the 100 ms as independent clients are): the same bytes at the same total
  rate, every byte checked; the relay's CPU compared. And one connection under `-L 10M` on `--via splice` and
  `--via userspace`: the rate it held over 10 s and its CPU;
- `--dump hex` on a 1 GiB relay vs the same relay without it (the dump written to a file
  under bench/work/, removed after each run): the relay's throughput, and what the dump held
  and missed;
- WebSocket: 1 GiB through `relay tcp-listen: ws://` into `relay ws-listen: tcp:` vs the same
  tunnel in Python's `websockets` (bench/wsrelay.py) and websocat (`-b --oneshot`, where
  installed); both halves' CPU.

--check runs each row once, small (100 connections for 2 s; -L 10M for 2 s; 64 MiB)."""
import os
import re
import statistics
import subprocess
import time

from . import common
from .checks import Sample, listening_sink, sink_check, zerocat_paths
from .common import MINRELAY, WORK, Failed, MiB, human
from .data import make_data
from .measure import contender, scenario
from .procs import Procs, free_port, listening_addr, read_line, timeout_for, wait_listening
from .redis import MODES, bench_through, requests_table, start_backend
from .relay import fan_run, run_relay, start_haproxy

GROUP = "ops"
WSRELAY = os.path.join(common.BENCH, "wsrelay.py")
# pacing: connections and each one's rate, seconds (full / --check); the one-connection limit
PACED_EACH = 10 * 1024
PACED = {"full": (1000, 10), "check": (100, 2)}
LIMIT = 10 * MiB
LIMIT_SECONDS = {"full": 10, "check": 2}
RR = "round-robin over 2 redis"


def run_rr(ctx, tool, args, n):
    """redis-benchmark through `tool` relaying round-robin to two fresh redis-servers. tool:
    ("zerocat", relay args) | ("haproxy",) | ("minrelay",)."""
    ps = Procs(60 + n / 200)
    try:
        ports = [start_backend(ps)[1] for _ in range(2)]
        if tool[0] == "zerocat":
            p = ps.spawn("tool", [common.ZC, "relay", *tool[1], "--balance", "round-robin", "tcp-listen:127.0.0.1:0",
                                  *(f"tcp:127.0.0.1:{b}" for b in ports)], daemon=True)
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", read_line(p))
            if not m:
                raise Failed("no 'listening on 127.0.0.1:PORT' line from zerocat")
            port = int(m.group(1))
        elif tool[0] == "haproxy":
            port = free_port()
            start_haproxy(ps, ctx["tmp"], f"127.0.0.1:{port}", [f"127.0.0.1:{b}" for b in ports])
        else:
            port = free_port()
            p = ps.spawn("tool", [MINRELAY, str(port), *map(str, ports)], daemon=True)
            wait_listening(port, proc=p)
        return bench_through(ctx, ps, port, args, n)
    finally:
        ps.close()


def run_paced(ctx, paced, conns, seconds, spread=False):
    """`conns` streams of PACED_EACH bytes/s for `seconds` through one relay: paced by it
    (-L) or by fan itself (its clients in step, or spread). The relay's CPU over the whole run."""
    nbytes = PACED_EACH * seconds
    try:
        r = fan_run(conns, nbytes, 1, rate=None if paced else PACED_EACH,
                    relay_args=["-L", str(PACED_EACH), "--max-conns", str(conns + 16)] if paced else
                    ["--max-conns", str(conns + 16)], spread=spread)
    except (OSError, ValueError) as e:
        raise Failed(str(e))
    rate = r["bytes"] / r["seconds"]
    return {"seconds": r["seconds"], "cpu": r["cpu_s"], "path": "", "rss_kib": r["rss_kib"],
            "note": f"{rate / 1024:,.0f} KiB/s in all ({rate / (conns * PACED_EACH):.3f}x {conns} x 10 KiB/s)"}


def run_limit(ctx, via, seconds):
    """One connection under -L 10M for `seconds` worth of bytes: the rate it held."""
    nbytes = LIMIT * seconds
    data = os.path.join(ctx["tmpfs"], "limit.bin")
    make_data(data, nbytes, seed=9)
    r = run_relay(dict(ctx, seed_data=data), ("zerocat", via, "-L", str(LIMIT)), "tcp-to-tcp", nbytes=nbytes)
    r["note"] = f"{nbytes / r['seconds'] / MiB:.2f} MiB/s, {nbytes / r['seconds'] / LIMIT:.3f}x the limit"
    return r


def run_dump(ctx, dump):
    """A relay --once of ctx's data, with `--dump hex` into a file under bench/work/ or not."""
    path = os.path.join(WORK, "ops.dump")
    try:
        r = run_relay(ctx, ("zerocat", None, *(["--dump", path, "--dump-format", "hex"] if dump else [])),
                      "tcp-to-tcp")
    finally:
        if os.path.exists(path):
            os.unlink(path)
    if dump:
        r["path"] = "+".join(p for p in r["path"].split("+") if p != path)  # the dump's own "path"
        d = (r.get("report") or {}).get("dump")
        if not d:
            raise Failed("no dump object in zerocat's report")
        if d.get("error"):
            raise Failed(f"the dump failed: {d['error']}")
        if d["bytes"] + d["missed"] != ctx["size"]:  # the sink answers nothing: one direction's bytes
            raise Failed(f"dump held {d['bytes']} + missed {d['missed']} != {ctx['size']} relayed")
        r["dump"] = d
        r["note"] = (f"dump held {human(d['bytes'])} ({d['bytes'] / ctx['size']:.0%}), missed "
                     f"{human(d['missed'])}; fed by {'tee(2)' if d['teed'] else 'writes'}")
    return r


def run_ws(ctx, tool):
    """zcb src -> [client half: tcp-listen -> ws://] -> [server half: ws-listen -> tcp] -> zcb
    sink, with `tool` ("zerocat", "python", "websocat") for both halves; CPU of both."""
    size = ctx["size"]
    sample = Sample(ctx["data"], size, ctx["rng"])
    ps = Procs(2 * timeout_for(size))
    try:
        sink, ready = listening_sink(ps, ctx, sample)
        if tool == "zerocat":
            srv = ps.spawn("tool", [common.ZC, "--stats", "json", "relay", "--once", "ws-listen:127.0.0.1:0/bench",
                                    f"tcp:127.0.0.1:{ready}"])
            cli = ps.spawn("tool", [common.ZC, "--stats", "json", "relay", "--once", "tcp-listen:127.0.0.1:0",
                                    f"ws://{listening_addr(srv)}/bench"])
            a = listening_addr(cli)
        elif tool == "python":
            srv = ps.spawn("tool", ["python3", WSRELAY, "server", ready], stdout=subprocess.PIPE)
            port = srv.stdout.readline().decode().strip()
            if not port:
                raise Failed("wsrelay.py server did not listen: " + os.pread(srv.errfile.fileno(), 4096, 0).decode())
            cli = ps.spawn("tool", ["python3", WSRELAY, "client", "0", f"ws://127.0.0.1:{port}/bench"],
                           stdout=subprocess.PIPE)
            a = "127.0.0.1:" + cli.stdout.readline().decode().strip()
        else:
            port, a_port = free_port(), free_port()
            ps.spawn("tool", ["websocat", "-b", "--oneshot", f"ws-l:127.0.0.1:{port}", f"tcp:127.0.0.1:{ready}"])
            wait_listening(port)
            ps.spawn("tool", ["websocat", "-b", "--oneshot", f"tcp-l:127.0.0.1:{a_port}", f"ws://127.0.0.1:{port}/bench"])
            wait_listening(a_port)
            a = f"127.0.0.1:{a_port}"
        start = time.perf_counter()
        ps.spawn("src", [common.ZCB, "src", ctx["data"], "0", f"tcp:{a}"])
        end = ps.wait()
        ps.check_exits()
        sink_check(sink, sample)
        halves = [p for p in ps.procs if p.role == "tool"]
        path = ""
        if tool == "zerocat":
            path = " / ".join(f"{half}: " + "+".join(zerocat_paths(p.err)[0])
                              for half, p in zip(("ws-listen->tcp", "tcp->ws://"), halves))
        return {"seconds": end - start, "cpu": sum(p.rusage.ru_utime + p.rusage.ru_stime for p in halves),
                "path": path}
    finally:
        ps.close()


def python_websockets():
    """What the Python peer needs: python3 with the websockets package (a name no command has
    when the package is missing, so the row says it skipped)."""
    ok = subprocess.run(["python3", "-c", "import websockets"], capture_output=True).returncode == 0
    return ("python3",) if ok else ("python3-websockets",)


def scenarios(ctx):
    size = "check" if ctx.get("check") else "full"
    S = []
    for name, args, full, check in MODES:
        n = check if ctx.get("check") else full
        tests = len(args[args.index("-t") + 1].split(","))

        def runner(tool, args=args, n=n):
            return lambda: run_rr(ctx, tool, args, n)
        need = ("redis-server", "redis-benchmark")
        cs = [contender("zerocat --workers 1", "zerocat", runner(("zerocat", ["--workers", "1"])), ("relay", *need)),
              contender("haproxy balance roundrobin", "peer", runner(("haproxy",)), ("haproxy", *need)),
              contender("minrelay (the floor)", "peer", runner(("minrelay",)), need)]
        scn = scenario(GROUP, f"{RR}, {name}", n * tests, cs, ref="zerocat --workers 1")
        scn["requests"] = True
        S.append(scn)

    conns, seconds = PACED[size]
    cs = [contender("zerocat -L 10K (paced)", "zerocat", lambda: run_paced(ctx, True, conns, seconds), ("relay",)),
          contender("zerocat, fan at 10 KiB/s (unpaced)", "zerocat", lambda: run_paced(ctx, False, conns, seconds),
                    ("relay",)),
          contender("zerocat, fan at 10 KiB/s spread (unpaced)", "zerocat",
                    lambda: run_paced(ctx, False, conns, seconds, spread=True), ("relay",))]
    S.append(scenario(GROUP, f"{conns:,} connections x 10 KiB/s for {seconds} s", conns * PACED_EACH * seconds, cs,
                      ref="zerocat -L 10K (paced)"))
    seconds = LIMIT_SECONDS[size]
    cs = [contender(f"zerocat -L 10M --via {via}", "zerocat", lambda via=via: run_limit(ctx, via, seconds), ("relay",))
          for via in ("splice", "userspace")]
    S.append(scenario(GROUP, f"one connection, -L 10M, {seconds * 10} MiB", LIMIT * seconds, cs,
                      ref="zerocat -L 10M --via splice"))
    cs = [contender("zerocat", "zerocat", lambda: run_dump(ctx, False), ("relay",)),
          contender("zerocat --dump hex", "zerocat", lambda: run_dump(ctx, True), ("relay",))]
    S.append(scenario(GROUP, "relay tcp -> tcp, --dump hex", ctx["size"], cs))
    cs = [contender("zerocat", "zerocat", lambda: run_ws(ctx, "zerocat"), ("relay",)),
          contender("python websockets", "peer", lambda: run_ws(ctx, "python"), python_websockets()),
          contender("websocat", "peer", lambda: run_ws(ctx, "websocat"), ("websocat",))]
    S.append(scenario(GROUP, "websocket tunnel tcp -> ws:// -> ws-listen -> tcp", ctx["size"], cs))
    return S


def per_rep(a, b, key):
    """Per repetition a[key] / b[key] over two rows' runs, then the median (None if either
    row has no runs, or they differ in count)."""
    if not a or not b or not a["runs"] or len(a["runs"]) != len(b["runs"]) or a["error"] or b["error"]:
        return None
    vals = [x[key] / y[key] for x, y in zip(a["runs"], b["runs"]) if x[key] and y[key]]
    return statistics.median(vals) if vals else None


def summary(rows):
    """RESULTS.md's lines under the ops table: the requests rows, then each target of issue
    41 with the ratio measured."""
    rs = [r for r in rows if r["group"] == GROUP]
    if not rs:
        return []
    L = requests_table([r for r in rs if r.get("requests")], f"### ops: {RR} (requests/s)\n",
                       "redis-benchmark against two redis-servers through the relay (round-robin), as the redis "
                       "rows: requests/s and the relay's CPU per request; ×ref over zerocat `--workers 1`. "
                       "minrelay is bench/minrelay.c (one epoll, read then write, round-robin): the least CPU a "
                       "read/write relay spends a request.\n")
    row = {(r["scenario"], r["tool"]): r for r in rs}

    def fmt(x, spec="{:.2f}"):
        return spec.format(x) if x is not None else "–"
    L += ["### ops: issue 41's targets\n",
          "Each ratio is per repetition (the runs were interleaved), then the median.\n",
          "| target | measured | met? |", "|---|---|---|"]
    for name, _, _, _ in MODES:
        scn = f"{RR}, {name}"
        z, h, m = (row.get((scn, t)) for t in ("zerocat --workers 1", "haproxy balance roundrobin",
                                                 "minrelay (the floor)"))
        if not z or not h:
            continue
        rps = per_rep(h, z, "seconds")  # HAProxy's time over zerocat's = zerocat's requests/s over HAProxy's
        cpu = per_rep(z, h, "cpu")
        floor = per_rep(m, h, "cpu")
        L.append(f"| {name}: ≥ 1.0x HAProxy's requests/s at ≤ 0.8x its CPU | {fmt(rps)}x requests/s, "
                 f"{fmt(cpu)}x CPU a request (minrelay, the floor: {fmt(floor)}x) | "
                 + ("yes" if rps and cpu and rps >= 1.0 and cpu <= 0.8 else "no") + " |")
    scn = next((r["scenario"] for r in rs if r["tool"] == "zerocat -L 10K (paced)"), None)
    p = row.get((scn, "zerocat -L 10K (paced)"))
    for how, tool in (("clients in step", "zerocat, fan at 10 KiB/s (unpaced)"),
                      ("clients spread", "zerocat, fan at 10 KiB/s spread (unpaced)")):
        cpu = per_rep(p, row.get((scn, tool)), "cpu")
        if cpu is not None:
            L.append(f"| {scn}: paced costs no more CPU than unpaced ({how}) | paced/unpaced CPU {cpu:.2f}x | "
                     + ("yes" if cpu <= 1.0 else "no") + " |")
    for via in ("splice", "userspace"):
        r = next((r for r in rs if r["tool"] == f"zerocat -L 10M --via {via}"), None)
        if r and r["runs"] and not r["error"]:
            held = [r["bytes"] / x["seconds"] / LIMIT for x in r["runs"]]
            L.append(f"| -L 10M within ±5 %, --via {via} | {min(held):.3f}-{max(held):.3f}x the limit, relay CPU "
                     f"{statistics.median(x['cpu'] for x in r['runs']) / (r['bytes'] / LIMIT):.3f} s per second | "
                     + ("yes" if all(abs(h - 1) <= 0.05 for h in held) else "no") + " |")
    d = row.get(("relay tcp -> tcp, --dump hex", "zerocat --dump hex"))
    if d and d["ratio"]:
        L.append(f"| --dump hex: the relay ≥ 0.9x its throughput without | {1 / d['ratio']:.2f}x "
                 f"({d.get('note', '')}) | " + ("yes" if 1 / d["ratio"] >= 0.9 else "no") + " |")
    ws = [r for r in rs if r["scenario"].startswith("websocket") and r["kind"] == "peer" and r["ratio"]]
    if ws:
        best = min(ws, key=lambda r: r["ratio"])
        L.append(f"| WebSocket 1 GiB: ≥ 2x the best peer | {best['ratio']:.2f}x {best['tool']} (the best peer "
                 "that ran) | " + ("yes" if best["ratio"] >= 2 else "no") + " |")
    L.append("")
    return L
