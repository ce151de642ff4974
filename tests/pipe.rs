//! `zerocat pipe`: every source kind × every sink kind × the sizes that sit on page and
//! pipe boundaries, byte-exact, with the path the report names; then bad input.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;

use crate::util::*;

const SIZES: [usize; 8] = [0, 1, 4095, 4096, 4097, 65537, (1 << 20) + 1, 64 << 20];
const PREFIX: &[u8] = b"already here\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    File,
    StdinFile,
    StdinPipe,
    Tcp,
    TcpListen,
    Unix,
    UnixListen,
    Fd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sink {
    File,
    AppendFile,
    StdoutPipe,
    StdoutFile,
    StdoutAppend,
    DevNull,
    Tcp,
    Unix,
}

const SINKS: [Sink; 8] = [
    Sink::File,
    Sink::AppendFile,
    Sink::StdoutPipe,
    Sink::StdoutFile,
    Sink::StdoutAppend,
    Sink::DevNull,
    Sink::Tcp,
    Sink::Unix,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Pipe,
    Socket,
}

impl Source {
    fn kind(self) -> Kind {
        match self {
            Source::File | Source::StdinFile | Source::Fd => Kind::File,
            Source::StdinPipe => Kind::Pipe,
            _ => Kind::Socket,
        }
    }
}

/// The path that must carry the bytes under `--via auto` (DESIGN §3). O_APPEND sinks
/// are refused by every kernel path, so their bytes go through userspace.
fn expected_path(src: Source, sink: Sink) -> &'static str {
    let append = matches!(sink, Sink::AppendFile | Sink::StdoutAppend);
    match (src.kind(), sink) {
        (_, _) if append => "userspace",
        (Kind::File, Sink::File | Sink::StdoutFile) => "copy_file_range",
        (Kind::File, Sink::DevNull | Sink::Tcp | Sink::Unix) => "sendfile",
        _ => "splice",
    }
}

