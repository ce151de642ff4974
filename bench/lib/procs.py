"""One run's processes: spawned (optionally pinned), killed at a deadline, reaped with
wait4 for their CPU; and the small timing helpers around a run."""
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time

from . import common
from .checks import zerocat_paths
from .common import MiB, Failed


class Procs:
    """The processes of one run: spawned, watched by a deadline, reaped with wait4."""

    def __init__(self, timeout, pin=None):
        """pin: role -> set of CPUs that role's process runs on."""
        self.procs, self.reaped = [], set()
        self.pin = pin or {}
        self.timer = threading.Timer(timeout, self.kill)
        self.timer.start()
        self.timed_out = False

    def spawn(self, role, argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=(), daemon=False, env=None):
        """daemon: a server that runs until told to stop (haproxy, a relay without --once,
        redis-server): wait() does not wait for it but charges it the CPU it used since
        start_clock() (its children's too: socat fork), then stops it with SIGTERM. env: the
        process's whole environment (None: this one's)."""
        err = tempfile.TemporaryFile()  # a file, not a pipe: a long report cannot block the tool
        cpus = self.pin.get(role)
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        p = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=err, pass_fds=pass_fds, preexec_fn=pin,
                             env=env)
        p.role, p.argv, p.rusage, p.io, p.err, p.errfile = role, argv, None, {}, b"", err
        p.daemon, p.cpu0, p.cpu = daemon, 0.0, None
        self.procs.append(p)
        return p

    def start_clock(self):
        """The daemons' CPU so far (start-up), which their result does not count."""
        for p in self.procs:
            if p.daemon:
                p.cpu0 = proc_cpu(p.pid, children=True)

    def stop_daemons(self):
        """Charges each daemon its CPU since start_clock(), then stops it (SIGTERM) and reaps it."""
        for p in self.procs:
            if p.daemon and p.pid not in self.reaped:
                try:
                    p.cpu = proc_cpu(p.pid, children=True) - p.cpu0
                    os.kill(p.pid, signal.SIGTERM)
                except (OSError, ProcessLookupError):
                    pass
                _, status, p.rusage = os.wait4(p.pid, 0)
                self.reaped.add(p.pid)
                p.returncode = os.waitstatus_to_exitcode(status)

    def kill(self):
        self.timed_out = True
        for p in self.procs:
            if p.pid not in self.reaped:
                try:
                    os.kill(p.pid, 9)
                except ProcessLookupError:
                    pass

    def wait(self):
        """Reaps every process but the daemons, then stops those; returns the time the last
        non-daemon ended."""
        for p in self.procs:
            if p.daemon:
                continue
            if p.role == "tool":  # read the kernel's I/O counters before reaping
                os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
                try:
                    with open(f"/proc/{p.pid}/io") as f:
                        p.io = {k: int(v) for k, v in (ln.split(": ") for ln in f.read().split("\n") if ln)}
                except OSError:
                    pass
            _, status, p.rusage = os.wait4(p.pid, 0)
            self.reaped.add(p.pid)
            p.returncode = os.waitstatus_to_exitcode(status)
        end = time.perf_counter()
        self.stop_daemons()
        self.timer.cancel()
        for p in self.procs:
            p.err = os.pread(p.errfile.fileno(), 1 << 24, 0)
        return end

    def close(self):
        self.timer.cancel()
        self.kill()
        for p in self.procs:
            if p.pid not in self.reaped:
                p.wait()
            p.errfile.close()
            if p.stdout:
                p.stdout.close()

    def tool(self):
        return next((p for p in self.procs if p.role == "tool"), None)

    def check_exits(self):
        if self.timed_out:
            raise Failed("timed out")
        for p in self.procs:
            if p.returncode and not p.daemon:
                msg = p.err.decode(errors="replace").strip().splitlines()
                raise Failed(f"{os.path.basename(p.argv[0])} exited {p.returncode}"
                             + (f": {msg[-1][:200]}" if msg else ""))


def result(ps, start, end, nbytes):
    t = ps.tool()
    r = {"seconds": end - start, "cpu": None, "path": ""}
    if t is not None:
        r["cpu"] = t.cpu if t.daemon else t.rusage.ru_utime + t.rusage.ru_stime
        if t.argv[0] == common.ZC:
            names, r["report"] = zerocat_paths(t.err)
            r["path"] = "+".join(names)
    return r


def settle():
    """Outside the clock, before a run that writes a file: flush what earlier runs left
    dirty. Back-to-back 1 GiB writes otherwise push the page cache over the dirty limits,
    and whichever run lands there is throttled or pays for the previous run's writeback."""
    os.sync()


def timeout_for(nbytes):
    return 30 + nbytes / (10 * MiB)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def read_line(p, timeout=10):
    """The first stderr line of p (zerocat's `listening on ADDR`)."""
    deadline = time.monotonic() + timeout
    while True:
        buf = os.pread(p.errfile.fileno(), 4096, 0)
        if b"\n" in buf:
            return buf.split(b"\n", 1)[0].decode(errors="replace")
        if p.poll() is not None:
            raise Failed("zerocat exited before listening: " + buf.decode(errors="replace").strip())
        if time.monotonic() > deadline:
            raise Failed("no 'listening on' line from zerocat")
        time.sleep(0.002)


def listening_addr(p):
    """The ADDR of zerocat's first stderr line, `zerocat: listening on ADDR`."""
    line = read_line(p)
    m = re.search(r"listening on (\S+)", line)
    if not m:
        raise Failed(f"unexpected first line from zerocat: {line!r}")
    return m.group(1)


def proc_cpu(pid, children=False):
    """user+system CPU seconds of a live process (all its threads; with children=True,
    also those of the children it has reaped, and of those still running: socat's fork
    children are alive when a run ends)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15 if children else 13])
    seconds = ticks / os.sysconf("SC_CLK_TCK")
    if children:
        for kid in live_children(pid):
            try:
                seconds += proc_cpu(kid, children=True)
            except OSError:
                pass  # it ended meanwhile (then its parent's reaped total has it, or soon will)
    return seconds


def live_children(pid):
    kids = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += [int(k) for k in f.read().split()]
    except OSError:
        pass
    return kids


def wait_listening(where, timeout=10, proc=None):
    """Until something listens on `where`: a TCP port on 127.0.0.1 (int) or a unix socket
    path (str) -- read from /proc/net, without connecting (a connection would reach the
    backend). Raises Failed on timeout or when `proc` exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if isinstance(where, int):
            with open("/proc/net/tcp") as f:
                if any(ln.split()[1] == f"0100007F:{where:04X}" and ln.split()[3] == "0A" for ln in list(f)[1:]):
                    return
        else:
            # HAProxy binds PATH.PID.tmp, then renames it to PATH: the socket keeps its name
            with open("/proc/net/unix") as f:
                names = [ln.split()[-1] for ln in list(f)[1:] if len(ln.split()) >= 8 and ln.split()[3] == "00010000"]
            if os.path.exists(where) and any(n == where or n.startswith(where + ".") for n in names):
                return
        if proc is not None and proc.poll() is not None:
            raise Failed(f"{os.path.basename(proc.argv[0])} exited {proc.returncode} before listening: "
                         + (os.pread(proc.errfile.fileno(), 4096, 0).decode(errors="replace").strip().splitlines() or [""])[-1][:300])
        time.sleep(0.005)
    raise Failed(f"nothing listening on {where} after {timeout} s")
