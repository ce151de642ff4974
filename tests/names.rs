//! Drop-in names (issue 43): zerocat called through links named nc, tee and pv, with the
//! real tools as the oracle — the same command line through both (GNU tee, pv, OpenBSD
//! netcat from Debian's packages), in directories alike, and the bytes, the exit status
//! and the stderr lines scripts read compared. The kernel path zerocat took is asserted
//! through `--zerocat-report`.

use std::io::{Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::util::*;

/// A directory holding links named nc, netcat, ncat, tee and pv to the zerocat under test.
fn links() -> tempfile::TempDir {
    let dir = tempdir();
    for name in ["nc", "netcat", "ncat", "tee", "pv"] {
        std::os::unix::fs::symlink(bin(), dir.path().join(name)).unwrap();
    }
    dir
}

/// The real tool's path, or None after saying SKIPPED.
fn real(path: &str, package: &str) -> Option<PathBuf> {
    let path = PathBuf::from(path);
    if path.exists() {
        Some(path)
    } else {
        eprintln!(
            "SKIPPED: {} is not installed (apt-get install {package})",
            path.display()
        );
        None
    }
}

/// Runs `program ARGS` in `dir` with `stdin`, clean environment, bounded in time.
fn run_in(program: &Path, args: &[&str], dir: &Path, stdin: &[u8]) -> Output {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new(program);
    // argv[0] as a shell gives it: GNU tools begin their error lines with it.
    let name = program.file_name().unwrap().to_string_lossy().into_owned();
    cmd.arg0(name.trim_end_matches(".openbsd"))
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LC_ALL", "C")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let feeder = thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    let out = wait_with_deadline(child, DEADLINE);
    feeder.join().unwrap();
    out
}

/// Every file under `dir` with its bytes, sorted by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    all.sort();
    all
}

// ---------------------------------------------------------------------------------------
// tee

/// One GNU tee command line: `setup` makes each directory alike, then GNU tee and the link
/// run there; stdout, the exit status, stderr and the directory's files must be equal.
struct TeeCase {
    args: &'static [&'static str],
    stdin: Vec<u8>,
    setup: fn(&Path),
    /// stderr compared (help and version texts are zerocat's own).
    same_stderr: bool,
}

fn no_setup(_: &Path) {}

fn with_old_file(dir: &Path) {
    std::fs::write(dir.join("f"), b"old line\n").unwrap();
}

fn with_a_directory(dir: &Path) {
    std::fs::create_dir(dir.join("d")).unwrap();
}

fn tee_cases() -> Vec<TeeCase> {
    let small = b"hello\nworld\n".to_vec();
    let case = |args, setup| TeeCase {
        args,
        stdin: small.clone(),
        setup,
        same_stderr: true,
    };
    vec![
        case(&["f"], no_setup),
        case(&[], no_setup),
        case(&["f", "g", "h"], no_setup),
        case(&["-a", "f"], with_old_file),
        case(&["--append", "f"], with_old_file),
        case(&["f", "-a"], with_old_file),
        case(&["f"], with_old_file),
        case(&["-"], no_setup),
        case(&["--", "-a"], no_setup),
        case(&["missing/x", "f"], no_setup),
        case(&["d", "f"], with_a_directory),
        case(&["-x"], no_setup),
        case(&["--bogus"], no_setup),
        case(&["--output-error=bogus", "f"], no_setup),
        case(&["--output-error=warn", "f"], no_setup),
        case(&["--output-error", "f"], no_setup),
        case(&["--output-e=exit", "f"], no_setup),
        case(&["-p", "f", "g"], no_setup),
        case(&["-i", "f"], no_setup),
        case(&["-ai", "f"], with_old_file),
        case(&["--output-error=exit-nopipe", "missing/x", "f"], no_setup),
        case(&["f", "f"], no_setup),
        TeeCase {
            args: &["big1", "big2"],
            stdin: data(3 << 20),
            setup: no_setup,
            same_stderr: true,
        },
        TeeCase {
            args: &["--help"],
            stdin: Vec::new(),
            setup: no_setup,
            same_stderr: false,
        },
        TeeCase {
            args: &["--version"],
            stdin: Vec::new(),
            setup: no_setup,
            same_stderr: false,
        },
    ]
}

#[test]
fn tee_answers_as_gnu_tee_line_for_line() {
    let Some(gnu) = real("/usr/bin/tee", "coreutils") else {
        return;
    };
    let links = links();
    let ours = links.path().join("tee");
    let cases = tee_cases();
    assert!(cases.len() >= 20);
    for case in cases {
        let (a, b) = (tempdir(), tempdir());
        (case.setup)(a.path());
        (case.setup)(b.path());
        let want = run_in(&gnu, case.args, a.path(), &case.stdin);
        let got = run_in(&ours, case.args, b.path(), &case.stdin);
        let what = format!("tee {:?}", case.args);
        assert_eq!(
            got.status.code(),
            want.status.code(),
            "{what}: {}",
            stderr_text(&got)
        );
        if !case.args.contains(&"--help") && !case.args.contains(&"--version") {
            assert_bytes_eq(&got.stdout, &want.stdout, &format!("{what}: stdout"));
        }
        if case.same_stderr {
            assert_eq!(stderr_text(&got), stderr_text(&want), "{what}: stderr");
        }
        assert_eq!(files(b.path()), files(a.path()), "{what}: files");
    }
}

