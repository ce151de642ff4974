//! `pipe --keep-open` (nc -lk, ncat -k): one listener's connections into one sink, one at
//! a time, each whole; until a signal.

use std::io::Write;
use std::net::TcpStream;

use nix::sys::signal::Signal;

use crate::rig::*;
use crate::util::*;

/// Client `i`'s bytes: its own pattern, so a block out of place or cut shows.
pub(crate) fn client_bytes(i: usize, len: usize) -> Vec<u8> {
    let mut bytes = data(len + i);
    bytes.drain(..i);
    bytes[0] = i as u8;
    bytes
}

/// 20 clients at once into `file:log,append`: every client's bytes are in the log whole and
/// contiguous (no interleaving), the report counts 20 connections, SIGINT ends it (130).
#[test]
fn keep_open_takes_20_clients_whole_and_contiguous_into_one_log() {
    const CLIENTS: usize = 20;
    const LEN: usize = 300_000;
    let rig = Rig::new();
    let log = rig.path("log");
    std::fs::write(&log, b"before\n").unwrap();
    let mut running = rig
        .args(["pipe", "--keep-open", "tcp-listen:0"])
        .arg(format!("file:{},append", log.display()))
        .listen();
    send_all_at_once(running.addr(), CLIENTS, LEN);
    let want_len = (b"before\n".len() + CLIENTS * LEN) as u64;
    running.wait_until("the log", want_len, || {
        std::fs::metadata(&log).map_or(0, |m| m.len())
    });
    running.signal(Signal::SIGINT);
    let end = running.finish();
    end.assert_code(130, "keep-open ends at the signal");
    let report = end.report();
    assert_eq!(report["connections"], CLIENTS as u64, "{report}");
    assert_eq!(report["connections_cut"], 0, "{report}");
    assert_eq!(report["bytes"], (CLIENTS * LEN) as u64, "{report}");
    // splice refuses an O_APPEND file: userspace carries the bytes.
    end.assert_final_path("userspace", "socket -> O_APPEND log");
    let got = std::fs::read(&log).unwrap();
    assert!(got.starts_with(b"before\n"), "appended, not truncated");
    assert_whole_blocks(&got[b"before\n".len()..], CLIENTS, LEN);
}

/// `log` holds each of `clients` clients' bytes once, whole and contiguous, in any order.
pub(crate) fn assert_whole_blocks(log: &[u8], clients: usize, len: usize) {
    let mut rest = log;
    let mut seen = vec![false; clients];
    while !rest.is_empty() {
        let i = usize::from(rest[0]);
        assert!(i < clients && !seen[i], "a block that starts with {i}");
        let want = client_bytes(i, len);
        assert_bytes_eq(
            &rest[..want.len().min(rest.len())],
            &want,
            &format!("client {i}"),
        );
        seen[i] = true;
        rest = &rest[want.len()..];
    }
    assert!(seen.iter().all(|s| *s), "every client once: {seen:?}");
}

/// `tee --keep-open`: 10 clients at once, each one's bytes whole and contiguous in both
/// sinks, in the same order in each; the report counts the connections.
#[test]
fn tee_keep_open_gives_every_sink_each_client_whole() {
    const CLIENTS: usize = 10;
    const LEN: usize = 200_000;
    let rig = Rig::new();
    let (one, two) = (rig.path("one"), rig.path("two"));
    let mut running = rig
        .args(["tee", "--keep-open", "tcp-listen:0"])
        .arg(&one)
        .arg(&two)
        .listen();
    send_all_at_once(running.addr(), CLIENTS, LEN);
    let want_len = (CLIENTS * LEN) as u64;
    for sink in [&one, &two] {
        running.wait_until("a sink", want_len, || {
            std::fs::metadata(sink).map_or(0, |m| m.len())
        });
    }
    running.signal(Signal::SIGINT);
    let end = running.finish();
    end.assert_code(130, "keep-open ends at the signal");
    let report = end.report();
    assert_eq!(report["connections"], CLIENTS as u64, "{report}");
    assert_eq!(report["connections_cut"], 0, "{report}");
    assert_eq!(report["bytes"], want_len, "{report}");
    // The kernel fan-out: tee(2) into the first sink's pipe, the last spliced.
    for (sink, path) in [(0, "tee"), (1, "splice")] {
        assert_eq!(report["sinks"][sink]["bytes"], want_len, "{report}");
        assert_eq!(report["sinks"][sink]["paths"][0]["path"], path, "{report}");
    }
    let got = std::fs::read(&one).unwrap();
    assert_whole_blocks(&got, CLIENTS, LEN);
    assert_bytes_eq(&std::fs::read(&two).unwrap(), &got, "the second sink");
}

/// `--keep-open` on a source that is not a listener: a usage error naming it, nothing opened.
#[test]
fn keep_open_on_a_non_listener_is_a_usage_error() {
    let dir = tempdir();
    let out = dir.path().join("out");
    for (command, src) in [
        ("pipe", "tcp:127.0.0.1:9"),
        ("pipe", "-"),
        ("pipe", "udp-listen:0"),
        ("tee", "tcp:127.0.0.1:9"),
        ("tee", "-"),
    ] {
        let mut cmd = zerocat();
        cmd.args([command, "--keep-open", src]).arg(&out);
        let done = run(cmd);
        let err = stderr_text(&done);
        assert_eq!(done.status.code(), Some(2), "{src}: {err}");
        assert!(
            err.contains("--keep-open") && err.contains(src),
            "{src}: {err}"
        );
        assert!(!out.exists(), "{src}: the sink was created");
    }
}

/// `clients` clients connected at once, each sending `client_bytes(i, len)` in pieces (so a
/// second connection served at the same time would interleave), all done on return.
pub(crate) fn send_all_at_once(addr: &str, clients: usize, len: usize) {
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(&addr).unwrap();
                for piece in client_bytes(i, len).chunks(7_000) {
                    s.write_all(piece).unwrap();
                }
            })
        })
        .collect();
    for c in threads {
        c.join().unwrap();
    }
}
