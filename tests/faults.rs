//! Faults (the hardening of issue 8): faults injected with strace, full disks, signals,
//! closed standard fds, hostile input and a soak. The promise under test: no byte lost or
//! duplicated, a clear error and the right exit code on every fault.
//!
//! One file per family: `pipe`, `tee`, `copy`, `relay` (its traffic in `relay/traffic`),
//! `endpoint` (closed standard fds, hostile paths, blocking opens, the URI parser) and
//! `soak`. Every family is a table of cases run on the rig (`crate::rig`); this file holds
//! what the tables share: the shapes, strace, the errno lists, a small tmpfs.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::Value;

use crate::rig::{Finished, Pace, Rig, Running};
use crate::util::{assert_bytes_eq, bin, data, paths, strace_missing, tempdir, Mounted, DEADLINE};

mod copy;
mod endpoint;
mod pipe;
mod relay;
mod soak;
mod tee;

// =============================================================================================
// The shapes: a subcommand, a source and a sink of some kind
// =============================================================================================

/// The subcommand under test. copy / tee / relay add a variant and their argument shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sub {
    Pipe,
    /// `tee SRC DST /dev/null`: the sink under test and a second one, so tee(2) runs.
    Tee,
    /// `relay A B`: its traffic is in `relay` (connections, not a source and a sink).
    Relay,
}

impl Sub {
    fn name(self) -> &'static str {
        match self {
            Sub::Pipe => "pipe",
            Sub::Tee => "tee",
            Sub::Relay => "relay",
        }
    }

    /// The command line moving one source to one sink.
    fn args(self, src: &str, dst: &str) -> Vec<String> {
        match self {
            Sub::Pipe => vec!["pipe".into(), src.into(), dst.into()],
            Sub::Tee => vec!["tee".into(), src.into(), dst.into(), "/dev/null".into()],
            Sub::Relay => vec!["relay".into(), src.into(), dst.into()],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Src {
    /// A regular file in the test's directory.
    File,
    /// zerocat's stdin, a pipe the test feeds.
    Pipe,
    /// A TCP server on 127.0.0.1 that zerocat connects to; it sends the payload.
    Socket,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dst {
    /// A regular file (in the run's directory, or the one [`sink`] is given).
    File,
    /// /dev/null: the bytes cannot be checked, only the report.
    Null,
    /// /dev/full: every write is ENOSPC.
    Full,
    /// zerocat's stdout, a pipe the test reads.
    Pipe,
    /// A TCP server on 127.0.0.1 that zerocat connects to; it keeps what arrives.
    Socket,
}

type Shape = (Src, Dst);

fn shape_name((src, dst): Shape) -> String {
    let s = match src {
        Src::File => "file",
        Src::Pipe => "pipe",
        Src::Socket => "socket",
    };
    let d = match dst {
        Dst::File => "file",
        Dst::Null => "/dev/null",
        Dst::Full => "/dev/full",
        Dst::Pipe => "pipe",
        Dst::Socket => "socket",
    };
    format!("{s}->{d}")
}

/// Writes the source of kind `src` on `rig` (a stream at `pace`); returns its argument.
fn source(rig: &mut Rig, src: Src, payload: &Arc<Vec<u8>>, pace: Pace) -> String {
    match src {
        Src::File => rig.file("src.bin", payload),
        Src::Pipe => rig.stdin(payload.clone(), pace),
        Src::Socket => rig.tcp_source(payload.clone(), pace),
    }
}

/// Adds a sink of kind `dst` on `rig` (a file goes in `dir`, else the rig's directory);
/// returns its argument.
fn sink(rig: &mut Rig, dst: Dst, dir: Option<&Path>) -> String {
    match dst {
        Dst::File => {
            let path = dir.map_or_else(|| rig.path("dst.bin"), |d| d.join("dst.bin"));
            rig.file_sink(path)
        }
        Dst::Null => rig.device_sink("/dev/null"),
        Dst::Full => rig.device_sink("/dev/full"),
        Dst::Pipe => rig.stdout_sink(Pace::Full),
        Dst::Socket => rig.tcp_sink(Pace::Full),
    }
}

/// `sub` moving `payload` from a source to a sink (sink 0) of the shape's kinds.
fn shaped(mut rig: Rig, sub: Sub, (src, dst): Shape, payload: &Arc<Vec<u8>>, pace: Pace) -> Rig {
    let src = source(&mut rig, src, payload, pace);
    let dst = sink(&mut rig, dst, None);
    rig.args(sub.args(&src, &dst))
}

/// 64 KiB every 2 ms: a peer (source or reader) slower than zerocat, so a signal comes
/// mid-transfer.
const SLOW: Pace = Pace::Slow {
    chunk: 64 << 10,
    pause: Duration::from_millis(2),
};

// =============================================================================================
// Fault injection with strace
// =============================================================================================

/// Errnos a fast path treats as "not supported here" (DESIGN §3), with their numbers.
const UNSUPPORTED: &[(&str, i32)] = &[
    ("EXDEV", nix::libc::EXDEV),
    ("EINVAL", nix::libc::EINVAL),
    ("EOPNOTSUPP", nix::libc::EOPNOTSUPP),
    ("ENOSYS", nix::libc::ENOSYS),
    ("EPERM", nix::libc::EPERM),
];
/// Errnos that are errors whenever they come.
const FATAL: &[(&str, i32)] = &[("EIO", nix::libc::EIO), ("ENOSPC", nix::libc::ENOSPC)];

/// `strace -f -o LOG -e trace=SYSCALL -e inject=SYSCALL:ACTION:when=N`: the log shows
/// the call was INJECTED, so a case cannot pass because the call never happened.
fn strace_wrap(log: &Path, syscalls: &str, action: &str, when: &str) -> Vec<String> {
    strace_injecting(log, &[(syscalls, action, when)])
}

/// [`strace_wrap`] with several injections, (syscalls, action, when) each; all of their
/// syscalls traced.
fn strace_injecting(log: &Path, injects: &[(&str, &str, &str)]) -> Vec<String> {
    let traced: Vec<&str> = injects.iter().map(|i| i.0).collect();
    let mut wrap: Vec<String> = vec![
        "strace".into(),
        "-f".into(),
        "-qq".into(),
        "-o".into(),
        log.display().to_string(),
        "-e".into(),
        format!("trace={}", traced.join(",")),
    ];
    for (syscalls, action, when) in injects {
        wrap.push("-e".into());
        wrap.push(format!("inject={syscalls}:{action}:when={when}"));
    }
    wrap
}

/// Runs every case, printing each row; fails at the end with every problem found.
fn run_cases<C>(cases: Vec<C>, run: impl Fn(&C) -> Result<String, String>) {
    let mut problems = Vec::new();
    for case in &cases {
        match run(case) {
            Ok(row) => eprintln!("{row}"),
            Err(problem) => problems.push(problem),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
}

// =============================================================================================
// Full disk: a small tmpfs
// =============================================================================================
