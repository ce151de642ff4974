//! `zerocat tee`: every sink gets every byte, in order, once — and the report says which
//! path carried each sink's bytes.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::Value;

use crate::util::*;

const SIZES: [usize; 8] = [0, 1, 4095, 4096, 4097, 65537, (1 << 20) + 1, 64 << 20];

/// One sink of a test run: the argument, how to collect its bytes, the path expected.
enum Kind {
    File,
    AppendFile,
    Stdout,
    Tcp,
    Unix,
}

struct Planned {
    arg: String,
    kind: Kind,
    file: Option<PathBuf>,
    reader: Option<JoinHandle<Vec<u8>>>,
}

/// Bytes an append sink holds before the run: they must stay in front.
const PREFIX: &[u8] = b"kept before the run\n";

fn plan(dir: &Path, kinds: Vec<Kind>) -> Vec<Planned> {
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| {
            let (arg, file, reader) = match kind {
                Kind::File => {
                    let p = dir.join(format!("out{i}"));
                    (format!("file:{}", p.display()), Some(p), None)
                }
                Kind::AppendFile => {
                    let p = write_file(dir, &format!("log{i}"), PREFIX);
                    (format!("file:{},append", p.display()), Some(p), None)
                }
                Kind::Stdout => ("-".to_string(), None, None),
                Kind::Tcp => {
                    let (addr, handle) = tcp_sink();
                    (format!("tcp:{addr}"), None, Some(handle))
                }
                Kind::Unix => {
                    let p = dir.join(format!("s{i}.sock"));
                    let handle = unix_sink(&p);
                    (format!("unix:{}", p.display()), None, Some(handle))
                }
            };
            Planned {
                arg,
                kind,
                file,
                reader,
            }
        })
        .collect()
}

/// The paths of sink `i` in the JSON report.
fn sink(report: &Value, i: usize) -> &Value {
    &report["sinks"][i]
}

fn sink_path(report: &Value, i: usize) -> String {
    final_path(sink(report, i))
}

/// Checks every sink's bytes and the path it reports. `consumer` is the sink the kernel
/// fan-out splices straight out of the source pipe.
#[track_caller]
fn check_sinks(
    out: &Output,
    sinks: Vec<Planned>,
    want: &[u8],
    via_userspace: bool,
    consumer: usize,
) {
    assert!(out.status.success(), "zerocat failed: {}", stderr_text(out));
    let report = json_report(&out.stderr);
    assert_eq!(report["command"], "tee");
    assert_eq!(report["bytes"].as_u64(), Some(want.len() as u64));
    assert_eq!(report["sinks"].as_array().unwrap().len(), sinks.len());
    for (i, s) in sinks.into_iter().enumerate() {
        let what = format!("sink {i} ({}) of {} bytes", s.arg, want.len());
        let got = match (&s.kind, s.file, s.reader) {
            (Kind::Stdout, _, _) => out.stdout.clone(),
            (_, Some(path), _) => std::fs::read(path).unwrap(),
            (_, None, Some(reader)) => reader.join().unwrap(),
            _ => unreachable!(),
        };
        match s.kind {
            Kind::AppendFile => {
                assert_bytes_eq(&got[..PREFIX.len()], PREFIX, &what);
                assert_bytes_eq(&got[PREFIX.len()..], want, &what);
            }
            _ => assert_bytes_eq(&got, want, &what),
        }
        assert_eq!(
            sink(&report, i)["bytes"].as_u64(),
            Some(want.len() as u64),
            "{what}"
        );
        assert_eq!(sink(&report, i)["ended"], "eof", "{what}");
        assert_eq!(
            sink(&report, i)["uri"].as_str(),
            Some(s.arg.as_str()),
            "{what}"
        );
        let expected = match s.kind {
            _ if via_userspace => "userspace",
            // O_APPEND refuses splice: written from the lane pipe's data (once tried).
            Kind::AppendFile if !want.is_empty() => "userspace",
            _ if i == consumer => "splice",
            _ => "tee",
        };
        assert_eq!(
            sink_path(&report, i),
            expected,
            "{what}: {}",
            sink(&report, i)
        );
    }
}

/// Runs `zerocat --stats json tee SRC <sinks>`, feeding `stdin_data` if given.
fn run_tee(extra: &[&str], src: &str, sinks: &[Planned], stdin_data: Option<Vec<u8>>) -> Output {
    let mut cmd = zerocat();
    cmd.args(extra).args(["--stats", "json", "tee", src]);
    cmd.args(sinks.iter().map(|s| s.arg.as_str()));
    run_with_stdin(cmd, stdin_data)
}

fn feed(child: &mut Child, data: Option<Vec<u8>>) -> Option<JoinHandle<()>> {
    let data = data?;
    let mut stdin = child.stdin.take().unwrap();
    Some(thread::spawn(move || {
        let _ = stdin.write_all(&data);
    }))
}

fn five_kinds() -> Vec<Kind> {
    vec![
        Kind::File,
        Kind::AppendFile,
        Kind::Stdout,
        Kind::Tcp,
        Kind::Unix,
    ]
}

