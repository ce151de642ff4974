//! Shared helpers: test data, running the binary with a deadline, reading its report.

#![allow(dead_code)]

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Every test's deadline for one zerocat run: nothing here should take long.
pub const DEADLINE: Duration = Duration::from_secs(60);

pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("zerocat")
}

/// A `zerocat` command with a clean environment.
pub fn zerocat() -> Command {
    let mut cmd = Command::new(bin());
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd.stdin(Stdio::null());
    cmd
}

/// Deterministic bytes that are not all alike (xorshift), so a shifted or duplicated
/// block cannot compare equal by accident.
pub fn data(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ len as u64;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Asserts two byte strings are equal without printing megabytes on failure.
#[track_caller]
pub fn assert_bytes_eq(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let first = got
            .iter()
            .zip(want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        panic!(
            "{what}: got {} bytes, want {} bytes, first difference at offset {first}",
            got.len(),
            want.len()
        );
    }
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("zerocat-test")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

pub fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Waits for a child with a deadline; kills it and panics when the deadline passes.
pub fn wait_with_deadline(mut child: Child, deadline: Duration) -> Output {
    let (tx, rx) = mpsc::channel();
    let pid = child.id();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let out_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stdout.as_mut() {
            s.read_to_end(&mut buf).unwrap();
        }
        buf
    });
    let err_reader = thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(s) = stderr.as_mut() {
            s.read_to_end(&mut buf).unwrap();
        }
        buf
    });
    thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(deadline) {
        Ok(status) => status.unwrap(),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("zerocat (pid {pid}) did not finish within {deadline:?}");
        }
    };
    Output {
        status,
        stdout: out_reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
    }
}

/// Runs to completion with the deadline.
pub fn run(mut cmd: Command) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    wait_with_deadline(cmd.spawn().expect("spawn zerocat"), DEADLINE)
}

pub fn stderr_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The entry of a `copy` report whose destination ends with `name`.
#[track_caller]
pub fn entry<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["dst"].as_str().unwrap().ends_with(name))
        .unwrap_or_else(|| panic!("no entry for {name} in {report}"))
}

/// The `--stats json` object on stderr.
#[track_caller]
pub fn json_report(stderr: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stderr);
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON report on stderr: {text}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("bad JSON report ({e}): {line}"))
}

/// The paths of a report, in order, with their bytes.
pub fn paths(report: &Value) -> Vec<(String, u64)> {
    report["paths"]
        .as_array()
        .expect("paths array")
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_string(),
                p["bytes"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The path that carried the bytes: the last one run (every earlier one fell back).
pub fn final_path(report: &Value) -> String {
    paths(report).last().expect("at least one path").0.clone()
}

/// Reads zerocat's "listening on ADDR" line from its stderr, then hands the rest of
/// stderr to a thread so the child never blocks on a full pipe.
pub fn listening_addr(child: &mut Child) -> (String, thread::JoinHandle<Vec<u8>>) {
    let stderr = child.stderr.take().expect("stderr piped");
    let mut reader = BufReader::new(stderr);
    let mut seen = Vec::new();
    let started = Instant::now();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || started.elapsed() > DEADLINE {
            panic!(
                "zerocat never said where it listens; stderr: {}",
                String::from_utf8_lossy(&seen)
            );
        }
        seen.extend_from_slice(line.as_bytes());
        if let Some(addr) = line.trim_end().strip_prefix("zerocat: listening on ") {
            let addr = addr.to_string();
            let rest = thread::spawn(move || {
                let mut buf = seen;
                reader.read_to_end(&mut buf).unwrap();
                buf
            });
            return (addr, rest);
        }
    }
}

/// A one-shot TCP server on 127.0.0.1 that sends `payload` to its first client and closes.
pub fn tcp_source(payload: Vec<u8>) -> (String, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&payload).unwrap();
    });
    (addr, handle)
}

/// A one-shot TCP server on 127.0.0.1 that returns all bytes of its first client.
pub fn tcp_sink() -> (String, thread::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handle = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        buf
    });
    (addr, handle)
}

pub fn unix_source(path: &Path, payload: Vec<u8>) -> thread::JoinHandle<()> {
    let listener = UnixListener::bind(path).unwrap();
    thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&payload).unwrap();
    })
}

pub fn unix_sink(path: &Path) -> thread::JoinHandle<Vec<u8>> {
    let listener = UnixListener::bind(path).unwrap();
    thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        buf
    })
}