/// `zerocat compat tee` is GNU's grammar too; the report says tee(2) fed the file.
#[test]
fn compat_tee_moves_bytes_by_tee_and_says_so_when_asked() {
    let dir = tempdir();
    let payload = data(1 << 20);
    let mut cmd = zerocat();
    cmd.args(["compat", "tee", "--zerocat-report", "copy"])
        .current_dir(dir.path());
    let out = run_with_stdin(cmd, Some(payload.clone()));
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(&out.stdout, &payload, "stdout");
    assert_bytes_eq(
        &std::fs::read(dir.path().join("copy")).unwrap(),
        &payload,
        "copy",
    );
    let err = stderr_text(&out);
    assert!(
        err.contains("via tee") || err.contains("via splice"),
        "{err}"
    );
    // zerocat's own tee keeps its grammar: SRC then DSTs.
    let src = write_file(dir.path(), "src", &payload);
    let out = run({
        let mut cmd = zerocat();
        cmd.args(["tee"]).arg(&src).arg(dir.path().join("dst"));
        cmd
    });
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(
        &std::fs::read(dir.path().join("dst")).unwrap(),
        &payload,
        "dst",
    );
}

// ---------------------------------------------------------------------------------------
// pv

/// One pv command line, through pv and the link, in directories holding `in` (256 KiB):
/// stdout and the exit status equal, and `stderr` says whether the two stderrs agree.
struct PvCase {
    args: &'static [&'static str],
    stdin: bool,
    stderr: fn(&str, &str) -> Result<(), String>,
}

const PV_INPUT: usize = 256 << 10;

fn both_empty(got: &str, want: &str) -> Result<(), String> {
    (got.is_empty() && want.is_empty())
        .then_some(())
        .ok_or_else(|| "stderr should be empty".into())
}

fn same_first_line(got: &str, want: &str) -> Result<(), String> {
    (got.lines().next() == want.lines().next())
        .then_some(())
        .ok_or_else(|| "first lines differ".into())
}

fn same_last_line(got: &str, want: &str) -> Result<(), String> {
    (got.lines().last() == want.lines().last())
        .then_some(())
        .ok_or_else(|| "last lines differ".into())
}

/// pv's display's last state: the same fields, in the same order, with the same shapes
/// (amounts, clock, brackets), whatever the figures.
fn same_display(got: &str, want: &str) -> Result<(), String> {
    let shape = |s: &str| -> String {
        let last = s.split(['\r', '\n']).rfind(|l| !l.trim().is_empty());
        last.unwrap_or("")
            .replace("[ ", "[")
            .split_whitespace()
            .map(|w| {
                w.chars()
                    .map(|c| if c.is_ascii_digit() { '9' } else { c })
                    .collect::<String>()
                    .replace("9.99", "9")
                    .replace("99.9", "9")
                    .replace("999", "9")
                    .replace("99", "9")
            })
            .map(|w| {
                if w.starts_with('[') && w.contains('=') {
                    "[bar]".into()
                } else {
                    w
                }
            })
            .map(|w| {
                w.replace("KiB", "U")
                    .replace("MiB", "U")
                    .replace("GiB", "U")
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    (shape(got) == shape(want)).then_some(()).ok_or_else(|| {
        format!(
            "display shapes differ: {:?} vs {:?}",
            shape(got),
            shape(want)
        )
    })
}

fn pv_cases() -> Vec<PvCase> {
    let case = |args, stdin, stderr| PvCase {
        args,
        stdin,
        stderr,
    };
    vec![
        case(&["in"], false, both_empty),
        case(&[], true, both_empty),
        case(&["-"], true, both_empty),
        case(&["-q", "in"], false, both_empty),
        case(&["-L", "1m", "in"], false, both_empty),
        case(&["-L", "512k", "-q"], true, both_empty),
        case(&["-W", "-q", "in"], false, both_empty),
        case(&["-n", "-s", "262144", "in"], false, same_last_line),
        case(&["-n", "-i", "0.5"], true, same_last_line),
        case(&["-n", "-b", "in"], false, same_last_line),
        case(&["-f", "in"], false, same_display),
        case(&["-f", "-b", "in"], false, same_display),
        case(&["-f", "-a", "in"], false, same_display),
        case(&["-f", "-p", "-t", "-e", "in"], false, same_display),
        case(&["-f", "-N", "name", "-b", "in"], false, same_display),
        case(&["-f", "-s", "262144"], true, same_display),
        case(&["-Y", "in"], false, same_first_line),
        case(&["-s", "bogus", "in"], false, same_first_line),
        // Line mode: lines counted (NUL-ended with -0), -s and -L in lines; on text (pv
        // 1.6 miscounts the lines of binary data: 5 where wc -l says 1011).
        case(&["-l", "-n", "-b", "lines"], false, same_last_line),
        case(&["-l", "-n", "-s", "40000", "lines"], false, same_last_line),
        case(&["-l", "-f", "-b", "lines"], false, same_display),
        case(&["-0", "-f", "-b", "nul"], false, same_display),
        case(&["-0", "-n", "-b", "nul"], false, same_last_line),
        case(&["-l", "-L", "100k", "-q", "lines"], false, both_empty),
    ]
}

#[test]
fn pv_answers_as_pv_bytes_status_and_display() {
    let Some(pv) = real("/usr/bin/pv", "pv") else {
        return;
    };
    let links = links();
    let ours = links.path().join("pv");
    let input = data(PV_INPUT);
    let text: String = (0..30_000).map(|i| format!("line {i}\n")).collect();
    let cases = pv_cases();
    assert!(cases.len() >= 15);
    for case in cases {
        let (a, b) = (tempdir(), tempdir());
        for dir in [a.path(), b.path()] {
            write_file(dir, "in", &input);
            write_file(dir, "lines", text.as_bytes());
            write_file(dir, "nul", text.replace('\n', "\0").as_bytes());
        }
        let stdin = if case.stdin {
            input.clone()
        } else {
            Vec::new()
        };
        let want = run_in(&pv, case.args, a.path(), &stdin);
        let got = run_in(&ours, case.args, b.path(), &stdin);
        let what = format!("pv {:?}", case.args);
        assert_eq!(
            got.status.code(),
            want.status.code(),
            "{what}: {}",
            stderr_text(&got)
        );
        assert_bytes_eq(&got.stdout, &want.stdout, &format!("{what}: stdout"));
        if let Err(why) = (case.stderr)(&stderr_text(&got), &stderr_text(&want)) {
            panic!(
                "{what}: {why}\nzerocat: {:?}\npv: {:?}",
                stderr_text(&got),
                stderr_text(&want)
            );
        }
    }
}

/// pv's bytes go by splice from a file into a pipe; `-C` (pv's no-splice) is userspace.
#[test]
fn pv_moves_a_file_by_splice_and_c_says_userspace() {
    let dir = tempdir();
    let payload = data(4 << 20);
    let src = write_file(dir.path(), "in", &payload);
    for (flags, path) in [(&[][..], "splice"), (&["-C"][..], "userspace")] {
        let mut cmd = zerocat();
        cmd.arg("pv").args(flags).arg("--zerocat-report").arg(&src);
        let out = run(cmd);
        assert!(out.status.success(), "{}", stderr_text(&out));
        assert_bytes_eq(&out.stdout, &payload, "stdout");
        let err = stderr_text(&out);
        assert!(err.contains(&format!("via {path}")), "{flags:?}: {err}");
    }
}

/// A flag zerocat does not take is refused with pv's usage error and the zerocat way
/// (this was `-l`, which zerocat's pv now takes).
#[test]
fn pv_refuses_a_flag_it_does_not_take_naming_why() {
    let mut cmd = zerocat();
    cmd.args(["pv", "-S"]);
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(64));
    let err = stderr_text(&out);
    assert!(
        err.starts_with("pv: -S: not supported by zerocat's pv\n"),
        "{err}"
    );
    assert!(err.contains("zerocat: "), "{err}");
}

/// `-l` reads every byte to count lines: userspace, and the report says why; `-l -L 2`
/// paces lines (four lines pass; only a generous bound on the time).
#[test]
fn pv_l_goes_by_userspace_and_paces_lines() {
    let mut cmd = zerocat();
    cmd.args(["pv", "-l", "-L", "2", "-n", "-b", "--zerocat-report"]);
    let started = std::time::Instant::now();
    let out = run_with_stdin(cmd, Some(b"1\n2\n3\n4\n".to_vec()));
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_eq!(out.stdout, b"1\n2\n3\n4\n");
    let err = stderr_text(&out);
    assert!(err.contains("via userspace"), "{err}");
    assert!(
        err.contains("userspace because pv -l counts lines"),
        "{err}"
    );
    assert!(
        err.lines().any(|l| l == "4"),
        "the last count is 4 lines: {err}"
    );
    assert!(started.elapsed() < DEADLINE, "pv -l -L 2 stalled");
}

// ---------------------------------------------------------------------------------------
// nc

/// What a case's server saw: the client's port (to tell `-p`'s from an ephemeral one) and
/// the bytes (or datagrams, one after another) it read.
type Served = (Option<u16>, Vec<u8>);

/// A server on 127.0.0.1 that reads to EOF, then answers `reply` and closes: its port,
/// and what it read.
fn answering_server(reply: &'static [u8]) -> (u16, thread::JoinHandle<Served>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = thread::spawn(move || {
        let (mut conn, from) = listener.accept().unwrap();
        conn.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut got = Vec::new();
        let _ = conn.read_to_end(&mut got);
        let _ = conn.write_all(reply);
        (Some(from.port()), got)
    });
    (port, handle)
}

