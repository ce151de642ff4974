//! `zerocat relay LISTENER B1 B2 …`: several upstreams under `--balance`, passive and
//! active health, the next upstream where no byte had moved and never after. Upstreams
//! written here greet with their name first (so a client knows which one it got before
//! it sends a byte), then echo; every byte compared, every byte an upstream received
//! counted (nothing sent twice).

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use serde_json::Value;

use crate::rig::{connections, Rig};
use crate::util::*;

/// What an upstream does with each connection.
#[derive(Clone, Copy)]
enum Kind {
    /// Greets after `delay`, then echoes to EOF.
    Greeter(Duration),
    /// Every other connection (the 1st, 3rd, …) reset at once (SO_LINGER 0) before a byte
    /// either way; the others greeted and echoed.
    Flapping,
    /// Reads a byte, then resets: a failure after bytes moved.
    ResetAfterAByte,
}

/// An upstream on 127.0.0.1: its address, and the bytes it received over all connections.
struct Upstream {
    addr: String,
    received: Arc<AtomicU64>,
}

fn upstream(name: &'static str, kind: Kind) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let received = Arc::new(AtomicU64::new(0));
    let counted = received.clone();
    thread::spawn(move || {
        for (n, s) in listener.incoming().enumerate() {
            let Ok(s) = s else { continue };
            let counted = counted.clone();
            match kind {
                Kind::Flapping if n % 2 == 0 => linger_zero(&s),
                Kind::Flapping => {
                    thread::spawn(move || greet_and_echo(s, name, Duration::ZERO, &counted));
                }
                Kind::Greeter(delay) => {
                    thread::spawn(move || greet_and_echo(s, name, delay, &counted));
                }
                Kind::ResetAfterAByte => {
                    thread::spawn(move || {
                        let mut s = s;
                        let mut one = [0u8; 1];
                        if let Ok(got) = s.read(&mut one) {
                            counted.fetch_add(got as u64, Ordering::SeqCst);
                        }
                        linger_zero(&s);
                    });
                }
            }
        }
    });
    Upstream { addr, received }
}

fn greet_and_echo(mut s: TcpStream, name: &str, delay: Duration, counted: &AtomicU64) {
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    thread::sleep(delay);
    if s.write_all(format!("{name}\n").as_bytes()).is_err() {
        return;
    }
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                counted.fetch_add(n as u64, Ordering::SeqCst);
                if s.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
    let _ = s.shutdown(Shutdown::Write);
}

/// An address where nothing listens: connecting is refused.
fn refusing() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

