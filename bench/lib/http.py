"""The http family (issue 38): objects fetched over HTTP(S) from a server on loopback.

- GET from nginx into a file on tmpfs: `zerocat copy URL FILE` (and `-j 4`) vs `curl -o`,
  `wget -O`, `aria2c -x1` and `aria2c -x4`;
- GET from nginx into a pipe: `zerocat pipe URL -` vs `curl URL` and `wget -O-`, into the zcb sink;
- the same GET over https (nginx `ssl`, the tls family's test CA) vs curl;
- a download cut every tenth of the object (bench/cutserver.py: an RST after every size/10
  bytes of body, counted across connections; 100 MiB at 1 GiB) vs `curl -C -` in a shell
  loop and `wget -c` (50 tries each: an RST also drops what the server's socket still held,
  so a client sees more cuts than ten), next to the same server uncut. curl's own `--retry 20 -C -` is no row:
  curl 7.88 retries without a Range (from byte 0 again, overwriting), so a download cut
  more often than it is long never completes (bench/NOTEBOOK.md#http-cut-downloads);
- PUT into nginx (`dav_methods PUT`) from a file vs `curl -T FILE`, and from a pipe (chunked,
  fed by zcb) vs `curl -T -`; the note says nginx's CPU per GiB: the upload's receiver does
  most of the work, and a body sent from the page cache (sendfile) costs it more to take
  than one a client copied (bench/NOTEBOOK.md#http-targets);
- the floor of the file rows: the tmpfs write alone (`zerocat copy --via splice` of the data,
  file -> pipe -> file), which every tool pays;
- the peak RSS of an object ten times the run's size (a sparse file on tmpfs, into /dev/null).

nginx runs once for the family (one worker, no master: it reads the run's 0700 temp dirs
as the user bench/run is), with sendfile on; its CPU is not charged to anyone (the PUT rows
say it in their note). The cut
server is started per run, so every run is cut at the same offsets."""
import atexit
import os
import re
import shutil
import subprocess
import sys
import time

from . import common
from .checks import Sample, check_devnull, zerocat_paths
from .common import Failed, GiB, human
from .measure import contender, scenario
from .procs import Procs, free_port, proc_cpu, result, settle, timeout_for, wait_listening
from .stream import run_stream
from .tls import pki

GROUP = "http"
CUTSERVER = os.path.join(common.BENCH, "cutserver.py")
# what every zerocat row of the family needs: an http scheme in this zerocat
NEEDS_ZC = ("http", "nginx")
_nginx = {}


def has_http(zc):
    """Does this zerocat take http:// endpoints (its --help lists the scheme)?"""
    out = common.quiet([zc, "--help"]).stdout
    return re.search(r"^\s+https?:", out, re.M) is not None


