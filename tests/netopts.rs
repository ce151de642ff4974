//! Where a connection leaves from and what its socket is set to (`bind=`, `tcp4:`, `-4`,
//! `keepalive`, `nodelay`, `sndbuf=`, `mark=`...), who may connect to a listener (`allow=`,
//! `deny=`, `allow-file=`), and what a listener's command child learns of its client
//! (`ZEROCAT_PEER_ADDR`...): on loopback, 127.0.0.1 against 127.0.0.2. Socket options are
//! read back from zerocat's own socket, taken into the test with pidfd_getfd(2).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::socket::{self, sockopt, SockaddrStorage};

use crate::rig::{connections, dir_paths, Finished, Rig};
use crate::util::*;

/// A TCP connection to `to` that leaves from `from` (an address of this machine: all of
/// 127.0.0.0/8 is loopback's).
fn connect_from(from: &str, to: &str) -> TcpStream {
    let to: SocketAddr = to.parse().unwrap();
    let fd = socket::socket(
        socket::AddressFamily::Inet,
        socket::SockType::Stream,
        socket::SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    let from: SocketAddr = format!("{from}:0").parse().unwrap();
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(from)).unwrap();
    socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(to)).unwrap();
    let stream = TcpStream::from(fd);
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    stream
}

/// Sends `payload`, half-closes, and returns all that comes back (None when the
/// connection was reset or closed before any byte: a refused client).
fn exchange(mut stream: TcpStream, payload: &[u8]) -> Option<Vec<u8>> {
    // A refused client's write may already meet the reset.
    let wrote = stream.write_all(payload).is_ok();
    let _ = stream.shutdown(Shutdown::Write);
    let mut back = Vec::new();
    match stream.read_to_end(&mut back) {
        Ok(_) if wrote && !back.is_empty() => Some(back),
        Ok(_) if payload.is_empty() => Some(back),
        _ => None,
    }
}

/// zerocat's socket whose local address is `local` (or, with None, its one connected TCP
/// socket), duplicated into the test by pidfd_getfd(2); None (with `SKIPPED:` printed)
/// where the kernel refuses that.
fn zerocat_socket(pidfd: &OwnedFd, pid: i32, local: Option<SocketAddr>) -> Option<OwnedFd> {
    let started = Instant::now();
    loop {
        for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .flatten()
        {
            let link = std::fs::read_link(entry.path()).unwrap_or_default();
            if !link.to_string_lossy().starts_with("socket:") {
                continue;
            }
            let target: RawFd = entry.file_name().to_string_lossy().parse().unwrap();
            // SAFETY: a pidfd, an fd number of that process, no flags.
            let raw = unsafe {
                nix::libc::syscall(nix::libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0)
            };
            if raw < 0 {
                eprintln!(
                    "SKIPPED: pidfd_getfd refused ({}): cannot read zerocat's socket options",
                    std::io::Error::last_os_error()
                );
                return None;
            }
            // SAFETY: pidfd_getfd just made this fd; it is ours alone.
            let fd = unsafe { OwnedFd::from_raw_fd(raw as RawFd) };
            let name = socket::getsockname::<SockaddrStorage>(fd.as_raw_fd()).ok();
            let name = name.and_then(|a| a.as_sockaddr_in().map(|v4| SocketAddr::V4((*v4).into())));
            let connected = socket::getpeername::<SockaddrStorage>(fd.as_raw_fd()).is_ok();
            let wanted = match local {
                Some(local) => name == Some(local),
                None => name.is_some() && connected,
            };
            if wanted {
                return Some(fd);
            }
        }
        assert!(started.elapsed() < DEADLINE, "zerocat never had the socket");
        thread::sleep(Duration::from_millis(5));
    }
}

/// The options every read-back test sets, and what the kernel reports for each.
const OPTIONS: &str = "nodelay,keepalive=30:5:4,sndbuf=64k,rcvbuf=64k,tos=0x10,ttl=9,mark=7";