/// A server that sends `payload` at once and closes, reading nothing.
fn sending_server(payload: Vec<u8>) -> (u16, thread::JoinHandle<Served>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = thread::spawn(move || {
        let (mut conn, from) = listener.accept().unwrap();
        conn.write_all(&payload).unwrap();
        (Some(from.port()), Vec::new())
    });
    (port, handle)
}

/// A server that sends `hi\n`, then reads and holds the connection open until `release`
/// is dropped (the client under test exited): for -w and -q, which end a session the
/// peer keeps open.
fn holding_server(release: mpsc::Receiver<()>) -> (u16, thread::JoinHandle<Served>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = thread::spawn(move || {
        let (mut conn, from) = listener.accept().unwrap();
        conn.write_all(b"hi\n").unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let deadline = std::time::Instant::now() + DEADLINE;
        while release.try_recv() == Err(mpsc::TryRecvError::Empty)
            && std::time::Instant::now() < deadline
        {
            match conn.read(&mut buf) {
                Ok(0) => thread::sleep(Duration::from_millis(20)),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
        }
        (Some(from.port()), got)
    });
    (port, handle)
}

/// A UDP server on 127.0.0.1 answering `reply\n` to each datagram until `release` is
/// dropped: the datagrams it read, one after another.
fn udp_server(release: mpsc::Receiver<()>) -> (u16, thread::JoinHandle<Served>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    socket
        .set_read_timeout(Some(Duration::from_millis(20)))
        .unwrap();
    let handle = thread::spawn(move || {
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        let deadline = std::time::Instant::now() + DEADLINE;
        while release.try_recv() == Err(mpsc::TryRecvError::Empty)
            && std::time::Instant::now() < deadline
        {
            if let Ok((n, from)) = socket.recv_from(&mut buf) {
                got.extend_from_slice(&buf[..n]);
                let _ = socket.send_to(b"reply\n", from);
            }
        }
        (None, got)
    });
    (port, handle)
}

/// What a connect-mode case needs: a server of a kind, and where {P}, {C} and {S} (its
/// port, a closed port, and a free one for `-p`) go in the arguments.
#[derive(Clone, Copy)]
enum Server {
    Answering,
    Sending,
    /// Sends `hi\n` and keeps the connection open until the client under test exits.
    Holding,
    /// Only a listener that accepts (for -z).
    Open,
    /// The same on [::1] (the case is skipped, saying so, where IPv6 is off).
    Open6,
    /// A UDP socket that answers each datagram.
    Udp,
    None,
}

struct NcCase {
    args: &'static [&'static str],
    server: Server,
    stdin: &'static [u8],
}