/// A client that waits for the greeting, then sends `len` bytes of its own and reads them
/// back; returns the upstream's name, after checking every byte.
fn client(addr: &str, seed: u64, len: usize) -> String {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut name = String::new();
    reader.read_line(&mut name).unwrap();
    assert!(
        name.ends_with('\n'),
        "client {seed}: no greeting ({name:?})"
    );
    let payload: Vec<u8> = data(len + seed as usize % 977)
        .iter()
        .map(|b| b.wrapping_add(seed as u8))
        .collect();
    let mut w = s.try_clone().unwrap();
    let sent = payload.clone();
    let sending = thread::spawn(move || {
        w.write_all(&sent).unwrap();
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut got = Vec::new();
    reader.read_to_end(&mut got).unwrap();
    sending.join().unwrap();
    assert_bytes_eq(&got, &payload, &format!("client {seed}"));
    name.trim_end().to_string()
}

/// The report's counts for upstream `i`: (served, failed).
fn counts(report: &Value, i: usize) -> (u64, u64) {
    let u = &report["upstreams"]["list"][i];
    (u["served"].as_u64().unwrap(), u["failed"].as_u64().unwrap())
}

/// FNV-1a of 127.0.0.1, as the relay hashes a client for source-hash.
fn loopback_hash() -> u64 {
    [127u8, 0, 0, 1]
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

const CLIENTS: u64 = 200;
const AT_ONCE: u64 = 20;
const LEN: usize = 8 * 1024;

/// Three upstreams (down, flapping, slow) under 200 clients, 20 at a time, with `balance`
/// and `--down-for 0` (each connection tries them afresh, so the counts follow the mode
/// alone): every byte back, every upstream's bytes received add up to what was sent once,
/// and the counts per upstream the report gives are the clients' own.
fn three_upstreams(balance: &str) -> (Value, [u64; 3]) {
    let down = refusing();
    let flapping = upstream("flapping", Kind::Flapping);
    let slow = upstream("slow", Kind::Greeter(Duration::from_millis(30)));
    let relay = Rig::new().relay(&[
        "--balance",
        balance,
        "--down-for",
        "0",
        "tcp-listen:0,backlog=256",
        &format!("tcp:{down}"),
        &format!("tcp:{}", flapping.addr),
        &format!("tcp:{}", slow.addr),
    ]);
    let names: Vec<String> = (0..AT_ONCE)
        .map(|t| {
            let addr = relay.addr().to_string();
            thread::spawn(move || {
                (0..CLIENTS / AT_ONCE)
                    .map(|k| client(&addr, t * 1000 + k, LEN))
                    .collect::<Vec<_>>()
            })
        })
        .flat_map(|h| h.join().unwrap())
        .collect();
    let end = relay.stop();
    end.assert_code(130, "relay");
    let report = end.report().clone();
    let got = |n: &str| names.iter().filter(|x| *x == n).count() as u64;
    let (flap_n, slow_n) = (got("flapping"), got("slow"));
    assert_eq!(flap_n + slow_n, CLIENTS, "{balance}: {names:?}");
    assert_eq!(
        counts(&report, 0).0,
        0,
        "{balance}: the down one served none"
    );
    assert_eq!(
        counts(&report, 1).0,
        flap_n,
        "{balance}: {}",
        report["upstreams"]
    );
    assert_eq!(
        counts(&report, 2).0,
        slow_n,
        "{balance}: {}",
        report["upstreams"]
    );
    assert_eq!(report["upstreams"]["no_upstream"], 0);
    let conns = connections(&report);
    assert_eq!(conns.len() as u64, CLIENTS);
    for c in conns {
        assert_eq!(c["ended"], "eof", "{c}");
        assert!(
            c["upstream_uri"].as_str().unwrap().starts_with("tcp:"),
            "{c}"
        );
    }
    // Nothing sent twice: what the upstreams received is what the clients sent, once.
    let sent: u64 = report["bytes_a_to_b"].as_u64().unwrap();
    let received = flapping.received.load(Ordering::SeqCst) + slow.received.load(Ordering::SeqCst);
    assert_eq!(received, sent, "{balance}");
    assert!(!crate::util::paths(&report).is_empty());
    (report, [0, flap_n, slow_n])
}

#[test]
fn failover_under_200_clients_takes_the_first_up_and_the_next_where_no_byte_moved() {
    let (report, [_, flap, slow]) = three_upstreams("failover");
    let (_, down_failed) = counts(&report, 0);
    let (_, flap_failed) = counts(&report, 1);
    // Every connection tried the down one first, then the flapping one: each reset there
    // went on to the slow one, and nothing else did.
    assert_eq!(down_failed, CLIENTS, "{}", report["upstreams"]);
    assert_eq!(slow, flap_failed, "{}", report["upstreams"]);
    assert!(flap > 0 && slow > 0, "{}", report["upstreams"]);
}

#[test]
fn round_robin_under_200_clients_spreads_over_those_up() {
    let (report, [_, flap, slow]) = three_upstreams("round-robin");
    // Turns start at each upstream in turn: a third at the down one and a third at the
    // flapping one go to the flapping one, whose resets (half) go to the slow one, as
    // does the third that starts there.
    assert!(flap >= CLIENTS / 8, "{}", report["upstreams"]);
    assert!(slow >= CLIENTS / 4, "{}", report["upstreams"]);
    let (_, down_failed) = counts(&report, 0);
    assert!(
        down_failed > 0 && down_failed < CLIENTS,
        "{}",
        report["upstreams"]
    );
}

#[test]
fn least_conn_under_200_clients_serves_everyone_on_those_up() {
    let (report, [_, flap, slow]) = three_upstreams("least-conn");
    assert!(flap > 0 && slow > 0, "{}", report["upstreams"]);
}

#[test]
fn source_hash_under_200_clients_keeps_one_address_on_its_upstream() {
    let (report, [_, flap, slow]) = three_upstreams("source-hash");
    // Every client is 127.0.0.1: all start at the same upstream.
    match loopback_hash() % 3 {
        // Down, or flapping: the flapping one serves half, its resets go to the slow one.
        0 | 1 => assert!(flap > 0 && slow > 0, "{}", report["upstreams"]),
        // The slow one: it serves them all.
        _ => assert_eq!((flap, slow), (0, CLIENTS), "{}", report["upstreams"]),
    }
}

#[test]
fn a_failed_upstream_is_skipped_for_down_for() {
    let down = refusing();
    let good = upstream("good", Kind::Greeter(Duration::ZERO));
    let relay = Rig::new().relay(&[
        "--down-for",
        "1h",
        "tcp-listen:0",
        &format!("tcp:{down}"),
        &format!("tcp:{}", good.addr),
    ]);
    for seed in 0..20 {
        assert_eq!(client(relay.addr(), seed, 100), "good");
    }
    let end = relay.stop();
    let report = end.report();
    // Tried once, then skipped.
    assert_eq!(counts(report, 0), (0, 1), "{}", report["upstreams"]);
    assert_eq!(counts(report, 1), (20, 0), "{}", report["upstreams"]);
    assert_eq!(report["upstreams"]["list"][0]["down"], true);
}

#[test]
fn every_upstream_down_closes_the_client_as_no_upstream() {
    let (x, y) = (refusing(), refusing());
    let relay = Rig::new().relay(&["tcp-listen:0", &format!("tcp:{x}"), &format!("tcp:{y}")]);
    for _ in 0..3 {
        let mut s = TcpStream::connect(relay.addr()).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut buf = Vec::new();
        match s.read_to_end(&mut buf) {
            Ok(_) => assert!(buf.is_empty()),
            Err(e) => assert_eq!(e.kind(), ErrorKind::ConnectionReset, "{e}"),
        }
    }
    let end = relay.stop();
    let report = end.report();
    assert_eq!(
        report["upstreams"]["no_upstream"], 3,
        "{}",
        report["upstreams"]
    );
    for c in connections(report) {
        assert_eq!(c["ended"], "no-upstream", "{c}");
    }
    // The first client tried both and marked them down; the next two found none up.
    assert_eq!(counts(report, 0), (0, 1));
    assert_eq!(counts(report, 1), (0, 1));
}

#[test]
fn an_upstream_that_resets_after_a_byte_moved_is_that_connections_failure_not_a_retry() {
    let resetting = upstream("resetting", Kind::ResetAfterAByte);
    let good = upstream("good", Kind::Greeter(Duration::ZERO));
    let relay = Rig::new().relay(&[
        "--down-for",
        "0",
        "tcp-listen:0",
        &format!("tcp:{}", resetting.addr),
        &format!("tcp:{}", good.addr),
    ]);
    for _ in 0..5 {
        let mut s = TcpStream::connect(relay.addr()).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        s.write_all(b"hello, only once").unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        assert!(buf.is_empty(), "{buf:?}");
    }
    let end = relay.stop();
    let report = end.report();
    // The good one never saw a byte: nothing was sent twice.
    assert_eq!(good.received.load(Ordering::SeqCst), 0);
    assert_eq!(counts(report, 1).0, 0, "{}", report["upstreams"]);
    for c in connections(report) {
        assert_eq!(c["ended"], "reset", "{c}");
        assert!(c["a_to_b"]["bytes"].as_u64().unwrap() > 0, "{c}");
    }
}

/// A listener whose accept queue is full and never drained: SYNs to it are dropped.
/// None when this kernel answers it anyway.
fn blackhole() -> Option<(String, Vec<TcpStream>, std::os::fd::OwnedFd)> {
    use nix::sys::socket::{self, AddressFamily, Backlog, SockFlag, SockType, SockaddrIn};
    use std::os::fd::AsRawFd;
    let fd = socket::socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    socket::bind(fd.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, 0)).unwrap();
    socket::listen(&fd, Backlog::new(0).unwrap()).unwrap();
    let addr: SockaddrIn = socket::getsockname(fd.as_raw_fd()).unwrap();
    let addr = format!("127.0.0.1:{}", addr.port());
    let mut held = Vec::new();
    for _ in 0..8 {
        match TcpStream::connect_timeout(&addr.parse().unwrap(), Duration::from_millis(300)) {
            Ok(s) => held.push(s),
            Err(_) => return Some((addr, held, fd)),
        }
    }
    None
}

#[test]
fn a_blackholed_upstream_times_out_and_the_next_serves() {
    let Some((hole, _held, _fd)) = blackhole() else {
        println!("SKIPPED: a listener with a full accept queue still answered SYNs here");
        return;
    };
    let good = upstream("good", Kind::Greeter(Duration::ZERO));
    let relay = Rig::new().relay(&[
        "--connect-timeout",
        "300ms",
        "--down-for",
        "0",
        "tcp-listen:0",
        &format!("tcp:{hole}"),
        &format!("tcp:{}", good.addr),
    ]);
    for seed in 0..3 {
        assert_eq!(client(relay.addr(), seed, 4096), "good");
    }
    let end = relay.stop();
    let report = end.report();
    assert_eq!(counts(report, 0), (0, 3), "{}", report["upstreams"]);
    assert_eq!(counts(report, 1), (3, 0), "{}", report["upstreams"]);
}

#[test]
fn check_interval_marks_a_dead_upstream_down_and_a_revived_one_up() {
    // A port that refuses now and listens later.
    let probe = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let good = upstream("good", Kind::Greeter(Duration::ZERO));
    let relay = Rig::new().relay(&[
        "--check-interval",
        "50ms",
        "--down-for",
        "1h",
        "tcp-listen:0",
        &format!("tcp:127.0.0.1:{port}"),
        &format!("tcp:{}", good.addr),
    ]);
    // Probed down before any client came: the first client never tries it.
    thread::sleep(Duration::from_millis(300));
    assert_eq!(client(relay.addr(), 1, 100), "good");
    // It comes up: the next probe says so, and failover takes it again.
    let revived = TcpListener::bind(format!("127.0.0.1:{port}"));
    let Ok(revived) = revived else {
        println!("SKIPPED: the port was taken meanwhile");
        return;
    };
    thread::spawn(move || {
        for s in revived.incoming().flatten() {
            thread::spawn(move || greet_and_echo(s, "revived", Duration::ZERO, &AtomicU64::new(0)));
        }
    });
    let mut got = String::new();
    for seed in 2..100 {
        got = client(relay.addr(), seed, 100);
        if got == "revived" {
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(got, "revived");
    relay.signal(nix::sys::signal::Signal::SIGUSR1);
    let end = relay.stop();
    assert!(
        end.stderr.contains("upstreams (failover)"),
        "{}",
        end.stderr
    );
    let report = end.report();
    assert_eq!(counts(report, 0).1, 0, "{}", report["upstreams"]);
}

#[test]
fn usage_errors_for_several_upstreams_come_before_any_listener() {
    let cases: &[&[&str]] = &[
        &[
            "relay",
            "tcp-listen:0",
            "tcp:127.0.0.1:9",
            "udp:127.0.0.1:9",
        ],
        &[
            "relay",
            "udp-listen:0",
            "udp:127.0.0.1:9",
            "tcp:127.0.0.1:9",
        ],
        &[
            "relay",
            "--balance",
            "source-hash",
            "unix-listen:@zc-up",
            "tcp:127.0.0.1:9",
            "tcp:127.0.0.1:10",
        ],
        &[
            "relay",
            "--balance",
            "round-robin",
            "tcp-listen:0",
            "tcp:127.0.0.1:9",
        ],
        &[
            "relay",
            "tcp:127.0.0.1:8",
            "tcp:127.0.0.1:9",
            "tcp:127.0.0.1:10",
        ],
        &["relay", "tcp-listen:0", "tcp:127.0.0.1:9", "tcp-listen:0"],
        &[
            "relay",
            "--exit-idle",
            "1s",
            "tcp-listen:0",
            "tcp:127.0.0.1:9",
        ],
    ];
    for args in cases {
        let mut cmd = zerocat();
        cmd.args(*args);
        let out = run(cmd);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("listening"), "{args:?}: {err}");
    }
}

#[test]
fn unix_and_exec_upstreams_fail_over_like_tcp() {
    let dir = tempdir();
    let missing = dir.path().join("nobody-listens.sock");
    let relay = Rig::new().relay(&[
        "tcp-listen:0",
        &format!("unix:{}", missing.display()),
        "sh:printf 'exec\\n'; exec cat",
    ]);
    for seed in 0..3 {
        assert_eq!(client(relay.addr(), seed, 70_000), "exec");
    }
    let end = relay.stop();
    let report = end.report();
    assert_eq!(counts(report, 0), (0, 1), "{}", report["upstreams"]);
    assert_eq!(counts(report, 1), (3, 0), "{}", report["upstreams"]);
    for c in connections(report) {
        assert_eq!(c["ended"], "eof", "{c}");
    }
}

/// A UDP upstream that answers each datagram with its name and the datagram.
fn udp_named(name: &'static str) -> String {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap().to_string();
    thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            let mut answer = format!("{name}:").into_bytes();
            answer.extend_from_slice(&buf[..n]);
            let _ = socket.send_to(&answer, from);
        }
    });
    addr
}