def nginx(ctx):
    """(http port, https port) of the family's nginx, started on first use, serving
    ctx["tmpfs"] (the run's data on tmpfs) and taking PUTs under /up/."""
    if _nginx:
        return _nginx["ports"]
    ca, cert, key, _ = pki(ctx["tmp"])
    conf_dir = os.path.join(ctx["tmp"], "nginx")
    os.makedirs(conf_dir, exist_ok=True)
    os.makedirs(os.path.join(ctx["tmpfs"], "up"), exist_ok=True)
    port, sport = free_port(), free_port()
    tmp = os.path.join(ctx["tmpfs"], "nginx-body")  # the same filesystem as up/: a PUT is a rename
    os.makedirs(tmp, exist_ok=True)
    conf = os.path.join(conf_dir, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off;
master_process off;
worker_processes 1;
pid {conf_dir}/nginx.pid;
error_log {conf_dir}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    client_max_body_size 0;
    client_body_temp_path {tmp};
    proxy_temp_path {conf_dir}/proxy;
    fastcgi_temp_path {conf_dir}/fastcgi;
    uwsgi_temp_path {conf_dir}/uwsgi;
    scgi_temp_path {conf_dir}/scgi;
    server {{
        listen 127.0.0.1:{port};
        listen 127.0.0.1:{sport} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {ctx["tmpfs"]};
        location /up/ {{ dav_methods PUT; create_full_put_path on; }}
    }}
}}
""")
    p = subprocess.Popen(["nginx", "-c", conf, "-p", conf_dir], stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(conf_dir, "stderr"), "wb"))
    atexit.register(lambda: (p.terminate(), p.wait()))
    wait_listening(port)
    wait_listening(sport)
    _nginx["ports"] = (port, sport)
    _nginx["pid"] = p.pid
    return port, sport


def noted_server_cpu(r, cpu0, nbytes):
    """A run's result `r` with nginx's CPU since `cpu0` (per GiB) in its note."""
    used = proc_cpu(_nginx["pid"]) - cpu0
    r["note"] = f"nginx CPU {used / (nbytes / GiB):.2f} s/GiB"
    return r


def run_get(ctx, argv, dst, https=False, devnull=False):
    """TOOL fetching the run's data from nginx into `dst` (argv(url, dst) makes the command)."""
    size = ctx["size"]
    port, sport = nginx(ctx)
    url = f"https://localhost:{sport}/data.bin" if https else f"http://127.0.0.1:{port}/data.bin"
    sample = Sample(ctx["data_tmpfs"], size, ctx["rng"])
    for f in (dst, dst + ".aria2"):
        if os.path.exists(f):
            os.unlink(f)
    ps = Procs(timeout_for(size))
    try:
        settle()
        start = time.perf_counter()
        ps.spawn("tool", argv(url, dst))
        end = ps.wait()
        ps.check_exits()
        err = sample.check_file(dst)
        if err:
            raise Failed(err)
        return result(ps, start, end, size)
    finally:
        ps.close()
        if os.path.exists(dst):
            os.unlink(dst)


def run_get_stream(ctx, argv):
    """TOOL fetching the run's data from nginx to its stdout, a pipe into the zcb sink."""
    port, _ = nginx(ctx)
    return run_stream(ctx, argv(f"http://127.0.0.1:{port}/data.bin"), feed=False)


def run_put(ctx, argv):
    """TOOL sending the run's data (on tmpfs) to nginx's /up/put.bin; the file nginx wrote checked."""
    size = ctx["size"]
    port, _ = nginx(ctx)
    dst = os.path.join(ctx["tmpfs"], "up", "put.bin")
    if os.path.exists(dst):
        os.unlink(dst)
    sample = Sample(ctx["data_tmpfs"], size, ctx["rng"])
    ps = Procs(timeout_for(size))
    try:
        cpu0 = proc_cpu(_nginx["pid"])
        start = time.perf_counter()
        ps.spawn("tool", argv(ctx["data_tmpfs"], f"http://127.0.0.1:{port}/up/put.bin"))
        end = ps.wait()
        ps.check_exits()
        err = sample.check_file(dst)
        if err:
            raise Failed(err)
        return noted_server_cpu(result(ps, start, end, size), cpu0, size)
    finally:
        ps.close()
        if os.path.exists(dst):
            os.unlink(dst)


def run_put_stream(ctx, argv):
    """TOOL sending the run's data from its stdin (a pipe the zcb feeder fills) to nginx's
    /up/put.bin, chunked; the file nginx wrote checked."""
    port, _ = nginx(ctx)
    dst = os.path.join(ctx["tmpfs"], "up", "put.bin")
    cpu0 = proc_cpu(_nginx["pid"])
    r = run_stream(ctx, argv(f"http://127.0.0.1:{port}/up/put.bin"), feed=True, out="nothing", files=(dst,))
    return noted_server_cpu(r, cpu0, ctx["size"])


