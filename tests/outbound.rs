//! Out through a proxy: `tcp:HOST:PORT,socks5=…` against microsocks, and a stub proxy for
//! the replies a real one does not give (garbage, a close mid-handshake).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::util::*;

/// A daemon (a proxy, sshd) on a free loopback port, killed on drop.
pub(crate) struct Daemon {
    child: Child,
    pub(crate) port: u16,
}

/// None (with the reason printed) when `path` is not installed.
fn installed(path: &str, package: &str) -> bool {
    let there = Path::new(path).exists();
    if !there {
        eprintln!("skipped: {path} is not installed (apt-get install {package})");
    }
    there
}

impl Daemon {
    /// Starts `cmd`, which listens on 127.0.0.1:`port`, and waits until it accepts.
    fn start(mut cmd: Command, port: u16) -> Daemon {
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < until, "{cmd:?} did not come up");
            thread::sleep(Duration::from_millis(20));
        }
        Daemon { child, port }
    }
}

/// A microsocks on a free loopback port; None when it is not installed.
pub(crate) struct Microsocks;

impl Microsocks {
    pub(crate) fn start(auth: Option<(&str, &str)>) -> Option<Daemon> {
        if !installed("/usr/bin/microsocks", "microsocks") {
            return None;
        }
        let port = free_port();
        let mut cmd = Command::new("microsocks");
        cmd.args(["-i", "127.0.0.1", "-p", &port.to_string()]);
        if let Some((user, pass)) = auth {
            cmd.args(["-u", user, "-P", pass]);
        }
        Some(Daemon::start(cmd, port))
    }
}

impl Drop for Daemon {
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
        // Closed with what zerocat sent next unread, the socket would reset (RST) and
        // zerocat might say "reset" instead of "closed" (seen under load): a FIN first,
        // then what comes is read until zerocat closes.
        let _ = s.shutdown(std::net::Shutdown::Write);
        let _ = std::io::copy(&mut s, &mut std::io::sink());
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

/// An echo server on 127.0.0.1 for `n` connections, each served by its own thread.
fn echo_server(n: usize) -> (u16, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = thread::spawn(move || {
        let mut served = Vec::new();
        for _ in 0..n {
            let (mut s, _) = listener.accept().unwrap();
            served.push(thread::spawn(move || {
                s.set_read_timeout(Some(DEADLINE)).unwrap();
                let mut back = s.try_clone().unwrap();
                // Until the client closes (a reset then is its close, through the proxy).
                let _ = std::io::copy(&mut s, &mut back);
            }));
        }
        for t in served {
            t.join().unwrap();
        }
    });
    (port, handle)
}

/// Sends `payload` to `addr` and reads as many bytes back, then closes. No half-close
/// first: microsocks ends both directions at the first EOF (it has no half-close).
fn echo_through(addr: &str, payload: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut reader = s.try_clone().unwrap();
    let len = payload.len();
    let got = thread::spawn(move || {
        let mut got = vec![0u8; len];
        reader.read_exact(&mut got).unwrap();
        got
    });
    s.write_all(payload).unwrap();
    got.join().unwrap()
}

#[test]
fn relay_dials_each_connection_through_socks5() {
    let Some(proxy) = Microsocks::start(None) else {
        return;
    };
    // 8 clients at once, each connection with its own handshake in the one event loop.
    let clients = 8;
    let (echo, server) = echo_server(clients);
    let mut relay = zerocat()
        .args(["relay", "--max-conns", "16", "tcp-listen:0"])
        .arg(format!(
            "tcp:localhost:{echo},socks5=127.0.0.1:{}",
            proxy.port
        ))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (addr, _rest) = listening_addr(&mut relay);
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let addr = addr.clone();
            thread::spawn(move || {
                let payload = data(300_000 + i * 1000);
                let got = echo_through(&addr, &payload);
                assert_bytes_eq(&got, &payload, &format!("client {i}"));
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    server.join().unwrap();
    let _ = relay.kill();
    let _ = relay.wait();
}

/// A proxy that takes connections and never answers, for `hold` (then closes).
fn silent_proxy(hold: Duration) -> (u16, thread::JoinHandle<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = vec![0u8; 3];
        s.read_exact(&mut got).unwrap();
        thread::sleep(hold);
        got
    });
    (port, handle)
}

#[test]
fn a_stalled_proxy_is_cut_at_the_connect_timeout_and_named() {
    let (port, stub) = silent_proxy(Duration::from_secs(2));
    let started = Instant::now();
    let mut cmd = zerocat();
    cmd.args(["relay", "--connect-timeout", "300ms", "-"])
        .arg(format!("tcp:localhost:9,socks5=127.0.0.1:{port}"));
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("socks5 proxy 127.0.0.1:{port}")),
        "{err}"
    );
    assert!(err.contains("stalled"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(out.stdout.is_empty());
    assert_eq!(stub.join().unwrap(), [5, 1, 0]);
}

/// A tinyproxy on a free loopback port with its own config: CONNECT only to `allowed`,
/// Basic auth bob:s3cret. None when tinyproxy is not installed.
/// A tinyproxy on a free loopback port that takes CONNECT to port `allowed` only, and
/// requests from bob:s3cret; None when it is not installed.
pub(crate) fn tinyproxy(dir: &Path, allowed: u16) -> Option<Daemon> {
    if !installed("/usr/bin/tinyproxy", "tinyproxy") {
        return None;
    }
    let port = free_port();
    let conf = dir.join("tinyproxy.conf");
    std::fs::write(
        &conf,
        format!(
            "Port {port}\nListen 127.0.0.1\nTimeout 30\nAllow 127.0.0.1\nConnectPort {allowed}\n\
             BasicAuth bob s3cret\nLogLevel Error\nMaxClients 10\n"
        ),
    )
    .unwrap();
    let mut cmd = Command::new("tinyproxy");
    cmd.arg("-d").arg("-c").arg(&conf);
    Some(Daemon::start(cmd, port))
}

#[test]
fn http_connect_through_tinyproxy_with_auth_and_refusals() {
    let dir = tempdir();
    let (addr, sink) = tcp_sink();
    let target: u16 = sink_port(&addr).parse().unwrap();
    let Some(proxy) = tinyproxy(dir.path(), target) else {
        return;
    };
    let payload = data(2 << 20);
    let src = write_file(dir.path(), "in", &payload);
    // Without credentials: 407, quoted.
    let mut cmd = zerocat();
    cmd.args(["pipe"]).arg(&src).arg(format!(
        "tcp:localhost:{target},connect=127.0.0.1:{}",
        proxy.port
    ));
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("connect proxy 127.0.0.1:{}", proxy.port)),
        "{err}"
    );
    assert!(err.contains(" 407 "), "{err}");
    // A port the proxy does not allow: 403, quoted.
    let mut cmd = zerocat();
    cmd.args(["pipe"]).arg(&src).arg(format!(
        "tcp:localhost:{},connect=127.0.0.1:{},proxy-auth=bob:s3cret",
        free_port(),
        proxy.port
    ));
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(" 403 "), "{err}");
    // With them: the bytes arrive, sent by sendfile.
    let mut cmd = zerocat();
    cmd.args(["pipe", "--stats", "json"])
        .arg(&src)
        .arg(format!(
            "tcp:localhost:{target},connect=127.0.0.1:{}",
            proxy.port
        ))
        .env("ZEROCAT_PROXY_AUTH", "bob:s3cret");
    let out = run(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    assert_bytes_eq(&sink.join().unwrap(), &payload, "through tinyproxy");
    assert_eq!(final_path(&json_report(&out.stderr)), "sendfile");
}

