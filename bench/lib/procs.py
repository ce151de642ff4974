"""One run's processes: spawned (optionally pinned), killed at a deadline, reaped with
wait4 for their CPU; and the small timing helpers around a run."""
import os
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

    def spawn(self, role, argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, pass_fds=()):
        err = tempfile.TemporaryFile()  # a file, not a pipe: a long report cannot block the tool
        cpus = self.pin.get(role)
        pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        p = subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=err, pass_fds=pass_fds, preexec_fn=pin)
        p.role, p.argv, p.rusage, p.io, p.err, p.errfile = role, argv, None, {}, b"", err
        self.procs.append(p)
        return p

    def kill(self):
        self.timed_out = True
        for p in self.procs:
            if p.pid not in self.reaped:
                try:
                    os.kill(p.pid, 9)
                except ProcessLookupError:
                    pass

    def wait(self):
        for p in self.procs:
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
            if p.returncode:
                msg = p.err.decode(errors="replace").strip().splitlines()
                raise Failed(f"{os.path.basename(p.argv[0])} exited {p.returncode}"
                             + (f": {msg[-1][:200]}" if msg else ""))


def result(ps, start, end, nbytes):
    t = ps.tool()
    r = {"seconds": end - start, "cpu": None, "path": ""}
    if t is not None:
        r["cpu"] = t.rusage.ru_utime + t.rusage.ru_stime
        if t.argv[0] == common.ZC:
            names, _ = zerocat_paths(t.err)
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


def proc_cpu(pid):
    """user+system CPU seconds of a live process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