def run_cut(ctx, argv, cut_every):
    """TOOL fetching from a fresh bench/cutserver.py that resets the connection after every
    `cut_every` bytes of body (0: never) into a file on tmpfs."""
    size = ctx["size"]
    dst = os.path.join(ctx["tmpfs"], "cut.out")
    if os.path.exists(dst):
        os.unlink(dst)
    sample = Sample(ctx["data_tmpfs"], size, ctx["rng"])
    ps = Procs(timeout_for(size) + 60)
    try:
        srv = ps.spawn("server", [sys.executable, CUTSERVER, ctx["data_tmpfs"], "--cut-every", str(cut_every)],
                       stdout=subprocess.PIPE, daemon=True)
        port = int(srv.stdout.readline() or 0)
        if not port:
            raise Failed("cutserver printed no port")
        settle()
        start = time.perf_counter()
        ps.spawn("tool", argv(f"http://127.0.0.1:{port}/data.bin", dst))
        end = ps.wait()
        ps.check_exits()
        err = sample.check_file(dst)
        if err:
            raise Failed(err)
        return result(ps, start, end, size)
    finally:
        ps.close()
        if os.path.exists(dst):
            os.unlink(dst)


def run_big(ctx, argv, nbytes):
    """TOOL fetching a sparse object of `nbytes` from nginx into /dev/null, under
    /usr/bin/time: its peak RSS in the row's note."""
    port, _ = nginx(ctx)
    big = os.path.join(ctx["tmpfs"], "big.bin")
    if not os.path.exists(big) or os.path.getsize(big) != nbytes:
        with open(big, "wb") as f:
            f.truncate(nbytes)
    rss_file = os.path.join(ctx["tmp"], "rss")
    ps = Procs(timeout_for(nbytes))
    try:
        start = time.perf_counter()
        ps.spawn("tool", ["/usr/bin/time", "-f", "%M", "-o", rss_file,
                          *argv(f"http://127.0.0.1:{port}/big.bin")])
        end = ps.wait()
        ps.check_exits()
        t = ps.tool()
        names, obj = zerocat_paths(t.err)
        if common.ZC in t.argv:
            if obj is None or obj.get("bytes") != nbytes:
                raise Failed(f"zerocat reported {obj and obj.get('bytes')} bytes, expected {nbytes}")
        else:
            check_devnull(ps, nbytes)
        r = result(ps, start, end, nbytes)
        r["path"] = "+".join(names)
        with open(rss_file) as f:
            r["rss_kib"] = int(f.read().split()[-1])
        r["note"] = f"peak RSS {r['rss_kib'] / 1024:.1f} MiB"
        return r
    finally:
        ps.close()


