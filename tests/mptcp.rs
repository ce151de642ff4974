//! `,mptcp` on `tcp:` and `tcp-listen:`: MPTCP sockets where the kernel makes them, plain
//! TCP where it refuses (the errno in the report) or the peer has no MPTCP ("peer"), and
//! the stream still spliced or sendfile'd either way.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::path::Path;
use std::thread;

use nix::libc;
use serde_json::Value;

use crate::rig::*;
use crate::util::*;

const IPPROTO_MPTCP: libc::c_int = 262;

/// True (the reason printed) when this kernel makes no MPTCP sockets: the tests that need
/// MPTCP to run skip then; the fallback tests still run.
fn mptcp_missing() -> bool {
    match std::fs::read_to_string("/proc/sys/net/mptcp/enabled") {
        Ok(v) if v.trim() == "1" => false,
        Ok(v) => {
            eprintln!("SKIPPED: net.mptcp.enabled is {} here", v.trim());
            true
        }
        Err(e) => {
            eprintln!("SKIPPED: no MPTCP in this kernel (/proc/sys/net/mptcp/enabled: {e})");
            true
        }
    }
}

/// An MPTCP socket of the test's own (std has none), connected to `addr` (127.0.0.1:PORT).
fn mptcp_connect(addr: &str) -> TcpStream {
    // SAFETY: socket(2) with integer arguments; the fd becomes the stream's alone.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, IPPROTO_MPTCP) };
    assert!(fd >= 0, "socket(IPPROTO_MPTCP)");
    let (host, port) = addr.rsplit_once(':').unwrap();
    assert_eq!(host, "127.0.0.1");
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.parse::<u16>().unwrap().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a sockaddr_in of its own size.
    let ret = unsafe {
        libc::connect(
            fd,
            std::ptr::addr_of!(sin).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(
        ret,
        0,
        "connect to {addr}: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: the fd was just made and is owned by nothing else.
    unsafe { TcpStream::from_raw_fd(fd) }
}

/// The `mptcp` object of a report's endpoint (`src`, `dst`).
fn mptcp_of<'a>(report: &'a Value, end: &str) -> &'a Value {
    &report[end]["mptcp"]
}

/// A receiving `zerocat pipe tcp-listen:0,mptcp FILE` and its sender `zerocat pipe FILE
/// tcp:ADDR,mptcp`: both ends MPTCP, bytes exact, the sender's path sendfile and the
/// receiver's splice, both reports saying MPTCP ran.
#[test]
fn mptcp_both_ends_carry_a_file_by_sendfile_and_splice() {
    if mptcp_missing() {
        return;
    }
    let payload = data(3 << 20);
    let mut receiver = Rig::new();
    let out = receiver.path("out");
    let out_arg = receiver.file_sink(out);
    let receiver = receiver
        .args(["pipe", "tcp-listen:0,mptcp", &out_arg])
        .listen();
    let sender = Rig::new();
    let src = sender.file("in", &payload);
    let sent = sender
        .args(["pipe", &src, &format!("tcp:{},mptcp", receiver.addr())])
        .run();
    sent.assert_code(0, "sender");
    sent.assert_final_path("sendfile", "file -> MPTCP socket");
    assert_eq!(
        mptcp_of(sent.report(), "dst"),
        &serde_json::json!({"active": true, "fallback": null}),
        "{}",
        sent.stderr
    );
    let got = receiver.finish();
    got.assert_code(0, "receiver");
    got.assert_held(0, &payload, "the file through MPTCP");
    got.assert_final_path("splice", "MPTCP socket -> file");
    assert_eq!(mptcp_of(got.report(), "src")["active"], true);
}

/// socket(IPPROTO_MPTCP) refused (ENOPROTOOPT, what `net.mptcp.enabled = 0` answers,
/// injected by strace): a plain TCP socket instead, before any byte moved, the errno in
/// the JSON report and in words in the text one; every byte arrives.
#[test]
fn a_refused_mptcp_socket_falls_back_to_tcp_and_says_the_errno() {
    if strace_missing() {
        return;
    }
    let payload = data(1 << 20);
    for json in [true, false] {
        let mut rig = if json { Rig::new() } else { Rig::bare() };
        let log = rig.path("strace.log");
        let src = rig.file("in", &payload);
        let dst = rig.tcp_sink(Pace::Full);
        let wrap = [
            "strace",
            "-f",
            "-qq",
            "-o",
            log.to_str().unwrap(),
            "-e",
            "trace=socket",
            "-e",
            "inject=socket:error=ENOPROTOOPT:when=1",
        ];
        let run = rig
            .under(wrap)
            .args(["pipe", &src, &format!("{dst},mptcp")])
            .run();
        run.assert_code(0, "fallback to TCP");
        run.assert_held(0, &payload, "the file through the fallback");
        let trace = std::fs::read_to_string(&log).unwrap();
        assert!(
            trace.contains("IPPROTO_MPTCP) = -1 ENOPROTOOPT") && trace.contains("(INJECTED)"),
            "the MPTCP socket was refused: {trace}"
        );
        assert!(
            trace.contains("SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_IP) = "),
            "then a plain TCP socket: {trace}"
        );
        if json {
            run.assert_final_path("sendfile", "file -> TCP socket");
            assert_eq!(
                mptcp_of(run.report(), "dst"),
                &serde_json::json!({"active": false, "fallback": "ENOPROTOOPT"}),
            );
        } else {
            assert!(
                run.stderr
                    .contains("file -> socket (tcp: mptcp refused, ENOPROTOOPT) via sendfile"),
                "{}",
                run.stderr
            );
        }
    }
}

/// An MPTCP connector whose peer is plain TCP (std's listener): the kernel falls back at
/// the handshake; the report says "peer", the bytes are whole.
#[test]
fn a_peer_without_mptcp_makes_the_connection_tcp_said_as_the_peer() {
    if mptcp_missing() {
        return;
    }
    let payload = data(1 << 20);
    let mut rig = Rig::new();
    let src = rig.file("in", &payload);
    let dst = rig.tcp_sink(Pace::Full);
    let run = rig.args(["pipe", &src, &format!("{dst},mptcp")]).run();
    run.assert_code(0, "plain peer");
    run.assert_held(0, &payload, "the file to a plain TCP peer");
    run.assert_final_path("sendfile", "file -> TCP socket");
    assert_eq!(
        mptcp_of(run.report(), "dst"),
        &serde_json::json!({"active": false, "fallback": "peer"}),
    );
}

/// `relay tcp-listen:0,mptcp tcp:ECHO,mptcp`: an MPTCP client through to an MPTCP echo
/// server and back, every byte, and the `--log` line says both sides ran MPTCP; a plain
/// client on the same listener is logged as "peer".
#[test]
fn relay_speaks_mptcp_on_both_sides_and_logs_what_ran() {
    if mptcp_missing() {
        return;
    }
    // The echo server: an MPTCP listener of the test's own, two connections.
    let echo = mptcp_listener();
    let echo_addr = echo.local_addr().unwrap().to_string();
    let echo_thread = thread::spawn(move || {
        for _ in 0..2 {
            let (mut s, _) = echo.accept().unwrap();
            let mut buf = Vec::new();
            s.read_to_end(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        }
    });
    let rig = Rig::new();
    let log = rig.path("conns.log");
    let relay = rig.relay(&[
        "--log",
        log.to_str().unwrap(),
        "tcp-listen:0,mptcp",
        &format!("tcp:{echo_addr},mptcp"),
    ]);
    let payload = data(2 << 20);
    // One client at a time: the echo server serves its connections in turn, so a second
    // client connected early could take its first turn and never send.
    for mptcp in [true, false] {
        let mut client = if mptcp {
            mptcp_connect(relay.addr())
        } else {
            TcpStream::connect(relay.addr()).unwrap()
        };
        let mut reader = client.try_clone().unwrap();
        let expect = payload.clone();
        let read = thread::spawn(move || {
            let mut got = Vec::new();
            reader.read_to_end(&mut got).unwrap();
            got
        });
        client.write_all(&payload).unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
        assert_bytes_eq(&read.join().unwrap(), &expect, "echo through the relay");
    }
    echo_thread.join().unwrap();
    let done = relay.stop();
    assert_eq!(done.connections().len(), 2, "{}", done.stderr);
    let lines = log_lines(&log);
    let conns: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] == "connection")
        .collect();
    assert_eq!(conns.len(), 2, "{lines:?}");
    assert_eq!(
        conns[0]["mptcp"],
        serde_json::json!({"a": {"active": true, "fallback": null},
                           "b": {"active": true, "fallback": null}})
    );
    assert_eq!(conns[1]["mptcp"]["a"]["fallback"], "peer");
    assert_eq!(conns[1]["mptcp"]["b"]["active"], true);
}

