//! `relay -L/--limit RATE` (each direction of each connection) and `--limit-total RATE`
//! (all together): rates measured over a few seconds on the splice and the userspace path,
//! asserted in a generous band only (the ±5 % figure is bench/'s); every byte compared; a
//! paced direction whose source resets passes the reset on at once.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::rig::{connections, dir_paths, Rig};
use crate::util::*;

/// A backend that reads every connection to its end and checks each byte against
/// `data`'s pattern (a connection's stream starts at offset 0); returns its address and
/// the bytes received over all connections.
fn counting_backend() -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let total = Arc::new(AtomicU64::new(0));
    let counted = total.clone();
    thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let counted = counted.clone();
            thread::spawn(move || {
                let mut s = s;
                s.set_read_timeout(Some(DEADLINE)).unwrap();
                let pattern = data(1 << 20);
                let mut offset = 0usize;
                let mut buf = vec![0u8; 256 * 1024];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            for (i, b) in buf[..n].iter().enumerate() {
                                assert_eq!(*b, pattern[(offset + i) % pattern.len()]);
                            }
                            offset += n;
                            counted.fetch_add(n as u64, Ordering::SeqCst);
                        }
                    }
                }
            });
        }
    });
    (addr, total)
}

/// A client that sends `data`'s pattern as fast as the relay takes it until `stop`, then
/// half-closes and waits for the end; returns the bytes it sent.
fn flooding_client(addr: String, stop: Arc<AtomicBool>) -> thread::JoinHandle<u64> {
    thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        // A small send buffer: little is still queued at the end, which the relay would
        // pass on at the rate.
        nix::sys::socket::setsockopt(&s, nix::sys::socket::sockopt::SndBuf, &(64 << 10)).unwrap();
        s.set_write_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let pattern = data(1 << 20);
        let mut sent = 0u64;
        while !stop.load(Ordering::SeqCst) {
            let at = (sent % pattern.len() as u64) as usize;
            match s.write(&pattern[at..]) {
                Ok(n) => sent += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => panic!("{e}"),
            }
        }
        s.shutdown(Shutdown::Write).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
        sent
    })
}

const SECONDS: f64 = 3.0;

/// Bytes the backend got over SECONDS (after the first second, so the first chunk does
/// not count) through `args`, per second; and the relay's report.
fn measured(via: &str, args: &[&str], clients: usize) -> (f64, serde_json::Value) {
    let (backend, received) = counting_backend();
    let mut all = vec!["--via", via, "relay"];
    all.extend_from_slice(args);
    let target = format!("tcp:{backend}");
    all.extend_from_slice(&["tcp-listen:0", &target]);
    let relay = Rig::new().args(all.iter().copied()).listen();
    let stop = Arc::new(AtomicBool::new(false));
    let floods: Vec<_> = (0..clients)
        .map(|_| flooding_client(relay.addr().to_string(), stop.clone()))
        .collect();
    thread::sleep(Duration::from_secs(1));
    let (t0, b0) = (Instant::now(), received.load(Ordering::SeqCst));
    thread::sleep(Duration::from_secs_f64(SECONDS));
    let (t1, b1) = (Instant::now(), received.load(Ordering::SeqCst));
    stop.store(true, Ordering::SeqCst);
    let sent: u64 = floods.into_iter().map(|f| f.join().unwrap()).sum();
    let end = relay.stop();
    let report = end.report().clone();
    // Every byte sent arrived (the clients waited for the end of their connection).
    assert_eq!(report["bytes_a_to_b"].as_u64(), Some(sent), "{report}");
    assert_eq!(received.load(Ordering::SeqCst), sent);
    ((b1 - b0) as f64 / (t1 - t0).as_secs_f64(), report)
}

fn assert_rate(what: &str, rate: f64, limit: f64) {
    eprintln!("{what}: {:.0} B/s against a limit of {limit:.0} B/s", rate);
    assert!(
        rate > limit * 0.5 && rate < limit * 1.5,
        "{what}: {rate:.0} B/s, limit {limit:.0} B/s"
    );
}