#[test]
fn a_udp_session_picks_its_upstream_once() {
    let (x, y) = (udp_named("x"), udp_named("y"));
    let relay = Rig::new().relay(&[
        "--balance",
        "round-robin",
        "udp-listen:0",
        &format!("udp:{x}"),
        &format!("udp:{y}"),
    ]);
    let mut seen = Vec::new();
    for client in 0..4u8 {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_read_timeout(Some(DEADLINE)).unwrap();
        socket.connect(relay.addr()).unwrap();
        let mut names = Vec::new();
        for k in 0..3u8 {
            socket.send(&[client, k]).unwrap();
            let mut buf = [0u8; 64];
            let n = socket.recv(&mut buf).unwrap();
            let (name, rest) = buf[..n].split_at(2);
            assert_eq!(rest, [client, k], "whole, in order");
            names.push(name.to_vec());
        }
        assert!(
            names.iter().all(|n| *n == names[0]),
            "one upstream a session: {names:?}"
        );
        seen.push(names[0].clone());
    }
    // Round-robin: the sessions alternate.
    assert_eq!(seen, [b"x:", b"y:", b"x:", b"y:"].map(|n| n.to_vec()));
    let end = relay.stop();
    let report = end.report();
    assert_eq!(counts(report, 0).0, 2, "{}", report["upstreams"]);
    assert_eq!(counts(report, 1).0, 2, "{}", report["upstreams"]);
}