fn assert_options(fd: &OwnedFd, what: &str) {
    let fd = fd.as_fd();
    assert!(
        socket::getsockopt(&fd, sockopt::TcpNoDelay).unwrap(),
        "{what}: TCP_NODELAY"
    );
    assert!(
        socket::getsockopt(&fd, sockopt::KeepAlive).unwrap(),
        "{what}: SO_KEEPALIVE"
    );
    assert_eq!(
        socket::getsockopt(&fd, sockopt::TcpKeepIdle).unwrap(),
        30,
        "{what}"
    );
    assert_eq!(
        socket::getsockopt(&fd, sockopt::TcpKeepInterval).unwrap(),
        5,
        "{what}"
    );
    assert_eq!(
        socket::getsockopt(&fd, sockopt::TcpKeepCount).unwrap(),
        4,
        "{what}"
    );
    // The kernel doubles what was asked (socket(7)), under net.core.[rw]mem_max.
    let wmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let sndbuf = socket::getsockopt(&fd, sockopt::SndBuf).unwrap();
    let rcvbuf = socket::getsockopt(&fd, sockopt::RcvBuf).unwrap();
    assert_eq!(sndbuf, 2 * (64 << 10).min(wmem_max), "{what}: SO_SNDBUF");
    assert_eq!(rcvbuf, 2 * (64 << 10).min(rmem_max), "{what}: SO_RCVBUF");
    assert_eq!(
        socket::getsockopt(&fd, sockopt::IpTos).unwrap(),
        0x10,
        "{what}: IP_TOS"
    );
    assert_eq!(
        socket::getsockopt(&fd, sockopt::Ipv4Ttl).unwrap(),
        9,
        "{what}: IP_TTL"
    );
    assert_eq!(
        socket::getsockopt(&fd, sockopt::Mark).unwrap(),
        7,
        "{what}: SO_MARK"
    );
}

#[test]
fn bind_is_the_source_address_the_server_sees() {
    let payload = data(1 << 20);
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let got = thread::spawn(move || {
        let (mut s, peer) = server.accept().unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        (peer, buf)
    });
    let rig = Rig::new();
    let src = rig.file("src.bin", &payload);
    let run = rig
        .args(["pipe", &src, &format!("tcp:{addr},bind=127.0.0.2")])
        .run();
    run.assert_code(0, "pipe to tcp:,bind=");
    let (peer, bytes) = got.join().unwrap();
    assert_eq!(peer.ip().to_string(), "127.0.0.2", "{}", run.stderr);
    assert_bytes_eq(&bytes, &payload, "pipe FILE tcp:,bind=127.0.0.2");
    run.assert_final_path("sendfile", "pipe FILE tcp:,bind=");

    // A source port too (nc -p), and tcp4: with a name that resolves to both families.
    let port = {
        let probe = TcpListener::bind("127.0.0.2:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let got = thread::spawn(move || {
        let (mut s, peer) = server.accept().unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        (peer, buf)
    });
    let rig = Rig::new();
    let src = rig.file("src.bin", &payload);
    let dst = format!("tcp4:localhost:{},bind=127.0.0.2:{port}", addr.port());
    let run = rig.args(["-v", "pipe", &src, &dst]).run();
    run.assert_code(0, "pipe to tcp4:localhost,bind=IP:PORT");
    let (peer, bytes) = got.join().unwrap();
    assert_eq!(
        peer.to_string(),
        format!("127.0.0.2:{port}"),
        "{}",
        run.stderr
    );
    assert_bytes_eq(&bytes, &payload, "pipe FILE tcp4:localhost,bind=IP:PORT");
    run.assert_final_path("sendfile", "pipe FILE tcp4:,bind=IP:PORT");
    assert!(
        run.stderr
            .contains(&format!("socket options set: bind=127.0.0.2:{port}")),
        "-v echoes the options: {}",
        run.stderr
    );
}

