//! `udp:` and `udp-listen:` in `pipe`: one read is one datagram, datagrams arrive in order
//! and whole, the first peer of a `udp-listen:` source is the only one heard, netcat's
//! `nc -u` talks to zerocat both ways, and bad UDP arguments are usage errors.

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::rig::{Pace, Rig};
use crate::util::{assert_bytes_eq, data, run, stderr_text, zerocat, DEADLINE};

/// A UDP socket on 127.0.0.1 that the test reads: returns it and `udp:ADDR`.
fn udp_sink() -> (UdpSocket, String) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    (socket, format!("udp:{addr}"))
}

/// The datagrams `socket` receives until `total` bytes came.
fn datagrams(socket: &UdpSocket, total: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut held = 0;
    let mut buf = vec![0u8; 65_536];
    while held < total {
        let n = socket.recv(&mut buf).expect("a datagram within 10 s");
        held += n;
        got.push(buf[..n].to_vec());
    }
    got
}

pub fn udp_peer() -> UdpSocket {
    UdpSocket::bind("127.0.0.1:0").unwrap()
}

#[test]
fn a_file_into_udp_is_one_datagram_per_read_of_at_most_65507_bytes() {
    // Two datagrams: the loopback receive buffer (rmem_default) holds both unread.
    let payload = data(100_000);
    let (socket, dst) = udp_sink();
    let rig = Rig::new();
    let src = rig.file("src.bin", &payload);
    let run = rig.args(["pipe", &src, &dst]).run();
    run.assert_code(0, "pipe file udp");
    run.assert_final_path("userspace", "pipe file udp");
    assert_eq!(run.report()["dst"]["kind"], "datagram", "{}", run.report());
    let got = datagrams(&socket, payload.len());
    let sizes: Vec<usize> = got.iter().map(Vec::len).collect();
    assert_eq!(sizes, [65_507, 100_000 - 65_507], "datagram sizes");
    assert_bytes_eq(&got.concat(), &payload, "pipe file udp");
}

#[test]
fn size_caps_each_datagram() {
    let payload = data(10_000);
    let (socket, dst) = udp_sink();
    let rig = Rig::new();
    let src = rig.file("src.bin", &payload);
    let dst = format!("{dst},SIZE=1400");
    let run = rig.args(["pipe", &src, &dst]).run();
    run.assert_code(0, "pipe file udp,size=1400");
    run.assert_final_path("userspace", "pipe file udp,size=1400");
    let got = datagrams(&socket, payload.len());
    let sizes: Vec<usize> = got.iter().map(Vec::len).collect();
    let mut want = vec![1400; 7];
    want.push(10_000 - 7 * 1400);
    assert_eq!(sizes, want, "datagram sizes");
    assert_bytes_eq(&got.concat(), &payload, "pipe file udp,size=1400");
}

#[test]
fn stdin_lines_into_udp_keep_their_bounds() {
    // A slow writer: each write reaches zerocat as its own read, so its own datagram.
    let line = b"0123456789abcdef\n".to_vec();
    let payload: Vec<u8> = line.repeat(5);
    let (socket, dst) = udp_sink();
    let mut rig = Rig::new();
    let src = rig.stdin(
        Arc::new(payload.clone()),
        Pace::Slow {
            chunk: line.len(),
            pause: Duration::from_millis(30),
        },
    );
    let run = rig.args(["pipe", &src, &dst]).run();
    run.assert_code(0, "pipe stdin udp");
    run.assert_final_path("userspace", "pipe stdin udp");
    let got = datagrams(&socket, payload.len());
    assert!(
        got.iter().all(|d| d.len() % line.len() == 0),
        "a datagram split a line: {:?}",
        got.iter().map(Vec::len).collect::<Vec<_>>()
    );
    assert_bytes_eq(&got.concat(), &payload, "pipe stdin udp");
}