/// From a file, for every size: `kinds` as sinks, `consumer` the one spliced out of the
/// source pipe; `extra` are global options (`--via userspace`).
fn file_to_sinks_for_sizes(
    sizes: &[usize],
    kinds: fn() -> Vec<Kind>,
    consumer: usize,
    extra: &[&str],
) {
    for &size in sizes {
        let dir = tempdir();
        let want = data(size);
        let src = write_file(dir.path(), "in", &want);
        let sinks = plan(dir.path(), kinds());
        let out = run_tee(extra, src.to_str().unwrap(), &sinks, None);
        let userspace = extra.contains(&"userspace");
        if userspace {
            assert_eq!(final_path(&json_report(&out.stderr)), "userspace");
        }
        check_sinks(&out, sinks, &want, userspace, consumer);
    }
}

#[test]
fn one_sink_gets_every_byte_for_every_size() {
    file_to_sinks_for_sizes(&SIZES, || vec![Kind::Stdout], 0, &[]);
}

#[test]
fn two_sinks_get_every_byte_for_every_size() {
    // The socket is the consumer; stdout, a pipe, is teed into directly.
    file_to_sinks_for_sizes(&SIZES, || vec![Kind::Stdout, Kind::Tcp], 1, &[]);
}

#[test]
fn five_sinks_of_every_kind_get_every_byte_for_every_size() {
    file_to_sinks_for_sizes(&SIZES, five_kinds, 4, &[]);
}

#[test]
fn a_pipe_source_fans_out_to_five_sinks() {
    for &size in &[0, 1, 4097, (1 << 20) + 1, 64 << 20] {
        let dir = tempdir();
        let want = data(size);
        let sinks = plan(
            dir.path(),
            vec![
                Kind::Unix,
                Kind::Stdout,
                Kind::File,
                Kind::AppendFile,
                Kind::Tcp,
            ],
        );
        let out = run_tee(&[], "-", &sinks, Some(want.clone()));
        let report = json_report(&out.stderr);
        assert_eq!(report["src"]["kind"], "pipe");
        check_sinks(&out, sinks, &want, false, 4);
    }
}

#[test]
fn userspace_fan_out_gives_the_same_bytes() {
    let sizes = [0, 1, 4096, 65537, (1 << 20) + 1, 64 << 20];
    file_to_sinks_for_sizes(&sizes, five_kinds, usize::MAX, &["--via", "userspace"]);
}

#[test]
fn forced_tee_runs_the_kernel_fan_out() {
    let dir = tempdir();
    let want = data(3 << 20);
    let src = write_file(dir.path(), "in", &want);
    let sinks = plan(dir.path(), vec![Kind::File, Kind::Stdout, Kind::Unix]);
    let out = run_tee(&["--via", "tee"], src.to_str().unwrap(), &sinks, None);
    let report = json_report(&out.stderr);
    assert_eq!(paths(&report), vec![("tee".to_string(), want.len() as u64)]);
    check_sinks(&out, sinks, &want, false, 2);
}

#[test]
fn forced_tee_refuses_an_append_sink_instead_of_writing_it() {
    let dir = tempdir();
    let want = data(100_000);
    let src = write_file(dir.path(), "in", &want);
    let sinks = plan(dir.path(), vec![Kind::AppendFile, Kind::Stdout]);
    let out = run_tee(&["--via", "tee"], src.to_str().unwrap(), &sinks, None);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let report = json_report(&out.stderr);
    assert_eq!(sink(&report, 0)["ended"], "error");
    assert!(
        stderr_text(&out).contains("--via tee"),
        "{}",
        stderr_text(&out)
    );
    // The refused sink got nothing; nothing was written behind the forced path's back.
    assert_eq!(std::fs::read(dir.path().join("log0")).unwrap(), PREFIX);
}

#[test]
fn other_paths_cannot_fan_out() {
    let out = run({
        let mut cmd = zerocat();
        cmd.args(["--via", "sendfile", "tee", "/dev/null", "-"]);
        cmd
    });
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
}

/// A pipe of 4 KiB whose reader takes 4 KiB at a time with pauses.
fn slow_pipe() -> (OwnedFd, JoinHandle<Vec<u8>>) {
    let (read, write) = nix::unistd::pipe().unwrap();
    nix::fcntl::fcntl(write.as_raw_fd(), nix::fcntl::FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
    let reader = thread::spawn(move || {
        let mut file = File::from(read);
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        for round in 0.. {
            let n = file.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
            if round % 4 == 0 {
                thread::sleep(Duration::from_millis(1));
            }
        }
        got
    });
    (write, reader)
}

/// A FIFO whose reader is quick.
fn fifo(dir: &Path, name: &str) -> (PathBuf, JoinHandle<Vec<u8>>) {
    let path = dir.join(name);
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let p = path.clone();
    let reader = thread::spawn(move || {
        let mut got = Vec::new();
        File::open(p).unwrap().read_to_end(&mut got).unwrap();
        got
    });
    (path, reader)
}

/// Runs tee with the slow pipe as stdout; returns the report and every sink's bytes.
fn tee_into_slow_stdout(
    src: &str,
    sinks: &[String],
    stdin_data: Option<Vec<u8>>,
) -> (Output, Vec<u8>) {
    let (slow, slow_reader) = slow_pipe();
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "tee", src]).args(sinks);
    cmd.stdout(Stdio::from(slow)).stderr(Stdio::piped());
    if stdin_data.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().unwrap();
    drop(cmd); // our copy of the pipe's write end: the reader must see EOF
    let feeder = feed(&mut child, stdin_data);
    let out = wait_with_deadline(child, DEADLINE);
    if let Some(f) = feeder {
        f.join().unwrap();
    }
    (out, slow_reader.join().unwrap())
}