/// One cell: runs zerocat from `src` to `sink` with `payload`, checks the bytes that
/// arrived and the path the report names.
fn cell(src: Source, sink: Sink, payload: &[u8], via: Option<&str>) {
    let dir = tempdir();
    let what = format!(
        "{src:?} -> {sink:?}, {} bytes, via {}",
        payload.len(),
        via.unwrap_or("auto")
    );
    let src_file = write_file(dir.path(), "src.bin", payload);
    let mut cmd = zerocat();
    cmd.arg("--stats").arg("json");
    if let Some(via) = via {
        cmd.arg("--via").arg(via);
    }
    cmd.arg("pipe");

    // The source side.
    let mut feeder: Option<thread::JoinHandle<()>> = None;
    let mut listen_feed = false;
    match src {
        Source::File => {
            cmd.arg(&src_file);
        }
        Source::StdinFile => {
            cmd.arg("-").stdin(File::open(&src_file).unwrap());
        }
        Source::StdinPipe => {
            cmd.arg("-").stdin(Stdio::piped());
        }
        Source::Tcp => {
            let (addr, h) = tcp_source(payload.to_vec());
            feeder = Some(h);
            cmd.arg(format!("tcp:{addr}"));
        }
        Source::Unix => {
            let path = dir.path().join("src.sock");
            feeder = Some(unix_source(&path, payload.to_vec()));
            cmd.arg(format!("unix:{}", path.display()));
        }
        Source::TcpListen => {
            listen_feed = true;
            cmd.arg("tcp-listen:0");
        }
        Source::UnixListen => {
            listen_feed = true;
            cmd.arg(format!(
                "unix-listen:{}",
                dir.path().join("listen.sock").display()
            ));
        }
        Source::Fd => {
            let file = File::open(&src_file).unwrap();
            pass_as_fd3(&mut cmd, file);
            cmd.arg("fd:3");
        }
    }

    // The sink side.
    let out_path = dir.path().join("out.bin");
    let mut collector: Option<thread::JoinHandle<Vec<u8>>> = None;
    let mut expect_prefix = false;
    match sink {
        Sink::File => {
            std::fs::write(&out_path, b"stale content that must be truncated").unwrap();
            cmd.arg(&out_path).stdout(Stdio::null());
        }
        Sink::AppendFile => {
            std::fs::write(&out_path, PREFIX).unwrap();
            expect_prefix = true;
            cmd.arg(format!("file:{},append", out_path.display()))
                .stdout(Stdio::null());
        }
        Sink::StdoutPipe => {
            cmd.arg("-").stdout(Stdio::piped());
        }
        Sink::StdoutFile => {
            cmd.arg("-").stdout(File::create(&out_path).unwrap());
        }
        Sink::StdoutAppend => {
            std::fs::write(&out_path, PREFIX).unwrap();
            expect_prefix = true;
            cmd.arg("-")
                .stdout(OpenOptions::new().append(true).open(&out_path).unwrap());
        }
        Sink::DevNull => {
            cmd.arg("/dev/null").stdout(Stdio::null());
        }
        Sink::Tcp => {
            let (addr, h) = tcp_sink();
            collector = Some(h);
            cmd.arg(format!("tcp:{addr}")).stdout(Stdio::null());
        }
        Sink::Unix => {
            let path = dir.path().join("sink.sock");
            collector = Some(unix_sink(&path));
            cmd.arg(format!("unix:{}", path.display()))
                .stdout(Stdio::null());
        }
    }
    cmd.stderr(Stdio::piped());

    let mut child = cmd.spawn().unwrap();
    if src == Source::StdinPipe {
        let mut stdin = child.stdin.take().unwrap();
        let owned = payload.to_vec();
        feeder = Some(thread::spawn(move || stdin.write_all(&owned).unwrap()));
    }
    let mut stderr_rest = None;
    if listen_feed {
        let (addr, rest) = listening_addr(&mut child);
        let owned = payload.to_vec();
        // From a thread: zerocat's stdout is read only below, and a big payload fills it.
        feeder = Some(thread::spawn(move || send_to(&addr, &owned)));
        stderr_rest = Some(rest);
    }
    let mut out = wait_with_deadline(child, DEADLINE);
    if let Some(rest) = stderr_rest {
        out.stderr = rest.join().unwrap();
    }
    if let Some(f) = feeder {
        f.join().unwrap();
    }
    assert!(
        out.status.success(),
        "{what}: exit {:?}, stderr: {}",
        out.status,
        stderr_text(&out)
    );

    let got = match sink {
        Sink::StdoutPipe => out.stdout.clone(),
        Sink::DevNull => payload.to_vec(), // nothing to read back: the report's count is checked below
        Sink::Tcp | Sink::Unix => collector.unwrap().join().unwrap(),
        _ => std::fs::read(&out_path).unwrap(),
    };
    let want = if expect_prefix {
        [PREFIX, payload].concat()
    } else {
        payload.to_vec()
    };
    assert_bytes_eq(&got, &want, &what);

    let report = json_report(&out.stderr);
    assert_eq!(
        report["bytes"].as_u64(),
        Some(payload.len() as u64),
        "{what}: report bytes"
    );
    let delivered: u64 = paths(&report).iter().map(|(_, n)| n).sum();
    assert_eq!(
        delivered,
        payload.len() as u64,
        "{what}: bytes per path add up"
    );
    let want_path = via.unwrap_or_else(|| expected_path(src, sink));
    if payload.is_empty() {
        // An empty source proves nothing about a path (a first copy_file_range returning
        // 0 is not trusted, for one): only that some path ran and moved nothing.
        assert!(!paths(&report).is_empty(), "{what}: some path ran");
    } else {
        assert_eq!(
            final_path(&report),
            want_path,
            "{what}: path; report: {report}"
        );
        let carried: Vec<_> = paths(&report).into_iter().filter(|(_, n)| *n > 0).collect();
        assert_eq!(
            carried.len(),
            1,
            "{what}: one path carried the bytes: {report}"
        );
    }
}