#[test]
fn udp_listen_takes_the_first_peer_only_and_an_empty_datagram_ends_it() {
    let mut rig = Rig::new();
    let dst = rig.file_sink(rig.path("out.bin"));
    let mut running = rig.args(["pipe", "udp-listen:0", &dst]).listen();
    let addr = running.addr().to_string();
    let (first, other) = (udp_peer(), udp_peer());
    first.send_to(b"one\n", &addr).unwrap();
    running.wait_for_sink(0, 4);
    other.send_to(b"intruder\n", &addr).unwrap();
    first.send_to(b"two\n", &addr).unwrap();
    running.wait_for_sink(0, 8);
    first.send_to(b"", &addr).unwrap();
    let run = running.finish();
    run.assert_code(0, "pipe udp-listen file");
    run.assert_final_path("userspace", "pipe udp-listen file");
    assert_eq!(run.report()["src"]["kind"], "datagram", "{}", run.report());
    run.assert_held(0, b"one\ntwo\n", "pipe udp-listen file");
}

/// A UDP port that was free a moment ago (netcat needs a number to listen on).
pub fn free_udp_port() -> u16 {
    udp_peer().local_addr().unwrap().port()
}

pub fn nc_missing() -> bool {
    let missing = Command::new("nc")
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err();
    if missing {
        eprintln!("SKIPPED: nc is not installed; .ci/run installs netcat-openbsd");
    }
    missing
}

#[test]
fn netcat_u_listen_receives_what_zerocat_sends() {
    if nc_missing() {
        return;
    }
    let payload = data(3000);
    let port = free_udp_port();
    let nc = Command::new("nc")
        .args(["-u", "-l", "-W", "1", "127.0.0.1", &port.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // nc binds after it starts: resend until it answers by exiting (one datagram, -W 1).
    let rig = Rig::new();
    let src = rig.file("src.bin", &payload);
    let started = Instant::now();
    let mut nc = nc;
    loop {
        let out = run({
            let mut c = zerocat();
            c.args([
                "--stats",
                "json",
                "pipe",
                &src,
                &format!("udp:127.0.0.1:{port}"),
            ]);
            c
        });
        assert_eq!(out.status.code(), Some(0), "{}", stderr_text(&out));
        assert_eq!(
            crate::util::final_path(&crate::util::json_report(&out.stderr)),
            "userspace"
        );
        if nc.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "nc -u -l never got a datagram"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = nc.wait_with_output().unwrap();
    assert_bytes_eq(&out.stdout, &payload, "nc -u -l from zerocat");
}

#[test]
fn zerocat_udp_listen_receives_what_netcat_u_sends() {
    if nc_missing() {
        return;
    }
    let payload = data(1000);
    let mut rig = Rig::new();
    let dst = rig.file_sink(rig.path("out.bin"));
    let mut running = rig.args(["pipe", "udp-listen:0", &dst]).listen();
    let port = running.addr().rsplit(':').next().unwrap().to_string();
    let mut nc = Command::new("nc")
        .args(["-u", "-q", "0", "127.0.0.1", &port])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::io::Write::write_all(nc.stdin.as_mut().unwrap(), &payload).unwrap();
    drop(nc.stdin.take());
    running.wait_for_sink(0, payload.len() as u64);
    let _ = nc.wait();
    // Nothing ends a UDP stream but an empty datagram (nc sends none) or a signal.
    running.signal(nix::sys::signal::Signal::SIGINT);
    let run = running.finish();
    run.assert_code(130, "pipe udp-listen file, interrupted");
    run.assert_final_path("userspace", "pipe udp-listen file");
    run.assert_held(0, &payload, "zerocat from nc -u");
}

#[test]
fn bad_udp_arguments_are_usage_errors_naming_the_argument() {
    for args in [
        ["pipe", "-", "udp:127.0.0.1:0"],
        ["pipe", "-", "udp:127.0.0.1:65536"],
        ["pipe", "-", "udp:127.0.0.1"],
        ["pipe", "-", "udp-listen:0"],
        ["relay", "tcp-listen:0", "udp:127.0.0.1:9"],
        ["pipe", "-", "UDP:127.0.0.1:x"],
        ["pipe", "-", "udp:127.0.0.1:9,size=0"],
        ["pipe", "-", "udp:127.0.0.1:9,size=65508"],
        ["pipe", "-", "udp:127.0.0.1:9,size"],
        ["pipe", "-", "udp:127.0.0.1:9,backlog=3"],
    ] {
        let out = run({
            let mut c = zerocat();
            c.args(args);
            c
        });
        let text = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(args[2]), "{args:?} not named: {text}");
        assert!(!text.contains("listening on"), "{args:?} opened: {text}");
    }
    let out = run({
        let mut c = zerocat();
        c.args(["pipe", "-", "upd:127.0.0.1:9"]);
        c
    });
    assert!(
        stderr_text(&out).contains("did you mean 'udp'"),
        "{}",
        stderr_text(&out)
    );
}

#[test]
fn a_datagram_socket_is_never_spliced() {
    let (_socket, dst) = udp_sink();
    let out = run({
        let mut c = zerocat();
        c.args(["--via", "splice", "pipe", "-", &dst]);
        c
    });
    let text = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("datagram"), "{text}");
}

/// A UDP server on 127.0.0.1 that answers each datagram with its bytes reversed, until
/// the test ends (its thread stops after a second of silence once `stop` is set).
pub fn udp_echo() -> (String, Arc<std::sync::atomic::AtomicU64>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    // Several clients in lock-step can each have a 64 KiB datagram waiting here at once;
    // rmem_default (208 KiB) holds fewer than three of them as the relay sends them, and
    // a slow echo thread on a loaded machine then lost one (seen in /proc/net/udp drops).
    // The kernel caps this at rmem_max and doubles it: 416 KiB even at the default cap.
    nix::sys::socket::setsockopt(&socket, nix::sys::socket::sockopt::RcvBuf, &(1 << 20)).unwrap();
    let addr = socket.local_addr().unwrap();
    let heard = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let count = heard.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        let mut quiet = Instant::now();
        while quiet.elapsed() < Duration::from_secs(20) {
            if let Ok((n, from)) = socket.recv_from(&mut buf) {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let answer: Vec<u8> = buf[..n].iter().rev().copied().collect();
                let _ = socket.send_to(&answer, from);
                quiet = Instant::now();
            }
        }
    });
    (format!("udp:{addr}"), heard)
}