/// Connects to a zerocat listener (TCP "host:port" or a unix path) and sends `payload`.
pub fn send_to(addr: &str, payload: &[u8]) {
    if addr.starts_with('/') {
        UnixStream::connect(addr)
            .unwrap()
            .write_all(payload)
            .unwrap();
    } else {
        TcpStream::connect(addr)
            .unwrap()
            .write_all(payload)
            .unwrap();
    }
}

/// SIGHUP at its default action in `cmd`'s child, whoever started the tests: under `nohup
/// cargo test` it comes ignored, zerocat keeps an ignored SIGHUP ignored (as nohup asks),
/// and a test that hangs zerocat up would wait for an end that never comes.
pub fn sighup_at_its_default(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only signal(2), async-signal-safe, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            nix::libc::signal(nix::libc::SIGHUP, nix::libc::SIG_DFL);
            Ok(())
        });
    }
}

/// SO_LINGER {1, 0} on a TCP socket: its close sends RST instead of FIN.
pub fn linger_zero(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = nix::libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a linger struct of the right size.
    unsafe {
        nix::libc::setsockopt(
            s.as_raw_fd(),
            nix::libc::SOL_SOCKET,
            nix::libc::SO_LINGER,
            (&linger as *const nix::libc::linger).cast(),
            std::mem::size_of::<nix::libc::linger>() as nix::libc::socklen_t,
        );
    }
}

/// uid and gid of `nobody`, the user a test runs zerocat as to see permissions as a user would.
pub const NOBODY: u32 = 65534;

/// A test that runs zerocat as `nobody` (root reads through any mode, a user does not).
///
/// Its files and its copy of the binary live in a directory of its own under the system temp
/// dir, every directory on the way down traversable by others: under the checkout's
/// `target/`, a private parent (root's 0700 home, any `mktemp -d`) would keep nobody from its
/// own files and the test would fail for where the checkout lives (issue 44). Removed when
/// dropped.
pub struct AsNobody {
    // Holds `work` and `bin`; removed when dropped.
    _dir: tempfile::TempDir,
    work: PathBuf,
    bin: PathBuf,
}

impl AsNobody {
    /// None, after printing `SKIPPED: <why>`, where this machine cannot run zerocat as nobody:
    /// not root, no setpriv, or a temp dir that other users cannot traverse.
    pub fn new() -> Option<AsNobody> {
        use std::os::unix::fs::PermissionsExt;
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: needs root to run zerocat as nobody");
            return None;
        }
        if Command::new("setpriv").arg("--version").output().is_err() {
            eprintln!("SKIPPED: setpriv (util-linux) is not installed");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("zerocat-test-nobody")
            .tempdir_in(std::env::temp_dir())
            .unwrap();
        let traversable = |path: &Path| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o711)).unwrap();
        };
        traversable(dir.path());
        if let Some(private) = dir.path().ancestors().find(|dir| {
            std::fs::metadata(dir).map_or(true, |meta| meta.permissions().mode() & 0o001 == 0)
        }) {
            eprintln!(
                "SKIPPED: nobody cannot traverse {} (the temp dir's parents must be o+x)",
                private.display()
            );
            return None;
        }
        let work = dir.path().join("work");
        let bin_dir = dir.path().join("bin");
        for sub in [&work, &bin_dir] {
            std::fs::create_dir(sub).unwrap();
            traversable(sub);
        }
        // A link where the filesystem allows one (same device), else a copy.
        let bin = bin_dir.join("zerocat");
        if std::fs::hard_link(crate::util::bin(), &bin).is_err() {
            std::fs::copy(crate::util::bin(), &bin).unwrap();
        }
        Some(AsNobody {
            _dir: dir,
            work,
            bin,
        })
    }

    /// The test's directory (mode 0711: set what the test needs on what it makes inside).
    pub fn path(&self) -> &Path {
        &self.work
    }

    /// `zerocat` as nobody with no supplementary group, environment cleared, stdin null.
    pub fn zerocat(&self) -> Command {
        self.zerocat_in_groups(&[])
    }

    /// `zerocat` as nobody, member of `groups` besides its own.
    pub fn zerocat_in_groups(&self, groups: &[u32]) -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.arg(format!("--reuid={NOBODY}"))
            .arg(format!("--regid={NOBODY}"));
        if groups.is_empty() {
            cmd.arg("--clear-groups");
        } else {
            let list: Vec<String> = groups.iter().map(u32::to_string).collect();
            cmd.arg(format!("--groups={}", list.join(",")));
        }
        cmd.arg(&self.bin)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .stdin(Stdio::null());
        cmd
    }
}