/// Makes `file` the child's fd 3 (inherited: without FD_CLOEXEC).
fn pass_as_fd3(cmd: &mut Command, file: File) {
    use nix::libc;
    use std::os::fd::IntoRawFd;
    let raw = file.into_raw_fd();
    // SAFETY: dup2 and fcntl are async-signal-safe. dup2 onto itself would keep the
    // close-on-exec flag, so clear it explicitly.
    unsafe {
        cmd.pre_exec(move || {
            let ok = if raw == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(raw, 3)
            };
            if ok < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn matrix(src: Source) {
    for sink in SINKS {
        for size in SIZES {
            let payload = data(size);
            cell(src, sink, &payload, None);
        }
        // The escape hatch moves the same bytes (the two boundary sizes are enough).
        for size in [4097, (1 << 20) + 1] {
            cell(src, sink, &data(size), Some("userspace"));
        }
    }
}

#[test]
fn from_file() {
    matrix(Source::File);
}

#[test]
fn from_stdin_redirected_from_a_file() {
    matrix(Source::StdinFile);
}

#[test]
fn from_stdin_pipe() {
    matrix(Source::StdinPipe);
}

#[test]
fn from_tcp_connect() {
    matrix(Source::Tcp);
}

#[test]
fn from_tcp_listen() {
    matrix(Source::TcpListen);
}

#[test]
fn from_unix_connect() {
    matrix(Source::Unix);
}

#[test]
fn from_unix_listen() {
    matrix(Source::UnixListen);
}

#[test]
fn from_inherited_fd() {
    matrix(Source::Fd);
}

/// Runs a shell snippet with `$Z` bound to the binary; returns its output.
fn shell(script: &str, dir: &Path) -> std::process::Output {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script).current_dir(dir).env("Z", bin());
    run(cmd)
}

#[test]
fn resumes_at_the_offset_the_shell_left() {
    let dir = tempdir();
    let payload = data(100_000);
    write_file(dir.path(), "f", &payload);
    let out = shell(
        "{ head -c 10 >/dev/null; \"$Z\" -q pipe > out; } < f",
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(
        &std::fs::read(dir.path().join("out")).unwrap(),
        &payload[10..],
        "bytes 10..",
    );
}

#[test]
fn writes_at_the_offset_the_shell_left() {
    let dir = tempdir();
    let payload = data(100_000);
    write_file(dir.path(), "f", &payload);
    let out = shell(
        "{ printf H; \"$Z\" --stats json pipe f -; printf T; } > out",
        dir.path(),
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    let want = [b"H".as_slice(), &payload, b"T"].concat();
    assert_bytes_eq(
        &std::fs::read(dir.path().join("out")).unwrap(),
        &want,
        "H·f·T",
    );
    assert_eq!(final_path(&json_report(&out.stderr)), "copy_file_range");
}

#[test]
fn dev_full_is_a_full_disk() {
    let dir = tempdir();
    let src = write_file(dir.path(), "f", &data(100_000));
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "pipe"])
        .arg(&src)
        .arg("/dev/full");
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_text(&out);
    assert!(
        err.contains("No space left on device") && err.contains("/dev/full"),
        "{err}"
    );
    let report = json_report(&out.stderr);
    assert_eq!(report["bytes"], 0);
    assert_eq!(report["ended"], "error");
}

#[test]
fn a_reader_that_goes_away_gives_141_promptly_and_quietly() {
    let dir = tempdir();
    write_file(dir.path(), "big", &data(64 << 20));
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg("\"$Z\" pipe big - 2>err | head -c 1 >/dev/null; echo ${PIPESTATUS[0]}")
        .current_dir(dir.path())
        .env("Z", bin());
    let out = run(cmd);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "141");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("err")).unwrap(),
        "",
        "no message on 141"
    );
}