#[test]
fn a_slow_reader_on_a_4k_pipe_is_teed_into_without_loss_or_duplication() {
    let dir = tempdir();
    let want = data((2 << 20) + 12345);
    let (fifo_path, fifo_reader) = fifo(dir.path(), "fast");
    let file = dir.path().join("copy");
    let sinks = [
        "-".to_string(),
        fifo_path.display().to_string(),
        file.display().to_string(),
    ];
    // From a pipe: tee(2) copies what the source pipe holds, short into the 4 KiB pipe.
    let (out, slow) = tee_into_slow_stdout("-", &sinks, Some(want.clone()));
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(&slow, &want, "slow stdout");
    assert_bytes_eq(&fifo_reader.join().unwrap(), &want, "fifo");
    assert_bytes_eq(&std::fs::read(&file).unwrap(), &want, "file");
    let report = json_report(&out.stderr);
    assert_eq!(sink_path(&report, 0), "tee");
    assert_eq!(sink_path(&report, 1), "tee");
    assert_eq!(sink_path(&report, 2), "splice");
    for i in 0..3 {
        assert_eq!(sink(&report, i)["bytes"].as_u64(), Some(want.len() as u64));
    }
}

#[test]
fn a_slow_reader_on_a_4k_pipe_as_the_consumer_loses_nothing() {
    let dir = tempdir();
    let want = data((2 << 20) + 777);
    let src = write_file(dir.path(), "in", &want);
    let (fifo_path, fifo_reader) = fifo(dir.path(), "fast");
    // Both sinks are pipes: the last one, the slow stdout, is spliced out of the source's
    // pipe, and the fast FIFO is teed ahead of it.
    let sinks = [fifo_path.display().to_string(), "-".to_string()];
    let (out, slow) = tee_into_slow_stdout(src.to_str().unwrap(), &sinks, None);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(&slow, &want, "slow stdout");
    assert_bytes_eq(&fifo_reader.join().unwrap(), &want, "fifo");
    let report = json_report(&out.stderr);
    assert_eq!(sink_path(&report, 0), "tee");
    assert_eq!(sink_path(&report, 1), "splice");
}

/// A FIFO whose reader takes one byte and leaves.
fn early_closing_fifo(dir: &Path, name: &str) -> (PathBuf, JoinHandle<()>) {
    let path = dir.join(name);
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let p = path.clone();
    let reader = thread::spawn(move || {
        let mut one = [0u8; 1];
        File::open(p).unwrap().read_exact(&mut one).unwrap();
    });
    (path, reader)
}

/// A TCP peer that reads a little and closes.
fn early_closing_tcp() -> (String, JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let reader = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 1000];
        s.read_exact(&mut buf).unwrap();
    });
    (format!("tcp:{addr}"), reader)
}

#[test]
fn a_sink_that_closes_early_stops_the_run_and_is_named() {
    for via in ["auto", "userspace"] {
        let dir = tempdir();
        let want = data(8 << 20);
        let src = write_file(dir.path(), "in", &want);
        let (quitter, reader) = early_closing_fifo(dir.path(), "quitter");
        let copy = dir.path().join("copy");
        let out = run({
            let mut cmd = zerocat();
            cmd.args(["--via", via, "--stats", "json", "tee"])
                .arg(&src)
                .arg(&quitter)
                .arg(&copy);
            cmd
        });
        reader.join().unwrap();
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(1), "{via}: {err}");
        let name = format!("cannot write to 'file:{}'", quitter.display());
        assert!(
            err.contains(&name) && err.contains("Broken pipe"),
            "{via}: {err}"
        );
        let report = json_report(&out.stderr);
        assert_eq!(sink(&report, 0)["ended"], "error");
        let error = sink(&report, 0)["error"].as_str().unwrap();
        assert!(error.contains("Broken pipe"), "{error}");
        assert_eq!(sink(&report, 1)["ended"], "error"); // stopped because of sink 0
        let expected = if via == "auto" { "tee" } else { "userspace" };
        assert_eq!(sink_path(&report, 0), expected);
        // What the file did get is a prefix of the source, counted right.
        let got = std::fs::read(&copy).unwrap();
        assert_eq!(sink(&report, 1)["bytes"].as_u64(), Some(got.len() as u64));
        assert_bytes_eq(&got, &want[..got.len()], "copy prefix");
    }
}