def scenarios(ctx):
    n = ctx["size"]
    zc = [common.ZC, "--stats", "json"]
    out = os.path.join(ctx["tmpfs"], "http.out")
    S = []

    def get(argv, https=False):
        return lambda: run_get(ctx, argv, out, https)

    def aria(x):
        return lambda url, dst: ["aria2c", "-q", f"-x{x}", f"-s{x}", "-k1M", "--allow-overwrite=true",
                                 "--auto-file-renaming=false", "--file-allocation=none", "-d",
                                 os.path.dirname(dst), "-o", os.path.basename(dst), url]
    cs = [contender("zerocat", "zerocat", get(lambda u, d: [*zc, "copy", u, d]), NEEDS_ZC),
          contender("zerocat -j 4", "zerocat", get(lambda u, d: [*zc, "copy", "-j", "4", u, d]), NEEDS_ZC),
          contender("curl -o", "peer", get(lambda u, d: ["curl", "-sSf", "-o", d, u]), ("curl", "nginx")),
          contender("wget -O", "peer", get(lambda u, d: ["wget", "-q", "-O", d, u]), ("wget", "nginx")),
          contender("aria2c -x1", "peer", get(aria(1)), ("aria2c", "nginx")),
          contender("aria2c -x4", "peer", get(aria(4)), ("aria2c", "nginx")),
          contender("floor: the tmpfs write alone", "ceiling",
                    get(lambda u, d: [common.ZC, "--via", "splice", "copy", ctx["data_tmpfs"], d]))]
    S.append(scenario(GROUP, f"GET {human(n)} nginx -> file (tmpfs)", n, cs))

    def stream(argv):
        return lambda: run_get_stream(ctx, argv)
    cs = [contender("zerocat", "zerocat", stream(lambda u: [*zc, "pipe", u, "-"]), NEEDS_ZC),
          contender("curl", "peer", stream(lambda u: ["curl", "-sSf", u]), ("curl", "nginx")),
          contender("wget -O-", "peer", stream(lambda u: ["wget", "-q", "-O-", u]), ("wget", "nginx"))]
    S.append(scenario(GROUP, f"GET {human(n)} nginx -> pipe", n, cs))

    ca = os.path.join(ctx["tmp"], "pki", "ca.pem")
    cs = [contender("zerocat", "zerocat", get(lambda u, d: [*zc, "copy", f"{u},cafile={ca}", d], https=True),
                    (*NEEDS_ZC, "openssl")),
          contender("curl -o", "peer", get(lambda u, d: ["curl", "-sSf", "--cacert", ca, "-o", d, u], https=True),
                    ("curl", "nginx", "openssl"))]
    S.append(scenario(GROUP, f"GET {human(n)} nginx https -> file (tmpfs)", n, cs))

    cut = max(n // 10, 1 << 20)

    def cutrun(argv, every=cut):
        return lambda: run_cut(ctx, argv, every)
    # An RST drops what the server's socket still held, so a client sees more cuts than
    # size/cut (about 20 at 1 GiB): the peers get 50 tries.
    loop = "until curl -sSf -C - -o \"$1\" \"$2\"; do i=$((i+1)); [ $i -lt 50 ] || exit 1; done"
    cs = [contender("zerocat", "zerocat", cutrun(lambda u, d: [*zc, "copy", u, d]), ("http",)),
          contender("zerocat, uncut", "zerocat", cutrun(lambda u, d: [*zc, "copy", u, d], 0), ("http",)),
          contender("curl -C - (loop of 50)", "peer", cutrun(lambda u, d: ["sh", "-c", "i=0; " + loop, "sh", d, u]),
                    ("curl",)),
          contender("wget -c", "peer", cutrun(lambda u, d: ["wget", "-q", "-c", "--tries=50", "--waitretry=0",
                                                            "-O", d, u]), ("wget",))]
    S.append(scenario(GROUP, f"GET {human(n)} cut every {human(cut)} -> file (tmpfs)", n, cs))

    def put(argv):
        return lambda: run_put(ctx, argv)
    cs = [contender("zerocat", "zerocat", put(lambda f, u: [*zc, "copy", f, u]), NEEDS_ZC),
          contender("curl -T", "peer", put(lambda f, u: ["curl", "-sSf", "-T", f, u]), ("curl", "nginx"))]
    S.append(scenario(GROUP, f"PUT {human(n)} tmpfs file -> nginx", n, cs))

    def put_stream(argv):
        return lambda: run_put_stream(ctx, argv)
    cs = [contender("zerocat", "zerocat", put_stream(lambda u: [*zc, "pipe", "-", u]), NEEDS_ZC),
          contender("curl -T -", "peer", put_stream(lambda u: ["curl", "-sSf", "-T", "-", u]), ("curl", "nginx"))]
    S.append(scenario(GROUP, f"PUT {human(n)} pipe -> nginx (chunked)", n, cs))

    big = 10 * n

    def bigrun(argv):
        return lambda: run_big(ctx, argv, big)
    cs = [contender("zerocat", "zerocat", bigrun(lambda u: [*zc, "pipe", u, "/dev/null"]),
                    (*NEEDS_ZC, "/usr/bin/time")),
          contender("curl -o /dev/null", "peer", bigrun(lambda u: ["curl", "-sSf", "-o", "/dev/null", u]),
                    ("curl", "nginx", "/usr/bin/time"))]
    S.append(scenario(GROUP, f"GET {human(big)} (sparse) nginx -> /dev/null, peak RSS", big, cs))
    return S


def cleanup(ctx):
    for name in ("big.bin", "up", "nginx-body"):
        p = os.path.join(ctx["tmpfs"], name)
        if os.path.isdir(p):
            shutil.rmtree(p, ignore_errors=True)
        elif os.path.exists(p):
            os.unlink(p)
