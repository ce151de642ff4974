//! The one rig every test runs zerocat with, for every subcommand (like fd's `TestEnv`):
//! a temporary directory, the sources and sinks a run needs (files, a stdin the test feeds,
//! TCP servers that send or keep, stdout kept), zerocat maybe under a wrapper (strace,
//! prlimit), a deadline, and what the run left: exit code, stderr, the `--stats json`
//! report and the bytes each sink holds.
//!
//! ```ignore
//! let mut rig = Rig::new().args(["--via", "splice"]);
//! let src = rig.file("src.bin", &payload);
//! let dst = rig.file_sink(rig.path("dst.bin"));
//! let run = rig.args(["pipe", &src, &dst]).run();
//! run.assert_code(0, "pipe file file");
//! run.assert_final_path("splice", "pipe file file");
//! run.assert_held(0, &payload, "pipe file file");
//! ```
//!
//! A relay: `let relay = Rig::new().relay(&["tcp-listen:0", &backend]);` starts it and
//! learns where it listens (`relay.addr()`); clients connect there; `relay.stop()` sends
//! SIGINT and returns the run with its report (`connections()`, `conn(peer)`).

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use crate::util::{
    assert_bytes_eq, bin, final_path, json_report, listening_addr, tempdir, write_file, DEADLINE,
};

/// How the test writes a stream into zerocat, or reads one out of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// As fast as the other side goes.
    Full,
    /// `chunk` bytes, then `pause`: slower than zerocat.
    Slow { chunk: usize, pause: Duration },
}

impl Pace {
    /// The size of each write or read, and the pause after it.
    fn step(self) -> (usize, Option<Duration>) {
        match self {
            Pace::Full => (256 << 10, None),
            Pace::Slow { chunk, pause } => (chunk, Some(pause)),
        }
    }
}

/// Bytes a stream sink (stdout, a TCP server) kept, counted as they come so a test can
/// wait for them.
#[derive(Default)]
struct Kept {
    len: AtomicU64,
    bytes: Mutex<Vec<u8>>,
}

/// Where a sink's bytes are read from once the run is over.
enum Sink {
    File(PathBuf),
    Stream(Arc<Kept>),
    /// /dev/null, /dev/full: nothing to read back.
    Device,
}

/// What zerocat's stdout is.
enum Stdout {
    Null,
    /// A sink: kept by a thread of the rig, read at this pace.
    Kept(Arc<Kept>, Pace),
    /// Handed to the test ([`Running::take_stdout`]).
    Piped,
}

/// A zerocat run being set up: its directory, arguments, sources and sinks.
pub struct Rig {
    dir: tempfile::TempDir,
    wrap: Vec<OsString>,
    args: Vec<OsString>,
    stdin: Option<(Arc<Vec<u8>>, Pace)>,
    stdout: Stdout,
    sinks: Vec<Sink>,
    /// Threads of the TCP sinks, joined when the run is over.
    threads: Vec<JoinHandle<()>>,
    /// Set once zerocat ended: feeders and servers that never got a peer give up.
    stop: Arc<AtomicBool>,
    fd3: Option<RawFd>,
    /// Environment variables beside PATH (the environment is otherwise empty).
    envs: Vec<(OsString, OsString)>,
}

impl Rig {
    /// `zerocat --stats json ...` in a fresh directory.
    pub fn new() -> Rig {
        Rig::bare().args(["--stats", "json"])
    }

    /// `zerocat ...` without `--stats json` (a test of what stderr holds otherwise).
    pub fn bare() -> Rig {
        Rig {
            dir: tempdir(),
            wrap: Vec::new(),
            args: Vec::new(),
            stdin: None,
            stdout: Stdout::Null,
            sinks: Vec::new(),
            threads: Vec::new(),
            stop: Arc::new(AtomicBool::new(false)),
            fd3: None,
            envs: Vec::new(),
        }
    }

    /// Sets an environment variable of zerocat's (its environment is otherwise PATH only).
    pub fn env(mut self, name: impl Into<OsString>, value: impl Into<OsString>) -> Rig {
        self.envs.push((name.into(), value.into()));
        self
    }

    /// Runs zerocat under `wrap` (`strace ...`, `prlimit --nofile=64`).
    pub fn under<S: Into<OsString>>(mut self, wrap: impl IntoIterator<Item = S>) -> Rig {
        self.wrap = wrap.into_iter().map(Into::into).collect();
        self
    }