#[test]
fn with_continue_the_other_sinks_get_every_byte() {
    for via in ["auto", "userspace"] {
        let dir = tempdir();
        let want = data(8 << 20);
        let src = write_file(dir.path(), "in", &want);
        let (quitter, quitter_reader) = early_closing_fifo(dir.path(), "quitter");
        let copy = dir.path().join("copy");
        let (fast, fast_reader) = fifo(dir.path(), "fast");
        // The TCP quitter is last: the consumer of the kernel fan-out.
        let (tcp, tcp_reader) = early_closing_tcp();
        let out = run({
            let mut cmd = zerocat();
            cmd.args([
                "--via",
                via,
                "--stats",
                "json",
                "tee",
                "--on-error=continue",
            ])
            .arg(&src)
            .arg(&quitter)
            .arg(&copy)
            .arg("-")
            .arg(&fast)
            .arg(&tcp);
            cmd
        });
        quitter_reader.join().unwrap();
        tcp_reader.join().unwrap();
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(1), "{via}: {err}");
        assert!(err.contains("2 of 5 sinks failed"), "{via}: {err}");
        assert!(err.contains(&quitter.display().to_string()), "{via}: {err}");
        assert!(err.contains(&tcp), "{via}: {err}");
        let report = json_report(&out.stderr);
        assert_eq!(report["ended"], "error");
        assert_eq!(report["bytes"].as_u64(), Some(want.len() as u64), "{via}");
        assert_eq!(sink(&report, 0)["ended"], "error");
        assert_eq!(sink(&report, 4)["ended"], "error");
        assert_bytes_eq(&std::fs::read(&copy).unwrap(), &want, "copy");
        assert_bytes_eq(&out.stdout, &want, "stdout");
        assert_bytes_eq(&fast_reader.join().unwrap(), &want, "fast fifo");
        for i in 1..=3 {
            assert_eq!(sink(&report, i)["ended"], "eof", "{via} sink {i}");
            assert_eq!(sink(&report, i)["bytes"].as_u64(), Some(want.len() as u64));
            let expected = if via == "auto" { "tee" } else { "userspace" };
            assert_eq!(sink_path(&report, i), expected, "{via} sink {i}");
        }
    }
}

#[test]
fn listening_sinks_are_all_announced_then_each_accepts_one_connection() {
    let dir = tempdir();
    let want = data((1 << 20) + 3);
    let src = write_file(dir.path(), "in", &want);
    let sock = dir.path().join("l.sock");
    let mut child = zerocat()
        .args(["--stats", "json", "tee"])
        .arg(&src)
        .arg("tcp-listen:0")
        .arg(format!("unix-listen:{}", sock.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tcp_addr, rest) = listening_addr(&mut child);
    // The second listener is bound before the first accepts: connect to it first.
    let unix_reader = {
        let sock = sock.clone();
        thread::spawn(move || {
            for _ in 0..500 {
                if let Ok(mut s) = std::os::unix::net::UnixStream::connect(&sock) {
                    let mut got = Vec::new();
                    s.read_to_end(&mut got).unwrap();
                    return got;
                }
                thread::sleep(Duration::from_millis(10));
            }
            panic!("unix listener never came up");
        })
    };
    let mut tcp = std::net::TcpStream::connect(&tcp_addr).unwrap();
    let mut got_tcp = Vec::new();
    tcp.read_to_end(&mut got_tcp).unwrap();
    let out = wait_with_deadline(child, DEADLINE);
    let stderr = rest.join().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&stderr));
    assert_bytes_eq(&got_tcp, &want, "tcp-listen sink");
    assert_bytes_eq(&unix_reader.join().unwrap(), &want, "unix-listen sink");
    let report = json_report(&stderr);
    assert_eq!(sink_path(&report, 0), "tee");
    assert_eq!(sink_path(&report, 1), "splice");
}

#[test]
fn text_report_names_every_sink_and_its_path() {
    let dir = tempdir();
    let want = data(70_000);
    let src = write_file(dir.path(), "in", &want);
    let copy = dir.path().join("copy");
    let out = run({
        let mut cmd = zerocat();
        cmd.arg("tee").arg(&src).arg(&copy).arg("-");
        cmd
    });
    assert!(out.status.success());
    assert_bytes_eq(&out.stdout, &want, "stdout");
    let err = stderr_text(&out);
    assert!(err.contains("-> 2 sinks via tee"), "{err}");
    assert!(
        err.contains(&format!("'file:{}' file via splice", copy.display())),
        "{err}"
    );
    assert!(err.contains("'-' pipe via tee"), "{err}");
}