/// A filesystem mounted for one test on a fresh directory, unmounted when dropped.
pub struct Mounted {
    mnt: PathBuf,
    // Dropped after `drop` unmounted `mnt`: holds the mount point (and an image).
    _dir: tempfile::TempDir,
}

impl Mounted {
    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// A tmpfs of `size` (`1m`, `512m`); None, with the reason printed, when the machine
    /// refuses the mount.
    pub fn tmpfs(size: &str) -> Option<Mounted> {
        let dir = tempdir();
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let mut mount = Command::new("mount");
        mount.args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]);
        mount.arg(&mnt);
        Mounted::new(dir, mnt, &mut mount, "tmpfs")
    }

    /// A loop-mounted 512 MiB XFS with reflink=1; None, with the reason printed, when
    /// mkfs.xfs is missing or the machine refuses the mount.
    pub fn xfs_with_reflink() -> Option<Mounted> {
        if Command::new("mkfs.xfs").arg("-V").output().is_err() {
            eprintln!("SKIPPED (xfs): mkfs.xfs is missing (apt-get install -y xfsprogs)");
            return None;
        }
        let dir = tempdir();
        let image = dir.path().join("xfs.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        std::fs::File::create(&image)
            .unwrap()
            .set_len(512 << 20)
            .unwrap();
        let mkfs = Command::new("mkfs.xfs")
            .args(["-q", "-m", "reflink=1"])
            .arg(&image)
            .output()
            .unwrap();
        assert!(
            mkfs.status.success(),
            "mkfs.xfs: {}",
            String::from_utf8_lossy(&mkfs.stderr)
        );
        let mut mount = Command::new("mount");
        mount.args(["-o", "loop"]).arg(&image).arg(&mnt);
        Mounted::new(dir, mnt, &mut mount, "xfs")
    }

    fn new(
        dir: tempfile::TempDir,
        mnt: PathBuf,
        mount: &mut Command,
        what: &str,
    ) -> Option<Mounted> {
        match mount.output() {
            Ok(o) if o.status.success() => Some(Mounted { mnt, _dir: dir }),
            Ok(o) => {
                let why = String::from_utf8_lossy(&o.stderr);
                eprintln!(
                    "SKIPPED ({what}): mount refused ({}): {}",
                    o.status,
                    why.trim()
                );
                None
            }
            Err(e) => {
                eprintln!("SKIPPED ({what}): cannot run mount: {e}");
                None
            }
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mnt).status();
    }
}

/// True (and the reason printed) when strace cannot run here: not installed, or ptrace
/// refused (a container's seccomp, Yama). Tests that need it skip then.
pub fn strace_missing() -> bool {
    let probe = Command::new("strace")
        .args(["-f", "-qq", "-o", "/dev/null", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output();
    match probe {
        Ok(out) if out.status.success() => false,
        Ok(out) => {
            eprintln!(
                "SKIPPED: strace cannot trace here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            true
        }
        Err(e) => {
            eprintln!("SKIPPED: strace is not installed ({e}); .ci/run installs it from Debian");
            true
        }
    }
}

/// The wrapper that runs a command under `strace -f`, tracing `calls` into the file
/// `trace` (the command's own arguments follow it).
pub fn strace_of(calls: &str, trace: &Path) -> Vec<OsString> {
    let filter = format!("trace={calls}");
    let args = ["strace", "-f", "-qq", "-e", filter.as_str(), "-o"];
    let mut wrap: Vec<OsString> = args.iter().map(OsString::from).collect();
    wrap.push(trace.into());
    wrap
}

/// A port on 127.0.0.1 that was free a moment ago (bound to 0, then let go): for a server
/// that cannot be told port 0, or as a port where nobody listens.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Connects to `addr`, retrying while nothing listens there yet (bounded by [`DEADLINE`]).
pub fn connect_retrying(addr: &str) -> TcpStream {
    let started = Instant::now();
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return s,
            Err(e) if started.elapsed() > DEADLINE => panic!("nothing listened on {addr}: {e}"),
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Runs `cmd` to completion with the deadline, feeding `stdin_data` (if any) to its stdin
/// from a thread of its own while its output is read.
pub fn run_with_stdin(mut cmd: Command, stdin_data: Option<Vec<u8>>) -> Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    if stdin_data.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().expect("spawn");
    let feeder = stdin_data.map(|data| {
        let mut stdin = child.stdin.take().unwrap();
        thread::spawn(move || {
            let _ = stdin.write_all(&data);
        })
    });
    let out = wait_with_deadline(child, DEADLINE);
    if let Some(f) = feeder {
        f.join().unwrap();
    }
    out
}
