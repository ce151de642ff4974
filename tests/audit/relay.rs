//! The relay's budgets and limits: the pipe budget after idle timeouts, bounded memory, --max-conns default, bounded durations, the inherited fds' flags restored, unix-listen mode= without a path race.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use serde_json::Value;

use crate::rig::{connections, Rig};
use crate::util::*;

/// Connections the report accounts for: those listed, and those it only counts.
fn connection_count(report: &Value) -> u64 {
    connections(report).len() as u64 + report["connections_omitted"].as_u64().unwrap_or(0)
}

/// A TCP backend whose first `stall` connections are never read (held open until the
/// relay cuts them); every later one is an echo that shuts its write side at EOF.
fn stalling_backend(stall: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // A small receive buffer: a stalled connection fills up after a few KiB.
    let size: nix::libc::c_int = 4096;
    // SAFETY: a valid socket and an int of the right size.
    unsafe {
        nix::libc::setsockopt(
            listener.as_raw_fd(),
            nix::libc::SOL_SOCKET,
            nix::libc::SO_RCVBUF,
            (&size as *const nix::libc::c_int).cast(),
            std::mem::size_of::<nix::libc::c_int>() as nix::libc::socklen_t,
        );
    }
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        let mut held = Vec::new();
        for (n, s) in listener.incoming().enumerate() {
            let Ok(s) = s else { continue };
            if n < stall {
                held.push(s);
                continue;
            }
            thread::spawn(move || echo(s));
        }
    });
    addr
}

fn echo(mut s: TcpStream) {
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if s.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
    let _ = s.shutdown(Shutdown::Write);
}

/// An echo backend serving every connection.
fn echo_backend() -> String {
    stalling_backend(0)
}