#[test]
fn sigint_stops_between_rounds_with_every_sink_level() {
    let dir = tempdir();
    let want = data(100_000);
    let copy = dir.path().join("copy");
    let mut child = zerocat()
        .args(["--stats", "json", "tee", "-"])
        .arg(&copy)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Keep the source open: zerocat blocks in tee(2) waiting for more.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&want).unwrap();
    let mut waited = 0;
    while std::fs::metadata(&copy).map_or(0, |m| m.len()) < want.len() as u64 {
        assert!(waited < 6000, "the file never got the bytes");
        thread::sleep(Duration::from_millis(10));
        waited += 10;
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = wait_with_deadline(child, DEADLINE);
    drop(stdin);
    assert_eq!(out.status.code(), Some(130), "{}", stderr_text(&out));
    let report = json_report(&out.stderr);
    assert_eq!(report["ended"], "signal");
    assert_eq!(report["bytes"].as_u64(), Some(want.len() as u64));
    assert_bytes_eq(&out.stdout, &want, "stdout");
    assert_bytes_eq(&std::fs::read(&copy).unwrap(), &want, "file");
    for i in 0..2 {
        assert_eq!(sink(&report, i)["ended"], "signal");
        assert_eq!(sink(&report, i)["bytes"].as_u64(), Some(want.len() as u64));
    }
    assert_eq!(sink_path(&report, 0), "splice");
    assert_eq!(sink_path(&report, 1), "tee");
}

// =============================================================================================
// GNU tee's --output-error modes (and -p, and the --on-error alias)
// =============================================================================================

/// What breaks in one run of the modes' table.
#[derive(Clone, Copy, PartialEq)]
enum Breakage {
    /// stdout is a pipe whose reader already went away (EPIPE).
    ReaderGone,
    /// A sink that fails with ENOSPC (/dev/full); stdout is read to its end.
    SinkFails,
    /// Both.
    Both,
}

impl Breakage {
    fn name(self) -> &'static str {
        match self {
            Breakage::ReaderGone => "reader gone",
            Breakage::SinkFails => "/dev/full",
            Breakage::Both => "reader gone + /dev/full",
        }
    }
}

/// Runs `tee MODE... [/dev/full] GOOD` (zerocat's `tee MODE... SRC - [/dev/full] GOOD`:
/// stdout first, as GNU tee writes it first) under `breakage`. Returns the output, with
/// the exit code a shell would give (128 + signal).
fn run_tee_mode(
    program: Command,
    zerocat: bool,
    src: &Path,
    good: &Path,
    breakage: Breakage,
) -> (i32, Output) {
    let mut cmd = program;
    if zerocat {
        cmd.arg(src).arg("-");
    } else {
        cmd.stdin(File::open(src).unwrap());
    }
    if breakage != Breakage::ReaderGone {
        cmd.arg("/dev/full");
    }
    cmd.arg(good).stderr(Stdio::piped());
    if breakage == Breakage::SinkFails {
        cmd.stdout(Stdio::piped());
    } else {
        let (read, write) = nix::unistd::pipe().unwrap();
        drop(read);
        cmd.stdout(Stdio::from(write));
    }
    let out = wait_with_deadline(cmd.spawn().unwrap(), DEADLINE);
    use std::os::unix::process::ExitStatusExt;
    let code = out
        .status
        .code()
        .or_else(|| out.status.signal().map(|s| 128 + s))
        .unwrap();
    (code, out)
}

/// Each mode with a closed stdout reader, a failing file sink, and both: zerocat's exit
/// code is GNU tee's (the table below, checked against the real `tee` where it is GNU's),
/// the messages are the ones GNU gives (a reader that went away is quiet under the
/// `-nopipe` modes), and the sinks hold what the report says: all of it where the mode
/// keeps feeding them, a prefix where it stops.
#[test]
fn output_error_modes_exit_as_gnu_tee() {
    let dir = tempdir();
    let want = data(1 << 20);
    let src = write_file(dir.path(), "in", &want);
    let good = dir.path().join("good");
    // (zerocat's spelling, GNU's, exit codes for: reader gone, /dev/full, both)
    let modes: [(&[&str], &[&str], [i32; 3]); 8] = [
        (&[], &[], [141, 1, 141]),
        (&["-p"], &["-p"], [0, 1, 1]),
        (&["--output-error"], &["--output-error"], [0, 1, 1]),
        (
            &["--output-error=warn"],
            &["--output-error=warn"],
            [1, 1, 1],
        ),
        (
            &["--on-error=continue"],
            &["--output-error=warn"],
            [1, 1, 1],
        ),
        (
            &["--output-error=warn-nopipe"],
            &["--output-error=warn-nopipe"],
            [0, 1, 1],
        ),
        (
            &["--output-error=exit"],
            &["--output-error=exit"],
            [1, 1, 1],
        ),
        (
            &["--output-error=exit-nopipe"],
            &["--output-error=exit-nopipe"],
            [0, 1, 1],
        ),
    ];
    let gnu = Command::new("tee")
        .arg("--version")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("GNU coreutils"));
    if !gnu {
        eprintln!("no GNU tee installed: checking zerocat against the table only");
    }
    let breakages = [Breakage::ReaderGone, Breakage::SinkFails, Breakage::Both];
    for (ours, theirs, codes) in modes {
        for (breakage, code) in breakages.into_iter().zip(codes) {
            if gnu {
                let mut cmd = Command::new("tee");
                cmd.args(theirs);
                let gnu_good = dir.path().join("gnu_good");
                let (got, out) = run_tee_mode(cmd, false, &src, &gnu_good, breakage);
                assert_eq!(
                    got,
                    code,
                    "GNU tee {theirs:?} {}: {}",
                    breakage.name(),
                    stderr_text(&out)
                );
            }
            for via in ["auto", "userspace"] {
                let name = format!("zerocat tee {ours:?} via {via}, {}", breakage.name());
                let mut cmd = zerocat();
                cmd.args(["--stats", "json", "--via", via, "tee"])
                    .args(ours);
                let (got, out) = run_tee_mode(cmd, true, &src, &good, breakage);
                let err = stderr_text(&out);
                assert_eq!(got, code, "{name}: {err}");
                check_mode_run(&name, ours, breakage, code, &out, &want, &good);
                eprintln!("{name} | exit {got}, as GNU tee");
            }
        }
    }
}

