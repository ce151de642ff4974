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

fn udp_peer() -> UdpSocket {
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
fn free_udp_port() -> u16 {
    udp_peer().local_addr().unwrap().port()
}

fn nc_missing() -> bool {
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
