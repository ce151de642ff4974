"""Did the right bytes arrive: sampled windows of a file or a sink, a whole tree, or a
count for /dev/null."""
import hashlib
import json
import os
import subprocess

from . import common
from .common import Failed

WINDOW = 4096


class Sample:
    """Windows of a run's bytes: the first, the last, and 14 at random offsets."""

    def __init__(self, data, size, rng):
        offs = sorted({0, size - WINDOW, *(rng.randrange(size - WINDOW) for _ in range(14))})
        self.offsets = []
        for o in offs:  # non-overlapping, as the sink expects
            if not self.offsets or o >= self.offsets[-1] + WINDOW:
                self.offsets.append(o)
        self.size = size
        self.expected = self.digest(data)

    def arg(self):
        return ",".join(map(str, self.offsets))

    def digest(self, path):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for o in self.offsets:
                h.update(os.pread(f.fileno(), WINDOW, o))
        return h.hexdigest()

    def check_file(self, path):
        if not os.path.exists(path):
            return f"{path} missing"
        got = os.path.getsize(path)
        if got != self.size:
            return f"{path}: {got} bytes, expected {self.size}"
        if self.digest(path) != self.expected:
            return f"{path}: sampled bytes differ"
        return None


def check_tree(src, dst, rng):
    if not os.path.isdir(dst):
        return f"{dst} missing"
    inner = os.path.join(dst, os.path.basename(src))
    if not os.path.exists(os.path.join(dst, "d000")) and os.path.isdir(inner):
        dst = inner  # copied into dst/ rather than as dst/: accept, the bytes are what count
    want = sorted(os.path.relpath(os.path.join(d, f), src) for d, _, fs in os.walk(src) for f in fs)
    got = sorted(os.path.relpath(os.path.join(d, f), dst) for d, _, fs in os.walk(dst) for f in fs)
    if got != want:
        return f"tree: {len(got)} files, expected {len(want)}"
    for rel in rng.sample(want, min(64, len(want))):
        with open(os.path.join(src, rel), "rb") as a, open(os.path.join(dst, rel), "rb") as b:
            if a.read() != b.read():
                return f"tree: {rel} differs"
    if sum(os.path.getsize(os.path.join(dst, r)) for r in got) != sum(
            os.path.getsize(os.path.join(src, r)) for r in want):
        return "tree: sizes differ"
    return None


def sink_check(p, sample):
    """A `zcb sink` process: its byte count, and the windows it saved."""
    out = p.stdout.read().decode().strip().splitlines()
    got = int(out[-1]) if out and out[-1].isdigit() else -1
    if got != sample.size:
        raise Failed(f"{p.label} got {got} bytes, expected {sample.size}")
    with open(p.sample_path, "rb") as f:
        if hashlib.sha256(f.read()).hexdigest() != sample.expected:
            raise Failed(f"{p.label}: sampled bytes differ")


def check_devnull(ps, size):
    """/dev/null keeps nothing: trust zerocat's own count, else the kernel's wchar/rchar."""
    t = ps.tool()
    if t is None:
        return
    if t.argv[0] == common.ZC:
        _, obj = zerocat_paths(t.err)
        if obj is not None and obj.get("bytes") == size:
            return
        raise Failed(f"zerocat reported {obj and obj.get('bytes')} bytes, expected {size}")
    if max(t.io.get("wchar", 0), t.io.get("rchar", 0)) < size:
        raise Failed(f"kernel counted {t.io} bytes moved, expected {size}")


def zerocat_paths(err):
    """The path names in zerocat's --stats json report, in order, for the table."""
    names = []

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "path" and isinstance(v, str) and v not in names:
                    names.append(v)
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    for line in err.decode(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            walk(obj)
            return names, obj
    return names, None


def listening_sink(ps, ctx, sample, listen="tcp-listen:127.0.0.1:0"):
    """bench/zcb's sink, checking `sample`, listening on `listen`: the process (for
    sink_check) and the port (or path) it printed once listening."""
    sink = ps.spawn("sink", [common.ZCB, "sink", sample.arg(), os.path.join(ctx["tmp"], "sample0"), listen],
                    stdout=subprocess.PIPE)
    sink.sample_path, sink.label = sink.argv[3], "sink"
    ready = sink.stdout.readline().decode().strip()
    if not ready:
        raise Failed("sink did not listen: " + os.pread(sink.errfile.fileno(), 4096, 0).decode(errors="replace"))
    return sink, ready
