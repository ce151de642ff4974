"""The s3 family (issue 39): objects to and from two servers on loopback, zerocat against the AWS CLI (`aws s3 cp`, the
credentials in the environment and `--endpoint-url`), s3cmd (a config file written here,
path style, `use_https = False`) and rclone (an `s3` remote of provider Other named by
RCLONE_CONFIG_S3B_* variables). The servers, each row naming its own:

- [s3s-fs]: the Rust S3 server over a directory (here on tmpfs). It is what a real server
  costs, and it costs much: a GET hashes the whole object before its first byte (3.7 s for
  1 GiB), so clients fast and slow end near the same time;
- [s3sink]: bench/s3sink.py --root over the same directory, a server that costs (almost)
  nothing a byte: GETs are sendfile from tmpfs, PUT bodies are spliced into /dev/null but for
  4 KiB windows of each, whose SHA-256 the row checks against its data at their offsets in the
  object. These rows measure the clients.

The rows:

- GET the run's size -> a file on tmpfs, and -> a pipe into the zcb sink;
- PUT from the file on tmpfs, and from a pipe (zcb src | TOOL);
- `copy -r` of a tree of 4 KiB files (10,000; 200 with --check) up and down (s3cmd up only:
  s3s-fs 0.14.1's listings have no ETag, and s3cmd 2.3.0's `get -r` dies on that);
- the peak RSS of a 10x-size (2x with --check) multipart upload from a stream of zeros into bench/s3sink.py
  (a server that reads and checks every byte and keeps none, so no disk is needed).

Every row runs under /usr/bin/time: its peak RSS is the row's note. Each server runs once
for the family; its CPU is charged to no one. zerocat finds its credentials and endpoint as
the AWS CLI does (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL). The peers
get an environment without the machine's AWS_CA_BUNDLE (rclone refuses to start with one
and a plain-http endpoint).

Targets (issue 39): on every row zerocat >= 2x the AWS CLI and >= 1.0x the best of the
three, CPU per GiB <= 0.5x the AWS CLI's; peak RSS <= 32 MiB for the 10x upload."""
import atexit
import base64
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

from . import common
from .checks import Sample, check_tree, sink_check, zerocat_paths
from .common import Failed, KiB, MiB, human
from .measure import contender, scenario
from .procs import Procs, free_port, result, settle, timeout_for, wait_listening
from .trees import make_tree

GROUP = "s3"
SINK = os.path.join(common.BENCH, "s3sink.py")
ACCESS_KEY, SECRET_KEY, BUCKET = "AKIAZEROCATBENCH", "zerocat-bench-secret", "bench"
# The target for the 10x upload's peak RSS.
RSS_TARGET_KIB = 32 * 1024
TARGETS = {"aws s3 cp": 2.0}
_server = {}
_fast = {}


def has_s3(zc):
    """Does this zerocat take s3:// endpoints (its --help lists the scheme)?"""
    return re.search(r"^\s+s3:", common.quiet([zc, "--help"]).stdout, re.M) is not None