fn nc_connect_cases() -> Vec<NcCase> {
    use Server::*;
    let case = |args, server, stdin| NcCase {
        args,
        server,
        stdin,
    };
    vec![
        // Without -N OpenBSD nc keeps its side open after stdin's EOF (zerocat's nc
        // half-closes always, as -N asks): a server that sends and closes ends both.
        case(&["127.0.0.1", "{P}"], Sending, b""),
        case(&["-N", "127.0.0.1", "{P}"], Answering, b"request\n"),
        case(&["-v", "-N", "127.0.0.1", "{P}"], Answering, b"request\n"),
        case(&["-vN", "127.0.0.1", "{P}"], Answering, b"x"),
        case(&["-n", "-N", "127.0.0.1", "{P}"], Answering, b""),
        case(&["-4", "-N", "127.0.0.1", "{P}"], Answering, b"four\n"),
        case(&["-w", "5", "-N", "127.0.0.1", "{P}"], Answering, b"w\n"),
        case(&["-d", "127.0.0.1", "{P}"], Sending, b""),
        case(&["127.0.0.1", "{C}"], None, b""),
        case(&["-v", "127.0.0.1", "{C}"], None, b""),
        case(&["-n", "127.0.0.1", "{C}"], None, b""),
        case(&["-z", "127.0.0.1", "{P}"], Open, b""),
        case(&["-zv", "127.0.0.1", "{P}"], Open, b""),
        case(&["-z", "-v", "-n", "127.0.0.1", "{P}"], Open, b""),
        case(&["-z", "-w", "2", "127.0.0.1", "{P}"], Open, b""),
        case(&["-z", "127.0.0.1", "{C}"], None, b""),
        case(&["-zv", "127.0.0.1", "{C}"], None, b""),
        case(&["-zv", "127.0.0.1", "{C}-{C}"], None, b""),
        case(&["-zv4", "127.0.0.1", "{P}"], Open, b""),
        case(&["-Y"], None, b""),
        case(&[], None, b""),
        case(&["127.0.0.1"], None, b""),
        case(&["-z", "127.0.0.1", "70000"], None, b""),
        case(&["-z", "127.0.0.1", "port-that-is-no-service"], None, b""),
        case(&["-zn", "localhost", "{C}"], None, b""),
        case(&["-l"], None, b""),
        // -s and -p: the source address and port (the server sees {S}).
        case(
            &["-s", "127.0.0.1", "-N", "127.0.0.1", "{P}"],
            Answering,
            b"s\n",
        ),
        case(&["-p", "{S}", "-N", "127.0.0.1", "{P}"], Answering, b"p\n"),
        case(
            &["-vN", "-s", "127.0.0.1", "-p", "{S}", "127.0.0.1", "{P}"],
            Answering,
            b"sp\n",
        ),
        case(
            &["-s", "localhost", "-N", "127.0.0.1", "{P}"],
            Answering,
            b"",
        ),
        case(&["-vs", "127.0.0.1", "127.0.0.1", "{C}"], None, b""),
        case(&["-s", "999.1.1.1", "127.0.0.1", "{C}"], None, b""),
        case(&["-p", "no-such-service", "127.0.0.1", "{C}"], None, b""),
        // -q: stdin's EOF half-closes and the answer still comes (Debian's build starts
        // its timer once the peer closed); -w: silence ends it, exit 0.
        case(&["-q", "1", "127.0.0.1", "{P}"], Answering, b"then quit\n"),
        case(&["-q", "0", "127.0.0.1", "{P}"], Answering, b"at once\n"),
        case(&["-q", "abc", "127.0.0.1", "{C}"], None, b""),
        case(&["-q", "-1", "-N", "127.0.0.1", "{P}"], Answering, b"q\n"),
        case(&["-w", "1", "127.0.0.1", "{P}"], Holding, b""),
        case(&["-w", "abc", "127.0.0.1", "{C}"], None, b""),
        case(&["-vw", "1", "127.0.0.1", "{C}"], None, b""),
        // -4/-6 and names.
        case(&["-6", "127.0.0.1", "{C}"], None, b""),
        case(&["-4", "::1", "{C}"], None, b""),
        case(&["-zv6", "::1", "{P}"], Open6, b""),
        case(&["-zv", "localhost", "{P}"], Open, b""),
        case(&["-v", "-N", "localhost", "{P}"], Answering, b"name\n"),
        // Ports: several operands, ranges, nc's words for a bad one.
        case(&["-zv", "127.0.0.1", "{P}", "{C}"], Open, b""),
        case(&["-z", "127.0.0.1", "0"], None, b""),
        case(&["-z", "127.0.0.1", "5-"], None, b""),
        case(&["-z", "127.0.0.1", "8-x"], None, b""),
        case(&["-z", "127.0.0.1", "--", "-5"], None, b""),
        case(&["-z", "127.0.0.1", "1-70000"], None, b""),
        // Combinations nc refuses, and proxies it cannot reach.
        case(&["-k", "127.0.0.1", "{P}"], None, b""),
        case(&["-X", "9", "127.0.0.1", "{C}"], None, b""),
        case(
            &[
                "-v",
                "-X",
                "connect",
                "-x",
                "127.0.0.1:{C}",
                "127.0.0.1",
                "{P}",
            ],
            None,
            b"",
        ),
        case(
            &["-X", "5", "-x", "127.0.0.1:{C}", "127.0.0.1", "{P}"],
            None,
            b"",
        ),
        // UDP: a session that prints the answers, scans that send nothing.
        case(&["-u", "-w", "1", "127.0.0.1", "{P}"], Udp, b"datagram\n"),
        case(&["-uz", "127.0.0.1", "{P}"], Udp, b""),
        case(&["-uz", "127.0.0.1", "{C}"], None, b""),
        case(&["-uzv", "127.0.0.1", "{C}"], None, b""),
        // -C: a CR before each LF that has none (the server reads the wire's bytes); -i:
        // a second after each line sent (both take two seconds; no timing asserted), none
        // between ports (Debian's nc pauses not there either), nc's words for a bad one.
        case(
            &["-N", "-C", "127.0.0.1", "{P}"],
            Answering,
            b"a\nb\r\nc\n\nd",
        ),
        case(
            &["-C", "-q", "0", "127.0.0.1", "{P}"],
            Answering,
            b"GET / HTTP/1.0\n\n",
        ),
        case(
            &["-N", "-i", "1", "127.0.0.1", "{P}"],
            Answering,
            b"one\ntwo\n",
        ),
        case(
            &["-i", "0", "-N", "127.0.0.1", "{P}"],
            Answering,
            b"no pause\n",
        ),
        case(&["-zv", "-i", "1", "127.0.0.1", "{C}", "{P}"], Open, b""),
        case(&["-i", "0.5", "127.0.0.1", "{C}"], None, b""),
        case(&["-i", "-1", "127.0.0.1", "{C}"], None, b""),
        case(&["-i", "x", "127.0.0.1", "{C}"], None, b""),
    ]
}