/// The messages, the report and the bytes of one run of the modes' table.
fn check_mode_run(
    name: &str,
    mode: &[&str],
    breakage: Breakage,
    code: i32,
    out: &Output,
    want: &[u8],
    good: &Path,
) {
    let err = stderr_text(out);
    let messages: Vec<&str> = err.lines().filter(|l| l.starts_with("zerocat:")).collect();
    let good_bytes = std::fs::read(good).unwrap();
    if code == 141 {
        // The shell's SIGPIPE convention: nothing on stderr, not even the report.
        assert!(out.stderr.is_empty(), "{name}: {err}");
        assert_bytes_eq(&good_bytes, &want[..good_bytes.len()], name);
        return;
    }
    let report = json_report(&out.stderr);
    let mode = mode.first().copied().unwrap_or("");
    let nopipe = mode == "-p" || mode == "--output-error" || mode.ends_with("-nopipe");
    let keeps_feeding = mode.contains("warn") || mode == "-p" || mode == "--output-error";
    let keeps_feeding = keeps_feeding
        || mode == "--on-error=continue"
        || (mode.ends_with("exit-nopipe") && breakage == Breakage::ReaderGone);
    let epipe_said = messages.iter().any(|m| m.contains("Broken pipe"));
    let enospc_said = messages
        .iter()
        .any(|m| m.contains("'file:/dev/full'") && m.contains("No space left on device"));
    let reader_gone = breakage != Breakage::SinkFails;
    let full = breakage != Breakage::ReaderGone;
    // A reader that went away is diagnosed unless the mode is -nopipe; /dev/full always is
    // (unless exit mode stopped at stdout first).
    assert_eq!(epipe_said, reader_gone && !nopipe, "{name}: {err}");
    let stopped_at_stdout = mode == "--output-error=exit" && reader_gone;
    assert_eq!(enospc_said, full && !stopped_at_stdout, "{name}: {err}");
    assert_eq!(messages.is_empty(), code == 0, "{name}: {err}");
    let good_sink = if full { 2 } else { 1 };
    let good_entry = sink(&report, good_sink);
    assert_eq!(
        good_entry["bytes"].as_u64(),
        Some(good_bytes.len() as u64),
        "{name}"
    );
    assert_bytes_eq(&good_bytes, &want[..good_bytes.len()], name);
    if keeps_feeding {
        assert_bytes_eq(&good_bytes, want, name);
        assert_eq!(good_entry["ended"], "eof", "{name}");
        if !reader_gone {
            assert_bytes_eq(&out.stdout, want, &format!("{name}: stdout"));
        }
    }
    if reader_gone {
        assert_eq!(sink(&report, 0)["ended"], "error", "{name}");
        assert_eq!(sink(&report, 0)["bytes"].as_u64(), Some(0), "{name}");
    }
    if full {
        assert_eq!(sink(&report, 1)["ended"], "error", "{name}");
        assert_eq!(sink(&report, 1)["bytes"].as_u64(), Some(0), "{name}");
    }
    let ended = if code == 0 { "eof" } else { "error" };
    assert_eq!(report["ended"], ended, "{name}");
}

#[test]
fn output_error_takes_its_mode_only_after_an_equals_sign() {
    // `--output-error warn` is the bare option (warn-nopipe) and a sink named `warn`, as
    // with GNU's optional argument.
    let dir = tempdir();
    let want = data(10_000);
    let src = write_file(dir.path(), "in", &want);
    let out = run({
        let mut cmd = zerocat();
        cmd.current_dir(dir.path())
            .args(["-q", "tee", "--output-error"])
            .arg(&src)
            .arg("warn");
        cmd
    });
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(
        &std::fs::read(dir.path().join("warn")).unwrap(),
        &want,
        "warn",
    );
    let out = run({
        let mut cmd = zerocat();
        cmd.args(["tee", "--output-error=sometimes"])
            .arg(&src)
            .arg(dir.path().join("x"));
        cmd
    });
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("warn-nopipe"),
        "{}",
        stderr_text(&out)
    );
    assert!(
        !dir.path().join("x").exists(),
        "nothing written on a usage error"
    );
}