    pub fn arg(mut self, arg: impl Into<OsString>) -> Rig {
        self.args.push(arg.into());
        self
    }

    pub fn args<S: Into<OsString>>(mut self, args: impl IntoIterator<Item = S>) -> Rig {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// zerocat gets the test's open file description `raw` as its fd 3 (`fd:3`): the offset
    /// is shared, so afterwards it says how many bytes zerocat took.
    pub fn fd3(mut self, raw: RawFd) -> Rig {
        self.fd3 = Some(raw);
        self
    }

    /// NAME in the run's directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A file source: `bytes` written to NAME in the run's directory; returns its path.
    pub fn file(&self, name: &str, bytes: &[u8]) -> String {
        write_file(self.dir.path(), name, bytes)
            .display()
            .to_string()
    }

    /// zerocat's stdin, fed `payload` at `pace`; returns `-`.
    pub fn stdin(&mut self, payload: Arc<Vec<u8>>, pace: Pace) -> String {
        self.stdin = Some((payload, pace));
        "-".into()
    }

    /// A TCP server on 127.0.0.1 that sends `payload` at `pace` to the first client;
    /// returns `tcp:ADDR`.
    pub fn tcp_source(&mut self, payload: Arc<Vec<u8>>, pace: Pace) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = self.stop.clone();
        thread::spawn(move || {
            if let Some(mut s) = accept_until(&listener, &stop) {
                feed(&mut s, &payload, pace, &stop);
            }
        });
        format!("tcp:{addr}")
    }

    /// The next sink is the file at `path`; returns the path.
    pub fn file_sink(&mut self, path: PathBuf) -> String {
        let arg = path.display().to_string();
        self.sinks.push(Sink::File(path));
        arg
    }

    /// The next sink is a device (/dev/null, /dev/full): it holds nothing to check.
    pub fn device_sink(&mut self, path: &str) -> String {
        self.sinks.push(Sink::Device);
        path.into()
    }

    /// The next sink is zerocat's stdout, read at `pace`; returns `-`.
    pub fn stdout_sink(&mut self, pace: Pace) -> String {
        let kept = Arc::new(Kept::default());
        self.sinks.push(Sink::Stream(kept.clone()));
        self.stdout = Stdout::Kept(kept, pace);
        "-".into()
    }

    /// zerocat's stdout is a pipe the test reads itself ([`Running::take_stdout`]).
    pub fn stdout_to_test(mut self) -> Rig {
        self.stdout = Stdout::Piped;
        self
    }

    /// The next sink is a TCP server on 127.0.0.1 that keeps what its first client sends,
    /// read at `pace`; returns `tcp:ADDR`.
    pub fn tcp_sink(&mut self, pace: Pace) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let kept = Arc::new(Kept::default());
        self.sinks.push(Sink::Stream(kept.clone()));
        let stop = self.stop.clone();
        self.threads.push(thread::spawn(move || {
            if let Some(s) = accept_until(&listener, &stop) {
                keep(s, pace, &kept);
            }
        }));
        format!("tcp:{addr}")
    }

    /// Spawns zerocat; the test's threads start feeding and draining it.
    pub fn start(self) -> Running {
        let mut running = self.spawn();
        let mut stderr = running.child.stderr.take().unwrap();
        running.stderr = Some(thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = stderr.read_to_end(&mut buf);
            buf
        }));
        running
    }

    /// Starts zerocat and reads where it listens from its "listening on ADDR" line (a
    /// thread then keeps the rest of stderr).
    pub fn listen(self) -> Running {
        let mut running = self.spawn();
        let (addr, stderr) = listening_addr(&mut running.child);
        running.addr = Some(addr);
        running.stderr = Some(stderr);
        running
    }

    /// Spawns zerocat with its stderr still to be read.
    fn spawn(mut self) -> Running {
        let mut cmd = match self.wrap.split_first() {
            None => Command::new(bin()),
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(bin());
                c
            }
        };
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .args(&self.args)
            .stdin(match self.stdin {
                Some(_) => Stdio::piped(),
                None => Stdio::null(),
            })
            .stdout(match self.stdout {
                Stdout::Null => Stdio::null(),
                Stdout::Kept(..) | Stdout::Piped => Stdio::piped(),
            })
            .stderr(Stdio::piped());
        if let Some(raw) = self.fd3 {
            share_as_fd3(&mut cmd, raw);
        }
        let started = Instant::now();
        let mut child = cmd.spawn().expect("spawn zerocat");
        if let (Some(mut stdin), Some((payload, pace))) = (child.stdin.take(), self.stdin) {
            let stop = self.stop.clone();
            thread::spawn(move || feed(&mut stdin, &payload, pace, &stop));
        }
        if let Stdout::Kept(kept, pace) = &self.stdout {
            let (stdout, kept, pace) = (child.stdout.take().unwrap(), kept.clone(), *pace);
            self.threads
                .push(thread::spawn(move || keep(stdout, pace, &kept)));
        }
        let pid = Pid::from_raw(child.id() as i32);
        Running {
            wrapped: !self.wrap.is_empty(),
            child,
            dir: self.dir,
            stop: self.stop,
            sinks: self.sinks,
            threads: self.threads,
            stderr: None,
            addr: None,
            started,
            guard: KillUnlessWaited { pid, waited: false },
        }
    }

    /// Starts zerocat and waits until the run is over.
    pub fn run(self) -> Finished {
        self.start().finish()
    }

    /// `zerocat ... relay ARGS`, started and listening.
    pub fn relay(self, args: &[&str]) -> Running {
        self.arg("relay").args(args).listen()
    }
}