/// Starts the server a case asks for: the port it listens on, its thread, and what ends
/// it (dropped once the client under test exited); None where the machine has no IPv6.
fn start(server: Server) -> Option<(u16, Option<thread::JoinHandle<Served>>, mpsc::Sender<()>)> {
    let (release, released) = mpsc::channel();
    let accepting = |listener: TcpListener| {
        let port = listener.local_addr().unwrap().port();
        let h = thread::spawn(move || {
            let from = listener.accept().ok().map(|(_, from)| from.port());
            (from, Vec::new())
        });
        (port, Some(h))
    };
    let (port, handle) = match server {
        Server::Answering => {
            let (port, h) = answering_server(b"answer\n");
            (port, Some(h))
        }
        Server::Sending => {
            let (port, h) = sending_server(data(300_000));
            (port, Some(h))
        }
        Server::Holding => {
            let (port, h) = holding_server(released);
            (port, Some(h))
        }
        Server::Udp => {
            let (port, h) = udp_server(released);
            (port, Some(h))
        }
        Server::Open => accepting(TcpListener::bind("127.0.0.1:0").unwrap()),
        Server::Open6 => accepting(TcpListener::bind("[::1]:0").ok()?),
        Server::None => (free_port(), None),
    };
    Some((port, handle, release))
}

#[test]
fn nc_connects_scans_and_refuses_as_openbsd_netcat_does() {
    let Some(nc) = real("/bin/nc.openbsd", "netcat-openbsd") else {
        return;
    };
    let links = links();
    let ours = links.path().join("nc");
    let cases = nc_connect_cases();
    let dir = tempdir();
    assert!(cases.len() >= 40, "issue 43 asks for at least 40 nc lines");
    'cases: for case in &cases {
        let mut results = Vec::new();
        for program in [&nc, &ours] {
            let Some((port, server, release)) = start(case.server) else {
                eprintln!("SKIPPED: nc {:?}: no IPv6 loopback here", case.args);
                continue 'cases;
            };
            let (closed, source) = (free_port(), free_port());
            let named = |text: &str| {
                text.replace("{P}", &port.to_string())
                    .replace("{C}", &closed.to_string())
                    .replace("{S}", &source.to_string())
            };
            let args: Vec<String> = case.args.iter().map(|a| named(a)).collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = run_in(program, &args, dir.path(), case.stdin);
            drop(release);
            // The client's port is {S} when -p chose it, else whichever the kernel gave.
            let served = server.map(|h| h.join().unwrap()).map(|(from, bytes)| {
                let from = from.map(|p| if p == source { "{S}" } else { "any" });
                (from, bytes)
            });
            // The ports differ between the two runs: compare with them named.
            let err = stderr_text(&out)
                .replace(&port.to_string(), "{P}")
                .replace(&closed.to_string(), "{C}")
                .replace(&source.to_string(), "{S}");
            results.push((out, err, served));
        }
        let (want, got) = (&results[0], &results[1]);
        let what = format!("nc {:?}", case.args);
        assert_eq!(
            got.0.status.code(),
            want.0.status.code(),
            "{what}: {}",
            got.1
        );
        assert_bytes_eq(&got.0.stdout, &want.0.stdout, &format!("{what}: stdout"));
        assert_eq!(got.2, want.2, "{what}: what the server read");
        assert_eq!(got.1, want.1, "{what}: stderr");
    }
    // -h: exit 0 and nc's usage lines; the summary below them is zerocat's own.
    let usage = |out: &Output| -> (Option<i32>, Vec<String>) {
        let err = stderr_text(out);
        let lines = err.lines().skip(1).take(5).map(str::to_string).collect();
        (out.status.code(), lines)
    };
    let want = run_in(&nc, &["-h"], dir.path(), b"");
    let got = run_in(&ours, &["-h"], dir.path(), b"");
    assert_eq!(usage(&got), usage(&want), "nc -h");
    assert_eq!(got.stdout, want.stdout, "nc -h: stdout");
}