/// GNU tee's form `printf x | zerocat tee t1 t2` would read t1 and overwrite t2 while the
/// piped bytes go nowhere; it is a usage error naming the spelling that means what GNU does.
/// With stdin /dev/null the first operand is still the source: t1 is copied into t2.
#[test]
fn gnu_form_with_piped_stdin_is_refused_and_touches_no_file() {
    let dir = tempdir();
    let t1 = write_file(dir.path(), "t1", b"first file\n");
    let t2 = write_file(dir.path(), "t2", b"second file\n");
    for stdin_is_file in [false, true] {
        let mut cmd = zerocat();
        cmd.arg("tee").arg(&t1).arg(&t2);
        let out = if stdin_is_file {
            cmd.stdin(File::open(&t1).unwrap());
            run(cmd)
        } else {
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().unwrap();
            // zerocat may have refused and exited already (EPIPE): what counts is its answer.
            let _ = child.stdin.take().unwrap().write_all(b"x");
            wait_with_deadline(child, Duration::from_secs(10))
        };
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains("zerocat tee - "), "{err}");
        assert_eq!(std::fs::read(&t1).unwrap(), b"first file\n");
        assert_eq!(std::fs::read(&t2).unwrap(), b"second file\n");
    }
    // stdin neither a pipe nor a file: the first operand is the source, as documented.
    let mut cmd = zerocat();
    cmd.arg("tee").arg(&t1).arg(&t2);
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    assert_eq!(std::fs::read(&t2).unwrap(), b"first file\n");
}

/// Issue 28 item 2: an output that cannot be opened is a failed sink like any other, in
/// every mode (GNU tee: said, the other outputs still get every byte, exit 1). Before, the
/// run stopped at the open: nothing on stdout, `out` never created.
#[test]
fn an_output_that_cannot_be_opened_fails_alone_in_every_mode() {
    let want = data(300 << 10);
    for mode in [
        None,
        Some("--output-error=warn"),
        Some("--output-error=warn-nopipe"),
        Some("--output-error=exit"),
        Some("--output-error=exit-nopipe"),
        Some("-p"),
    ] {
        let dir = tempdir();
        let out_path = dir.path().join("out");
        let missing = dir.path().join("no/such");
        let mut cmd = zerocat();
        cmd.args(["--stats", "json", "tee"]);
        cmd.args(mode);
        cmd.arg("-").arg("-").arg(&missing).arg(&out_path);
        let out = run_with_stdin(cmd, Some(want.clone()));
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(1), "{mode:?}: {err}");
        assert_bytes_eq(&out.stdout, &want, "stdout");
        assert_bytes_eq(&std::fs::read(&out_path).unwrap(), &want, "out");
        assert!(
            err.contains("no/such") && err.contains("No such file"),
            "{mode:?}: {err}"
        );
        let report = json_report(&out.stderr);
        assert_eq!(sink(&report, 0)["ended"], "eof", "{mode:?}: {report}");
        assert_eq!(sink(&report, 1)["ended"], "error", "{mode:?}: {report}");
        assert_eq!(sink(&report, 1)["bytes"], 0, "{mode:?}: {report}");
        assert_eq!(sink(&report, 2)["ended"], "eof", "{mode:?}: {report}");
        assert_eq!(sink(&report, 2)["bytes"], want.len(), "{mode:?}: {report}");
    }
    // No output opens: exit 1, the source is not read.
    let dir = tempdir();
    let mut cmd = zerocat();
    cmd.args(["tee", "-"]).arg(dir.path().join("no/such"));
    let out = run_with_stdin(cmd, Some(b"x".to_vec()));
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
}

/// Issue 29 item 1's other half: `echo hi | zerocat tee out` (one operand, GNU tee's
/// habit) is a usage error that shows the spelling meant; it was clap's bare "required
/// arguments were not provided". Nothing is created.
#[test]
fn one_operand_tee_shows_the_gnu_spelling() {
    let dir = tempdir();
    let mut cmd = zerocat();
    cmd.current_dir(dir.path()).args(["tee", "out"]);
    let out = run_with_stdin(cmd, Some(b"hi\n".to_vec()));
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("write: zerocat tee - out -"), "{err}");
    assert!(!dir.path().join("out").exists());
}

