//! WebSocket endpoints (`ws://`, `ws-listen:`): round trips against Python's `websockets`
//! (client and server), a large byte-exact tcp -> ws-listen … ws:// -> tcp tunnel between
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
    let end = relay.finish();
    end.assert_code(0, "relay");
    let conn = &connections(end.report())[0];
    assert_eq!(conn["a_to_b"]["bytes"].as_u64(), Some(4 << 20), "{conn}");
    assert_eq!(conn["b_to_a"]["bytes"].as_u64(), Some(4 << 20), "{conn}");
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
        end.assert_code(0, "relay");
        let conn = &connections(end.report())[0];
        assert_eq!(
            conn["a_to_b"]["bytes"].as_u64(),
            Some(size as u64),
            "{conn}"
        );
        assert_eq!(
            conn["b_to_a"]["bytes"].as_u64(),
            Some(size as u64),
            "{conn}"
        );
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
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    .unwrap();
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
    s
}

/// Reads frames until a close frame: its code.
fn close_code(s: &mut TcpStream) -> u16 {
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
        if head[0] & 0x0f == 8 {
            return u16::from_be_bytes([payload[0], payload[1]]);
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