/// `ssh -o ProxyCommand='zerocat relay - tcp:%h:%p,socks5=…'` against an sshd of our own on
/// loopback (its own config, host key and authorized key in a temp dir).
#[test]
fn ssh_proxy_command_goes_through_socks5() {
    if !installed("/usr/sbin/sshd", "openssh-server")
        || !installed("/usr/bin/ssh", "openssh-client")
    {
        return;
    }
    // sshd run as root wants its privilege separation directory.
    if nix::unistd::geteuid().is_root() {
        let _ = std::fs::create_dir_all("/run/sshd");
    } else {
        eprintln!("skipped: sshd needs root here (privilege separation)");
        return;
    }
    let Some(proxy) = Microsocks::start(None) else {
        return;
    };
    let dir = tempdir();
    let d = dir.path();
    for key in ["host", "user"] {
        let ok = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(d.join(key))
            .status()
            .unwrap()
            .success();
        assert!(ok, "ssh-keygen");
    }
    let port = free_port();
    let conf = d.join("sshd_config");
    std::fs::write(
        &conf,
        format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {host}\nAuthorizedKeysFile {keys}\n\
             StrictModes no\nPidFile none\nUsePAM no\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n",
            host = d.join("host").display(),
            keys = d.join("user.pub").display(),
        ),
    )
    .unwrap();
    let mut sshd = Command::new("/usr/sbin/sshd");
    sshd.arg("-f").arg(&conf).args(["-D", "-e"]);
    let _sshd = Daemon::start(sshd, port);
    let payload = data(1 << 20);
    let user = nix::unistd::User::from_uid(nix::unistd::geteuid())
        .unwrap()
        .map(|u| u.name)
        .unwrap_or_else(|| "root".into());
    let mut ssh = Command::new("ssh");
    ssh.args(["-F", "/dev/null", "-i"])
        .arg(d.join("user"))
        .args([
            "-o",
            "BatchMode=yes",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "LogLevel=ERROR",
            "-o",
        ])
        .arg(format!(
            "ProxyCommand={} -q relay - tcp:%h:%p,socks5=127.0.0.1:{}",
            bin().display(),
            proxy.port
        ))
        .args(["-p", &port.to_string()])
        .arg(format!("{user}@localhost"))
        .arg("cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = ssh.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feed = thread::spawn(move || stdin.write_all(&payload).map(|_| payload));
    let out = wait_with_deadline(child, DEADLINE);
    let payload = feed.join().unwrap().unwrap();
    assert!(out.status.success(), "ssh: {}", stderr_text(&out));
    assert_bytes_eq(
        &out.stdout,
        &payload,
        "ssh cat through zerocat and microsocks",
    );
}
