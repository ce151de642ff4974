#!/usr/bin/env python3
"""bench/relay_ab.py [RUNS] [PAIR ...]: zerocat relay as it is, with the hidden --grow-pipes,
with --via splice --grow-pipes and --via userspace, against the two reference relays of
bench/refrelay.c: 1 GiB per run (sendfile feeder), RUNS (default 5) interleaved rounds,
medians of throughput and of the relay's CPU-s/GiB. PAIR: tcp-to-tcp, tcp-to-unix,
unix-to-unix (default: all three). Needs bench/run to have built zerocat and bench/work/
(bench/run --check --only relay does). Ad hoc: the measurements behind
bench/RESULTS.md#relay-per-event-cost."""
import os
import random
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import common  # noqa: E402
from lib.common import GiB  # noqa: E402
from lib.data import make_data  # noqa: E402
from lib.relay import run_relay  # noqa: E402

ZC = common.ZC
GROW = os.path.join(common.WORK, "zerocat-grow")  # zerocat ... relay --grow-pipes ...
with open(GROW, "w") as f:
    f.write('#!/bin/bash\na=(); for x in "$@"; do a+=("$x"); [ "$x" = relay ] && a+=(--grow-pipes); done\n'
            f'exec {ZC} "${{a[@]}}"\n')
os.chmod(GROW, 0o755)
sock = tempfile.mkdtemp(prefix="zcb", dir="/tmp")
ctx = {"size": GiB, "rng": random.Random(), "tmp": sock, "sock": sock, "data": os.path.join(common.WORK, "data.bin")}
make_data(ctx["data"], GiB)
CONTENDERS = [("zerocat", ZC, ("zerocat", None)), ("zerocat --grow-pipes", GROW, ("zerocat", None)),
              ("zerocat --via splice --grow-pipes", GROW, ("zerocat", "splice")),
              ("zerocat --via userspace", ZC, ("zerocat", "userspace")),
              ("ref splice", ZC, ("ref", "splice")), ("ref rw", ZC, ("ref", "rw"))]
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
for pair in sys.argv[2:] or ["tcp-to-tcp", "tcp-to-unix", "unix-to-unix"]:
    res = {name: [] for name, _, _ in CONTENDERS}
    for i in range(runs):
        k = i % len(CONTENDERS)
        for name, zc, tool in CONTENDERS[k:] + CONTENDERS[:k]:
            common.ZC = zc
            res[name].append(run_relay(ctx, tool, pair))
    for name, rs in res.items():
        rate = [1 / x["seconds"] for x in rs]
        print(f"{pair:12} {name:34} {statistics.median(rate):5.2f} GiB/s ({min(rate):.2f}-{max(rate):.2f})  "
              f"CPU {statistics.median(x['cpu'] for x in rs):.3f} s/GiB  path {rs[-1]['path']}", flush=True)