/// `tee -p` whose only reader leaves while no input comes ends at once, as GNU tee 9.2
/// does (before: it waited for the next input to find out) (issue 28 item 6).
#[test]
fn tee_p_ends_at_once_when_its_only_reader_left_while_it_waited_for_input() {
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "tee", "-p", "-", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stdin = child.stdin.take().unwrap(); // held open: no input, no EOF
    drop(child.stdout.take()); // the only reader leaves
    let started = std::time::Instant::now();
    let out = wait_with_deadline(child, Duration::from_secs(10));
    let waited = started.elapsed();
    drop(stdin);
    assert!(
        waited < Duration::from_secs(5),
        "tee -p waited {waited:?} for input nobody would read"
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
    let report = json_report(&out.stderr);
    assert_eq!(report["sinks"][0]["bytes"], 0, "{report}");
}

/// `--on-error=gnu`, GNU tee's default: a file that fails is dropped and the others get
/// every byte (exit 1); a reader that went away ends the run quietly with 141 (issue 28
/// item 6: the mode was missing).
#[test]
fn on_error_gnu_drops_a_failing_file_and_ends_quietly_when_a_reader_leaves() {
    let dir = tempdir();
    let want = data(300 << 10);
    let out_path = dir.path().join("out");
    let mut cmd = zerocat();
    cmd.args(["tee", "--on-error=gnu", "-", "/dev/full"])
        .arg(&out_path)
        .arg("-");
    let out = run_with_stdin(cmd, Some(want.clone()));
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("/dev/full"),
        "{}",
        stderr_text(&out)
    );
    assert_bytes_eq(&out.stdout, &want, "stdout");
    assert_bytes_eq(&std::fs::read(&out_path).unwrap(), &want, "out");

    let out = gnu_tee_whose_stdout_reader_is_gone(&out_path);
    assert_eq!(out.status.code(), Some(141), "{}", stderr_text(&out));
    assert!(
        !stderr_text(&out).contains("Broken pipe"),
        "{}",
        stderr_text(&out)
    );
}

/// `--on-error=gnu` (GNU tee's default), as GNU's tee.sh check 126 has it: an output that
/// cannot be opened is said on stderr at once, also when stdout's reader then goes away
/// and the run ends quietly with 141 (it printed nothing at all); several failed outputs
/// get a line each, as GNU prints them (they were one line joined with ';').
#[test]
fn on_error_gnu_says_each_failed_output_on_a_line_of_its_own_also_before_a_quiet_141() {
    let dir = tempdir();
    let missing = dir.path().join("no/such/dir/x");
    let out = gnu_tee_whose_stdout_reader_is_gone(&missing);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(141), "{err}");
    let opened: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(&missing.display().to_string()))
        .collect();
    assert_eq!(opened.len(), 1, "{err}");
    assert!(opened[0].contains("ENOENT"), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");

    // Three outputs fail (two opens, one write): three lines, and the good one gets it all.
    let want = data(100 << 10);
    let good = dir.path().join("good");
    let other = dir.path().join("no/y");
    let mut cmd = zerocat();
    cmd.args(["tee", "--on-error=gnu", "-"])
        .arg(&missing)
        .arg("/dev/full")
        .arg(&good)
        .arg(&other);
    let out = run_with_stdin(cmd, Some(want.clone()));
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_bytes_eq(&std::fs::read(&good).unwrap(), &want, "good");
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("zerocat: cannot"))
        .collect();
    assert_eq!(lines.len(), 3, "{err}");
    for (name, errno) in [
        (missing.display().to_string(), "ENOENT"),
        ("/dev/full".to_string(), "ENOSPC"),
        (other.display().to_string(), "ENOENT"),
    ] {
        assert!(
            lines.iter().any(|l| l.contains(&name) && l.contains(errno)),
            "{name}: {err}"
        );
    }
    assert!(!err.contains("; cannot"), "{err}");
    let report = err
        .lines()
        .find(|l| l.contains(" -> 4 sinks via "))
        .unwrap();
    assert!(
        report.contains("via splice") || report.contains("via tee"),
        "{err}"
    );
}

/// `tee -i` (GNU tee's --ignore-interrupts): a SIGINT meant for the command feeding the
/// pipe does not cut the copy short; every byte written after it still arrives (it was
/// missing: -i was an unknown option, exit 2).
#[test]
fn tee_i_ignores_sigint_and_delivers_every_byte() {
    let dir = tempdir();
    let out_path = dir.path().join("out");
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "tee", "-i", "-"])
        .arg(&out_path)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (first, second) = (data(64 << 10), data(200 << 10));
    stdin.write_all(&first).unwrap();
    // Once the first bytes are in the file, zerocat is past its start-up (the handler is set).
    let deadline = std::time::Instant::now() + DEADLINE;
    while std::fs::metadata(&out_path).map_or(0, |m| m.len()) < first.len() as u64 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first bytes never arrived"
        );
        thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    thread::sleep(Duration::from_millis(300));
    stdin.write_all(&second).unwrap();
    drop(stdin);
    let out = wait_with_deadline(child, DEADLINE);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let want: Vec<u8> = first.iter().chain(&second).copied().collect();
    assert_bytes_eq(&std::fs::read(&out_path).unwrap(), &want, "tee -i");
    let report = json_report(&out.stderr);
    assert_eq!(report["ended"], "eof", "{report}");
    assert_eq!(final_path(&report), "splice", "{report}");
}

/// `tee --on-error=gnu - OUTPUT -` fed 4 MiB while stdout's reader is gone from the start.
fn gnu_tee_whose_stdout_reader_is_gone(output: &Path) -> Output {
    let mut cmd = zerocat();
    cmd.args(["tee", "--on-error=gnu", "-"])
        .arg(output)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    let writing = thread::spawn(move || {
        for _ in 0..64 {
            if stdin.write_all(&[b'x'; 65536]).is_err() {
                break;
            }
        }
    });
    let out = wait_with_deadline(child, Duration::from_secs(10));
    writing.join().unwrap();
    out
}