/// Datagrams the kernel dropped on arrival at the local UDP socket of `uri`
/// (`udp:127.0.0.1:PORT`), as /proc/net/udp counts them.
fn receive_drops(uri: &str) -> Option<u64> {
    let port: u16 = uri.rsplit(':').next()?.parse().ok()?;
    let local = format!("0100007F:{port:04X}");
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    let line = table
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(&local))?;
    line.split_whitespace().last()?.parse().ok()
}

/// A client of the relay at `addr`: each payload sent, its answer awaited (lock-step, so
/// no datagram is lost to a full buffer on loopback). The wait is generous: only a lost
/// datagram misses it, never a loaded machine.
fn ask(addr: &str, payloads: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let socket = udp_peer();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    socket.connect(addr).unwrap();
    let mut buf = vec![0u8; 65_536];
    payloads
        .iter()
        .map(|p| {
            socket.send(p).unwrap();
            let n = socket.recv(&mut buf).expect("an answer within 30 s");
            buf[..n].to_vec()
        })
        .collect()
}

#[test]
fn relay_gives_each_client_a_session_and_passes_datagrams_whole_both_ways() {
    let (target, heard) = udp_echo();
    let relay = Rig::new().relay(&["udp-listen:0", &target]);
    let sizes = [0usize, 1, 1400, 9000, 65_507];
    let clients: Vec<_> = (0..3)
        .map(|c| {
            let addr = relay.addr().to_string();
            std::thread::spawn(move || {
                let payloads: Vec<Vec<u8>> = (0..20)
                    .map(|i| {
                        let mut p = data(sizes[i % sizes.len()]);
                        if let Some(b) = p.first_mut() {
                            *b = c as u8;
                        }
                        p
                    })
                    .collect();
                for (sent, got) in payloads.iter().zip(ask(&addr, &payloads)) {
                    let want: Vec<u8> = sent.iter().rev().copied().collect();
                    assert_bytes_eq(&got, &want, &format!("client {c}"));
                }
                payloads.iter().map(|p| p.len() as u64).sum::<u64>()
            })
        })
        .collect();
    let joined: Vec<_> = clients.into_iter().map(|c| c.join()).collect();
    let end = relay.stop();
    let report = end.report();
    let total: u64 = joined
        .into_iter()
        .map(|j| {
            j.unwrap_or_else(|_| {
                let heard = heard.load(std::sync::atomic::Ordering::SeqCst);
                let drops = receive_drops(&target);
                panic!(
                    "a client failed; the target heard {heard} datagrams and its socket \
                     dropped {drops:?}; relay: {report}"
                )
            })
        })
        .sum();
    end.assert_code(130, "relay");
    assert_eq!(end.connections().len(), 3, "a session per client: {report}");
    assert_eq!(report["bytes_a_to_b"].as_u64(), Some(total), "{report}");
    assert_eq!(report["bytes_b_to_a"].as_u64(), Some(total), "{report}");
    assert_eq!(report["datagrams"]["a_to_b"], 60, "{report}");
    assert_eq!(report["datagrams"]["b_to_a"], 60, "{report}");
    assert_eq!(report["datagrams"]["mmsg"], true, "{report}");
    end.assert_final_path("userspace", "datagrams");
    let peers: std::collections::HashSet<&str> = end
        .connections()
        .iter()
        .map(|c| c["peer"].as_str().unwrap())
        .collect();
    assert_eq!(peers.len(), 3, "{report}");
}