#[test]
fn a_connectors_socket_options_are_set_before_it_connects() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: mark= needs CAP_NET_ADMIN (run as root to read the options back)");
        return;
    }
    // Big enough that zerocat is still writing while the test reads its socket.
    let payload = data(16 << 20);
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let rig = Rig::new();
    let src = rig.file("src.bin", &payload);
    let running = rig
        .args(["-v", "pipe", &src, &format!("tcp:{addr},{OPTIONS}")])
        .start();
    let (mut conn, peer) = server.accept().unwrap();
    let pidfd = running.pidfd().expect("zerocat runs");
    if let Some(fd) = zerocat_socket(&pidfd, running.pid().as_raw(), Some(peer)) {
        assert_options(&fd, "tcp: connector");
    }
    let mut bytes = Vec::new();
    conn.read_to_end(&mut bytes).unwrap();
    let run = running.finish();
    run.assert_code(0, "pipe FILE tcp:,OPTIONS");
    assert_bytes_eq(&bytes, &payload, "pipe FILE tcp:,OPTIONS");
    run.assert_final_path("sendfile", "pipe FILE tcp:,OPTIONS");
    assert!(
        run.stderr.contains(
            "socket options set: keepalive=30:5:4, nodelay, sndbuf=65536, rcvbuf=65536, \
             mark=7, tos=16, ttl=9"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn a_listeners_socket_options_are_inherited_by_the_connection_it_accepts() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: mark= needs CAP_NET_ADMIN (run as root to read the options back)");
        return;
    }
    let payload = data(4 << 20);
    let mut rig = Rig::new();
    let dst = rig.file_sink(rig.path("out.bin"));
    let running = rig
        .args(["pipe", &format!("tcp-listen:0,{OPTIONS}"), &dst])
        .listen();
    let mut client = TcpStream::connect(running.addr()).unwrap();
    let pidfd = running.pidfd().expect("zerocat runs");
    let local: SocketAddr = running.addr().parse().unwrap();
    if let Some(fd) = zerocat_socket(&pidfd, running.pid().as_raw(), Some(local))
        .filter(|fd| socket::getpeername::<SockaddrStorage>(fd.as_raw_fd()).is_ok())
    {
        assert_options(&fd, "an accepted connection of tcp-listen:");
    }
    client.write_all(&payload).unwrap();
    drop(client);
    let run = running.finish();
    run.assert_code(0, "pipe tcp-listen:,OPTIONS FILE");
    run.assert_held(0, &payload, "pipe tcp-listen:,OPTIONS FILE");
    run.assert_final_path("splice", "pipe tcp-listen:,OPTIONS FILE");
}

#[test]
fn a_refused_socket_option_is_an_error_that_names_it() {
    let Some(nobody) = AsNobody::new() else {
        return;
    };
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = server.local_addr().unwrap();
    let mut cmd = nobody.zerocat();
    cmd.args(["pipe", "/dev/null", &format!("tcp:{addr},nodelay,mark=7")]);
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let text = stderr_text(&out);
    assert!(
        text.contains("option 'mark=7': the kernel refused it (SO_MARK needs CAP_NET_ADMIN)")
            && text.contains("EPERM"),
        "{text}"
    );
    // Never skipped: no connection was made without it.
    server.set_nonblocking(true).unwrap();
    assert!(server.accept().is_err(), "a connection without its mark");

    // The relay says so at its start, before it listens.
    let mut cmd = nobody.zerocat();
    cmd.args(["relay", "tcp-listen:0", &format!("tcp:{addr},mark=7")]);
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_text(&out));
    let text = stderr_text(&out);
    assert!(text.contains("option 'mark=7'"), "{text}");
    assert!(!text.contains("listening on"), "{text}");
}