fn mptcp_listener() -> TcpListener {
    // SAFETY: socket(2) with integer arguments; the fd becomes the listener's alone.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, IPPROTO_MPTCP) };
    assert!(fd >= 0, "socket(IPPROTO_MPTCP)");
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a sockaddr_in of its own size; then listen on the bound fd.
    unsafe {
        assert_eq!(
            libc::bind(
                fd,
                std::ptr::addr_of!(sin).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ),
            0
        );
        assert_eq!(libc::listen(fd, 16), 0);
        TcpListener::from_raw_fd(fd)
    }
}

fn log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `mptcp` where it does not fit, or with a value: usage errors (exit 2) naming it, before
/// any fd opens.
#[test]
fn mptcp_where_it_does_not_fit_is_a_usage_error() {
    for (uri, says) in [
        ("unix:/tmp/x,mptcp", "option 'mptcp' does not apply to unix"),
        (
            "udp:127.0.0.1:9,mptcp",
            "option 'mptcp' does not apply to udp",
        ),
        ("tcp:127.0.0.1:9,mptcp=1", "option 'mptcp' is a flag"),
    ] {
        let out = zerocat().args(["pipe", "/dev/null", uri]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{uri}");
        let err = stderr_text(&out);
        assert!(err.contains(says), "{uri}: {err}");
    }
}
