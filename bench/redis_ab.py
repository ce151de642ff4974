#!/usr/bin/env python3
"""bench/redis_ab.py RUNS ZEROCAT_B [ZEROCAT_A]: the redis rows of bench/run (keep-alive and
-k 0) for two zerocat binaries (A: this checkout's release build unless given) and HAProxy,
RUNS interleaved rounds: median requests/s and the relay's CPU per request. For an A/B of a
relay change built elsewhere (e.g. a copy of the tree with a patch applied, built with its
own target dir). Ad hoc: bench/NOTEBOOK.md#relay-per-event-cost."""
import os
import random
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import common  # noqa: E402
from lib.redis import MODES, run_redis  # noqa: E402

runs, b = int(sys.argv[1]), os.path.abspath(sys.argv[2])
a = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else common.ZC
ctx = {"rng": random.Random(), "tmp": tempfile.mkdtemp(prefix="zcredis")}
cons = [("A " + a, a, ("zerocat", [])), ("B " + b, b, ("zerocat", [])), ("haproxy", a, ("haproxy",))]
for name, args, n, _ in MODES:
    total = n * len(args[args.index("-t") + 1].split(","))
    res = {c[0]: [] for c in cons}
    for i in range(runs):
        k = i % len(cons)
        for label, zc, tool in cons[k:] + cons[:k]:
            common.ZC = zc
            res[label].append(run_redis(ctx, tool, args, n))
    for label, rs in res.items():
        rps = [total / r["seconds"] for r in rs]
        print(f"{name}: {label}: {statistics.median(rps):,.0f} requests/s ({min(rps):,.0f}-{max(rps):,.0f}), "
              f"relay CPU {statistics.median(r['cpu'] for r in rs) / total * 1e6:.1f} us/request", flush=True)
