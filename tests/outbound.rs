//! Out through a proxy: `tcp:HOST:PORT,socks5=…` against microsocks, and a stub proxy for
//! the replies a real one does not give (garbage, a close mid-handshake).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::util::*;

/// A microsocks on a free loopback port, killed on drop; None (with the reason printed)
/// when microsocks is not installed.
struct Microsocks {
    child: Child,
    port: u16,
}

impl Microsocks {
    fn start(auth: Option<(&str, &str)>) -> Option<Microsocks> {
        if !Path::new("/usr/bin/microsocks").exists() {
            eprintln!("skipped: microsocks is not installed (apt-get install microsocks)");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut cmd = Command::new("microsocks");
        cmd.args(["-i", "127.0.0.1", "-p", &port.to_string()]);
        if let Some((user, pass)) = auth {
            cmd.args(["-u", user, "-P", pass]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < until, "microsocks did not come up");
            thread::sleep(Duration::from_millis(20));
        }
        Some(Microsocks { child, port })
    }
}

impl Drop for Microsocks {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sink_port(addr: &str) -> &str {
    addr.rsplit_once(':').unwrap().1
}

#[test]
fn socks5_carries_a_file_to_a_name_the_proxy_resolves() {
    let Some(proxy) = Microsocks::start(None) else {
        return;
    };
    let payload = data(3 << 20);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    let (addr, sink) = tcp_sink();
    let mut cmd = zerocat();
    cmd.args(["pipe", "--stats", "json"]).arg(&src).arg(format!(
        "tcp:localhost:{},socks5=127.0.0.1:{}",
        sink_port(&addr),
        proxy.port
    ));
    let out = run(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(&sink.join().unwrap(), &payload, "through microsocks");
    let report = json_report(&out.stderr);
    assert_eq!(final_path(&report), "sendfile", "{report}");
}

#[test]
fn socks5_with_auth_from_option_and_env_and_a_refusal() {
    let Some(proxy) = Microsocks::start(Some(("bob", "s3cret"))) else {
        return;
    };
    let payload = data(100_000);
    for how in ["option", "env"] {
        let (addr, sink) = tcp_sink();
        let mut uri = format!(
            "tcp:127.0.0.1:{},socks5=127.0.0.1:{}",
            sink_port(&addr),
            proxy.port
        );
        let mut cmd = zerocat();
        if how == "option" {
            uri.push_str(",proxy-auth=bob:s3cret");
        } else {
            cmd.env("ZEROCAT_PROXY_AUTH", "bob:s3cret");
        }
        let mut child = cmd
            .args(["pipe", "-", &uri])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&payload).unwrap();
        let out = wait_with_deadline(child, DEADLINE);
        assert!(out.status.success(), "{how}: {}", stderr_text(&out));
        assert_bytes_eq(&sink.join().unwrap(), &payload, how);
    }
    // No credentials, then wrong ones: exit 1 naming the proxy and what it said.
    for (extra, said) in [
        ("", "asks for authentication"),
        (
            ",proxy-auth=bob:wrong",
            "refused the user name and password",
        ),
    ] {
        let mut cmd = zerocat();
        cmd.args(["pipe", "/dev/null"]).arg(format!(
            "tcp:localhost:9,socks5=127.0.0.1:{}{extra}",
            proxy.port
        ));
        let out = run(cmd);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("socks5 proxy 127.0.0.1:{}", proxy.port)),
            "{err}"
        );
        assert!(err.contains(said), "{err}");
        assert!(
            !err.contains("s3cret") && !err.contains("wrong"),
            "credentials shown: {err}"
        );
    }
}

#[test]
fn socks5_refusal_names_the_reply_code_in_words() {
    let Some(proxy) = Microsocks::start(None) else {
        return;
    };
    // A port nobody listens on: the proxy's connect is refused (REP 5).
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cmd = zerocat();
    cmd.args(["pipe", "/dev/null"]).arg(format!(
        "tcp:localhost:{closed},socks5=127.0.0.1:{}",
        proxy.port
    ));
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("connection refused (SOCKS5 reply 5)"), "{err}");
}

/// A stub proxy that reads the greeting, answers `reply`, then closes; returns what it read.
fn stub_proxy(reply: &'static [u8]) -> (u16, thread::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut got = vec![0u8; 3];
        s.read_exact(&mut got).unwrap();
        s.write_all(reply).unwrap();
        got
    });
    (port, handle)
}

#[test]
fn a_proxy_that_answers_garbage_or_closes_is_exit_1_naming_it() {
    for (reply, said) in [
        (
            &b"HTTP/1.1 400 Bad Request\r\n\r\n"[..],
            "does not speak SOCKS5",
        ),
        (
            &b""[..],
            "closed the connection in the middle of the handshake",
        ),
        (
            &b"\x05\x00\x05"[..],
            "closed the connection in the middle of the handshake",
        ),
    ] {
        let (port, stub) = stub_proxy(reply);
        let mut cmd = zerocat();
        cmd.args(["pipe", "/dev/null"])
            .arg(format!("tcp:localhost:9,socks5=127.0.0.1:{port}"));
        let out = run(cmd);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("socks5 proxy 127.0.0.1:{port}")),
            "{err}"
        );
        assert!(err.contains(said), "{err}");
        assert_eq!(stub.join().unwrap(), [5, 1, 0], "the greeting");
    }
}

#[test]
fn proxy_options_that_do_not_fit_are_usage_errors() {
    for (arg, said) in [
        ("tcp:localhost:9,socks5=127.0.0.1", "missing PORT"),
        (
            "tcp:localhost:9,socks5=127.0.0.1:1,connect=127.0.0.1:2",
            "do not combine",
        ),
        (
            "tcp-listen:0,socks5=127.0.0.1:1",
            "does not apply to tcp-listen",
        ),
        ("tcp:localhost:9,proxy-auth=a:b", "needs socks5="),
        (
            "unix:/nonexistent,connect=127.0.0.1:1",
            "does not apply to unix",
        ),
    ] {
        let mut cmd = zerocat();
        cmd.args(["pipe", "-", arg]);
        let out = run(cmd);
        let err = stderr_text(&out);
        assert_eq!(out.status.code(), Some(2), "{arg}: {err}");
        assert!(err.contains(said), "{arg}: {err}");
    }
}
