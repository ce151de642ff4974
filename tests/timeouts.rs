//! `--idle-timeout`, `--connect-timeout` and `--linger` on pipe, tee and relay, for each
//! kind of endpoint. Each run must end by itself, within a bound only a real stall misses,
//! and say why it ended; no timing is asserted beyond that.

use std::io::Write;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::rig::*;
use crate::util::*;

/// Well past every timeout these tests set: a run still going then waits for nothing.
const BOUND: Duration = Duration::from_secs(20);

/// `pipe --idle-timeout` on a TCP source that sends, then falls silent without closing:
/// the silence ends the run, the bytes before it are all in the sink. (It was accepted and
/// ignored: the run waited for a FIN that never came.)
#[test]
fn pipe_idle_timeout_ends_a_quiet_tcp_source() {
    let mut rig = Rig::new();
    let out = rig.path("out.bin");
    let sink = rig.file_sink(out);
    let running = rig
        .args(["pipe", "--idle-timeout", "400ms", "tcp-listen:0", &sink])
        .listen();
    let payload = data(100_000);
    let mut client = TcpStream::connect(running.addr()).unwrap();
    client.write_all(&payload).unwrap();
    let quiet_from = Instant::now();
    let end = running.finish();
    drop(client);
    assert!(quiet_from.elapsed() < BOUND, "it waited on");
    end.assert_code(0, "pipe --idle-timeout");
    end.assert_held(0, &payload, "the bytes before the silence");
    assert_eq!(end.report()["ended"], "idle-timeout", "{}", end.report());
}

/// The same on a unix source, and on tee with stdin held open and silent (a pipe: woken
/// from its read by the timeout as a signal would wake it).
#[test]
fn idle_timeout_ends_quiet_unix_and_stdin_sources_of_pipe_and_tee() {
    let mut rig = Rig::new();
    let sock = rig.path("in.sock");
    let out = rig.path("out.bin");
    let sink = rig.file_sink(out);
    let running = rig
        .args(["pipe", "--idle-timeout", "300ms"])
        .arg(format!("unix-listen:{}", sock.display()))
        .arg(&sink)
        .listen();
    let payload = data(70_000);
    let mut client = std::os::unix::net::UnixStream::connect(running.addr()).unwrap();
    client.write_all(&payload).unwrap();
    let end = running.finish();
    drop(client);
    end.assert_code(0, "pipe --idle-timeout unix");
    end.assert_held(0, &payload, "the unix source's bytes");
    assert_eq!(end.report()["ended"], "idle-timeout", "{}", end.report());

    let dir = tempdir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let mut cmd = zerocat();
    cmd.args(["tee", "--idle-timeout", "300ms", "-"])
        .arg(&a)
        .arg(&b)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&payload).unwrap();
    let out = wait_with_deadline(child, BOUND);
    drop(stdin);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("idle timeout (no byte for 300 ms)"), "{err}");
    assert_bytes_eq(&std::fs::read(&a).unwrap(), &payload, "tee's first sink");
    assert_bytes_eq(&std::fs::read(&b).unwrap(), &payload, "tee's second sink");
}

/// A sink that takes nothing: the idle timeout ends the run, and since bytes taken were
/// not delivered, it fails (exit 1) and says so.
#[test]
fn idle_timeout_on_a_sink_that_takes_nothing_fails_and_says_why() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepted, never read.
    let held = std::thread::spawn(move || listener.accept().map(|(s, _)| s));
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &data(32 << 20));
    let mut cmd = zerocat();
    cmd.args(["pipe", "--idle-timeout", "300ms"])
        .arg(&src)
        .arg(format!("tcp:{addr}"));
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = wait_with_deadline(cmd.spawn().unwrap(), BOUND);
    let _peer = held.join().unwrap();
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--idle-timeout") && err.contains("not delivered"),
        "{err}"
    );
}