#[test]
fn a_tls_upstream_whose_handshake_fails_goes_on_to_the_next() {
    let Some(pki) = crate::tls::Pki::make() else {
        println!("SKIPPED: openssl is not installed (apt-get install openssl)");
        return;
    };
    // The first speaks no TLS (it greets in plaintext at once): the handshake fails before
    // a byte of the stream moved. The second is a TLS terminator in front of a greeter.
    let plain = upstream("plain", Kind::Greeter(Duration::ZERO));
    let behind = upstream("tls", Kind::Greeter(Duration::ZERO));
    let terminator = Rig::new().relay(&[
        &format!(
            "tls-listen:0,cert={},key={}",
            pki.path("server.pem"),
            pki.path("server.key")
        ),
        &format!("tcp:{}", behind.addr),
    ]);
    let port = |addr: &str| addr.rsplit(':').next().unwrap().to_string();
    let ca = pki.path("ca.pem");
    let relay = Rig::new().relay(&[
        "--down-for",
        "0",
        "tcp-listen:0",
        &format!("tls:localhost:{},cafile={ca}", port(&plain.addr)),
        &format!("tls:localhost:{},cafile={ca}", port(terminator.addr())),
    ]);
    for seed in 0..3 {
        assert_eq!(client(relay.addr(), seed, 50_000), "tls");
    }
    let end = relay.stop();
    let report = end.report();
    assert_eq!(counts(report, 0), (0, 3), "{}", report["upstreams"]);
    assert_eq!(counts(report, 1), (3, 0), "{}", report["upstreams"]);
    for c in connections(report) {
        assert_eq!(c["ended"], "eof", "{c}");
    }
    // The plaintext one got handshakes only, never a client's bytes.
    assert!(plain.received.load(Ordering::SeqCst) < 3 * 2048);
    drop(terminator.stop());
}

#[test]
fn dump_keeps_both_directions_of_a_connection_that_went_on_to_the_next_upstream() {
    let flapping = upstream("flapping", Kind::Flapping);
    let rig = Rig::new();
    let dump = rig.path("dump");
    let relay = rig
        .args(["--dump"])
        .arg(&dump)
        .args(["--dump-format", "text"])
        .relay(&[
            "--once",
            "--down-for",
            "0",
            "tcp-listen:127.0.0.1:0",
            &format!("tcp:{}", flapping.addr),
            &format!("tcp:{}", flapping.addr),
        ]);
    // The first try is reset at once, the second greets: the client's one connection.
    assert_eq!(client(relay.addr(), 7, 3000), "flapping");
    let end = relay.finish();
    end.assert_code(0, "relay");
    let report = end.report();
    assert_eq!(counts(report, 0), (0, 1), "{}", report["upstreams"]);
    let text = String::from_utf8_lossy(&std::fs::read(&dump).unwrap()).into_owned();
    assert!(
        text.contains("flapping"),
        "the greeting (b -> a) is in the dump: {text}"
    );
}
