//! `relay --exit-idle DURATION` under the real `systemd-socket-activate`: the relay exits 0
//! once no connection was open for that long, the listening socket stays with its giver,
//! and a client that arrives while it exits waits in the backlog for the next activation.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::util::*;

fn socket_activate_missing() -> bool {
    Command::new("systemd-socket-activate")
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
}

/// An echo backend on 127.0.0.1.
fn echo_backend() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for s in listener.incoming().flatten() {
            thread::spawn(move || {
                let mut s = s;
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
    addr
}

/// Sends `len` bytes through `addr`, half-closes, checks the echo.
fn echo_through(addr: &str, seed: u8, len: usize) {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let payload: Vec<u8> = data(len).iter().map(|b| b ^ seed).collect();
    let mut w = s.try_clone().unwrap();
    let sent = payload.clone();
    let sending = thread::spawn(move || {
        w.write_all(&sent).unwrap();
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut got = Vec::new();
    (&s).read_to_end(&mut got).unwrap();
    sending.join().unwrap();
    assert_bytes_eq(&got, &payload, &format!("client {seed}"));
}

/// systemd-socket-activate on `addr` running two activations of the relay in turn (a shell
/// gives each its own LISTEN_PID, as systemd would), a second apart; stderr's lines come
/// through the channel.
fn two_activations(addr: &str, backend: &str, idle: &str) -> (Child, mpsc::Receiver<String>) {
    let relay = format!(
        "LISTEN_PID=$$ exec {} -v --stats json relay --exit-idle {idle} systemd: tcp:{backend}",
        bin().display()
    );
    let script = format!(
        "for i in 1 2; do sh -c '{relay}'; echo \"activation $i exited $?\" >&2; sleep 1; done"
    );
    let mut child = Command::new("systemd-socket-activate")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(["-l", addr, "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Lines until one starts with `prefix`; all of them.
fn until(rx: &mpsc::Receiver<String>, prefix: &str, seen: &mut Vec<String>) {
    let started = Instant::now();
    while started.elapsed() < DEADLINE {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                let done = line.starts_with(prefix);
                seen.push(line);
                if done {
                    return;
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(_) => break,
        }
    }
    panic!("never saw '{prefix}': {seen:#?}");
}

#[test]
fn exit_idle_exits_0_and_a_client_arriving_meanwhile_waits_for_the_next_activation() {
    if socket_activate_missing() {
        println!("SKIPPED: systemd-socket-activate is not installed (Debian package systemd)");
        return;
    }
    let backend = echo_backend();
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let (mut child, rx) = two_activations(&addr, &backend, "400ms");
    let mut seen = Vec::new();
    until(&rx, "Listening on", &mut seen);
    // The first activation serves a client...
    echo_through(&addr, 1, 200_000);
    // ...and one that arrives as its idle stretch ends: served by it, or left in the
    // backlog for the next one, never lost.
    thread::sleep(Duration::from_millis(400));
    let racing = {
        let addr = addr.clone();
        thread::spawn(move || echo_through(&addr, 2, 200_000))
    };
    until(&rx, "activation 1 exited", &mut seen);
    // Between the two activations nobody accepts: this client waits in the backlog.
    echo_through(&addr, 3, 1 << 20);
    racing.join().unwrap();
    until(&rx, "activation 2 exited", &mut seen);
    let _ = child.kill();
    let _ = child.wait();
    let text = seen.join("\n");
    assert!(text.contains("activation 1 exited 0"), "{text}");
    assert!(text.contains("activation 2 exited 0"), "{text}");
    assert!(text.contains("--exit-idle"), "{text}");
    // Every client is in one of the two reports, all ended eof.
    let reports: Vec<serde_json::Value> = seen
        .iter()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(reports.len(), 2, "{text}");
    let conns: Vec<&serde_json::Value> = reports
        .iter()
        .flat_map(|r| r["connections"].as_array().unwrap())
        .collect();
    assert_eq!(conns.len(), 3, "{text}");
    for c in conns {
        assert_eq!(c["ended"], "eof", "{c}");
    }
    assert!(
        !reports[1]["connections"].as_array().unwrap().is_empty(),
        "the client of the gap went to the second activation: {text}"
    );
}
