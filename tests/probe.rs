//! `zerocat probe` (nc -z, wait-for-it) against real loopback listeners: open, refused,
//! filtered (a listener whose backlog is full: its SYNs are dropped) and late ones.

use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixListener;
use std::process::Output;
use std::time::Duration;

use crate::util::*;

fn probe(args: &[&str]) -> Output {
    let mut cmd = zerocat();
    cmd.arg("probe").args(args);
    run(cmd)
}

fn stdout_text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A listener whose accept queue is full (backlog 0, never accepting, filled with
/// connections until one is not answered): the kernel drops further SYNs, as a firewall's
/// DROP rule would. None when the queue would not fill.
fn full_listener() -> Option<(TcpListener, Vec<TcpStream>)> {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // std listens with 128; listen() again lowers the backlog of the same socket.
    // SAFETY: listen(2) on a socket we own.
    assert_eq!(unsafe { nix::libc::listen(listener.as_raw_fd(), 0) }, 0);
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    for _ in 0..8 {
        match TcpStream::connect_timeout(&addr, Duration::from_millis(300)) {
            Ok(s) => held.push(s),
            Err(_) => return Some((listener, held)),
        }
    }
    None
}

#[test]
fn probe_says_open_refused_and_timeout_and_exits_1_unless_all_are_open() {
    let open = TcpListener::bind("127.0.0.1:0").unwrap();
    let open_port = open.local_addr().unwrap().port();
    let dir = tempdir();
    let sock = dir.path().join("s.sock");
    let _unix = UnixListener::bind(&sock).unwrap();
    let open_target = format!("tcp:127.0.0.1:{open_port}");
    let unix_target = format!("unix:{}", sock.display());
    let refused_target = format!("tcp:127.0.0.1:{}", free_port());
    let missing = format!("unix:{}", dir.path().join("none.sock").display());

    // Every target open: exit 0, a line each, in the order given.
    let out = probe(&[&open_target, &unix_target]);
    let text = stdout_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr_text(&out));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].starts_with(&format!("{open_target} open (")),
        "{text}"
    );
    assert!(
        lines[1].starts_with(&format!("{unix_target} open (")),
        "{text}"
    );

    // -q: nothing on stdout or stderr, the exit code says it (a healthcheck).
    let out = probe(&["-q", &open_target]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");

    // One closed: exit 1, and the line says why.
    let out = probe(&[&open_target, &refused_target, &missing]);
    let text = stdout_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("{refused_target} refused (")) && text.contains("ECONNREFUSED"),
        "{text}"
    );
    assert!(
        text.contains(&format!("{missing} refused (")) && text.contains("ENOENT"),
        "{text}"
    );
    let out = probe(&["-q", &refused_target]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "{out:?}");

    // JSON lines.
    let out = probe(&["--stats", "json", &open_target, &refused_target]);
    let objects: Vec<serde_json::Value> = stdout_text(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objects.len(), 2);
    assert_eq!(objects[0]["state"], "open", "{objects:?}");
    assert_eq!(objects[0]["target"], open_target.as_str());
    assert_eq!(objects[1]["state"], "refused", "{objects:?}");
    assert_eq!(objects[1]["errno"], "ECONNREFUSED", "{objects:?}");

    // Filtered: the try ends at --connect-timeout, well inside the test's deadline.
    let Some((full, _held)) = full_listener() else {
        println!("SKIPPED: filtered port: a backlog-0 listener kept answering (no SYN dropped)");
        return;
    };
    let filtered = format!("tcp:{}", full.local_addr().unwrap());
    let out = probe(&["--connect-timeout", "300ms", &filtered, &open_target]);
    let text = stdout_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("{filtered} timeout (")) && text.contains("no answer within"),
        "{text}"
    );
    assert!(text.contains(&format!("{open_target} open (")), "{text}");
}