/// A zerocat run in progress, with the threads feeding and draining it.
pub struct Running {
    child: Child,
    /// zerocat runs under a wrapper (strace forks it; prlimit execs it).
    wrapped: bool,
    dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    sinks: Vec<Sink>,
    threads: Vec<JoinHandle<()>>,
    /// The thread keeping stderr (set as soon as the run is started).
    stderr: Option<JoinHandle<Vec<u8>>>,
    addr: Option<String>,
    started: Instant,
    /// Kills zerocat if the test ends (a failed assertion) before it was waited for.
    guard: KillUnlessWaited,
}

/// A child not waited for yet: SIGKILL when dropped, so a test that fails midway leaves no
/// zerocat running (its pid is not reaped until then, so it cannot be reused).
struct KillUnlessWaited {
    pid: Pid,
    waited: bool,
}

impl Drop for KillUnlessWaited {
    fn drop(&mut self) {
        if !self.waited {
            let _ = kill(self.pid, Signal::SIGKILL);
        }
    }
}

impl Running {
    /// zerocat's pid, for reading /proc: the child, or under a wrapper that forks (strace)
    /// the child's child. Never signal by it: see [`Running::signal`].
    pub fn pid(&self) -> Pid {
        let pid = self.child.id();
        Pid::from_raw(
            self.wrapped
                .then(|| traced_child(pid))
                .flatten()
                .unwrap_or(pid as i32),
        )
    }

    /// A pidfd of zerocat (None once it is gone). Under a forking wrapper, strace reaps
    /// zerocat, not the test: a bare pid could by then name another test's process (pid
    /// reuse; the suite once saw a zerocat exit 130 with no signal of its own). A pidfd
    /// names one process for good; it is taken while zerocat is known to be the wrapper's
    /// child (checked after opening it).
    pub fn pidfd(&self) -> Option<OwnedFd> {
        let wrapper = self.child.id() as i32;
        if !self.wrapped {
            // Our own child, not reaped until we wait: its pid is still its own.
            return pidfd_open(wrapper);
        }
        // A wrapper that execs (prlimit) is zerocat itself, with no child.
        let Some(pid) = traced_child(wrapper as u32) else {
            return pidfd_open(wrapper);
        };
        let fd = pidfd_open(pid)?;
        (parent_of(pid) == Some(wrapper)).then_some(fd)
    }

    /// Sends `signal` to zerocat, through its pidfd; nothing if it has ended.
    pub fn signal(&self, signal: Signal) {
        if let Some(fd) = self.pidfd() {
            let _ = pidfd_signal(&fd, signal);
        }
    }

    /// Where a listening run ([`Rig::listen`]) accepts: `HOST:PORT` or a unix path.
    pub fn addr(&self) -> &str {
        self.addr
            .as_deref()
            .expect("the run was started with listen()")
    }

    /// zerocat's stdout, when the rig gave it to the test ([`Rig::stdout_to_test`]).
    pub fn take_stdout(&mut self) -> ChildStdout {
        self.child.stdout.take().expect("stdout_to_test")
    }