/// Sends `payload` while reading the echo, half-closes, returns what came back.
fn echo_through(addr: &str, payload: &[u8]) -> Vec<u8> {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut w = s.try_clone().unwrap();
    let sent = payload.to_vec();
    let sending = thread::spawn(move || {
        w.write_all(&sent).unwrap();
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut got = Vec::new();
    (&s).read_to_end(&mut got).unwrap();
    sending.join().unwrap();
    got
}

/// A unix backend whose first `stall` connections are never read (held open until the
/// relay cuts them): the relay's unix socket queue holds about 208 KiB, then its pipe
/// fills. Later connections are echoes.
fn stalling_unix_backend(path: &std::path::Path, stall: usize) {
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    thread::spawn(move || {
        let mut held = Vec::new();
        for (n, s) in listener.incoming().enumerate() {
            let Ok(mut s) = s else { continue };
            if n < stall {
                held.push(s);
                continue;
            }
            thread::spawn(move || {
                s.set_read_timeout(Some(DEADLINE)).unwrap();
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 || s.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
}

/// The pipe budget (32 MiB). Connections cut by --idle-timeout while their pipe held bytes
/// (the backend never reads) used to keep their pipe's share of it for good: once it was
/// spent (512 pipes of 64 KiB; here pipes grown to 1 MiB, so fewer connections spend
/// it), every new connection failed with "reading A: No buffer space available" until a
/// restart.
#[test]
fn relay_pipe_budget_comes_back_from_connections_cut_with_bytes_in_their_pipes() {
    const STALLED: usize = 48;
    const ROUND: usize = 24;
    let dir = tempdir();
    let sock = dir.path().join("backend.sock");
    stalling_unix_backend(&sock, STALLED);
    let relay = Rig::new().relay(&[
        "--via",
        "splice",
        "--idle-timeout",
        "200ms",
        "tcp-listen:0,backlog=1024",
        &format!("unix:{}", sock.display()),
    ]);
    // Each client pushes until its bytes back up through the relay's pipe.
    let chunk = data(64 * 1024);
    // Two rounds of 24: each round fits the budget (24 pipes of 1 MiB), both do not.
    for _round in 0..2 {
        let mut clients: Vec<(TcpStream, usize)> = (0..ROUND)
            .map(|_| {
                let s = TcpStream::connect(relay.addr()).unwrap();
                s.set_nonblocking(true).unwrap();
                (s, 0)
            })
            .collect();
        const PUSH: usize = 1536 * 1024;
        let started = Instant::now();
        let mut quiet_since = Instant::now();
        while quiet_since.elapsed() < Duration::from_millis(100) {
            assert!(started.elapsed() < DEADLINE, "clients cannot push");
            let mut progress = false;
            for (s, sent) in &mut clients {
                if *sent >= PUSH {
                    continue;
                }
                match s.write(&chunk[..(PUSH - *sent).min(chunk.len())]) {
                    Ok(n) => {
                        *sent += n;
                        progress = true;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    // Already cut by the idle timeout.
                    Err(_) => *sent = PUSH,
                }
            }
            if progress {
                quiet_since = Instant::now();
            } else {
                thread::sleep(Duration::from_millis(5));
            }
        }
        // Every stalled connection is cut by the idle timeout.
        let cut = |c: &mut TcpStream| {
            c.set_nonblocking(false).unwrap();
            c.set_read_timeout(Some(DEADLINE)).unwrap();
            let mut buf = [0u8; 16];
            matches!(c.read(&mut buf), Ok(0) | Err(_))
        };
        assert!(clients.iter_mut().all(|(c, _)| cut(c)));
    }
    // The budget is whole again: a new connection relays every byte.
    let payload = data(3 << 20);
    let addr = relay.addr().to_string();
    let got = std::panic::catch_unwind(|| echo_through(&addr, &payload));
    let end = relay.stop();
    let (code, report, text) = (end.code(), end.report(), &end.stderr);
    let conns = connections(report);
    let last = conns.last().unwrap();
    let got = got.unwrap_or_else(|_| panic!("no echo after 48 cut connections: {last}"));
    assert_bytes_eq(&got, &payload, "echo after 48 cut connections");
    assert_eq!(code, Some(130), "{text}");
    assert_eq!(connection_count(report), STALLED as u64 + 1, "{text}");
    assert_eq!(last["ended"], "eof", "{last}");
    assert_eq!(last["a_to_b"]["bytes"].as_u64(), Some(payload.len() as u64));
    assert_eq!(last["b_to_a"]["bytes"].as_u64(), Some(payload.len() as u64));
    let mut stranded = 0;
    for conn in &conns[..conns.len() - 1] {
        assert_eq!(conn["ended"], "idle-timeout", "{conn}");
        if conn["a_to_b"]["undelivered"].as_u64().unwrap() > 0 {
            stranded += 1;
        }
    }
    // The cut connections did hold bytes in their pipes (else this proves nothing).
    assert!(
        stranded * 2 > conns.len(),
        "{stranded} of {} held bytes: {}",
        conns.len(),
        conns[0]
    );
    assert!(!text.contains("No buffer space"), "{text}");
}

/// A long-running relay keeps no per-connection state once a connection is over: the report
/// aggregates its counters (it lists a bounded number of connections). The baseline is taken
/// once the relay is warm (its listed connections full, the allocator's pools grown): from
/// 200 connections, a warm-up of about 250 KiB reached the bound under load, though RSS is flat
/// from 4,000 to 12,000 connections.
#[test]
fn relay_memory_stays_flat_over_three_thousand_short_connections() {
    let backend = echo_backend();
    let relay = Rig::new().relay(&["tcp-listen:0,backlog=256", &format!("tcp:{backend}")]);
    let payload = data(1000);
    let mut rss_at_1000 = 0;
    for n in 1..=3000u64 {
        let got = echo_through(relay.addr(), &payload);
        assert_bytes_eq(&got, &payload, &format!("connection {n}"));
        if n == 1000 {
            thread::sleep(Duration::from_millis(50));
            rss_at_1000 = relay.status_kib("VmRSS:");
        }
    }
    thread::sleep(Duration::from_millis(50));
    let rss_at_3000 = relay.status_kib("VmRSS:");
    let end = relay.stop();
    let (code, report) = (end.code(), end.report());
    eprintln!("relay RSS: {rss_at_1000} KiB at connection 1000, {rss_at_3000} KiB at 3000");
    assert_eq!(code, Some(130));
    assert_eq!(connection_count(report), 3000);
    assert_eq!(report["bytes_a_to_b"].as_u64(), Some(3000 * 1000));
    assert_eq!(report["bytes_b_to_a"].as_u64(), Some(3000 * 1000));
    assert_eq!(report["failed"].as_u64(), Some(0));
    let growth = rss_at_3000.saturating_sub(rss_at_1000);
    assert!(
        growth < 256,
        "RSS grew by {growth} KiB over 2,000 connections"
    );
    assert!(
        connections(report).len() <= 256,
        "{} listed",
        connections(report).len()
    );
}

/// Pushes from every client (non-blocking) until nothing moves for 100 ms: the bytes back
/// up through the relay into whatever it holds. A client cut meanwhile stops.
fn push_until_stalled(clients: &mut [TcpStream], each: usize) {
    let chunk = data(64 * 1024);
    let mut sent = vec![0usize; clients.len()];
    for c in clients.iter() {
        c.set_nonblocking(true).unwrap();
    }
    let started = Instant::now();
    let mut quiet_since = Instant::now();
    while quiet_since.elapsed() < Duration::from_millis(100) {
        assert!(started.elapsed() < DEADLINE, "clients cannot push");
        let mut progress = false;
        for (c, sent) in clients.iter_mut().zip(&mut sent) {
            if *sent >= each {
                continue;
            }
            match c.write(&chunk[..(each - *sent).min(chunk.len())]) {
                Ok(n) => {
                    *sent += n;
                    progress = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => *sent = each,
            }
        }
        if progress {
            quiet_since = Instant::now();
        } else {
            thread::sleep(Duration::from_millis(5));
        }
    }
    for c in clients.iter() {
        c.set_nonblocking(false).unwrap();
    }
}

/// 200 clients through `--via userspace` to a backend that does not read: every direction
/// held a full 256 KiB buffer, outside any budget (about 56 MB here). Buffers are under a
/// budget, and a direction that finds it spent goes on with a 16 KiB allowance of its own.
#[test]
fn relay_userspace_buffers_stay_under_a_budget_with_two_hundred_stalled_clients() {
    const STALLED: usize = 200;
    let dir = tempdir();
    let sock = dir.path().join("backend.sock");
    stalling_unix_backend(&sock, STALLED);
    let relay = Rig::new().relay(&[
        "--via",
        "userspace",
        "--idle-timeout",
        "500ms",
        "tcp-listen:0,backlog=256",
        &format!("unix:{}", sock.display()),
    ]);
    // What the relay holds before any client: its code and start-up (grown with each
    // endpoint kind the binary carries), not buffers.
    let idle = relay.status_kib("VmHWM:");
    let mut clients: Vec<TcpStream> = (0..STALLED)
        .map(|_| TcpStream::connect(relay.addr()).unwrap())
        .collect();
    push_until_stalled(&mut clients, 768 * 1024);
    let hwm = relay.status_kib("VmHWM:");
    // Cut by the idle timeout, their buffers come back: a new connection relays every byte.
    for c in &mut clients {
        c.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut buf = [0u8; 16];
        assert!(matches!(c.read(&mut buf), Ok(0) | Err(_)));
    }
    let payload = data(3 << 20);
    let got = echo_through(relay.addr(), &payload);
    drop(clients);
    let end = relay.stop();
    let (code, report) = (end.code(), end.report());
    eprintln!("relay, {STALLED} stalled userspace clients: VmHWM {hwm} KiB ({idle} KiB idle)");
    // 64 shared buffers of 256 KiB, then a 16 KiB allowance a direction (issue 26 item 2):
    // 22.25 MiB at most on top of what the idle relay held (before: 56 MB).
    assert!(
        hwm - idle < 24 * 1024,
        "peak RSS {hwm} KiB, {} KiB over the idle relay's {idle} KiB",
        hwm - idle
    );
    assert_bytes_eq(&got, &payload, "echo after the stalled clients");
    assert_eq!(code, Some(130));
    assert_eq!(connection_count(report), STALLED as u64 + 1);
    assert_eq!(report["failed"].as_u64(), Some(STALLED as u64));
    let last = connections(report).last().unwrap().clone();
    assert_eq!(last["ended"], "eof", "{last}");
    assert_eq!(last["b_to_a"]["bytes"].as_u64(), Some(payload.len() as u64));
}

/// `--max-conns` defaults to what the open-file limit holds, and says so in --help.
#[test]
fn relay_max_conns_has_a_default_that_fits_the_fd_limit_in_help() {
    let mut cmd = zerocat();
    cmd.args(["relay", "--help"]);
    let out = run(cmd);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let at = help.find("--max-conns").expect("--max-conns in --help");
    let text = help[at..at + 400.min(help.len() - at)]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains("Default: what the open-file limit holds"),
        "{text}"
    );
}

/// Under `ulimit -n 64` (prlimit), 40 idle clients do not drive the relay into EMFILE:
/// beyond the default --max-conns they wait in the backlog, the relay does not spin, and
/// every one is served once earlier ones end.
#[test]
fn relay_under_a_low_fd_limit_queues_idle_clients_instead_of_running_out_of_fds() {
    if Command::new("prlimit").arg("--version").output().is_err() {
        eprintln!("skipped: prlimit(1) is not installed");
        return;
    }
    let backend = echo_backend();
    let relay = Rig::new()
        .under(["prlimit", "--nofile=64"])
        .relay(&["tcp-listen:0,backlog=256", &format!("tcp:{backend}")]);
    let clients: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(relay.addr()).unwrap())
        .collect();
    thread::sleep(Duration::from_millis(300));
    let ticks_before = relay.cpu_ticks();
    thread::sleep(Duration::from_millis(700));
    let idle_ticks = relay.cpu_ticks() - ticks_before;
    let served = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(i, s)| {
            let served = served.clone();
            thread::spawn(move || {
                let payload = data(1000 + i);
                let mut w = s.try_clone().unwrap();
                w.write_all(&payload).unwrap();
                w.shutdown(Shutdown::Write).unwrap();
                s.set_read_timeout(Some(DEADLINE)).unwrap();
                let mut got = Vec::new();
                (&s).read_to_end(&mut got).unwrap();
                assert_bytes_eq(&got, &payload, &format!("client {i}"));
                served.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let end = relay.stop();
    end.assert_code(130, "relay");
    let (report, text) = (end.report(), &end.stderr);
    assert_eq!(served.load(Ordering::SeqCst), 40);
    assert_eq!(connection_count(report), 40);
    assert_eq!(report["failed"].as_u64(), Some(0), "{text}");
    // Idle clients never ran the relay out of fds, so it never had to back off.
    let complaints: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("cannot accept"))
        .collect();
    assert!(complaints.is_empty(), "{complaints:#?}");
    assert!(idle_ticks <= 5, "{idle_ticks} ticks of CPU over 0.7 s idle");
}

/// O_NONBLOCK of `fd`'s file description.
fn nonblocking(fd: &OwnedFd) -> bool {
    OFlag::from_bits_retain(fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL).unwrap())
        .contains(OFlag::O_NONBLOCK)
}

/// `relay - tcp:...` sets O_NONBLOCK on the stdin and stdout it inherited: that flag lives on
/// the file description, shared with whoever gave zerocat the fds. Killed by SIGHUP, 0.1 left
/// it set, and the shell's next `read` failed with EAGAIN.
#[test]
fn relay_restores_inherited_stdio_flags_when_killed_by_sighup() {
    let backend = echo_backend();
    let (stdin_read, stdin_write) = nix::unistd::pipe().unwrap();
    let (stdout_read, stdout_write) = nix::unistd::pipe().unwrap();
    // The test keeps its own fds on the very file descriptions zerocat gets.
    let ours_in = stdin_read.try_clone().unwrap();
    let ours_out = stdout_write.try_clone().unwrap();
    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "relay", "-", &format!("tcp:{backend}")]);
    cmd.stdin(Stdio::from(stdin_read))
        .stdout(Stdio::from(stdout_write))
        .stderr(Stdio::piped());
    sighup_at_its_default(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    drop(cmd); // the parent's copies of the child's ends
    let mut to_relay = std::fs::File::from(stdin_write);
    let mut from_relay = std::fs::File::from(stdout_read);
    to_relay.write_all(b"ping").unwrap();
    let mut four = [0u8; 4];
    from_relay.read_exact(&mut four).unwrap();
    assert_eq!(&four, b"ping");
    assert!(
        nonblocking(&ours_in) && nonblocking(&ours_out),
        "the relay runs with non-blocking stdio (else this proves nothing)"
    );
    Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < DEADLINE, "relay did not exit on SIGHUP");
        thread::sleep(Duration::from_millis(10));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(nix::libc::SIGHUP),
        "{status:?}: {stderr}"
    );
    assert!(!nonblocking(&ours_in), "stdin left O_NONBLOCK");
    assert!(!nonblocking(&ours_out), "stdout left O_NONBLOCK");
    // Nothing more came out after the echo.
    drop(ours_out);
    let mut rest = Vec::new();
    from_relay.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
}

/// A panic inside the relay (here `--idle-timeout` so long that the deadline overflows, a
/// panic on 0.1; refused as a usage error once durations are bounded) leaves the inherited
/// stdin/stdout as they were: a panic hook puts the flags back.
#[test]
fn relay_restores_inherited_stdio_flags_after_a_panic() {
    let backend = echo_backend();
    let (stdin_read, _stdin_write) = nix::unistd::pipe().unwrap();
    let (_stdout_read, stdout_write) = nix::unistd::pipe().unwrap();
    let ours_in = stdin_read.try_clone().unwrap();
    let ours_out = stdout_write.try_clone().unwrap();
    let mut cmd = zerocat();
    cmd.args([
        "relay",
        "--idle-timeout",
        "5000000000000000h",
        "-",
        &format!("tcp:{backend}"),
    ]);
    cmd.stdin(Stdio::from(stdin_read))
        .stdout(Stdio::from(stdout_write))
        .stderr(Stdio::piped());
    let out = wait_with_deadline(cmd.spawn().unwrap(), DEADLINE);
    drop(cmd);
    let stderr = stderr_text(&out);
    // 101: the panic (this branch); 2: a usage error (durations bounded): never a success.
    assert!(
        matches!(out.status.code(), Some(101) | Some(2)),
        "{:?}: {stderr}",
        out.status
    );
    assert!(out.stdout.is_empty());
    assert!(!nonblocking(&ours_in), "stdin left O_NONBLOCK: {stderr}");
    assert!(!nonblocking(&ours_out), "stdout left O_NONBLOCK: {stderr}");
}

/// A backend for clients that stop reading: a connection whose first line is "DOWNLOAD"
/// gets 20 MiB (its thread blocks on the client that never reads); any other is an echo
/// of its lines.
fn download_backend() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            let _ = thread::Builder::new().stack_size(64 << 10).spawn(move || {
                let mut line = Vec::new();
                let mut byte = [0u8; 1];
                while s.read(&mut byte).unwrap_or(0) == 1 {
                    line.push(byte[0]);
                    if byte[0] != b'\n' {
                        continue;
                    }
                    if line == b"DOWNLOAD\n" {
                        let chunk = vec![b'x'; 1 << 20];
                        for _ in 0..20 {
                            if s.write_all(&chunk).is_err() {
                                return;
                            }
                        }
                        return;
                    }
                    if s.write_all(&line).is_err() {
                        return;
                    }
                    line.clear();
                }
            });
        }
    });
    addr
}

/// A client with a 4 KiB receive buffer that asks for the download and never reads.
fn non_reading_client(addr: &str) -> OwnedFd {
    use nix::sys::socket::{
        connect, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType, SockaddrIn,
    };
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .unwrap();
    setsockopt(&fd, sockopt::RcvBuf, &4096).unwrap();
    let sockaddr: std::net::SocketAddrV4 = addr.parse().unwrap();
    connect(fd.as_raw_fd(), &SockaddrIn::from(sockaddr)).unwrap();
    nix::unistd::write(&fd, b"DOWNLOAD\n").unwrap();
    fd
}

/// How long an echo of one line through the relay takes (None: no answer within 5 s).
fn echo_latency(addr: &str, i: usize) -> Option<Duration> {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let line = format!("ordinary request {i}\n");
    s.write_all(line.as_bytes()).ok()?;
    let mut got = vec![0u8; line.len()];
    s.read_exact(&mut got).ok()?;
    (got == line.as_bytes()).then(|| started.elapsed())
}

/// Issue 26 item 2: clients that ask for a big answer and stop reading held the relay's
/// shared buffers and pipes, and then every other direction waited for memory (150 such
/// clients left 0 of 5 ordinary requests answered). Each direction now has an allowance of
/// its own outside the shared budget: the stalled ones degrade, nobody waits.
fn ordinary_requests_are_answered_beside(slow: usize) {
    let backend = download_backend();
    let relay = Rig::new().relay(&["tcp-listen:0,backlog=4096", &format!("tcp:{backend}")]);
    let before: Vec<Duration> = (0..5)
        .map(|i| echo_latency(relay.addr(), i).expect("answered before the slow clients"))
        .collect();
    let clients: Vec<OwnedFd> = (0..slow)
        .map(|_| non_reading_client(relay.addr()))
        .collect();
    // Let the downloads fill every buffer they can.
    thread::sleep(Duration::from_millis(1500));
    let hwm = relay.status_kib("VmHWM:");
    let after: Vec<Option<Duration>> = (0..5).map(|i| echo_latency(relay.addr(), i)).collect();
    eprintln!(
        "{slow} non-reading clients: ordinary requests before {before:?}, beside them {after:?}; \
         relay VmHWM {hwm} KiB"
    );
    // The service goes on: every ordinary request is answered within echo_latency's 5 s,
    // which only a real stall misses (before the fix, 0 of 5 were answered). How fast is a
    // benchmark's question (bench/run relay's `beside-stalled` row), not a test's: a bound of
    // 500 ms failed a newcomer's first run on a cold machine (issue 42).
    let answered = after.iter().filter(|a| a.is_some()).count();
    assert_eq!(
        answered, 5,
        "ordinary requests answered beside {slow} stalled clients: {after:?}"
    );
    drop(clients);
    let end = relay.stop();
    assert_eq!(end.code(), Some(130));
    // Said, once: the budget is held, the others go on with buffers of their own.
    let said = end.stderr.matches("the buffer budget").count();
    assert!(said >= 1, "{}", end.stderr);
    assert!(said <= 3, "said {said} times: {}", end.stderr);
}

#[test]
fn ordinary_requests_are_answered_beside_two_hundred_non_reading_clients() {
    ordinary_requests_are_answered_beside(200);
}

/// The proof: 1,000 such clients (the test raises its fd limit for them).
#[test]
#[ignore = "1,000 connections and 1,000 backend threads: run with --ignored"]
fn ordinary_requests_are_answered_beside_a_thousand_non_reading_clients() {
    let (_, hard) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    ordinary_requests_are_answered_beside(1000);
}