#[test]
fn a_port_range_probes_each_port_and_bad_ranges_are_usage_errors() {
    let open = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = open.local_addr().unwrap().port();
    // A range of 3 around the open port (the others are most likely closed).
    let (lo, hi) = (port.saturating_sub(1).max(1), port.saturating_add(1));
    let out = probe(&[&format!("tcp:127.0.0.1:{lo}-{hi}")]);
    let text = stdout_text(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), usize::from(hi - lo) + 1, "{text}");
    for (p, line) in (lo..=hi).zip(&lines) {
        assert!(line.starts_with(&format!("tcp:127.0.0.1:{p} ")), "{text}");
    }
    assert!(
        text.contains(&format!("tcp:127.0.0.1:{port} open")),
        "{text}"
    );

    for (arg, says) in [
        ("tcp:127.0.0.1:30-20", "backwards"),
        ("tcp:127.0.0.1:1-65536", "1-65535"),
        ("tcp:127.0.0.1:0-10", "1-65535"),
        ("tcp-listen:8080", "probe connects to"),
        ("tcp:127.0.0.1:80,retry=3", "--wait"),
    ] {
        let out = probe(&[arg]);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{arg}: {err}");
        assert!(err.contains(arg) && err.contains(says), "{arg}: {err}");
        assert!(out.stdout.is_empty(), "{arg}: nothing probed");
    }
}

/// A range wide enough for probe's poll loops on several threads, its sockets reused from
/// refused ports for the next: every port answers for itself, in order — the 20 listened
/// on open, every other refused (or listened on by something else since).
#[test]
fn a_wide_range_gives_each_port_its_own_answer() {
    const WIDTH: u16 = 400;
    // A block of ports all free now (each bound, then all but every 20th let go).
    let (lo, mut listeners) = (20_000..60_000)
        .step_by(usize::from(WIDTH))
        .find_map(|lo: u16| {
            let all: Option<Vec<TcpListener>> = (lo..lo + WIDTH)
                .map(|p| TcpListener::bind(("127.0.0.1", p)).ok())
                .collect();
            all.map(|l| (lo, l))
        })
        .expect("a free block of ports");
    let mut i = 0;
    listeners.retain(|_| {
        i += 1;
        (i - 1) % 20 == 0
    });
    let hi = lo + WIDTH - 1;
    let out = probe(&[&format!("tcp:127.0.0.1:{lo}-{hi}")]);
    let text = stdout_text(&out);
    assert_eq!(out.status.code(), Some(1), "not all open: {text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), usize::from(WIDTH), "{text}");
    for (p, line) in (lo..=hi).zip(&lines) {
        let ours = (p - lo) % 20 == 0;
        let want = match ours {
            true => "open",
            false => "refused",
        };
        let head = format!("tcp:127.0.0.1:{p} {want} (");
        // Another process took the port since it was let go.
        let taken = || !ours && TcpListener::bind(("127.0.0.1", p)).is_err();
        assert!(line.starts_with(&head) || taken(), "{line}\n{text}");
        if !ours && line.starts_with(&head) {
            assert!(line.ends_with(": ECONNREFUSED"), "{line}");
        }
    }
    drop(listeners);
}

#[test]
fn wait_retries_until_a_late_listener_is_up_or_the_time_runs_out() {
    let port = free_port();
    let target = format!("tcp:127.0.0.1:{port}");
    let mut cmd = zerocat();
    cmd.args(["probe", "--wait", "30s", &target]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let _late = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let out = wait_with_deadline(child, DEADLINE);
    let text = stdout_text(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr_text(&out));
    assert!(text.starts_with(&format!("{target} open (")), "{text}");
    assert!(text.contains(" tries)"), "more than one try: {text}");

    // Nobody comes: exit 1 once the wait is over, with the last try's answer.
    let target = format!("tcp:127.0.0.1:{}", free_port());
    let out = probe(&["--wait", "600ms", &target]);
    let text = stdout_text(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(&format!("{target} refused (")), "{text}");
}