#[test]
fn refuses_to_read_and_write_the_same_file_and_leaves_it_intact() {
    let dir = tempdir();
    let payload = data(10_000);
    let f = write_file(dir.path(), "f", &payload);
    let link = dir.path().join("hard");
    std::fs::hard_link(&f, &link).unwrap();
    let sym = dir.path().join("sym");
    std::os::unix::fs::symlink(&f, &sym).unwrap();
    for dst in [f.clone(), link, sym] {
        let mut cmd = zerocat();
        cmd.arg("pipe").arg(&f).arg(&dst);
        let out = run(cmd);
        assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
        assert!(
            stderr_text(&out).contains("same file"),
            "{}",
            stderr_text(&out)
        );
        assert_bytes_eq(&std::fs::read(&f).unwrap(), &payload, "source untouched");
    }
    // `zerocat pipe f - >> f`: cat's "input file is output file".
    let out = shell("\"$Z\" pipe f - >> f", dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_bytes_eq(
        &std::fs::read(&f).unwrap(),
        &payload,
        "source untouched by >>",
    );
}

#[test]
fn forced_paths_the_fds_cannot_take_fail_before_moving_bytes() {
    let dir = tempdir();
    let payload = data(70_000);
    let f = write_file(dir.path(), "f", &payload);
    // copy_file_range needs two regular files; stdout here is a pipe.
    let mut cmd = zerocat();
    cmd.args(["--via", "copy-file-range", "pipe"])
        .arg(&f)
        .arg("-");
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
    assert!(out.stdout.is_empty());
    // splice into an O_APPEND file: the kernel refuses (EINVAL) before any byte moves.
    let dst = dir.path().join("ap");
    std::fs::write(&dst, PREFIX).unwrap();
    let mut cmd = zerocat();
    cmd.args(["--via", "splice", "--stats", "json", "pipe"])
        .arg(&f)
        .arg(format!("file:{},append", dst.display()));
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("--via splice"),
        "{}",
        stderr_text(&out)
    );
    assert_eq!(json_report(&out.stderr)["bytes"], 0);
    assert_bytes_eq(&std::fs::read(&dst).unwrap(), PREFIX, "sink untouched");
    // A forced path that can run does run.
    for via in ["sendfile", "splice", "userspace", "copy_file_range"] {
        let out_path = dir.path().join(format!("out-{via}"));
        let mut cmd = zerocat();
        cmd.args(["--via", via, "--stats", "json", "pipe"])
            .arg(&f)
            .arg(&out_path);
        let out = run(cmd);
        assert!(out.status.success(), "{via}: {}", stderr_text(&out));
        assert_bytes_eq(&std::fs::read(&out_path).unwrap(), &payload, via);
        assert_eq!(
            paths(&json_report(&out.stderr)),
            vec![(via.to_string(), payload.len() as u64)]
        );
    }
}

#[test]
fn text_report_names_kinds_and_path() {
    let dir = tempdir();
    let f = write_file(dir.path(), "f", &data(5000));
    let mut cmd = zerocat();
    cmd.arg("pipe").arg(&f).arg(dir.path().join("o"));
    let out = run(cmd);
    let err = stderr_text(&out);
    assert!(err.starts_with("zerocat: 4.88 KiB in "), "{err}");
    assert!(
        err.trim_end().ends_with("file -> file via copy_file_range"),
        "{err}"
    );
    // Cross-filesystem: EXDEV falls back and says so (when /dev/shm is another fs).
    let shm = PathBuf::from("/dev/shm").join(format!("zerocat-test-{}", std::process::id()));
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "pipe"]).arg(&f).arg(&shm);
    let out = run(cmd);
    let copied = std::fs::read(&shm);
    let _ = std::fs::remove_file(&shm);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(&copied.unwrap(), &data(5000), "to /dev/shm");
    let report = json_report(&out.stderr);
    if report["fallbacks"].as_array().unwrap().is_empty() {
        eprintln!(
            "note: {} and /dev/shm share a filesystem here; no EXDEV to see",
            dir.path().display()
        );
    } else {
        assert_eq!(report["fallbacks"][0]["errno"], "EXDEV", "{report}");
        assert_eq!(final_path(&report), "splice");
    }
}

#[test]
fn quiet_prints_no_report() {
    let dir = tempdir();
    let f = write_file(dir.path(), "f", &data(5000));
    let mut cmd = zerocat();
    cmd.args(["-q", "pipe"]).arg(&f).arg(dir.path().join("o"));
    let out = run(cmd);
    assert!(out.status.success());
    assert_eq!(stderr_text(&out), "");
    assert_bytes_eq(
        &std::fs::read(dir.path().join("o")).unwrap(),
        &data(5000),
        "copied",
    );
}

#[test]
fn explain_moves_nothing_and_creates_nothing() {
    let dir = tempdir();
    let f = write_file(dir.path(), "f", &data(5000));
    let dst = dir.path().join("not-created");
    let mut cmd = zerocat();
    cmd.args(["--explain", "pipe"]).arg(&f).arg(&dst);
    let out = run(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("via copy_file_range -> splice -> userspace"),
        "{}",
        stderr_text(&out)
    );
    assert!(!dst.exists());
}

#[test]
fn verbose_prints_the_plan_with_pipe_sizes() {
    let dir = tempdir();
    let f = write_file(dir.path(), "f", &data(5000));
    let mut cmd = zerocat();
    cmd.args(["-v", "pipe"]).arg(&f).arg("-");
    let out = run(cmd);
    assert!(out.status.success());
    assert_bytes_eq(&out.stdout, &data(5000), "stdout");
    let err = stderr_text(&out);
    assert!(
        err.contains("plan:")
            && err.contains("(pipe, pipe of ")
            && err.contains("via splice -> userspace"),
        "{err}"
    );
}