/// `nc -l`: one connection, its bytes to stdout and stdin's to it; `-v -n` says where it
/// listens and who came, in OpenBSD's words.
#[test]
fn nc_listens_for_one_connection_as_openbsd_netcat_does() {
    let Some(nc) = real("/bin/nc.openbsd", "netcat-openbsd") else {
        return;
    };
    let links = links();
    let ours = links.path().join("nc");
    let forms: [&[&str]; 7] = [
        &["-l", "127.0.0.1", "{P}"],
        &["-l", "-p", "{P}"],
        &["-lvn", "127.0.0.1", "{P}"],
        &["-N", "-l", "127.0.0.1", "{P}"],
        &["-l", "-s", "127.0.0.1", "-p", "{P}"],
        &["-lvn4", "-s", "127.0.0.1", "-p", "{P}"],
        &["-l", "-w", "5", "127.0.0.1", "{P}"],
    ];
    let request = data(200_000);
    for form in forms {
        let mut results = Vec::new();
        for program in [&nc, &ours] {
            let port = free_port();
            let args: Vec<String> = form
                .iter()
                .map(|a| a.replace("{P}", &port.to_string()))
                .collect();
            let mut cmd = Command::new(program);
            cmd.args(&args)
                .env_clear()
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().unwrap();
            let mut stdin = child.stdin.take().unwrap();
            // Its stdout is read as it comes (a full pipe would stop it reading the socket).
            let waiter = thread::spawn(move || wait_with_deadline(child, DEADLINE));
            let conn = connect_retrying(&format!("127.0.0.1:{port}"));
            let (mut reader, mut writer) = (conn.try_clone().unwrap(), conn);
            let sent = request.clone();
            let sender = thread::spawn(move || {
                writer.write_all(&sent).unwrap();
                writer.shutdown(std::net::Shutdown::Write).unwrap();
            });
            stdin.write_all(b"from the listener's stdin\n").unwrap();
            drop(stdin);
            let mut back = Vec::new();
            reader.set_read_timeout(Some(DEADLINE)).unwrap();
            let _ = reader.read_to_end(&mut back);
            sender.join().unwrap();
            drop(reader);
            let out = waiter.join().unwrap();
            let err = stderr_text(&out).replace(&port.to_string(), "{P}");
            // The client's own port differs from run to run.
            let err: String = err
                .lines()
                .map(
                    |l| match l.strip_prefix("Connection received on 127.0.0.1 ") {
                        Some(_) => "Connection received on 127.0.0.1 {CLIENT}".to_string(),
                        None => l.to_string(),
                    },
                )
                .collect::<Vec<_>>()
                .join("\n");
            results.push((out, err, back));
        }
        let (want, got) = (&results[0], &results[1]);
        let what = format!("nc {form:?}");
        assert_eq!(
            got.0.status.code(),
            want.0.status.code(),
            "{what}: {}",
            got.1
        );
        assert_bytes_eq(&got.0.stdout, &request, &format!("{what}: stdout"));
        assert_bytes_eq(&want.0.stdout, &request, &format!("{what}: nc's stdout"));
        assert_eq!(got.2, want.2, "{what}: what the client got back");
        assert_eq!(got.1, want.1, "{what}: stderr");
    }
}

/// `nc HOST PORT` through the link moves a big stream by the relay, and the report (asked
/// with --zerocat-report) names the kernel path.
#[test]
fn nc_relays_a_big_stream_and_the_report_names_the_path() {
    let payload = data(8 << 20);
    let (port, server) = answering_server(b"done\n");
    let links = links();
    let mut cmd = Command::new(links.path().join("nc"));
    cmd.args(["-N", "--zerocat-report", "127.0.0.1", &port.to_string()])
        .env_clear();
    let out = run_with_stdin(cmd, Some(payload.clone()));
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(&server.join().unwrap().1, &payload, "what the server read");
    assert_eq!(out.stdout, b"done\n");
    let err = stderr_text(&out);
    assert!(err.contains("splice") || err.contains("userspace"), "{err}");
}

/// `-C` and `-i` read every line, so their bytes go by userspace, and the report says why.
#[test]
fn nc_c_and_i_go_by_userspace_and_the_report_says_why() {
    for (flag, why) in [("-C", "nc -C rewrites"), ("-i", "nc -i pauses")] {
        let (port, server) = answering_server(b"done\n");
        let links = links();
        let mut cmd = Command::new(links.path().join("nc"));
        cmd.arg("-N").arg(flag);
        if flag == "-i" {
            cmd.arg("1");
        }
        cmd.args(["--zerocat-report", "127.0.0.1", &port.to_string()])
            .env_clear();
        let out = run_with_stdin(cmd, Some(b"one line\n".to_vec()));
        assert!(out.status.success(), "{}", stderr_text(&out));
        let want: &[u8] = if flag == "-C" {
            b"one line\r\n"
        } else {
            b"one line\n"
        };
        assert_bytes_eq(&server.join().unwrap().1, want, "what the server read");
        assert_eq!(out.stdout, b"done\n");
        let err = stderr_text(&out);
        assert!(err.contains("via userspace"), "{flag}: {err}");
        assert!(
            err.contains(&format!("userspace because {why}")),
            "{flag}: {err}"
        );
    }
}

/// A server for `-P`'s runs: each connection's bytes, read to its end, one entry a run.
fn recording_server(runs: usize) -> (u16, thread::JoinHandle<Vec<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = thread::spawn(move || {
        (0..runs)
            .map(|_| {
                let (mut conn, _) = listener.accept().unwrap();
                conn.set_read_timeout(Some(DEADLINE)).unwrap();
                let mut got = Vec::new();
                let _ = conn.read_to_end(&mut got);
                got
            })
            .collect()
    });
    (port, handle)
}

