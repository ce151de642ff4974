"""The tee family: zerocat tee vs GNU tee and mbuffer, into two pipes and into a file
(tmpfs, ext4) plus a pipe."""
import os

from . import common
from .common import WORK
from .measure import contender, scenario
from .stream import run_stream

GROUP = "tee"


def scenarios(ctx):
    n = ctx["size"]
    zc = [common.ZC, "--stats", "json"]
    S = []
    cs = [contender("zerocat", "zerocat", lambda: run_stream(ctx, [*zc, "tee", "-", "-", "fd:{fd3}"], True, fd3=True), ("tee",)),
          contender("tee", "peer", lambda: run_stream(ctx, ["tee", "/dev/fd/{fd3}"], True, fd3=True)),
          contender("mbuffer", "peer", lambda: run_stream(ctx, ["mbuffer", "-q", "-o", "-", "-o", "/dev/fd/{fd3}"], True, fd3=True), ("mbuffer",)),
          contender("ceiling (src -> sink)", "ceiling", lambda: run_stream(ctx, None, True))]
    S.append(scenario(GROUP, "tee -> 2 pipes", n, cs))
    for fs, out in (("tmpfs", os.path.join(ctx["tmpfs"], "tee.out")), ("ext4", os.path.join(WORK, "tee.out"))):
        def runner(tool, out=out):
            return lambda: run_stream(ctx, tool, True, files=(out,))
        cs = [contender("zerocat", "zerocat", runner([*zc, "tee", "-", out, "-"]), ("tee",)),
              contender("tee", "peer", runner(["tee", out])),
              contender("mbuffer", "peer", runner(["mbuffer", "-q", "-o", out, "-o", "-"]), ("mbuffer",)),
              contender("ceiling (src -> sink)", "ceiling", lambda: run_stream(ctx, None, True))]
        S.append(scenario(GROUP, f"tee -> file ({fs}) + pipe", n, cs))
    return S
