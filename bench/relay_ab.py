#!/usr/bin/env python3
"""bench/relay_ab.py [--runs N] [--tcp-cc NAME] [--before ZEROCAT] [PAIR ...]: zerocat relay
(auto, and --via splice) against the two reference relays of bench/refrelay.c, and
optionally another zerocat build (--before: the same rows for it): 1 GiB per run
(sendfile feeder), N (default 5) interleaved rounds, medians of throughput and of the
relay's CPU-s/GiB, and the paths auto ran. PAIR: tcp-to-tcp, tcp-to-unix, unix-to-unix
(default: all three). --tcp-cc sets net.ipv4.tcp_congestion_control for the runs (root)
and restores it afterwards, also on failure or SIGINT/SIGTERM. Needs bench/run to have
built zerocat and bench/work/ (bench/run --check --only relay does). Ad hoc: the
measurements behind bench/NOTEBOOK.md#relay-per-event-cost and #relay-one-path-rule."""
import argparse
import os
import random
import signal
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import common  # noqa: E402
from lib.common import GiB  # noqa: E402
from lib.data import make_data  # noqa: E402
from lib.peers import set_tcp_cc, tcp_cc  # noqa: E402
from lib.relay import run_relay  # noqa: E402

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--runs", type=int, default=5)
ap.add_argument("--tcp-cc", metavar="NAME")
ap.add_argument("--before", metavar="ZEROCAT", help="another zerocat binary to compare")
ap.add_argument("pairs", nargs="*", default=["tcp-to-tcp", "tcp-to-unix", "unix-to-unix"])
args = ap.parse_args()

ZC = common.ZC
CONTENDERS = [("zerocat", ZC, ("zerocat", None)), ("zerocat --via splice", ZC, ("zerocat", "splice")),
              ("ref splice", ZC, ("ref", "splice")), ("ref rw", ZC, ("ref", "rw"))]
if args.before:
    CONTENDERS += [("before", os.path.abspath(args.before), ("zerocat", None))]


def on_signal(signum, _frame):
    raise SystemExit(128 + signum)  # unwinds through the finally below


signal.signal(signal.SIGTERM, on_signal)
old_cc = set_tcp_cc(args.tcp_cc) if args.tcp_cc else None
try:
    print(f"tcp congestion control {tcp_cc()}, load average {'%.1f %.1f %.1f' % os.getloadavg()}", flush=True)
    sock = tempfile.mkdtemp(prefix="zcb", dir="/tmp")
    ctx = {"size": GiB, "rng": random.Random(), "tmp": sock, "sock": sock,
           "data": os.path.join(common.WORK, "data.bin")}
    make_data(ctx["data"], GiB)
    for pair in args.pairs:
        res = {name: [] for name, _, _ in CONTENDERS}
        for i in range(args.runs):
            k = i % len(CONTENDERS)
            for name, zc, tool in CONTENDERS[k:] + CONTENDERS[:k]:
                common.ZC = zc
                res[name].append(run_relay(ctx, tool, pair))
        for name, rs in res.items():
            rate = [1 / x["seconds"] for x in rs]
            print(f"{pair:12} {name:22} {statistics.median(rate):5.2f} GiB/s ({min(rate):.2f}-{max(rate):.2f})  "
                  f"CPU {statistics.median(x['cpu'] for x in rs):.3f} s/GiB  path {rs[-1]['path']}", flush=True)
    print(f"load average {'%.1f %.1f %.1f' % os.getloadavg()}", flush=True)
finally:
    if old_cc:
        set_tcp_cc(old_cc)