/// Runs `program ARGS` with `stdin` piped and a terminal of its own (a pty, its
/// controlling terminal, as a login's): `typed` is typed there once `prompt` shows.
/// The output, and everything the terminal showed.
fn run_on_a_terminal(
    program: &Path,
    args: &[String],
    stdin: &[u8],
    prompt: &str,
    typed: &str,
) -> (Output, String) {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::process::CommandExt as _;
    let pty = nix::pty::openpty(None, None).unwrap();
    let slave = pty.slave.as_raw_fd();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            nix::unistd::setsid()?;
            if nix::libc::ioctl(slave, nix::libc::TIOCSCTTY, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let mut typist = master.try_clone().unwrap();
    let (shown_tx, shown_rx) = mpsc::channel();
    let prompt = prompt.to_string();
    let screen = thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        let mut told = false;
        // EIO once the child and its terminal are gone.
        while let Ok(n @ 1..) = master.read(&mut buf) {
            seen.extend_from_slice(&buf[..n]);
            if !told && String::from_utf8_lossy(&seen).contains(&prompt) {
                told = true;
                let _ = shown_tx.send(());
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let mut input = child.stdin.take().unwrap();
    let stdin = stdin.to_vec();
    let feeder = thread::spawn(move || {
        let _ = input.write_all(&stdin);
    });
    if shown_rx.recv_timeout(DEADLINE).is_ok() {
        typist.write_all(format!("{typed}\n").as_bytes()).unwrap();
    }
    let out = wait_with_deadline(child, DEADLINE);
    feeder.join().unwrap();
    drop(typist);
    (out, screen.join().unwrap())
}

/// `-P USER -X connect` against a tinyproxy that wants Basic credentials: as OpenBSD nc,
/// a first try without them, then the password asked on the terminal (echo off) and the
/// tunnel opened; with no terminal, nc's refusal; without -P, nc's words for the 407.
#[test]
fn nc_p_asks_the_terminal_for_the_proxy_password_as_openbsd_netcat_does() {
    let Some(nc) = real("/bin/nc.openbsd", "netcat-openbsd") else {
        return;
    };
    let (target, server) = recording_server(2);
    let dir = tempdir();
    let Some(proxy) = crate::outbound::tinyproxy(dir.path(), target) else {
        eprintln!("SKIPPED: nc -P: tinyproxy is not installed (apt-get install tinyproxy)");
        return;
    };
    let links = links();
    let ours = links.path().join("nc");
    let via = format!("127.0.0.1:{}", proxy.port);
    let args = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["-N", "-X", "connect", "-x", &via]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect();
        args.extend(["127.0.0.1".to_string(), target.to_string()]);
        args
    };
    let prompt = "Proxy password for bob@127.0.0.1: ";
    for program in [&nc, &ours] {
        let what = format!("{} -P", program.display());
        // A terminal: asked there, typed, the tunnel opens and stdin goes through.
        let (out, screen) = run_on_a_terminal(
            program,
            &args(&["-P", "bob"]),
            b"through the proxy\n",
            prompt,
            "s3cret",
        );
        assert_eq!(out.status.code(), Some(0), "{what}: {}", stderr_text(&out));
        assert!(
            screen.starts_with(prompt),
            "{what}: the terminal showed {screen:?}"
        );
        assert!(
            !screen.contains("s3cret"),
            "{what}: the password was echoed: {screen:?}"
        );
        // No terminal: nc's words (zerocat adds its own way on a second line).
        let args_p = args(&["-P", "bob"]);
        let args_p: Vec<&str> = args_p.iter().map(String::as_str).collect();
        let out = run_in(program, &args_p, dir.path(), b"x\n");
        assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr_text(&out));
        assert_eq!(
            stderr_text(&out).lines().next(),
            Some("nc: Unable to read proxy passphrase"),
            "{what}"
        );
        // Without -P: the proxy's refusal in nc's words.
        let plain = args(&[]);
        let plain: Vec<&str> = plain.iter().map(String::as_str).collect();
        let out = run_in(program, &plain, dir.path(), b"x\n");
        assert_eq!(out.status.code(), Some(1), "{what}");
        assert_eq!(
            stderr_text(&out),
            "nc: Proxy error: \"HTTP/1.0 407 Proxy Authentication Required\"\n",
            "{what}"
        );
    }
    let runs = server.join().unwrap();
    assert_eq!(
        runs,
        [
            b"through the proxy\n".to_vec(),
            b"through the proxy\n".to_vec()
        ]
    );
}

/// `nc -u HOST PORT` sends stdin as datagrams, as netcat does; like nc it then waits for
/// answers, so `-w 1` ends it after a second of silence (exit 0).
#[test]
fn nc_u_sends_stdin_as_datagrams() {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(DEADLINE)).unwrap();
    let port = socket.local_addr().unwrap().port();
    let links = links();
    let mut cmd = Command::new(links.path().join("nc"));
    cmd.args([
        "-u",
        "-w",
        "1",
        "--zerocat-report",
        "127.0.0.1",
        &port.to_string(),
    ])
    .env_clear();
    let out = run_with_stdin(cmd, Some(b"one datagram\n".to_vec()));
    assert!(out.status.success(), "{}", stderr_text(&out));
    let mut buf = [0u8; 100];
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"one datagram\n");
    assert!(stderr_text(&out).contains("via "), "{}", stderr_text(&out));
}