def server(ctx):
    """(port, root) of the family's s3s-fs, started on first use over a directory on
    tmpfs, with the bucket made (a directory of the root)."""
    if _server:
        return _server["port"], _server["root"]
    root = os.path.join(ctx["tmpfs"], "s3")
    os.makedirs(os.path.join(root, BUCKET), exist_ok=True)
    port = free_port()
    p = subprocess.Popen(["s3s-fs", "--host", "127.0.0.1", "--port", str(port), "--access-key", ACCESS_KEY,
                          "--secret-key", SECRET_KEY, root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    atexit.register(lambda: (p.terminate(), p.wait()))
    wait_listening(port, timeout=30)
    _server.update(port=port, root=root)
    return port, root


def endpoint(ctx):
    return f"http://127.0.0.1:{server(ctx)[0]}"


def fast_endpoint(ctx):
    """The URL of the family's s3sink.py --root over s3s-fs's directory (so both serve
    data.bin), started on first use."""
    if not _fast:
        _, root = server(ctx)
        p = subprocess.Popen([sys.executable, SINK, "--root", root], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        atexit.register(lambda: (p.terminate(), p.wait()))
        port = int(p.stdout.readline() or 0)
        if not port:
            raise Failed("s3sink.py printed no port")
        _fast["url"] = f"http://127.0.0.1:{port}"
    return _fast["url"]


def sink_forget(url, key):
    """s3sink.py forgets what was uploaded at the key (a DELETE; rclone would otherwise
    find it there and skip the upload)."""
    urllib.request.urlopen(urllib.request.Request(f"{url}/{BUCKET}/{key}", method="DELETE")).read()


def sink_check_object(url, key, data, size):
    """The windows s3sink.py kept of the object at the key, each against the data at its
    offset; None if all match, else what is wrong."""
    try:
        got = json.load(urllib.request.urlopen(f"{url}/_sink/{BUCKET}/{key}"))
    except urllib.error.HTTPError as e:
        return f"s3sink.py has no object {key} ({e.code})"
    if got["size"] != size:
        return f"{key}: {got['size']} bytes, expected {size}"
    fd = os.open(data, os.O_RDONLY)
    try:
        for off, n, digest in got["windows"]:
            if hashlib.sha256(os.pread(fd, n, off)).hexdigest() != digest:
                return f"{key}: the {n} bytes at {off} differ"
    finally:
        os.close(fd)
    return None


def env_for(ctx, url=None):
    """The tools' environment: the credentials, the endpoint (zerocat, rclone), no file of
    the user's (~/.aws, rclone.conf) and no AWS_CA_BUNDLE."""
    url = url or endpoint(ctx)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RCLONE_"))}
    env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_DEFAULT_REGION="us-east-1",
               AWS_ENDPOINT_URL=url, AWS_CONFIG_FILE="/nonexistent", AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
               RCLONE_CONFIG="/dev/null",
               RCLONE_CONFIG_S3B_TYPE="s3", RCLONE_CONFIG_S3B_PROVIDER="Other", RCLONE_CONFIG_S3B_ENDPOINT=url,
               RCLONE_CONFIG_S3B_ACCESS_KEY_ID=ACCESS_KEY, RCLONE_CONFIG_S3B_SECRET_ACCESS_KEY=SECRET_KEY,
               RCLONE_CONFIG_S3B_REGION="us-east-1", RCLONE_CONFIG_S3B_FORCE_PATH_STYLE="true")
    return env


def s3cmd_config(ctx, url=None):
    """s3cmd's config file for the endpoint: path style (host_bucket without %(bucket)s)."""
    hostport = (url or endpoint(ctx)).split("//", 1)[1]
    path = os.path.join(ctx["tmp"], f"s3cmd-{hostport.replace(':', '-')}.cfg")
    with open(path, "w") as f:
        f.write(f"[default]\naccess_key = {ACCESS_KEY}\nsecret_key = {SECRET_KEY}\nhost_base = {hostport}\n"
                f"host_bucket = {hostport}\nuse_https = False\nsignature_v2 = False\nbucket_location = us-east-1\n"
                "progress_meter = False\n")
    return path


class Tool:
    """The commands of one tool for each row: `get(key, dst)`, `get_stdout(key)`,
    `put(src, key)`, `put_stdin(key)`, `up_tree(dir, prefix)`, `down_tree(prefix, dir)`."""

    def __init__(self, name, ctx, url=None):
        self.name, self.ctx, self.url = name, ctx, url

    def s3(self, key):
        return f"s3://{BUCKET}/{key}"

    def argv(self, row, *a):
        zc = [common.ZC, "--stats", "json"]
        url = self.url or endpoint(self.ctx)
        aws = ["aws", "s3", "cp", "--quiet", "--endpoint-url", url]
        s3cmd = ["s3cmd", "-c", s3cmd_config(self.ctx, url), "--quiet"]
        rclone = ["rclone", "--config", "/dev/null"]
        return {
            "zerocat": {"get": lambda k, d: [*zc, "copy", self.s3(k), d],
                        "get_stdout": lambda k: [*zc, "pipe", self.s3(k), "-"],
                        "put": lambda s, k: [*zc, "copy", s, self.s3(k)],
                        "put_stdin": lambda k: [*zc, "pipe", "-", self.s3(k)],
                        "up_tree": lambda s, p: [*zc, "copy", "-r", s, self.s3(p + "/")],
                        "down_tree": lambda p, d: [*zc, "copy", "-r", self.s3(p + "/"), d]},
            "aws s3 cp": {"get": lambda k, d: [*aws, self.s3(k), d],
                          "get_stdout": lambda k: [*aws, self.s3(k), "-"],
                          "put": lambda s, k: [*aws, s, self.s3(k)],
                          "put_stdin": lambda k: [*aws, "-", self.s3(k)],
                          "up_tree": lambda s, p: [*aws, "--recursive", s, self.s3(p + "/")],
                          "down_tree": lambda p, d: [*aws, "--recursive", self.s3(p + "/"), d]},
            "s3cmd": {"get": lambda k, d: [*s3cmd, "get", "--force", self.s3(k), d],
                      "get_stdout": lambda k: [*s3cmd, "get", self.s3(k), "-"],
                      "put": lambda s, k: [*s3cmd, "put", s, self.s3(k)],
                      "put_stdin": lambda k: [*s3cmd, "put", "-", self.s3(k)],
                      "up_tree": lambda s, p: [*s3cmd, "put", "-r", s + "/", self.s3(p + "/")],
                      "down_tree": lambda p, d: [*s3cmd, "get", "-r", self.s3(p + "/"), d + "/"]},
            "rclone": {"get": lambda k, d: [*rclone, "copyto", f"s3b:{BUCKET}/{k}", d],
                       "get_stdout": lambda k: [*rclone, "cat", f"s3b:{BUCKET}/{k}"],
                       "put": lambda s, k: [*rclone, "copyto", s, f"s3b:{BUCKET}/{k}"],
                       "put_stdin": lambda k: [*rclone, "rcat", f"s3b:{BUCKET}/{k}"],
                       "up_tree": lambda s, p: [*rclone, "copy", s, f"s3b:{BUCKET}/{p}"],
                       # down/ with its slash: rclone HEADs a path without one (is it a
                       # file?), which s3s-fs answers 500 for a directory, retried for minutes
                       "down_tree": lambda p, d: [*rclone, "copy", f"s3b:{BUCKET}/{p}/", d]},
        }[self.name][row](*a)


PEERS = ("aws s3 cp", "s3cmd", "rclone")
NEEDS = {"zerocat": ("s3", "s3s-fs", "/usr/bin/time"), "aws s3 cp": ("aws", "s3s-fs", "/usr/bin/time"),
         "s3cmd": ("s3cmd", "s3s-fs", "/usr/bin/time"), "rclone": ("rclone", "s3s-fs", "/usr/bin/time")}


def timed(ctx, ps, argv, env, **kw):
    """Spawns the tool under /usr/bin/time; returns the file its peak RSS goes to."""
    rss_file = os.path.join(ctx["tmp"], "rss")
    if os.path.exists(rss_file):
        os.unlink(rss_file)
    ps.spawn("tool", ["/usr/bin/time", "-f", "%M", "-o", rss_file, *argv], env=env, **kw)
    return rss_file


def finish(ps, start, end, nbytes, rss_file):
    """The run's result, with the zerocat path (the tool is behind /usr/bin/time) and the
    peak RSS in its note."""
    r = result(ps, start, end, nbytes)
    t = ps.tool()
    if common.ZC in t.argv:
        names, _ = zerocat_paths(t.err)
        r["path"] = "+".join(names)
    with open(rss_file) as f:
        r["rss_kib"] = int(f.read().split()[-1])
    r["note"] = f"peak RSS {r['rss_kib'] / 1024:.1f} MiB"
    return r


def forget(root, prefix):
    """Removes the object `prefix` or those under `prefix/` (a file or a directory of
    s3s-fs's root) and s3s-fs's metadata files of them (`.bucket-B64.object-B64.*.json`
    in the root), outside the clock."""
    at = os.path.join(root, BUCKET, prefix)
    if os.path.isdir(at):
        shutil.rmtree(at)
    elif os.path.exists(at):
        os.unlink(at)
    for f in glob.glob(os.path.join(root, ".bucket-*.object-*")):
        b64 = os.path.basename(f).split(".object-", 1)[1].split(".", 1)[0]
        key = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).decode(errors="replace")
        if key == prefix or key.startswith(prefix + "/"):
            os.unlink(f)


def data_object(ctx):
    """The run's data as the object data.bin (a hard link into s3s-fs's root: same tmpfs)."""
    _, root = server(ctx)
    obj = os.path.join(root, BUCKET, "data.bin")
    if not os.path.exists(obj):
        os.link(ctx["data_tmpfs"], obj)
    return "data.bin"


def run_get(ctx, tool):
    """TOOL s3://bench/data.bin FILE, the file's windows checked (either server: the tool
    carries its URL)."""
    size = ctx["size"]
    key = data_object(ctx)
    dst = os.path.join(ctx["tmpfs"], "s3.out")
    if os.path.exists(dst):
        os.unlink(dst)
    sample = Sample(ctx["data_tmpfs"], size, ctx["rng"])
    ps = Procs(timeout_for(size) + 30)
    try:
        settle()
        start = time.perf_counter()
        rss = timed(ctx, ps, tool.argv("get", key, dst), env_for(ctx, tool.url))
        end = ps.wait()
        ps.check_exits()
        err = sample.check_file(dst)
        if err:
            raise Failed(err)
        return finish(ps, start, end, size, rss)
    finally:
        ps.close()
        if os.path.exists(dst):
            os.unlink(dst)


def run_get_stream(ctx, tool):
    """TOOL > pipe > zcb sink."""
    size = ctx["size"]
    key = data_object(ctx)
    sample = Sample(ctx["data_tmpfs"], size, ctx["rng"])
    ps = Procs(timeout_for(size) + 30)
    r, w = os.pipe()
    try:
        sink = ps.spawn("sink", [common.ZCB, "sink", sample.arg(), os.path.join(ctx["tmp"], "sample0"), "-"],
                        stdin=r, stdout=subprocess.PIPE)
        sink.sample_path, sink.label = sink.argv[3], "stdout sink"
        os.close(r)
        r = None
        start = time.perf_counter()
        rss = timed(ctx, ps, tool.argv("get_stdout", key), env_for(ctx, tool.url), stdout=w)
        os.close(w)
        w = None
        end = ps.wait()
        ps.check_exits()
        sink_check(sink, sample)
        return finish(ps, start, end, size, rss)
    finally:
        for fd in (r, w):
            if fd is not None:
                os.close(fd)
        ps.close()


def run_put(ctx, tool, stream):
    """TOOL FILE s3://bench/up.bin, or zcb src | TOOL - s3://bench/up.bin; the object
    s3s-fs wrote checked, or the windows s3sink.py kept of it."""
    size = ctx["size"]
    _, root = server(ctx)
    fast = tool.url is not None
    clear = (lambda: sink_forget(tool.url, "up.bin")) if fast else (lambda: forget(root, "up.bin"))
    clear()
    sample = Sample(ctx["data_tmpfs"], size, ctx["rng"])
    ps = Procs(timeout_for(size) + 30)
    r = w = None
    try:
        settle()
        start = time.perf_counter()
        if stream:
            r, w = os.pipe()
            ps.spawn("src", [common.ZCB, "src", ctx["data_tmpfs"], "0", "-"], stdout=w)
            os.close(w)
            w = None
            rss = timed(ctx, ps, tool.argv("put_stdin", "up.bin"), env_for(ctx, tool.url), stdin=r)
            os.close(r)
            r = None
        else:
            rss = timed(ctx, ps, tool.argv("put", ctx["data_tmpfs"], "up.bin"), env_for(ctx, tool.url))
        end = ps.wait()
        ps.check_exits()
        err = (sink_check_object(tool.url, "up.bin", ctx["data_tmpfs"], size) if fast else
               sample.check_file(os.path.join(root, BUCKET, "up.bin")))
        if err:
            raise Failed(err)
        return finish(ps, start, end, size, rss)
    finally:
        for fd in (r, w):
            if fd is not None:
                os.close(fd)
        ps.close()
        clear()


def tree_src(ctx):
    """The tree of 4 KiB files on tmpfs (made once, outside the clock)."""
    src = os.path.join(ctx["tmpfs"], "s3tree.src")
    make_tree(src, ctx["s3_files"], 4 * KiB)
    return src


def run_up_tree(ctx, tool):
    _, root = server(ctx)
    src = tree_src(ctx)
    forget(root, "up")
    ps = Procs(600)
    try:
        settle()
        start = time.perf_counter()
        rss = timed(ctx, ps, tool.argv("up_tree", src, "up"), env_for(ctx))
        end = ps.wait()
        ps.check_exits()
        err = check_tree(src, os.path.join(root, BUCKET, "up"), ctx["rng"])
        if err:
            raise Failed(err)
        return finish(ps, start, end, ctx["s3_files"] * 4 * KiB, rss)
    finally:
        ps.close()
        forget(root, "up")


def run_down_tree(ctx, tool):
    """The objects under down/: the same tree, made straight into s3s-fs's directory."""
    _, root = server(ctx)
    src = os.path.join(root, BUCKET, "down")
    make_tree(src, ctx["s3_files"], 4 * KiB)
    dst = os.path.join(ctx["tmpfs"], "s3tree.out")
    shutil.rmtree(dst, ignore_errors=True)
    ps = Procs(600)
    try:
        settle()
        start = time.perf_counter()
        rss = timed(ctx, ps, tool.argv("down_tree", "down", dst), env_for(ctx))
        end = ps.wait()
        ps.check_exits()
        err = check_tree(src, dst, ctx["rng"])
        if err:
            raise Failed(err)
        return finish(ps, start, end, ctx["s3_files"] * 4 * KiB, rss)
    finally:
        ps.close()
        shutil.rmtree(dst, ignore_errors=True)


def run_big_upload(ctx, tool, nbytes):
    """zcb src SPARSE | TOOL - s3://bench/big.bin into bench/s3sink.py, which checks that
    `nbytes` zeros arrived and keeps none of them."""
    big = os.path.join(ctx["tmpfs"], "s3-zeros.bin")
    if not os.path.exists(big) or os.path.getsize(big) != nbytes:
        with open(big, "wb") as f:
            f.truncate(nbytes)
    ps = Procs(timeout_for(nbytes) + 60)
    r = w = None
    try:
        sink = ps.spawn("server", [sys.executable, SINK], stdout=subprocess.PIPE, daemon=True)
        port = int(sink.stdout.readline() or 0)
        if not port:
            raise Failed("s3sink.py printed no port")
        url = f"http://127.0.0.1:{port}"
        start = time.perf_counter()
        r, w = os.pipe()
        ps.spawn("src", [common.ZCB, "src", big, "0", "-"], stdout=w)
        os.close(w)
        w = None
        rss = timed(ctx, ps, Tool(tool.name, ctx, url).argv("put_stdin", "big.bin"), env_for(ctx, url), stdin=r)
        os.close(r)
        r = None
        end = ps.wait()
        ps.check_exits()
        said = sink.stdout.read().decode().split()
        if said[-2:] != ["done", str(nbytes)]:
            raise Failed(f"s3sink.py said {' '.join(said[-4:])!r}, expected 'done {nbytes}'")
        res = finish(ps, start, end, nbytes, rss)
        res["note"] += " (target <= 32 MiB)" if tool.name == "zerocat" else ""
        return res
    finally:
        for fd in (r, w):
            if fd is not None:
                os.close(fd)
        ps.close()


def scenarios(ctx):
    n = ctx["size"]
    files = ctx.setdefault("s3_files", 200 if ctx["check"] else ctx["tree_files"])
    S = []

    def row(name, nbytes, fn, who=("zerocat", *PEERS), fast=False):
        """fast: against s3sink.py --root (its URL known once it runs), else s3s-fs."""
        tool = lambda t: Tool(t, ctx, fast_endpoint(ctx) if fast else None)
        cs = [contender(t, "zerocat" if t == "zerocat" else "peer", (lambda t=t: fn(tool(t))), NEEDS[t]) for t in who]
        S.append(scenario(GROUP, name, nbytes, cs, files=0))
    for server_name, fast in (("s3sink", True), ("s3s-fs", False)):
        row(f"GET {human(n)} -> file (tmpfs) [{server_name}]", n, lambda t: run_get(ctx, t), fast=fast)
        row(f"GET {human(n)} -> pipe [{server_name}]", n, lambda t: run_get_stream(ctx, t), fast=fast)
        row(f"PUT {human(n)} from a file (tmpfs) [{server_name}]", n, lambda t: run_put(ctx, t, stream=False), fast=fast)
        row(f"PUT {human(n)} from a pipe [{server_name}]", n, lambda t: run_put(ctx, t, stream=True), fast=fast)
    row(f"copy -r {files:,} x 4 KiB up [s3s-fs]", files * 4 * KiB, lambda t: run_up_tree(ctx, t))
    # No s3cmd: s3s-fs 0.14.1's listings have no ETag, and s3cmd 2.3.0's `get -r` dies on
    # that (KeyError: 'ETag').
    row(f"copy -r {files:,} x 4 KiB down [s3s-fs]", files * 4 * KiB, lambda t: run_down_tree(ctx, t),
        who=("zerocat", "aws s3 cp", "rclone"))
    big = (2 if ctx["check"] else 10) * n  # --check: still 16 parts, in a few seconds
    row(f"PUT {human(big)} of zeros from a pipe (multipart, into s3sink.py), peak RSS", big,
        lambda t: run_big_upload(ctx, t, big), who=("zerocat", "rclone"))
    return S


def summary(rows, meta):
    """RESULTS.md's lines under the s3 table: each row against the issue's targets."""
    L = ["Targets (issue 39): zerocat at least 2x `aws s3 cp` and 1.0x the best of the three "
         "(per repetition, the peer's time over zerocat's, then the median), CPU per GiB at most "
         "0.5x the AWS CLI's, peak RSS at most 32 MiB for the 10x multipart upload. Load average "
         f"{meta['load0']} at the start, {meta['load1']} at the end (other engineers share the cores).\n",
         "| scenario | zerocat | vs aws (>= 2) | vs best peer (>= 1.0) | CPU vs aws (<= 0.5) | peak RSS MiB "
         "(zerocat / aws / s3cmd / rclone) |", "|---|---:|---:|---:|---:|---|"]
    for scn in dict.fromkeys(r["scenario"] for r in rows if r["group"] == GROUP):
        by = {r["tool"]: r for r in rows if r["scenario"] == scn}
        ref = by.get("zerocat")
        if not ref or ref["median"] is None:
            continue
        aws = by.get("aws s3 cp")
        ok = lambda good: " ok" if good else " **missed**"
        vs_aws = f"{aws['ratio']:.2f}x{ok(aws['ratio'] >= 2.0)}" if aws and aws["ratio"] else "–"
        ratios = [(by[p]["ratio"], p) for p in PEERS if p in by and by[p]["ratio"]]
        best = min(ratios) if ratios else None
        vs_best = f"{best[0]:.2f}x ({best[1]}){ok(best[0] >= 1.0)}" if best else "–"
        cpu = (f"{ref['cpu'] / aws['cpu']:.2f}{ok(ref['cpu'] <= 0.5 * aws['cpu'])}"
               if aws and aws.get("cpu") and ref.get("cpu") is not None else "–")
        rss = " / ".join(f"{by[t]['rss_kib'] / 1024:.1f}" if t in by and by[t].get("rss_kib") else "–"
                         for t in ("zerocat", *PEERS))
        if "peak RSS" in scn:
            rss += ok(ref["rss_kib"] <= RSS_TARGET_KIB)
        L.append(f"| {scn} | {ref['median']:.2f} s | {vs_aws} | {vs_best} | {cpu} | {rss} |")
    L.append("")
    return L
