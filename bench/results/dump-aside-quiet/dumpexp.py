#!/usr/bin/env python3
"""Interleaved: zcb src /dev/shm/g1 -> zerocat relay --once [--dump ...] -> zcb sink. Times: sink exit, all exit."""
import subprocess, time, sys, os, json, statistics, itertools
ZCB = "/work/exp/zcb"
variants = {}
for spec in sys.argv[3:]:
    name, _, rest = spec.partition("=")
    zc, _, args = rest.partition(",")
    variants[name] = (zc, [a for a in args.split(",") if a])
runs = int(sys.argv[1]); data = sys.argv[2]
res = {k: [] for k in variants}
for r in range(runs + 1):
    for name, (zc, args) in variants.items():
        for f in ("/work/exp/d.dump", "/dev/shm/d.dump"):
            try: os.unlink(f)
            except FileNotFoundError: pass
        sink = subprocess.Popen([ZCB, "sink", "0", "/work/exp/sample", "tcp-listen:127.0.0.1:0"], stdout=subprocess.PIPE)
        port = sink.stdout.readline().decode().strip()
        relay = subprocess.Popen([zc, "--stats", "json", *args, "relay", "--once", "tcp-listen:127.0.0.1:0", f"tcp:127.0.0.1:{port}"], stderr=subprocess.PIPE)
        line = relay.stderr.readline().decode()
        import re
        m = re.search(r"127\.0\.0\.1:(\d+)", line)
        rport = m.group(1)
        t0 = time.perf_counter()
        src = subprocess.Popen([ZCB, "src", data, "0", f"tcp:127.0.0.1:{rport}"], stdout=subprocess.DEVNULL)
        sink.wait(); t_sink = time.perf_counter()
        err = relay.stderr.read().decode(); relay.wait(); src.wait(); t_all = time.perf_counter()
        ru = None
        held = ""
        for l in err.splitlines():
            if l.startswith("{"):
                try:
                    j = json.loads(l); d = j.get("dump")
                    if d: held = f"{d['bytes']>>10}K"
                except Exception: pass
        if r > 0:
            res[name].append((t_sink - t0, t_all - t0, held))
for name, v in res.items():
    s = statistics.median(x[0] for x in v); a = statistics.median(x[1] for x in v)
    t = statistics.median(x[1]-x[0] for x in v)
    print(f"{name:12s} sink {1/s:.2f} GiB/s  all {1/a:.2f} GiB/s  tail {t*1000:.1f} ms held {[x[2] for x in v]}")