/// `-e` (ncat's --exec) gives each accepted connection a command, as ncat does.
#[test]
fn nc_l_e_runs_a_command_for_the_connection() {
    let links = links();
    let port = free_port();
    let mut cmd = Command::new(links.path().join("nc"));
    cmd.args(["-l", "127.0.0.1", &port.to_string(), "-e", "/bin/cat"])
        .env_clear()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let mut conn = connect_retrying(&format!("127.0.0.1:{port}"));
    let payload = data(100_000);
    conn.write_all(&payload).unwrap();
    conn.shutdown(std::net::Shutdown::Write).unwrap();
    let mut back = Vec::new();
    conn.set_read_timeout(Some(DEADLINE)).unwrap();
    conn.read_to_end(&mut back).unwrap();
    assert_bytes_eq(&back, &payload, "cat's echo");
    let out = wait_with_deadline(child, DEADLINE);
    assert!(out.status.success(), "{}", stderr_text(&out));
}

/// A wait-for-it healthcheck and a `tar | pv | nc` / `nc -l | tar x` pipeline run
/// unchanged with the links first on PATH: the tree arrives whole, the exit codes hold.
#[test]
fn scripts_run_unchanged_with_the_links_first_on_path() {
    let links = links();
    let dir = tempdir();
    let tree = dir.path().join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    write_file(&tree, "a.bin", &data(300_000));
    write_file(&tree.join("sub"), "b.txt", b"hello\n");
    let port = free_port();
    let open = TcpListener::bind("127.0.0.1:0").unwrap();
    let open_port = open.local_addr().unwrap().port();
    let path = format!(
        "{}:{}",
        links.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!(
        r#"set -e
        test "$(command -v nc)" = "{links}/nc"
        # wait-for-it: a closed port fails, an open one answers.
        if nc -z -w 1 127.0.0.1 {port}; then echo "closed port said open"; exit 1; fi
        nc -z -w 1 127.0.0.1 {open}
        mkdir out
        (cd out && nc -l 127.0.0.1 {port} | tar x) &
        listener=$!
        for i in $(seq 1 200); do
            tar c -C "{tree}" . | pv -q | nc -N 127.0.0.1 {port} 2>/dev/null && break
            sleep 0.05
        done
        wait $listener
        cat out/sub/b.txt | tee copy.txt > /dev/null
        "#,
        links = links.path().display(),
        tree = tree.display(),
        open = open_port,
    );
    let out = run({
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(&script)
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", &path);
        cmd
    });
    let err = stderr_text(&out);
    assert!(out.status.success(), "{err}");
    // The first nc -z found the port closed; it was not "said open".
    assert!(!String::from_utf8_lossy(&out.stdout).contains("said open"));
    assert_bytes_eq(
        &std::fs::read(dir.path().join("out/a.bin")).unwrap(),
        &data(300_000),
        "a.bin through tar | pv | nc",
    );
    assert_eq!(
        std::fs::read(dir.path().join("copy.txt")).unwrap(),
        b"hello\n"
    );
}

/// `install-links DIR` makes the five links to this binary; a name taken by something
/// else is refused without --force.
#[test]
fn install_links_makes_the_links_and_keeps_what_is_there() {
    let dir = tempdir();
    let out = run({
        let mut cmd = zerocat();
        cmd.arg("install-links").arg(dir.path());
        cmd
    });
    assert!(out.status.success(), "{}", stderr_text(&out));
    for name in ["nc", "netcat", "ncat", "tee", "pv"] {
        let target = std::fs::read_link(dir.path().join(name)).unwrap();
        assert_eq!(
            target.canonicalize().unwrap(),
            bin().canonicalize().unwrap(),
            "{name}"
        );
    }
    // Through a link: GNU tee's grammar, the bytes whole.
    let out = run_with_stdin(
        {
            let mut cmd = Command::new(dir.path().join("tee"));
            cmd.arg(dir.path().join("f")).env_clear();
            cmd
        },
        Some(b"via the link\n".to_vec()),
    );
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_eq!(
        std::fs::read(dir.path().join("f")).unwrap(),
        b"via the link\n"
    );
    let other = tempdir();
    write_file(other.path(), "pv", b"someone else's pv");
    let out = run({
        let mut cmd = zerocat();
        cmd.arg("install-links").arg(other.path());
        cmd
    });
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("--force"),
        "{}",
        stderr_text(&out)
    );
    assert_eq!(
        std::fs::read(other.path().join("pv")).unwrap(),
        b"someone else's pv"
    );
}

/// `nc -lk PORT > log`: connection after connection into stdout, each whole, in order,
/// until a signal (zerocat's `pipe --keep-open` under the name); nothing else on stderr.
#[test]
fn nc_lk_takes_connection_after_connection_into_stdout() {
    let links = links();
    let dir = tempdir();
    let log = dir.path().join("log");
    let port = free_port();
    let mut cmd = Command::new(links.path().join("nc"));
    cmd.args(["-lk", "127.0.0.1", &port.to_string()])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let pid = child.id();
    let mut want = Vec::new();
    for i in 0..5 {
        let part = data(50_000 + i * 1000);
        let mut conn = connect_retrying(&format!("127.0.0.1:{port}"));
        conn.write_all(&part).unwrap();
        drop(conn);
        want.extend_from_slice(&part);
        // The next connection waits in the backlog until this one is written whole.
        let deadline = std::time::Instant::now() + DEADLINE;
        while std::fs::metadata(&log).unwrap().len() < want.len() as u64 {
            assert!(
                std::time::Instant::now() < deadline,
                "connection {i} never arrived"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
    Command::new("kill").arg(pid.to_string()).status().unwrap();
    let out = wait_with_deadline(child, DEADLINE);
    assert_bytes_eq(&std::fs::read(&log).unwrap(), &want, "the log");
    assert_eq!(stderr_text(&out), "", "nc -lk says nothing of its own");
}