#[test]
fn a_quiet_session_ends_after_the_idle_timeout_and_once_ends_the_relay() {
    let (target, _) = udp_echo();
    let relay = Rig::new().relay(&["--once", "--idle-timeout", "300ms", "udp-listen:0", &target]);
    let got = ask(relay.addr(), &[b"ping".to_vec()]);
    assert_eq!(got, [b"gnip".to_vec()]);
    // No signal: the session goes quiet, ends, and --once ends the run.
    let end = relay.finish();
    end.assert_code(0, "relay --once");
    let conn = &end.connections()[0];
    assert_eq!(conn["ended"], "quiet", "{conn}");
    assert_eq!(end.report()["failed"], 0);
}

#[test]
fn max_conns_bounds_the_sessions_and_counts_the_refused() {
    let (target, _) = udp_echo();
    let relay = Rig::new().relay(&["--max-conns", "1", "udp-listen:0", &target]);
    assert_eq!(ask(relay.addr(), &[b"ab".to_vec()]), [b"ba".to_vec()]);
    let second = udp_peer();
    second
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    second.connect(relay.addr()).unwrap();
    second.send(b"refused").unwrap();
    let mut buf = [0u8; 64];
    assert!(
        second.recv(&mut buf).is_err(),
        "a second session was opened"
    );
    let end = relay.stop();
    end.assert_code(130, "relay");
    assert_eq!(end.report()["datagrams"]["refused"], 1, "{}", end.report());
    assert_eq!(end.connections().len(), 1);
}

#[test]
fn netcat_u_talks_through_the_relay() {
    if nc_missing() {
        return;
    }
    let (target, _) = udp_echo();
    let relay = Rig::new().relay(&["udp-listen:0", &target]);
    let (host, port) = relay.addr().rsplit_once(':').unwrap();
    let mut nc = Command::new("nc")
        .args(["-u", "-w", "1", host, port])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    use std::io::Write;
    nc.stdin.as_mut().unwrap().write_all(b"hello\n").unwrap();
    let out = crate::util::wait_with_deadline(nc, Duration::from_secs(10));
    assert_eq!(out.stdout, b"\nolleh", "nc -u got the answer");
    let end = relay.stop();
    assert_eq!(end.report()["datagrams"]["b_to_a"], 1, "{}", end.report());
}