/// A listener whose accept queue is full drops SYNs: `--connect-timeout` ends the connect
/// (pipe and tee), naming the timeout, instead of the kernel's two minutes.
#[test]
fn connect_timeout_ends_a_connect_nobody_answers_in_pipe_and_tee() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: listen(2) on a socket we own: backlog 0.
    assert_eq!(
        unsafe { nix::libc::listen(std::os::fd::AsRawFd::as_raw_fd(&listener), 0) },
        0
    );
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    let filled =
        (0..8).any(
            |_| match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
                Ok(s) => {
                    held.push(s);
                    false
                }
                Err(_) => true,
            },
        );
    if !filled {
        println!("SKIPPED: a backlog-0 listener kept answering (no SYN dropped)");
        return;
    }
    let dir = tempdir();
    let src = write_file(dir.path(), "in", b"never sent");
    for command in [&["pipe"][..], &["tee"][..]] {
        let mut cmd = zerocat();
        cmd.args(command)
            .args(["--connect-timeout", "300ms"])
            .arg(&src)
            .arg(format!("tcp:{addr}"));
        if command == ["tee"] {
            cmd.arg(dir.path().join("copy"));
        }
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let out = wait_with_deadline(cmd.spawn().unwrap(), BOUND);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(1), "{command:?}: {err}");
        assert!(err.contains("ETIMEDOUT"), "{command:?}: {err}");
    }
}

/// relay's `--idle-timeout` on a unix listener: a client that says nothing more is closed,
/// the connection reported `idle-timeout`.
#[test]
fn relay_idle_timeout_closes_a_quiet_unix_connection() {
    let rig = Rig::new();
    let sock = rig.path("r.sock");
    // The backend: accepts, reads what comes until the relay closes (or resets) it.
    let backend = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let target = backend.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = backend.accept() {
            let _ = std::io::copy(&mut s, &mut std::io::sink());
        }
    });
    let running = rig.relay(&[
        "--once",
        "--idle-timeout",
        "300ms",
        &format!("unix-listen:{}", sock.display()),
        &format!("tcp:{target}"),
    ]);
    let mut client = std::os::unix::net::UnixStream::connect(running.addr()).unwrap();
    client.write_all(b"hello").unwrap();
    let end = running.finish();
    drop(client);
    // relay counts a connection its idle timeout closed as failed (exit 1 under --once),
    // as it always has; pipe and tee, whose whole run is the one stream, end cleanly.
    end.assert_code(1, "relay --idle-timeout unix");
    let conn = &end.connections()[0];
    assert_eq!(conn["ended"], "idle-timeout", "{conn}");
}

/// `relay --linger` (nc -q): stdin ends, the server reads everything and never answers nor
/// closes; the connection ends cleanly that long after, every byte delivered (exit 0,
/// `ended: linger`). The same for a listener whose client half-closes.
#[test]
fn relay_linger_ends_a_connection_whose_other_direction_never_ends() {
    use std::io::Read;
    // A server that reads to EOF, keeps what it got, and then holds the connection open.
    let server = |n: usize| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let got = std::thread::spawn(move || {
            (0..n)
                .map(|_| {
                    let (mut s, _) = listener.accept().unwrap();
                    let mut got = Vec::new();
                    s.read_to_end(&mut got).unwrap();
                    // Returned, so held open (never closed by the server) until the test ends.
                    (got, s)
                })
                .collect::<Vec<_>>()
        });
        (addr, got)
    };
    let (addr, got) = server(2);
    let payload = Arc::new(data(200_000));
    let mut rig = Rig::new();
    let stdin = rig.stdin(payload.clone(), Pace::Full);
    let end = rig
        .args(["relay", "--linger", "300ms", &stdin, &format!("tcp:{addr}")])
        .run();
    end.assert_code(0, "relay --linger -");
    let conn = &end.connections()[0];
    assert_eq!(conn["ended"], "linger", "{conn}");

    let rig = Rig::new();
    let running = rig.relay(&[
        "--once",
        "--linger",
        "300ms",
        "tcp-listen:0",
        &format!("tcp:{addr}"),
    ]);
    let mut client = TcpStream::connect(running.addr()).unwrap();
    client.write_all(&payload).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let end = running.finish();
    let mut rest = Vec::new();
    let _ = client.read_to_end(&mut rest);
    assert!(rest.is_empty(), "the server sent nothing");
    end.assert_code(0, "relay --linger tcp-listen");
    assert_eq!(end.connections()[0]["ended"], "linger");
    for (i, (bytes, _held)) in got.join().unwrap().iter().enumerate() {
        assert_bytes_eq(bytes, &payload, &format!("connection {i} at the server"));
    }
}