    /// Waits until sink `i` holds at least `n` bytes (zerocat is mid-transfer then).
    pub fn wait_for_sink(&mut self, i: usize, n: u64) {
        let held: Box<dyn Fn() -> u64> = match &self.sinks[i] {
            Sink::File(path) => {
                let path = path.clone();
                Box::new(move || std::fs::metadata(&path).map_or(0, |m| m.len()))
            }
            Sink::Stream(kept) => {
                let kept = kept.clone();
                Box::new(move || kept.len.load(Ordering::SeqCst))
            }
            Sink::Device => panic!("sink {i} is a device"),
        };
        self.wait_until(&format!("sink {i}"), n, held);
    }

    /// Waits until `held()` (bytes something holds) reaches `n`, while zerocat still runs.
    pub fn wait_until(&mut self, what: &str, n: u64, held: impl Fn() -> u64) {
        while held() < n {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("zerocat ended ({status}) before {what} held {n} bytes");
            }
            assert!(
                self.started.elapsed() < DEADLINE,
                "{what} never held {n} bytes"
            );
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// A field of /proc/PID/status, in KiB (`VmRSS:`, `VmHWM:`).
    pub fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc status"))
    }

    /// utime + stime, in clock ticks.
    pub fn cpu_ticks(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let fields: Vec<&str> = after.split(' ').collect();
        fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
    }

    /// SIGINT (unless it already ended, `--once`), then the run as [`Running::finish`].
    pub fn stop(mut self) -> Finished {
        if self.child.try_wait().is_ok_and(|s| s.is_none()) {
            // It may be ending on its own: gone already is fine.
            self.signal(Signal::SIGINT);
        }
        self.finish()
    }

    /// Waits for zerocat until [`DEADLINE`] (then kills it and fails), and collects what
    /// the run left.
    pub fn finish(mut self) -> Finished {
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.guard.waited = true;
                break status;
            }
            if self.started.elapsed() > DEADLINE {
                let _ = self.child.kill();
                let _ = self.child.wait();
                self.stop.store(true, Ordering::SeqCst);
                panic!("zerocat did not finish within {DEADLINE:?}");
            }
            thread::sleep(Duration::from_millis(2));
        };
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
        let stderr = self.stderr.take().unwrap().join().unwrap();
        let stderr = String::from_utf8_lossy(&stderr).into_owned();
        let report = stderr
            .lines()
            .any(|l| l.starts_with('{'))
            .then(|| json_report(stderr.as_bytes()));
        let held = self
            .sinks
            .iter()
            .map(|sink| match sink {
                Sink::File(path) => Some(std::fs::read(path).unwrap_or_default()),
                Sink::Stream(kept) => Some(std::mem::take(&mut *kept.bytes.lock().unwrap())),
                Sink::Device => None,
            })
            .collect();
        Finished {
            status,
            stderr,
            report,
            held,
            _dir: self.dir,
        }
    }
}

/// The first child of `pid` (a wrapper's one child: zerocat), from /proc.
fn traced_child(pid: u32) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The parent of `pid`, from /proc/PID/stat.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].split(' ').nth(1)?.parse().ok()
}

/// pidfd_open(2): a descriptor naming `pid` for good; None if it is gone.
pub fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags; it returns a new fd or -1.
    let fd = unsafe { nix::libc::syscall(nix::libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: the fd was just made and is owned by nothing else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// pidfd_send_signal(2): `signal` to the process `fd` names (ESRCH once it has ended,
/// never another process).
pub fn pidfd_signal(fd: &OwnedFd, signal: Signal) -> nix::Result<()> {
    // SAFETY: a pidfd, a signal number, no siginfo, no flags.
    let ret = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal as nix::libc::c_int,
            std::ptr::null::<nix::libc::siginfo_t>(),
            0,
        )
    };
    nix::errno::Errno::result(ret).map(drop)
}

/// What a finished run left behind. Its directory lives as long as it does.
pub struct Finished {
    pub status: ExitStatus,
    pub stderr: String,
    report: Option<Value>,
    /// What each sink holds, in the order they were added; None for a device.
    held: Vec<Option<Vec<u8>>>,
    _dir: tempfile::TempDir,
}

