//! Every blocking wait ends on SIGINT/SIGTERM with 130 and the report: copy onto a FIFO
//! with no reader (its open blocks); tee and pipe writing to a reader that stalls (bytes
//! already taken from the source are delivered only within the stop's one-second grace).

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::util::{
    assert_bytes_eq, data, json_report, tempdir, wait_with_deadline, write_file, zerocat,
};

/// Grace (1 s) plus slack for a loaded machine: well short of the hang it replaces.
const ENDS_WITHIN: Duration = Duration::from_secs(4);

/// Spawns `cmd`, sends `signal` once it had time to block, and waits for it to end.
fn signal_while_blocked(mut cmd: Command, signal: Signal) -> Output {
    cmd.stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let sent = Instant::now();
    kill(Pid::from_raw(child.id() as i32), signal).unwrap();
    let out = wait_with_deadline(child, ENDS_WITHIN + Duration::from_secs(6));
    let took = sent.elapsed();
    assert!(
        took < ENDS_WITHIN,
        "{signal}: ended {took:?} after the signal: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A pipe whose reader never reads until zerocat is gone: the write end for zerocat's
/// stdout, the read end kept here.
fn stalled_pipe() -> (OwnedFd, OwnedFd) {
    nix::unistd::pipe().unwrap()
}

fn read_all(fd: OwnedFd) -> Vec<u8> {
    let mut out = Vec::new();
    File::from(fd).read_to_end(&mut out).unwrap();
    out
}

fn read_file(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[track_caller]
fn assert_interrupted(out: &Output, what: &str) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{what}: {stderr}");
    let report = json_report(&out.stderr);
    assert_eq!(report["ended"], "signal", "{what}: {stderr}");
    report
}

#[test]
fn copy_onto_a_fifo_with_no_reader_ends_on_sigint_with_130_and_the_report() {
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        let dir = tempdir();
        let src = write_file(dir.path(), "src", &data(10_000));
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let mut cmd = zerocat();
        cmd.args(["--stats", "json", "copy"])
            .arg(&src)
            .arg(&fifo)
            .stdout(Stdio::null());
        let out = signal_while_blocked(cmd, signal);
        let report = assert_interrupted(&out, &format!("{signal}"));
        assert_eq!(report["bytes"], 0, "{signal}: nothing reached the FIFO");
    }
}

#[test]
fn tee_with_a_stalled_stdout_reader_ends_on_sigint_with_130_and_the_report() {
    let want = data(8 << 20);
    for (via, signal) in [("auto", Signal::SIGINT), ("userspace", Signal::SIGTERM)] {
        let what = format!("--via {via}, {signal}");
        let dir = tempdir();
        let src = write_file(dir.path(), "src", &want);
        let copy = dir.path().join("copy");
        let (stalled, write_end) = stalled_pipe();
        let mut cmd = zerocat();
        cmd.args(["--stats", "json", "--via", via, "tee"])
            .arg(&src)
            .arg("-")
            .arg(&copy)
            .stdout(Stdio::from(write_end));
        let out = signal_while_blocked(cmd, signal);
        let report = assert_interrupted(&out, &what);
        // Each sink holds exactly the prefix the report gives it.
        let to_stdout = read_all(stalled);
        let to_file = read_file(&copy);
        let sinks = report["sinks"].as_array().unwrap();
        assert_eq!(
            sinks[0]["bytes"],
            to_stdout.len() as u64,
            "{what}: {report}"
        );
        assert_eq!(sinks[1]["bytes"], to_file.len() as u64, "{what}: {report}");
        assert_bytes_eq(&to_stdout, &want[..to_stdout.len()], &what);
        assert_bytes_eq(&to_file, &want[..to_file.len()], &what);
        assert!(to_stdout.len() < want.len(), "{what}: the reader stalled");
    }
}

#[test]
fn tee_into_a_fifo_whose_reader_stalls_ends_on_sigint_with_130_and_the_report() {
    let want = data(8 << 20);
    let dir = tempdir();
    let src = write_file(dir.path(), "src", &want);
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    // A reader that opened the FIFO and never reads (non-blocking open: no writer yet).
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let copy = dir.path().join("copy");
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "tee"])
        .arg(&src)
        .arg(&fifo)
        .arg(&copy)
        .stdout(Stdio::null());
    let out = signal_while_blocked(cmd, Signal::SIGINT);
    let report = assert_interrupted(&out, "tee into a stalled FIFO");
    let mut in_fifo = Vec::new();
    let _ = (&reader).read_to_end(&mut in_fifo);
    let sinks = report["sinks"].as_array().unwrap();
    assert_eq!(sinks[0]["bytes"], in_fifo.len() as u64, "{report}");
    assert_bytes_eq(&in_fifo, &want[..in_fifo.len()], "the FIFO");
    let to_file = read_file(&copy);
    assert_eq!(sinks[1]["bytes"], to_file.len() as u64, "{report}");
    assert_bytes_eq(&to_file, &want[..to_file.len()], "the file");
}

#[test]
fn pipe_with_a_stalled_stdout_reader_ends_on_sigint_with_130_and_the_report() {
    let want = data(8 << 20);
    for via in ["auto", "userspace"] {
        let dir = tempdir();
        let src = write_file(dir.path(), "src", &want);
        let (stalled, write_end) = stalled_pipe();
        let mut cmd = zerocat();
        cmd.args(["--stats", "json", "--via", via, "pipe"])
            .arg(&src)
            .arg("-")
            .stdout(Stdio::from(write_end));
        let out = signal_while_blocked(cmd, Signal::SIGINT);
        let report = assert_interrupted(&out, via);
        let got = read_all(stalled);
        assert_eq!(report["bytes"], got.len() as u64, "--via {via}: {report}");
        assert_bytes_eq(&got, &want[..got.len()], via);
    }
}

#[test]
fn pipe_waiting_on_a_silent_peer_or_for_a_client_ends_on_sigint_with_130() {
    // A connector whose peer accepted and sends nothing, and a listener no one dials.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    for src in [format!("tcp:{addr}"), "tcp-listen:127.0.0.1:0".to_string()] {
        let dir = tempdir();
        let out_path = dir.path().join("out");
        let mut cmd = zerocat();
        cmd.args(["--stats", "json", "pipe", &src])
            .arg(&out_path)
            .stdout(Stdio::null());
        let out = signal_while_blocked(cmd, Signal::SIGINT);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{src}: {stderr}");
        let written = std::fs::read(&out_path).unwrap_or_default();
        assert!(written.is_empty(), "{src}: nothing was sent");
    }
}