fn assert_path(report: &serde_json::Value, path: &str) {
    for c in connections(report) {
        let paths = dir_paths(&c["a_to_b"]).unwrap();
        assert_eq!(paths, [path], "{c}");
        assert_eq!(c["ended"], "eof", "{c}");
    }
}

#[test]
fn limit_holds_each_direction_to_its_rate_on_the_splice_path() {
    let (rate, report) = measured("splice", &["-L", "2M"], 1);
    assert_rate("splice -L 2M", rate, 2.0 * 1048576.0);
    assert_path(&report, "splice");
}

#[test]
fn limit_holds_each_direction_to_its_rate_on_the_userspace_path() {
    let (rate, report) = measured("userspace", &["--limit", "2M"], 1);
    assert_rate("userspace -L 2M", rate, 2.0 * 1048576.0);
    assert_path(&report, "userspace");
}

#[test]
fn limit_total_is_shared_by_every_connection() {
    let (rate, report) = measured("splice", &["--limit-total", "4M"], 4);
    assert_rate("splice --limit-total 4M over 4", rate, 4.0 * 1048576.0);
    assert_eq!(connections(&report).len(), 4);
    assert_path(&report, "splice");
    let (rate, _) = measured("userspace", &["-L", "4M", "--limit-total", "2M"], 3);
    assert_rate(
        "userspace -L 4M --limit-total 2M over 3",
        rate,
        2.0 * 1048576.0,
    );
}

#[test]
fn a_paced_direction_whose_client_resets_resets_the_upstream_at_once() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let backend = listener.local_addr().unwrap().to_string();
    let relay = Rig::new().relay(&["-L", "8K", "tcp-listen:0", &format!("tcp:{backend}")]);
    let mut client = TcpStream::connect(relay.addr()).unwrap();
    let (mut upstream, _) = listener.accept().unwrap();
    // Far more than the relay passes on in a second: the rest waits in its socket.
    client
        .set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let pattern = data(4 << 20);
    let mut sent = 0;
    while sent < pattern.len() {
        match client.write(&pattern[sent..]) {
            Ok(n) => sent += n,
            Err(_) => break,
        }
    }
    assert!(sent > 1 << 20, "only {sent} bytes went out");
    linger_zero(&client);
    let reset_at = Instant::now();
    drop(client);
    upstream.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut got = 0usize;
    let mut buf = vec![0u8; 64 * 1024];
    let ended = loop {
        match upstream.read(&mut buf) {
            Ok(0) => break "eof",
            Ok(n) => {
                assert_eq!(buf[..n], pattern[got..got + n]);
                got += n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break "reset",
            Err(e) => panic!("{e}"),
        }
    };
    let took = reset_at.elapsed();
    eprintln!("sent {sent}, upstream got {got} then {ended} after {took:?}");
    // Paced, the bytes queued in the relay's socket would take many seconds at 8 KiB/s.
    assert_eq!(ended, "reset", "got {got} of {sent}");
    assert!(took < Duration::from_secs(5), "the reset took {took:?}");
    assert!(got < sent);
    let end = relay.stop();
    let c = &connections(end.report())[0];
    assert_eq!(c["ended"], "reset", "{c}");
}

#[test]
fn limit_on_a_udp_relay_is_a_usage_error_before_anything_binds() {
    for args in [
        &["--limit", "1M", "relay", "udp-listen:0", "udp:127.0.0.1:9"][..],
        &[
            "relay",
            "--limit-total",
            "1M",
            "udp-listen:0",
            "udp:127.0.0.1:9",
        ][..],
    ] {
        let mut cmd = zerocat();
        cmd.args(args);
        let out = run(cmd);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("--limit") && !err.contains("listening"),
            "{err}"
        );
    }
}