impl Finished {
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The `--stats json` report; fails the test when there is none.
    pub fn report(&self) -> &Value {
        self.report
            .as_ref()
            .unwrap_or_else(|| panic!("no JSON report; stderr: {}", self.stderr))
    }

    pub fn report_bytes(&self) -> u64 {
        self.report()["bytes"].as_u64().expect("bytes")
    }

    /// What sink `i` holds (None for a device).
    pub fn held(&self, i: usize) -> Option<&[u8]> {
        self.held[i].as_deref()
    }

    /// What every sink holds, in order.
    pub fn held_all(&self) -> &[Option<Vec<u8>>] {
        &self.held
    }

    #[track_caller]
    pub fn assert_code(&self, code: i32, what: &str) {
        assert_eq!(self.code(), Some(code), "{what}: {}", self.stderr);
    }

    /// The path that carried the bytes (the last one run) is `path`.
    #[track_caller]
    pub fn assert_final_path(&self, path: &str, what: &str) {
        assert_eq!(final_path(self.report()), path, "{what}: {}", self.report());
    }

    /// Sink `i` holds exactly `want`.
    #[track_caller]
    pub fn assert_held(&self, i: usize, want: &[u8], what: &str) {
        let held = self
            .held(i)
            .unwrap_or_else(|| panic!("{what}: sink {i} is a device"));
        assert_bytes_eq(held, want, what);
    }

    /// The connections of a relay's report.
    pub fn connections(&self) -> &Vec<Value> {
        connections(self.report())
    }

    /// The relay report's entry for the connection from client address `peer`.
    pub fn conn(&self, peer: &str) -> &Value {
        self.connections()
            .iter()
            .find(|c| c["peer"] == peer)
            .unwrap_or_else(|| panic!("no connection from {peer} in {}", self.report()))
    }
}

/// The connections of a relay's report.
pub fn connections(report: &Value) -> &Vec<Value> {
    report["connections"].as_array().expect("connections array")
}

/// The paths of one direction of a relay's connection, once their bytes add up to the
/// direction's.
pub fn dir_paths(dir: &Value) -> Result<Vec<String>, String> {
    let paths = dir["paths"].as_array().ok_or("no paths")?;
    let sum: u64 = paths.iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
    if sum != dir["bytes"].as_u64().unwrap() {
        return Err(format!("paths do not add up to the bytes: {dir}"));
    }
    Ok(paths
        .iter()
        .map(|p| p["path"].as_str().unwrap().to_string())
        .collect())
}

/// Accepts one connection, giving up when `stop` is set (zerocat ended without connecting).
pub fn accept_until(listener: &TcpListener, stop: &AtomicBool) -> Option<TcpStream> {
    listener.set_nonblocking(true).unwrap();
    let started = Instant::now();
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                return Some(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if stop.load(Ordering::SeqCst) || started.elapsed() > DEADLINE {
                    return None;
                }
                thread::sleep(Duration::from_millis(1));
            }
            Err(_) => return None,
        }
    }
}

/// Writes `payload` at `pace` until done, stopped, or the reader went away (zerocat
/// failed: that is what some cases test).
fn feed(out: &mut impl Write, payload: &[u8], pace: Pace, stop: &AtomicBool) {
    let (chunk, pause) = pace.step();
    for piece in payload.chunks(chunk) {
        if stop.load(Ordering::SeqCst) || out.write_all(piece).is_err() {
            return;
        }
        if let Some(pause) = pause {
            thread::sleep(pause);
        }
    }
}

/// Reads at `pace` until EOF or an error, keeping every byte and counting them.
fn keep(mut input: impl Read, pace: Pace, kept: &Kept) {
    let (chunk, pause) = pace.step();
    let mut buf = vec![0u8; chunk];
    while let Ok(n @ 1..) = input.read(&mut buf) {
        kept.bytes.lock().unwrap().extend_from_slice(&buf[..n]);
        kept.len.fetch_add(n as u64, Ordering::SeqCst);
        if let Some(pause) = pause {
            thread::sleep(pause);
        }
    }
}

/// The child gets our open file description `raw` as its fd 3.
pub fn share_as_fd3(cmd: &mut Command, raw: RawFd) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let ret = if raw == 3 {
                nix::libc::fcntl(3, nix::libc::F_SETFD, 0)
            } else {
                nix::libc::dup2(raw, 3)
            };
            if ret < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