#[test]
fn bad_addresses_and_lists_are_usage_errors_before_any_fd_opens() {
    let dir = tempdir();
    let unreadable = dir.path().join("no-such-allow-file");
    for (args, names) in [
        (
            vec!["pipe", "-", "tcp:[::1]:9,bind=127.0.0.2"],
            "option 'bind': 127.0.0.2 is an IPv4 address and ::1 an IPv6 one",
        ),
        (
            vec!["pipe", "-", "tcp6:localhost:9,bind=127.0.0.2"],
            "IPv6 only",
        ),
        (vec!["-6", "pipe", "-", "udp:127.0.0.1:9"], "IPv6 only"),
        (
            vec!["pipe", "tcp-listen:0,allow=10.0.0.0/33", "-"],
            "'10.0.0.0/33': the prefix /33 is longer than an IPv4 address",
        ),
        (
            vec!["relay", "udp-listen:0,deny=10.0.0.x", "udp:127.0.0.1:9"],
            "'10.0.0.x' is not a network",
        ),
    ] {
        let mut cmd = zerocat();
        cmd.args(&args);
        let out = run(cmd);
        let text = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(names), "{args:?}: {text}");
        assert!(!text.contains("listening on"), "{args:?}: {text}");
    }
    // -6 with no HOST: the listener binds IPv6's loopback, not 127.0.0.1 (which -6 rules out).
    let payload = data(64 << 10);
    let mut rig = Rig::new();
    let dst = rig.file_sink(rig.path("out.bin"));
    let running = rig.args(["-6", "pipe", "tcp-listen:0", &dst]).listen();
    assert!(running.addr().starts_with("[::1]:"), "{}", running.addr());
    send_to(running.addr(), &payload);
    let v6 = running.finish();
    v6.assert_code(0, "-6 pipe tcp-listen:0 FILE");
    v6.assert_held(0, &payload, "-6 pipe tcp-listen:0 FILE");
    v6.assert_final_path("splice", "-6 pipe tcp-listen:0 FILE");

    let arg = format!("tcp-listen:0,allow-file={}", unreadable.display());
    let mut cmd = zerocat();
    cmd.args(["relay", &arg, "exec:cat"]);
    let out = run(cmd);
    let text = stderr_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains(&format!("invalid endpoint '{arg}'")) && text.contains("cannot read"),
        "{text}"
    );
    assert!(!text.contains("listening on"), "{text}");
}