/// Issue 29 item 3: a pipe or tee stopped by SIGINT says `interrupted` in its text report,
/// as copy and relay do (it read like a whole transfer, with exit 130), and the bytes it
/// counts are what the sinks got.
#[test]
fn an_interrupted_pipe_or_tee_says_so_in_the_text_report() {
    for (command, sinks) in [("pipe", 1), ("tee", 2)] {
        let mut rig = crate::rig::Rig::bare().arg(command).arg("/dev/zero");
        for i in 0..sinks {
            let sink = rig.path(&format!("out{i}"));
            let arg = rig.file_sink(sink);
            rig = rig.arg(arg);
        }
        let mut running = rig.start();
        running.wait_for_sink(0, 1 << 20);
        let done = running.stop();
        done.assert_code(130, command);
        let report = done.stderr.lines().last().unwrap_or_default().to_string();
        assert!(
            report.ends_with("; interrupted"),
            "{command}: {}",
            done.stderr
        );
        let held = done.held(0).unwrap();
        assert!(
            held.len() >= 1 << 20,
            "{command}: the sink got {} bytes",
            held.len()
        );
        assert!(held.iter().all(|&b| b == 0), "{command}: /dev/zero's bytes");
        if sinks == 2 {
            assert_eq!(
                done.held(1).unwrap(),
                held,
                "tee: both sinks got the same bytes"
            );
        }
    }
}

/// `file:PATH,OPTIONS` could not name a file with a comma (issue 28 item 10): `\,` is a
/// comma of the path. Before, `file:a\,b,append` was a usage error ("unknown option 'b'").
#[test]
fn a_file_uri_names_a_path_with_a_comma_through_an_escape() {
    let dir = tempdir();
    let target = format!(r"file:{}/a\,b,append", dir.path().display());
    for chunk in ["one,", "two"] {
        let mut cmd = zerocat();
        cmd.args(["--stats", "json", "pipe", "-", &target])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(chunk.as_bytes())
            .unwrap();
        let out = wait_with_deadline(child, DEADLINE);
        assert!(out.status.success(), "{}", stderr_text(&out));
        let report = json_report(&out.stderr);
        assert_eq!(report["dst"]["uri"], target.as_str(), "{report}");
    }
    let written = std::fs::read(dir.path().join("a,b")).expect("a file named a,b");
    assert_eq!(written, b"one,two", "appended, not truncated");
}

/// A pipe whose source sends its bytes, then waits two seconds before closing (the peer's
/// late close): the rate is over the time bytes were moving, with the wall time beside it
/// (issue 42 item 5; it was 1 MiB over the whole run, idle time included). JSON's
/// `seconds` stays the wall time; `moving_seconds` is the moving span. tee says it alike.
#[test]
fn the_rate_is_over_the_time_bytes_were_moving_not_the_wait_for_the_end() {
    let payload = data(1 << 20);
    for (json, command) in [
        (false, "pipe"),
        (true, "pipe"),
        (false, "tee"),
        (true, "tee"),
    ] {
        let dir = tempdir();
        let out_path = dir.path().join("out");
        let mut cmd = zerocat();
        if json {
            cmd.args(["--stats", "json"]);
        }
        cmd.arg(command).arg("-").arg(&out_path);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&payload).unwrap();
        thread::sleep(std::time::Duration::from_secs(2));
        drop(stdin);
        let out = wait_with_deadline(child, DEADLINE);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert_bytes_eq(&std::fs::read(&out_path).unwrap(), &payload, command);
        if json {
            let report = json_report(&out.stderr);
            let wall = report["seconds"].as_f64().unwrap();
            let moving = report["moving_seconds"].as_f64().unwrap();
            // The source's pipe may hold all 1 MiB (zerocat enlarges it), so the two
            // seconds may start a little before zerocat's clock does.
            assert!(wall >= 1.5, "{report}");
            assert!(moving > 0.0 && moving + 1.0 < wall, "{report}");
            assert_eq!(final_path(&report), "splice", "{report}");
        } else {
            let line = err.lines().last().unwrap_or_default();
            assert!(
                line.starts_with("zerocat: 1.00 MiB in ") && line.contains("/s while moving, "),
                "{command}: {err}"
            );
            assert!(line.contains("via splice"), "{err}");
        }
    }
}