#[test]
fn a_burst_through_the_relay_arrives_in_order_and_whole_and_every_loss_is_counted() {
    // The target counts what it hears; the relay says what it took and passed on.
    let target = UdpSocket::bind("127.0.0.1:0").unwrap();
    target
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let relay = Rig::new().relay(&[
        "udp-listen:0",
        &format!("udp:{}", target.local_addr().unwrap()),
    ]);
    let sender = udp_peer();
    sender.connect(relay.addr()).unwrap();
    const SENT: u32 = 20_000;
    let receiving = std::thread::spawn(move || {
        let mut buf = vec![0u8; 2048];
        let mut last = None;
        let mut heard = 0u32;
        while let Ok(n) = target.recv(&mut buf) {
            assert_eq!(n, 1400, "a datagram cut or merged");
            let seq = u32::from_be_bytes(buf[..4].try_into().unwrap());
            assert!(
                buf[4..n].iter().all(|&b| b == seq as u8),
                "datagram {seq} altered"
            );
            assert!(
                last.is_none_or(|l| seq > l),
                "{seq} after {last:?}: reordered or repeated"
            );
            last = Some(seq);
            heard += 1;
        }
        heard
    });
    let mut sent = 0u64;
    for seq in 0..SENT {
        let mut p = vec![seq as u8; 1400];
        p[..4].copy_from_slice(&seq.to_be_bytes());
        sent += u64::from(sender.send(&p).is_ok());
    }
    let heard = receiving.join().unwrap();
    let end = relay.stop();
    let dg = &end.report()["datagrams"];
    let passed = dg["a_to_b"].as_u64().unwrap();
    let dropped = dg["dropped"].as_u64().unwrap();
    let lost = dg["lost_on_arrival"].as_u64().unwrap();
    eprintln!(
        "burst of {sent}: {lost} lost on arrival at the relay, which took {}, passed {passed}, \
         dropped {dropped}; the target heard {heard}",
        passed + dropped
    );
    assert_eq!(
        passed + dropped + lost,
        sent,
        "every datagram accounted for: {dg}"
    );
    // Runs of equal-size datagrams go out as GSO sends where the kernel takes them.
    assert!(
        dg["gso"] == true || dg["gso_refused"] == true,
        "neither GSO nor its refusal: {dg}"
    );
    if dg["gso_refused"] == true {
        eprintln!("SKIPPED (part): the kernel refused UDP GSO here: {dg}");
    }
    assert!(
        u64::from(heard) <= passed,
        "the target heard more than was passed: {dg}"
    );
    assert!(heard > 0, "nothing came through");
}

#[test]
fn relay_of_udp_with_a_stream_or_splice_is_a_usage_error() {
    for args in [
        vec!["relay", "udp-listen:0", "tcp:127.0.0.1:9"],
        vec!["relay", "tcp-listen:0", "udp:127.0.0.1:9"],
        vec!["relay", "udp-listen:0", "udp:127.0.0.1:9,size=100"],
        vec![
            "--via",
            "splice",
            "relay",
            "udp-listen:0",
            "udp:127.0.0.1:9",
        ],
    ] {
        let out = run({
            let mut c = zerocat();
            c.args(&args);
            c
        });
        let text = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(!text.contains("listening on"), "{args:?} opened: {text}");
    }
}

#[test]
fn a_udp_source_ends_after_the_idle_timeout() {
    let mut rig = Rig::new();
    let out = rig.path("out.bin");
    let sink = rig.file_sink(out);
    let running = rig
        .args(["pipe", "--idle-timeout", "400ms", "udp-listen:0", &sink])
        .listen();
    let peer = udp_peer();
    peer.connect(running.addr()).unwrap();
    let mut want = Vec::new();
    for i in 0..3u8 {
        let d = vec![i; 1000 + usize::from(i)];
        peer.send(&d).unwrap();
        want.extend(d);
        std::thread::sleep(Duration::from_millis(50));
    }
    let quiet_from = Instant::now();
    // No empty datagram, no signal: the silence ends it.
    let end = running.finish();
    assert!(
        quiet_from.elapsed() < Duration::from_secs(5),
        "it waited on"
    );
    end.assert_code(0, "pipe --idle-timeout");
    end.assert_held(0, &want, "the datagrams");
    end.assert_final_path("userspace", "udp");
}

/// A datagram longer than the sink's `,size=N` was cut to N bytes and the rest dropped
/// (the read was only N long); it is sent on in pieces of at most N, nothing lost.
#[test]
fn a_datagram_longer_than_the_sinks_size_goes_on_in_pieces_not_cut() {
    let (sink, sink_arg) = udp_sink();
    let mut cmd = zerocat();
    cmd.args([
        "--stats",
        "json",
        "pipe",
        "--idle-timeout",
        "500ms",
        "udp-listen:0",
    ])
    .arg(format!("{sink_arg},size=100"))
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let (addr, stderr) = crate::util::listening_addr(&mut child);
    let peer = udp_peer();
    peer.connect(&addr).unwrap();
    let payload = data(1400);
    peer.send(&payload).unwrap();
    let got = datagrams(&sink, payload.len());
    let status = child.wait().unwrap();
    let _ = stderr.join();
    assert!(status.success());
    assert!(
        got.iter().all(|d| d.len() <= 100),
        "a datagram over 100 bytes"
    );
    assert_bytes_eq(&got.concat(), &payload, "the datagram in pieces");
}