/// The relay's report and log after one client from 127.0.0.2 and one from 127.0.0.1
/// through `listener` to `exec:cat`: the refused one counted and never served, the other
/// echoed byte for byte.
fn refused_and_served(listener: &str, allowed_from: &str, refused_from: &str) {
    let payload = data(256 << 10);
    let rig = Rig::new();
    let log = rig.path("relay.log");
    let relay = rig.relay(&["--log", &log.display().to_string(), listener, "exec:cat"]);
    let refused = exchange(connect_from(refused_from, relay.addr()), &payload);
    assert_eq!(refused, None, "{listener}: {refused_from} got bytes back");
    let served = exchange(connect_from(allowed_from, relay.addr()), &payload);
    let run = relay.stop();
    assert_bytes_eq(&served.unwrap_or_default(), &payload, listener);
    let report = run.report();
    assert_eq!(report["refused"], 1, "{report}");
    assert_eq!(report["failed"], 0, "{report}");
    let conns = connections(report);
    let no = conns
        .iter()
        .find(|c| c["ended"] == "refused")
        .unwrap_or_else(|| panic!("no refused connection: {report}"));
    assert!(
        no["peer"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{refused_from}:")),
        "{no}"
    );
    assert_eq!(no["a_to_b"]["bytes"], 0, "{no}");
    let yes = conns.iter().find(|c| c["ended"] == "eof").expect("served");
    assert_eq!(yes["a_to_b"]["bytes"], payload.len() as u64, "{yes}");
    assert_eq!(yes["b_to_a"]["bytes"], payload.len() as u64, "{yes}");
    assert_eq!(dir_paths(&yes["a_to_b"]).unwrap().last().unwrap(), "splice");
    let log = std::fs::read_to_string(&log).unwrap();
    let refused_lines = log.lines().filter(|l| l.contains("\"ended\":\"refused\""));
    assert_eq!(refused_lines.count(), 1, "--log: {log}");
}

#[test]
fn deny_on_tcp_listen_refuses_a_client_before_any_byte() {
    refused_and_served("tcp-listen:0,deny=127.0.0.2", "127.0.0.1", "127.0.0.2");
    refused_and_served(
        "tcp-listen:0,allow=127.0.0.1;10.0.0.0/8",
        "127.0.0.1",
        "127.0.0.2",
    );
}

#[test]
fn allow_file_on_tcp_listen() {
    let dir = tempdir();
    let file = write_file(dir.path(), "allow", b"# the lab\n127.0.0.2/32 # only it\n");
    let listener = format!("tcp-listen:0,allow-file={}", file.display());
    refused_and_served(&listener, "127.0.0.2", "127.0.0.1");
}

/// `zerocat [--keep-open] COMMAND tcp-listen:0,allow=127.0.0.1 OUT` (pipe or tee; `rig` says
/// how it reports): a client from 127.0.0.2 is closed unread, then one from 127.0.0.1 is
/// carried into OUT byte for byte; the run as it ended (a signal ends --keep-open).
fn refused_then_served(rig: Rig, command: &str, keep_open: bool, payload: &[u8]) -> Finished {
    let what = format!("{command} keep_open={keep_open}");
    let out = rig.path("out");
    let mut rig = rig.arg(command);
    if keep_open {
        rig = rig.arg("--keep-open");
    }
    let mut running = rig.arg("tcp-listen:0,allow=127.0.0.1").arg(&out).listen();
    let refused = exchange(connect_from("127.0.0.2", running.addr()), payload);
    assert_eq!(refused, None, "{what}: 127.0.0.2 was answered");
    let mut served = connect_from("127.0.0.1", running.addr());
    served.write_all(payload).unwrap();
    drop(served);
    running.wait_until("the sink", payload.len() as u64, || {
        std::fs::metadata(&out).map_or(0, |m| m.len())
    });
    let end = match keep_open {
        true => running.stop(),
        false => running.finish(),
    };
    assert_bytes_eq(&std::fs::read(&out).unwrap(), payload, &what);
    end.assert_code(if keep_open { 130 } else { 0 }, &what);
    end
}

/// pipe and tee, with and without --keep-open, count the clients their listener's allow
/// list refused: `refused` in the JSON report, "1 connection refused by allow/deny" in the
/// text line; the client allowed after it is carried whole.
#[test]
fn pipe_and_tee_count_the_clients_their_listener_refused() {
    let payload = data(256 << 10);
    for command in ["pipe", "tee"] {
        for keep_open in [false, true] {
            let what = format!("{command} keep_open={keep_open}");
            let end = refused_then_served(Rig::new(), command, keep_open, &payload);
            let report = end.report();
            assert_eq!(report["refused"], 1, "{what}: {report}");
            assert_eq!(report["bytes"], payload.len() as u64, "{what}: {report}");
            if keep_open {
                assert_eq!(report["connections"], 1, "{what}: {report}");
            }
            end.assert_final_path("splice", &what);
        }
    }
    let end = refused_then_served(Rig::bare(), "pipe", true, &payload);
    assert!(
        end.stderr
            .contains("; 1 connection; 1 connection refused by allow/deny"),
        "{}",
        end.stderr
    );
}

/// `--keep-open` says each client its listener's allow list refused on stderr, as one
/// accepted without `--keep-open` does: "refused the connection from 127.0.0.2:PORT: ...".
#[test]
fn keep_open_says_each_client_its_listener_refused() {
    let payload = data(64 << 10);
    for command in ["pipe", "tee"] {
        let end = refused_then_served(Rig::new(), command, true, &payload);
        let said = end
            .stderr
            .lines()
            .filter(|l| l.starts_with("zerocat: refused the connection from 127.0.0.2:"))
            .count();
        assert_eq!(said, 1, "{command} --keep-open: {}", end.stderr);
        assert_eq!(end.report()["refused"], 1, "{command}: {}", end.report());
    }
}

#[test]
fn a_proxy_listener_checks_the_address_its_header_carried() {
    let payload = data(64 << 10);
    let relay = Rig::new().relay(&["tcp-listen:0,proxy,allow=10.0.0.0/8", "exec:cat"]);
    let header = |client: &str| format!("PROXY TCP4 {client} 127.0.0.1 5555 80\r\n");
    let with_header = |client: &str| {
        let mut message = header(client).into_bytes();
        message.extend_from_slice(&payload);
        exchange(connect_from("127.0.0.1", relay.addr()), &message)
    };
    // Both come from 127.0.0.1: the header decides.
    assert_eq!(with_header("192.0.2.1"), None, "192.0.2.1 was served");
    let served = with_header("10.1.2.3").expect("10.1.2.3 is allowed");
    let run = relay.stop();
    assert_bytes_eq(&served, &payload, "proxy,allow= the allowed client");
    let report = run.report();
    assert_eq!(report["refused"], 1, "{report}");
    assert_eq!(run.conn("192.0.2.1:5555")["ended"], "refused");
    let yes = run.conn("10.1.2.3:5555");
    assert_eq!(yes["ended"], "eof", "{yes}");
    assert_eq!(dir_paths(&yes["b_to_a"]).unwrap().last().unwrap(), "splice");
}

#[test]
fn udp_listen_drops_a_refused_clients_datagrams() {
    let backend = UdpSocket::bind("127.0.0.1:0").unwrap();
    backend.set_read_timeout(Some(DEADLINE)).unwrap();
    let backend_addr = backend.local_addr().unwrap();
    let relay = Rig::new().relay(&[
        "udp-listen:0,deny=127.0.0.2",
        &format!("udp:{backend_addr}"),
    ]);
    let refused = UdpSocket::bind("127.0.0.2:0").unwrap();
    let allowed = UdpSocket::bind("127.0.0.1:0").unwrap();
    allowed.set_read_timeout(Some(DEADLINE)).unwrap();
    for _ in 0..3 {
        refused.send_to(b"not me", relay.addr()).unwrap();
    }
    let datagram = data(1200);
    allowed.send_to(&datagram, relay.addr()).unwrap();
    let mut buf = vec![0u8; 65536];
    // Datagrams are in order per client, and the refused ones came first: the first to
    // reach the backend is the allowed one.
    let (n, session) = backend.recv_from(&mut buf).unwrap();
    assert_bytes_eq(
        &buf[..n],
        &datagram,
        "udp-listen,deny= the allowed datagram",
    );
    backend.send_to(&buf[..n], session).unwrap();
    let (n, _) = allowed.recv_from(&mut buf).unwrap();
    assert_bytes_eq(&buf[..n], &datagram, "the answer back");
    let run = relay.stop();
    let report = run.report();
    assert_eq!(report["refused"], 3, "{report}");
    assert_eq!(report["datagrams"]["a_to_b"], 1, "{report}");
    assert_eq!(final_path(report), "userspace", "{report}");
}

/// `pipe udp-listen:…,deny=`: a refused sender's datagrams, before the first allowed peer's,
/// are dropped unread, and counted in the report as the relay counts them (`refused` in
/// JSON, "; 3 datagrams refused by allow/deny" on the text line).
#[test]
fn pipe_udp_listen_counts_the_datagrams_it_refused() {
    for json in [true, false] {
        let what = format!("pipe udp-listen:0,deny=127.0.0.2 (json {json})");
        let mut rig = if json { Rig::new() } else { Rig::bare() };
        let dst = rig.file_sink(rig.path("out.bin"));
        let mut running = rig
            .args(["pipe", "udp-listen:0,deny=127.0.0.2", &dst])
            .listen();
        let addr = running.addr().to_string();
        let refused = UdpSocket::bind("127.0.0.2:0").unwrap();
        for _ in 0..3 {
            refused.send_to(b"not me\n", &addr).unwrap();
        }
        let allowed = UdpSocket::bind("127.0.0.1:0").unwrap();
        allowed.send_to(b"one\n", &addr).unwrap();
        running.wait_for_sink(0, 4);
        allowed.send_to(b"", &addr).unwrap();
        let run = running.finish();
        run.assert_code(0, &what);
        run.assert_held(0, b"one\n", &what);
        if json {
            assert_eq!(run.report()["refused"], 3, "{what}: {}", run.report());
            run.assert_final_path("userspace", &what);
        } else {
            assert!(
                run.stderr.contains("; 3 datagrams refused by allow/deny"),
                "{what}: {}",
                run.stderr
            );
        }
    }
}

/// `ZEROCAT_*` lines of a child's `env`, as name -> value.
fn zerocat_vars(env: &[u8]) -> std::collections::BTreeMap<String, String> {
    String::from_utf8_lossy(env)
        .lines()
        .filter(|l| l.starts_with("ZEROCAT_"))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_listeners_child_gets_its_client_in_its_environment() {
    let relay = Rig::new().relay(&["tcp-listen:0", "sh:env"]);
    let local: SocketAddr = relay.addr().parse().unwrap();
    let stream = connect_from("127.0.0.2", relay.addr());
    let client = stream.local_addr().unwrap();
    let env = exchange(stream, b"").expect("the child's env");
    let run = relay.stop();
    let vars = zerocat_vars(&env);
    assert_eq!(vars["ZEROCAT_PEER_ADDR"], "127.0.0.2", "{vars:?}");
    assert_eq!(
        vars["ZEROCAT_PEER_PORT"],
        client.port().to_string(),
        "{vars:?}"
    );
    assert_eq!(vars["ZEROCAT_LOCAL_ADDR"], "127.0.0.1", "{vars:?}");
    assert_eq!(
        vars["ZEROCAT_LOCAL_PORT"],
        local.port().to_string(),
        "{vars:?}"
    );
    assert_eq!(vars["ZEROCAT_PROTO"], "tcp", "{vars:?}");
    assert!(!vars.contains_key("ZEROCAT_TLS_CLIENT_SUBJECT"), "{vars:?}");
    let conn = run.conn(&client.to_string());
    assert_eq!(conn["b_to_a"]["bytes"], env.len() as u64, "{conn}");
    assert_eq!(
        dir_paths(&conn["b_to_a"]).unwrap().last().unwrap(),
        "splice"
    );

    // With a PROXY header, the client it names.
    let relay = Rig::new().relay(&["tcp-listen:0,proxy", "sh:env"]);
    let header = b"PROXY TCP4 192.0.2.7 198.51.100.1 4242 443\r\n";
    let env = exchange(connect_from("127.0.0.1", relay.addr()), header).expect("env");
    relay.stop();
    let vars = zerocat_vars(&env);
    assert_eq!(vars["ZEROCAT_PEER_ADDR"], "192.0.2.7", "{vars:?}");
    assert_eq!(vars["ZEROCAT_PEER_PORT"], "4242", "{vars:?}");
    assert_eq!(vars["ZEROCAT_LOCAL_ADDR"], "198.51.100.1", "{vars:?}");
    assert_eq!(vars["ZEROCAT_LOCAL_PORT"], "443", "{vars:?}");
}

#[test]
fn a_tls_listener_refuses_before_the_handshake_and_names_the_client_certificate() {
    let Some(pki) = crate::tls::Pki::make() else {
        return;
    };
    let listener = format!(
        "tls-listen:0,cert={},key={},cafile={},allow=127.0.0.1",
        pki.path("server.pem"),
        pki.path("server.key"),
        pki.path("ca.pem")
    );
    let relay = Rig::new().relay(&[&listener, "sh:env"]);
    // From 127.0.0.2: a ClientHello's first bytes get nothing back, no ServerHello.
    let mut refused = connect_from("127.0.0.2", relay.addr());
    let _ = refused.write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00]);
    let mut answer = Vec::new();
    let got = refused.read_to_end(&mut answer);
    assert!(
        answer.is_empty(),
        "the refused client got {} bytes",
        answer.len()
    );
    assert!(
        got.is_err() || got.is_ok_and(|n| n == 0),
        "the refused client's read"
    );
    // From 127.0.0.1, with a client certificate: served, its subject in the environment.
    let client = Rig::new();
    let out = client.path("env.out");
    let src = format!(
        "tls:localhost:{},cafile={},cert={},key={}",
        relay_port(relay.addr()),
        pki.path("ca.pem"),
        pki.path("client.pem"),
        pki.path("client.key")
    );
    let mut client = client;
    let sink = client.file_sink(out.clone());
    let fetched = client.args(["pipe", &src, &sink]).run();
    fetched.assert_code(0, "pipe tls: (client certificate) FILE");
    fetched.assert_final_path("splice", "pipe tls: (client certificate) FILE");
    let env = fetched.held(0).unwrap().to_vec();
    let run = relay.stop();
    let vars = zerocat_vars(&env);
    assert_eq!(vars["ZEROCAT_PROTO"], "tls", "{vars:?}");
    assert_eq!(vars["ZEROCAT_TLS_CLIENT_SUBJECT"], "CN=client", "{vars:?}");
    assert_eq!(vars["ZEROCAT_PEER_ADDR"], "127.0.0.1", "{vars:?}");
    assert_eq!(fetched.report_bytes(), env.len() as u64);
    let report = run.report();
    assert_eq!(report["refused"], 1, "{report}");
    let no = connections(report)
        .iter()
        .find(|c| c["ended"] == "refused")
        .expect("the refused client listed");
    assert!(
        no.get("tls").is_none_or(|t| t.is_null()),
        "no handshake: {no}"
    );
    let yes = connections(report)
        .iter()
        .find(|c| c["ended"] == "eof")
        .expect("the served client listed");
    assert_eq!(yes["b_to_a"]["bytes"], env.len() as u64, "{yes}");
}

fn relay_port(addr: &str) -> u16 {
    addr.parse::<SocketAddr>().unwrap().port()
}

/// pipe's and tee's `exec:`/`sh:` children learn the socket at the other end as a relay's
/// do: a command source whose sink connects (it starts once connected: the peer is the
/// server), a command sink of an accepted source (the peer is the client), and tee's command
/// sinks of a listener. A variable of the same name in zerocat's own environment is not
/// passed on.
#[test]
fn pipe_and_tee_children_get_the_socket_at_the_other_end_in_their_environment() {
    // A command source into a connector.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let server_addr = server.local_addr().unwrap();
    let running = Rig::new()
        .env("ZEROCAT_TLS_CLIENT_SUBJECT", "stale")
        .args(["pipe", "sh:env"])
        .arg(format!("tcp:{server_addr}"))
        .start();
    let (mut conn, zerocat_addr) = server.accept().unwrap();
    let mut env = Vec::new();
    conn.read_to_end(&mut env).unwrap();
    let end = running.finish();
    end.assert_code(0, "pipe sh:env tcp:");
    end.assert_final_path("splice", "a command's pipe into a socket");
    assert_eq!(end.report_bytes(), env.len() as u64);
    let vars = zerocat_vars(&env);
    assert_eq!(vars["ZEROCAT_PEER_ADDR"], "127.0.0.1", "{vars:?}");
    assert_eq!(
        vars["ZEROCAT_PEER_PORT"],
        server_addr.port().to_string(),
        "{vars:?}"
    );
    assert_eq!(
        vars["ZEROCAT_LOCAL_PORT"],
        zerocat_addr.port().to_string(),
        "{vars:?}"
    );
    assert_eq!(vars["ZEROCAT_PROTO"], "tcp", "{vars:?}");
    assert!(!vars.contains_key("ZEROCAT_TLS_CLIENT_SUBJECT"), "{vars:?}");

    // An accepted client into a command sink (pipe), and into two sinks (tee).
    let rig = Rig::new();
    let (piped, teed, copy) = (rig.path("piped"), rig.path("teed"), rig.path("copy"));
    let sink = |out: &std::path::Path| format!("sh:cat >/dev/null; env > {}", out.display());
    for (command, extra) in [("pipe", None), ("tee", Some(&copy))] {
        let out = if command == "pipe" { &piped } else { &teed };
        let mut rig = Rig::new().args([command, "tcp-listen:0"]).arg(sink(out));
        if let Some(copy) = extra {
            rig = rig.arg(copy);
        }
        let running = rig.listen();
        let local: SocketAddr = running.addr().parse().unwrap();
        let mut stream = connect_from("127.0.0.2", running.addr());
        let client = stream.local_addr().unwrap();
        stream.write_all(b"payload").unwrap();
        drop(stream);
        let end = running.finish();
        end.assert_code(0, command);
        assert_eq!(end.report_bytes(), 7, "{command}");
        let vars = zerocat_vars(&std::fs::read(out).unwrap());
        assert_eq!(
            vars["ZEROCAT_PEER_ADDR"], "127.0.0.2",
            "{command}: {vars:?}"
        );
        assert_eq!(
            vars["ZEROCAT_PEER_PORT"],
            client.port().to_string(),
            "{command}: {vars:?}"
        );
        assert_eq!(
            vars["ZEROCAT_LOCAL_PORT"],
            local.port().to_string(),
            "{command}: {vars:?}"
        );
        assert_eq!(vars["ZEROCAT_PROTO"], "tcp", "{command}: {vars:?}");
    }
    assert_eq!(std::fs::read(&copy).unwrap(), b"payload");
}
