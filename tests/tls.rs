//! TLS endpoints (`tls:`, `tls-listen:`) against real parts: openssl s_server/s_client,
//! curl, and zerocat on both ends of a relay; certificates made by `openssl req`/`x509` in
//! a temporary CA. Here the kernel has no `tls` ULP, so the record layer is rustls'
//! (`userspace`, with kTLS's refusal ENOENT in the report); where a kernel offers the ULP
//! the assertion on that path says so and is skipped.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::util::*;

/// A CA, a server certificate for localhost / 127.0.0.1 / ::1, and a client certificate;
/// `self.pem`, self-signed for CN=localhost as `openssl req -x509` makes it (CA:TRUE, no
/// subjectAltName), and `old.pem`, self-signed for CN=localhost, expired in 2020.
pub(crate) struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    /// None (with the reason printed) when openssl is not installed.
    pub(crate) fn make() -> Option<Pki> {
        if Command::new("openssl").arg("version").output().is_err() {
            eprintln!("skipped: openssl is not installed (apt-get install openssl)");
            return None;
        }
        let dir = tempdir();
        let script = r#"set -e
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 -subj "/CN=zerocat test CA"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.csr -subj "/CN=localhost"
printf "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth\n" > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout client.key -out client.csr -subj "/CN=client"
printf "extendedKeyUsage=clientAuth\n" > client.ext
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile client.ext
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout self.key -out self.pem -days 2 -subj "/CN=localhost"
mkdir old && cd old && mkdir newcerts && touch index.txt && echo 01 > serial
printf "[ca]\ndefault_ca=d\n[d]\ndir=.\ndatabase=index.txt\nnew_certs_dir=newcerts\nserial=serial\ndefault_md=sha256\npolicy=p\nx509_extensions=v3\n[p]\ncommonName=supplied\n[v3]\nbasicConstraints=critical,CA:TRUE\n" > ca.cnf
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ../old.key -out old.csr -subj "/CN=localhost"
openssl ca -batch -config ca.cnf -selfsign -keyfile ../old.key -in old.csr -startdate 20200101000000Z -enddate 20200102000000Z -notext -out ../old.pem
"#;
        let out = Command::new("sh")
            .args(["-c", script])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(Pki { dir })
    }

    pub(crate) fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// A TLS 1.3 client of our own (rustls) connected to `addr`, trusting this CA, for
    /// what no command-line client does on cue (a key update, a cut without close_notify).
    pub(crate) fn rustls_client(
        &self,
        addr: &str,
    ) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
        use rustls::pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        let ca = std::fs::read(self.path("ca.pem")).unwrap();
        for cert in rustls::pki_types::CertificateDer::pem_slice_iter(&ca) {
            roots.add(cert.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(DEADLINE)).unwrap();
        rustls::StreamOwned::new(conn, tcp)
    }

    /// A TLS server of our own (rustls) on 127.0.0.1 with the server certificate, for
    /// `runs` connections one after another: `serve` gets each established stream and says
    /// what it received; the stream is then dropped with no close_notify of ours (as
    /// Python's ssl and many HTTP servers close). The address, and what each run received.
    fn rustls_server(
        &self,
        runs: usize,
        serve: fn(&mut rustls::StreamOwned<rustls::ServerConnection, TcpStream>) -> Vec<u8>,
    ) -> (String, thread::JoinHandle<Vec<Vec<u8>>>) {
        use rustls::pki_types::pem::PemObject;
        let certs = rustls::pki_types::CertificateDer::pem_file_iter(self.path("server.pem"))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = rustls::pki_types::PrivateKeyDer::from_pem_file(self.path("server.key")).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        let config = Arc::new(config);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let server = thread::spawn(move || {
            (0..runs)
                .map(|_| {
                    let (tcp, _) = listener.accept().unwrap();
                    tcp.set_read_timeout(Some(DEADLINE)).unwrap();
                    let conn = rustls::ServerConnection::new(config.clone()).unwrap();
                    let mut tls = rustls::StreamOwned::new(conn, tcp);
                    serve(&mut tls)
                })
                .collect()
        });
        (addr, server)
    }

    /// `,cert=…,key=…` of the server.
    fn server_opts(&self) -> String {
        format!(
            ",cert={},key={}",
            self.path("server.pem"),
            self.path("server.key")
        )
    }
}

/// The kernel offers kTLS: the userspace assertions do not apply.
fn ulp_offered() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
        .map(|l| l.split_whitespace().any(|u| u == "tls"))
        .unwrap_or(false)
}

/// The report's TLS object of an endpoint says the record layer ran in userspace because
/// the kernel refused kTLS with ENOENT (no `tls` ULP); skipped, said, where it offers one.
#[track_caller]
fn assert_userspace_tls(tls: &serde_json::Value) {
    assert_eq!(tls["version"], "TLSv1.3", "{tls}");
    assert!(
        tls["cipher"].as_str().unwrap().starts_with("TLS13_"),
        "{tls}"
    );
    if ulp_offered() {
        eprintln!("skipped: this kernel offers the tls ULP; the userspace path is not the one run");
        return;
    }
    assert_eq!(tls["path"], "userspace", "{tls}");
    assert_eq!(tls["ktls"], false, "{tls}");
    assert_eq!(tls["fallback"], "ENOENT", "{tls}");
}

/// A child killed when dropped: a failed assertion leaves no relay running.
struct Reaped(Option<Child>);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn spawn_listening(mut cmd: Command) -> (Child, String, thread::JoinHandle<Vec<u8>>) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (addr, rest) = listening_addr(&mut child);
    (child, addr, rest)
}

fn port_of(addr: &str) -> &str {
    addr.rsplit_once(':').unwrap().1
}

#[test]
fn pipe_sends_a_file_over_tls_to_openssl_s_server() {
    let Some(pki) = Pki::make() else { return };
    let payload = data(3 << 20);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = Command::new("openssl")
        .args(["s_server", "-naccept", "1", "-quiet", "-accept"])
        .arg(format!("127.0.0.1:{port}"))
        .args([
            "-cert",
            &pki.path("server.pem"),
            "-key",
            &pki.path("server.key"),
        ])
        // Its stdin held open: at EOF s_server would end the session itself.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // s_server accepts one connection: no probe, zerocat retries until it listens.
    let mut cmd = zerocat();
    cmd.args(["pipe", "--stats", "json"]).arg(&src).arg(format!(
        "tls:localhost:{port},cafile={},retry=100,interval=50ms",
        pki.path("ca.pem")
    ));
    let out = run(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let stdin = server.stdin.take();
    let got = wait_with_deadline(server, DEADLINE);
    drop(stdin);
    assert_bytes_eq(&got.stdout, &payload, "zerocat tls: -> openssl s_server");
    let report = json_report(&out.stderr);
    assert_userspace_tls(&report["dst"]["tls"]);
    assert_eq!(report["dst"]["tls"]["sni"], "localhost", "{report}");
    assert_eq!(report["bytes"], payload.len() as u64, "{report}");
}

#[test]
fn tls_listen_takes_a_file_from_openssl_s_client() {
    let Some(pki) = Pki::make() else { return };
    let payload = data(2 << 20);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    let dst = dir.path().join("out");
    let mut cmd = zerocat();
    cmd.args(["pipe", "--stats", "json"])
        .arg(format!("tls-listen:0{}", pki.server_opts()))
        .arg(&dst);
    let (child, addr, rest) = spawn_listening(cmd);
    let client = Command::new("openssl")
        .args([
            "s_client",
            "-quiet",
            "-no_ign_eof",
            "-nocommands",
            "-connect",
            &addr,
        ])
        .args(["-CAfile", &pki.path("ca.pem")])
        .stdin(std::fs::File::open(&src).unwrap())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let client = wait_with_deadline(client, DEADLINE);
    let done = wait_with_deadline(child, DEADLINE);
    let stderr = rest.join().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&stderr)
    );
    assert!(client.status.success());
    assert_bytes_eq(
        &std::fs::read(&dst).unwrap(),
        &payload,
        "s_client -> tls-listen",
    );
    assert_userspace_tls(&json_report(&stderr)["src"]["tls"]);
}

#[test]
fn curl_fetches_through_a_relay_that_terminates_tls() {
    let Some(pki) = Pki::make() else { return };
    if Command::new("curl").arg("--version").output().is_err() {
        eprintln!("skipped: curl is not installed (apt-get install curl)");
        return;
    }
    let payload = data(1 << 20);
    let dir = tempdir();
    let body = write_file(dir.path(), "body", &payload);
    let mut cmd = zerocat();
    cmd.args(["relay", "--once", "--stats", "json"])
        .arg(format!("tls-listen:0{}", pki.server_opts()))
        // The request is read (a background cat drains it until curl is done; through fd
        // 3, as sh gives a background job /dev/null for stdin): a child that exits with it
        // unread makes the relay's write into its stdin EPIPE.
        .arg(format!(
            "sh:exec 3<&0; cat <&3 >/dev/null & printf 'HTTP/1.0 200 OK\\r\\nContent-Length: {}\\r\\n\\r\\n'; \
             cat {}; wait",
            payload.len(),
            body.display()
        ));
    let (child, addr, rest) = spawn_listening(cmd);
    let got = dir.path().join("got");
    let curl = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "30",
            "--cacert",
            &pki.path("ca.pem"),
            "-o",
        ])
        .arg(&got)
        .arg(format!("https://localhost:{}/", port_of(&addr)))
        .output()
        .unwrap();
    assert!(
        curl.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&curl.stderr)
    );
    let done = wait_with_deadline(child, DEADLINE);
    let stderr = rest.join().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&stderr)
    );
    assert_bytes_eq(
        &std::fs::read(&got).unwrap(),
        &payload,
        "curl through the relay",
    );
    let report = json_report(&stderr);
    let conn = &connections_of(&report)[0];
    assert_eq!(conn["ended"], "eof", "{conn}");
    assert_userspace_tls(&conn["tls"]["a"]);
    assert_eq!(conn["tls"]["a"]["sni"], "localhost", "{conn}");
}

fn connections_of(report: &serde_json::Value) -> &Vec<serde_json::Value> {
    report["connections"].as_array().expect("connections")
}

/// zerocat originates TLS (`relay tcp-listen: tls:`) into zerocat terminating it (`relay
/// tls-listen: tcp:`) in front of an echo: 100 clients at once, each its own handshake on
/// the event loops, every byte back as sent; the log names version, cipher and SNI.
#[test]
fn a_hundred_concurrent_connections_through_tls_origination_and_termination() {
    let Some(pki) = Pki::make() else { return };
    let dir = tempdir();
    let log = dir.path().join("log");
    let mut echo = zerocat();
    echo.args(["-q", "relay", "tcp-listen:0", "exec:cat"]);
    let (echo, echo_addr, _echo_rest) = spawn_listening(echo);
    let mut term = zerocat();
    term.args(["-q", "relay", "--log"])
        .arg(&log)
        .arg(format!("tls-listen:0{}", pki.server_opts()))
        .arg(format!("tcp:{echo_addr}"));
    let (term, term_addr, _term_rest) = spawn_listening(term);
    let mut orig = zerocat();
    orig.args(["-q", "relay", "tcp-listen:0"]).arg(format!(
        "tls:localhost:{},cafile={}",
        port_of(&term_addr),
        pki.path("ca.pem")
    ));
    let (orig, orig_addr, _orig_rest) = spawn_listening(orig);
    let _reaped = [Reaped(Some(orig)), Reaped(Some(term)), Reaped(Some(echo))];
    let clients: Vec<_> = (0..100)
        .map(|i| {
            let addr = orig_addr.clone();
            thread::spawn(move || {
                let payload = Arc::new(data(20_000 + i * 997));
                let mut s = TcpStream::connect(&addr).unwrap();
                s.set_read_timeout(Some(DEADLINE)).unwrap();
                let writer = {
                    let mut s = s.try_clone().unwrap();
                    let payload = payload.clone();
                    thread::spawn(move || {
                        s.write_all(&payload).unwrap();
                        s.shutdown(Shutdown::Write).unwrap();
                    })
                };
                let mut got = Vec::new();
                s.read_to_end(&mut got).unwrap();
                writer.join().unwrap();
                assert_bytes_eq(&got, &payload, &format!("client {i}"));
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    // Every connection is logged once it ends (the echo's side closes last).
    let until = Instant::now() + Duration::from_secs(20);
    let lines = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|l| l["event"] == "connection")
            .collect();
        if lines.len() >= 100 || Instant::now() > until {
            break lines;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(lines.len(), 100, "log lines");
    for line in &lines {
        assert_eq!(line["ended"], "eof", "{line}");
        assert_userspace_tls(&line["tls"]["a"]);
        assert_eq!(line["tls"]["a"]["sni"], "localhost", "{line}");
    }
}

/// One file sent by `zerocat pipe SRC CLIENT` to `zerocat pipe LISTENER DST`: the listener
/// is `tls-listen:0` with the server's certificate and `listen_extra`, the client URI is
/// made from the listener's port.
struct Sent {
    client: std::process::Output,
    server: std::process::Output,
    server_err: String,
    /// What reached DST.
    got: Vec<u8>,
}

/// `zerocat pipe tls-listen:0,cert=…,key=…EXTRA DST`, listening: the child, its address and
/// its stderr's reader.
fn tls_pipe_server(
    pki: &Pki,
    extra: &str,
    dst: &std::path::Path,
) -> (Child, String, thread::JoinHandle<Vec<u8>>) {
    let mut server = zerocat();
    server
        .arg("pipe")
        .arg(format!("tls-listen:0{}{extra}", pki.server_opts()))
        .arg(dst);
    spawn_listening(server)
}

fn send_file(
    pki: &Pki,
    src: &std::path::Path,
    listen_extra: &str,
    client: impl Fn(&str) -> String,
) -> Sent {
    send_file_to(
        &format!("tls-listen:0{}{listen_extra}", pki.server_opts()),
        src,
        client,
    )
}

/// `zerocat pipe SRC CLIENT` to `zerocat pipe LISTENER SRC.out`; `client` makes the
/// client's endpoint from the listener's port.
fn send_file_to(listener: &str, src: &std::path::Path, client: impl Fn(&str) -> String) -> Sent {
    let dst = src.with_extension("out");
    let _ = std::fs::remove_file(&dst);
    let mut server = zerocat();
    server.arg("pipe").arg(listener).arg(&dst);
    let (server, addr, rest) = spawn_listening(server);
    let mut cmd = zerocat();
    cmd.arg("pipe").arg(src).arg(client(port_of(&addr)));
    let client = run(cmd);
    let server = wait_with_deadline(server, DEADLINE);
    let server_err = String::from_utf8_lossy(&rest.join().unwrap()).into_owned();
    let got = std::fs::read(&dst).unwrap_or_default();
    Sent {
        client,
        server,
        server_err,
        got,
    }
}

/// `cafile=` on a listener requires a client certificate from that CA: refused without
/// one (both ends say why, exit 1), the bytes delivered with one.
#[test]
fn a_listener_with_cafile_requires_and_verifies_client_certificates() {
    let Some(pki) = Pki::make() else { return };
    let payload = data(300_000);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    for with_cert in [false, true] {
        let Sent {
            client,
            server,
            server_err,
            got,
        } = send_file(
            &pki,
            &src,
            &format!(",cafile={}", pki.path("ca.pem")),
            |port| {
                let mut uri = format!("tls:localhost:{port},cafile={}", pki.path("ca.pem"));
                if with_cert {
                    uri.push_str(&format!(
                        ",cert={},key={}",
                        pki.path("client.pem"),
                        pki.path("client.key")
                    ));
                }
                uri
            },
        );
        if with_cert {
            assert!(client.status.success(), "{}", stderr_text(&client));
            assert!(server.status.success(), "{server_err}");
            assert_bytes_eq(&got, &payload, "with a client cert");
        } else {
            assert_eq!(server.status.code(), Some(1), "{server_err}");
            assert!(
                server_err.contains("TLS handshake failed") && server_err.contains("certificate"),
                "{server_err}"
            );
            // TLS 1.3: the client learns of the refusal at its first read or write.
            assert_ne!(client.status.code(), Some(0), "{}", stderr_text(&client));
            assert!(
                stderr_text(&client)
                    .contains("the server requires a client certificate; give ,cert=PEM,key=PEM"),
                "{}",
                stderr_text(&client)
            );
        }
    }
}

/// A certificate for another name is refused (exit 1, the reason named, nothing sent);
/// `verify=0` takes it, with a warning line.
#[test]
fn a_wrong_host_is_refused_and_verify_0_warns() {
    let Some(pki) = Pki::make() else { return };
    let payload = data(100_000);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    for insecure in [false, true] {
        let Sent {
            client,
            server,
            server_err,
            got,
        } = send_file(&pki, &src, "", |port| {
            if insecure {
                format!("tls:127.0.0.1:{port},sni=wrong.example,verify=0")
            } else {
                format!(
                    "tls:127.0.0.1:{port},sni=wrong.example,cafile={}",
                    pki.path("ca.pem")
                )
            }
        });
        let err = stderr_text(&client);
        if insecure {
            assert!(client.status.success(), "{err}");
            assert!(
                err.contains("verify=0: the server's certificate is not verified"),
                "{err}"
            );
            assert!(server.status.success(), "{server_err}");
            assert_bytes_eq(&got, &payload, "verify=0");
        } else {
            assert_eq!(client.status.code(), Some(1), "{err}");
            assert!(
                err.contains("TLS handshake failed") && err.contains("not valid for name"),
                "{err}"
            );
            assert!(err.contains("tls:127.0.0.1:"), "names the endpoint: {err}");
            assert_eq!(server.status.code(), Some(1), "{server_err}");
            assert_eq!(got.len(), 0);
        }
    }
}

/// A peer that ends the TCP stream without close_notify: the bytes before are delivered,
/// but the stream may be cut short, so the run fails (exit 1) and says so.
#[test]
fn a_stream_cut_without_close_notify_is_an_error_not_an_eof() {
    let Some(pki) = Pki::make() else { return };
    let payload = data(200_000);
    let dir = tempdir();
    let dst = dir.path().join("out");
    let mut server = zerocat();
    server
        .args(["pipe", "--stats", "json"])
        .arg(format!("tls-listen:0{}", pki.server_opts()))
        .arg(&dst);
    let (server, addr, rest) = spawn_listening(server);
    // A rustls client that writes, then drops the TCP socket without close_notify.
    let mut tls = pki.rustls_client(&addr);
    tls.write_all(&payload).unwrap();
    tls.flush().unwrap();
    drop(tls);
    let server = wait_with_deadline(server, DEADLINE);
    let err = String::from_utf8_lossy(&rest.join().unwrap()).into_owned();
    assert_eq!(server.status.code(), Some(1), "{err}");
    assert!(err.contains("without close_notify"), "{err}");
    assert_bytes_eq(
        &std::fs::read(&dst).unwrap(),
        &payload,
        "the bytes before the cut",
    );
}

/// Plaintext spoken to a TLS listener, a record larger than TLS allows and a client that
/// never says a word: each closed and counted (the silent one at --connect-timeout), while
/// a real TLS client is served.
#[test]
fn plaintext_and_a_stalled_handshake_do_not_stall_the_relay() {
    let Some(pki) = Pki::make() else { return };
    let mut sink = zerocat();
    sink.args(["-q", "relay", "tcp-listen:0", "sh:cat >/dev/null"]);
    let (mut echo, echo_addr, _echo_rest) = spawn_listening(sink);
    let mut term = zerocat();
    term.args(["relay", "--connect-timeout", "1s", "--stats", "json"])
        .arg(format!("tls-listen:0{}", pki.server_opts()))
        .arg(format!("tcp:{echo_addr}"));
    let (term, term_addr, rest) = spawn_listening(term);
    let silent = TcpStream::connect(&term_addr).unwrap();
    let mut plain = TcpStream::connect(&term_addr).unwrap();
    plain.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    // A record header announcing more than TLS allows (2^14 + 2048 at most).
    let mut oversized = TcpStream::connect(&term_addr).unwrap();
    oversized
        .write_all(&[[0x16, 0x03, 0x01, 0xff, 0xff].as_slice(), &[0u8; 600]].concat())
        .unwrap();
    // A real client meanwhile: zerocat pipe over TLS to a sink behind the relay.
    let payload = data(150_000);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    let mut client = zerocat();
    client.arg("pipe").arg(&src).arg(format!(
        "tls:localhost:{},cafile={}",
        port_of(&term_addr),
        pki.path("ca.pem")
    ));
    let out = run(client);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let mut buf = Vec::new();
    plain.set_read_timeout(Some(DEADLINE)).unwrap();
    let _ = plain.read_to_end(&mut buf); // closed (after an alert)
    oversized.set_read_timeout(Some(DEADLINE)).unwrap();
    let _ = oversized.read_to_end(&mut buf);
    thread::sleep(Duration::from_millis(1500)); // past the silent one's deadline
    drop(silent);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(term.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let _ = wait_with_deadline(term, DEADLINE);
    let err = String::from_utf8_lossy(&rest.join().unwrap()).into_owned();
    assert!(
        err.contains("TLS handshake failed: what the client sent is not TLS"),
        "{err}"
    );
    assert!(
        err.contains("TLS handshake not complete within 1.000 s"),
        "{err}"
    );
    assert!(
        err.contains("TLS handshake failed: the client sent a record larger than TLS allows"),
        "{err}"
    );
    assert_sentence(&err);
    let report = json_report(err.as_bytes());
    let conns = connections_of(&report);
    assert_eq!(conns.len(), 4, "{report}");
    assert_eq!(
        conns.iter().filter(|c| c["ended"] == "eof").count(),
        1,
        "{report}"
    );
    let _ = echo.kill();
    let _ = echo.wait();
}

/// Bad input: a listener without its key is a usage error; a missing certificate file or a
/// key that does not match is a clear error before anything listens.
#[test]
fn bad_certificates_and_keys_are_clear_errors() {
    let Some(pki) = Pki::make() else { return };
    let mut cmd = zerocat();
    cmd.args(["pipe", "tls-listen:0,cert=x.pem", "/dev/null"]);
    let out = run(cmd);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
    assert!(stderr_text(&out).contains("needs its certificate and key"));
    let missing: PathBuf = pki.dir.path().join("nope.pem");
    let mut cmd = zerocat();
    cmd.arg("pipe")
        .arg(format!(
            "tls-listen:0,cert={},key={}",
            missing.display(),
            pki.path("server.key")
        ))
        .arg("/dev/null");
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot read the certificate") && err.contains("nope.pem"),
        "{err}"
    );
    assert!(!err.contains("listening on"), "{err}");
    let mut cmd = zerocat();
    cmd.arg("pipe")
        .arg(format!(
            "tls-listen:0,cert={},key={}",
            pki.path("server.pem"),
            pki.path("client.key")
        ))
        .arg("/dev/null");
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("do not go together"), "{err}");
    // The key's bytes are never shown.
    let key = std::fs::read_to_string(pki.path("client.key")).unwrap();
    let body = key.lines().nth(1).unwrap();
    assert!(!err.contains(body), "{err}");
    // A certificate given as the key: said so.
    let mut cmd = zerocat();
    cmd.arg("pipe")
        .arg(format!(
            "tls-listen:0,cert={},key={}",
            pki.path("server.pem"),
            pki.path("server.pem")
        ))
        .arg("/dev/null");
    let out = run(cmd);
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("holds no PEM private key"), "{err}");
}

/// A relayed stream cut by the backend (a reset mid-way) must not end in a close_notify
/// that tells the TLS client the stream was complete: the client gets a reset and fails.
/// (Before, the bridge sent close_notify whenever the relay closed its end: the client
/// exited 0 with a truncated file.)
#[test]
fn a_cut_behind_the_relay_is_no_clean_tls_end_for_the_client() {
    let Some(pki) = Pki::make() else { return };
    let backend = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let backend_addr = backend.local_addr().unwrap().to_string();
    let server = thread::spawn(move || {
        let (mut s, _) = backend.accept().unwrap();
        s.write_all(&data(100_000)).unwrap();
        thread::sleep(Duration::from_millis(100));
        // A reset: SO_LINGER 0, then close.
        nix::sys::socket::setsockopt(
            &s,
            nix::sys::socket::sockopt::Linger,
            &nix::libc::linger {
                l_onoff: 1,
                l_linger: 0,
            },
        )
        .unwrap();
    });
    let mut relay = zerocat();
    relay
        .args(["-q", "relay", "--once"])
        .arg(format!("tls-listen:0{}", pki.server_opts()))
        .arg(format!("tcp:{backend_addr}"));
    let (relay, addr, _rest) = spawn_listening(relay);
    let dir = tempdir();
    let dst = dir.path().join("out");
    let mut client = zerocat();
    client
        .arg("pipe")
        .arg(format!(
            "tls:localhost:{},cafile={}",
            port_of(&addr),
            pki.path("ca.pem")
        ))
        .arg(&dst);
    let out = run(client);
    server.join().unwrap();
    let _ = wait_with_deadline(relay, DEADLINE);
    let err = stderr_text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a cut stream ended cleanly: {err}"
    );
    assert!(
        err.contains("reset") || err.contains("without close_notify"),
        "{err}"
    );
}

/// TLS 1.3 key updates through the relay's own record layer: a client refreshes its keys
/// mid-stream (the relay must answer with its own), both ways keep every byte, and
/// close_notify ends each direction.
#[test]
fn key_updates_mid_stream_pass_through_the_relay() {
    let Some(pki) = Pki::make() else { return };
    let mut echo = zerocat();
    echo.args(["-q", "relay", "tcp-listen:0", "exec:cat"]);
    let (echo, echo_addr, _echo_rest) = spawn_listening(echo);
    let mut term = zerocat();
    term.args(["relay", "--once", "--stats", "json"])
        .arg(format!("tls-listen:0{}", pki.server_opts()))
        .arg(format!("tcp:{echo_addr}"));
    let (term, term_addr, rest) = spawn_listening(term);
    let _reaped = Reaped(Some(echo));
    let mut tls = pki.rustls_client(&term_addr);
    let payload = data(3 << 20);
    let mut got = Vec::new();
    for (i, piece) in payload.chunks(512 * 1024).enumerate() {
        tls.write_all(piece).unwrap();
        tls.flush().unwrap();
        if i % 2 == 0 {
            tls.conn.refresh_traffic_keys().unwrap();
        }
        // Read back what this piece echoes (the relay answers our key update meanwhile).
        let want = got.len() + piece.len();
        let mut buf = vec![0u8; 64 * 1024];
        while got.len() < want {
            let n = tls.read(&mut buf).unwrap();
            assert!(n > 0, "EOF after {} bytes", got.len());
            got.extend_from_slice(&buf[..n]);
        }
    }
    tls.conn.send_close_notify();
    tls.flush().unwrap();
    let mut tail = Vec::new();
    let _ = tls.read_to_end(&mut tail);
    assert!(tail.is_empty(), "{} bytes after the echo", tail.len());
    assert_bytes_eq(&got, &payload, "echo through key updates");
    let done = wait_with_deadline(term, DEADLINE);
    let err = String::from_utf8_lossy(&rest.join().unwrap()).into_owned();
    assert!(done.status.success(), "{err}");
    let report = json_report(err.as_bytes());
    let conn = &connections_of(&report)[0];
    assert_eq!(conn["ended"], "eof", "{conn}");
    assert_userspace_tls(&conn["tls"]["a"]);
}

/// An inherited listening socket takes `,tls,cert=,key=` as `systemd:` does: `fd:3,tls`.
#[test]
fn an_inherited_listener_serves_tls_with_fd_n_tls() {
    use std::os::fd::AsRawFd;
    let Some(pki) = Pki::make() else { return };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = tempdir();
    let dst = dir.path().join("out");
    let mut server = zerocat();
    server
        .arg("pipe")
        .arg(format!("fd:3,tls{}", pki.server_opts()))
        .arg(&dst);
    crate::rig::share_as_fd3(&mut server, listener.as_raw_fd());
    let (server, _addr, rest) = spawn_listening(server);
    let payload = data(400_000);
    let src = write_file(dir.path(), "in", &payload);
    let mut client = zerocat();
    client.arg("pipe").arg(&src).arg(format!(
        "tls:localhost:{port},cafile={}",
        pki.path("ca.pem")
    ));
    let out = run(client);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let done = wait_with_deadline(server, DEADLINE);
    let err = String::from_utf8_lossy(&rest.join().unwrap()).into_owned();
    assert!(done.status.success(), "{err}");
    assert_bytes_eq(&std::fs::read(&dst).unwrap(), &payload, "fd:3,tls");
    // Without the flag, cert= on fd: is refused, naming it.
    let mut bad = zerocat();
    bad.args(["pipe", "fd:3,cert=x.pem,key=y.pem", "/dev/null"]);
    let out = run(bad);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
    assert!(stderr_text(&out).contains("go with its 'tls'"));
}

/// `tee` to a TLS sink: its record layer sends the last records and close_notify before
/// tee exits (before, tee did not wait for the bridge: the receiver got a cut stream).
#[test]
fn tee_delivers_every_byte_to_a_tls_sink() {
    let Some(pki) = Pki::make() else { return };
    let payload = data(4 << 20);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    let dst = dir.path().join("out");
    let copy = dir.path().join("copy");
    let (server, addr, rest) = tls_pipe_server(&pki, "", &dst);
    let mut tee = zerocat();
    tee.arg("tee")
        .arg(&src)
        .arg(format!(
            "tls:localhost:{},cafile={}",
            port_of(&addr),
            pki.path("ca.pem")
        ))
        .arg(&copy);
    let out = run(tee);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let server = wait_with_deadline(server, DEADLINE);
    let err = String::from_utf8_lossy(&rest.join().unwrap()).into_owned();
    assert!(server.status.success(), "{err}");
    assert_bytes_eq(&std::fs::read(&dst).unwrap(), &payload, "the TLS sink");
    assert_bytes_eq(&std::fs::read(&copy).unwrap(), &payload, "the file sink");
}

/// `pipe FILE tls:` to a server that reads to zerocat's close_notify and then closes the
/// connection without its own (Python's ssl, many HTTP servers): the stream zerocat sends
/// was delivered whole and closed by its close_notify, and nothing flows the other way, so
/// the server's FIN is the end, not a truncation. Every run exits 0 with every byte there.
/// (Before, the record layer's thread took that FIN for a cut stream whenever it came
/// before the engine closed its end: 1 run in 5 or so exited 1, "without close_notify".)
#[test]
fn a_tls_sink_whose_server_closes_without_close_notify_is_a_clean_end() {
    let Some(pki) = Pki::make() else { return };
    const RUNS: usize = 40;
    let payload = data(100_000);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    let (addr, server) = pki.rustls_server(RUNS, |tls| {
        let mut got = Vec::new();
        // Ok at the client's close_notify; an error at a cut.
        tls.read_to_end(&mut got).unwrap();
        got
    });
    let mut failed = Vec::new();
    for run_no in 0..RUNS {
        let mut cmd = zerocat();
        cmd.args(["pipe", "--stats", "json"]).arg(&src).arg(format!(
            "tls:localhost:{},cafile={}",
            port_of(&addr),
            pki.path("ca.pem")
        ));
        let out = run(cmd);
        if !out.status.success() {
            failed.push(format!("run {run_no}: {}", stderr_text(&out)));
            continue;
        }
        let report = json_report(&out.stderr);
        assert_userspace_tls(&report["dst"]["tls"]);
        assert_eq!(report["bytes"], payload.len() as u64, "{report}");
    }
    let received = server.join().unwrap();
    for (run_no, got) in received.iter().enumerate() {
        assert_bytes_eq(
            got,
            &payload,
            &format!("run {run_no}: what the server read"),
        );
    }
    assert!(
        failed.is_empty(),
        "{} of {RUNS} runs failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}

/// The stream zerocat reads from a `tls:` server that ends it without close_notify may be
/// cut short: the bytes before are written, and the run fails (exit 1) and says so.
#[test]
fn a_tls_source_cut_without_close_notify_still_exits_1() {
    let Some(pki) = Pki::make() else { return };
    let (addr, server) = pki.rustls_server(1, |tls| {
        tls.write_all(&data(200_000)).unwrap();
        tls.flush().unwrap();
        Vec::new()
    });
    let dir = tempdir();
    let dst = dir.path().join("out");
    let mut cmd = zerocat();
    cmd.arg("pipe")
        .arg(format!(
            "tls:localhost:{},cafile={}",
            port_of(&addr),
            pki.path("ca.pem")
        ))
        .arg(&dst);
    let out = run(cmd);
    server.join().unwrap();
    let err = stderr_text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("without close_notify"), "{err}");
    assert_bytes_eq(
        &std::fs::read(&dst).unwrap(),
        &data(200_000),
        "the bytes before the cut",
    );
}

impl Pki {
    /// `,cert=…,key=…` of a listener presenting `name`.pem and `name`.key.
    fn cert_opts(&self, name: &str) -> String {
        format!(
            ",cert={},key={}",
            self.path(&format!("{name}.pem")),
            self.path(&format!("{name}.key"))
        )
    }

    /// `openssl x509 -noout -fingerprint -sha256` of `name`.pem: "AB:CD:…", as a person
    /// copies it into pin=sha256:.
    pub(crate) fn fingerprint(&self, name: &str) -> String {
        let out = Command::new("openssl")
            .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
            .arg(self.path(&format!("{name}.pem")))
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        text.trim().rsplit_once('=').unwrap().1.to_string()
    }
}

/// A TLS failure is said in a sentence: no Rust Debug text (`Other(OtherError(…))`,
/// `{ … }`, a variant's CamelCase name) on any stderr line but a JSON report's.
#[track_caller]
fn assert_sentence(err: &str) {
    let debug = [
        "Other(",
        "OtherError",
        "{",
        "}",
        "CaUsedAsEndEntity",
        "UnknownIssuer",
    ];
    for line in err.lines().filter(|l| !l.starts_with('{')) {
        for text in debug {
            assert!(!line.contains(text), "Debug text '{text}' in: {line}");
        }
    }
}

/// Two zerocats over a certificate made by `openssl req -x509 -subj /CN=localhost` (CA:TRUE,
/// OpenSSL 3's default, and no subjectAltName): the client trusts it given as cafile= (curl
/// takes the same --cacert) and pinned by pin=sha256: (the colon form openssl prints). Before,
/// cafile= refused it: "invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))".
#[test]
fn a_self_signed_certificate_is_trusted_through_cafile_and_pin() {
    let Some(pki) = Pki::make() else { return };
    let payload = data(300_000);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    let pin = format!("pin=sha256:{}", pki.fingerprint("self"));
    for trust in [format!("cafile={}", pki.path("self.pem")), pin] {
        let Sent {
            client,
            server,
            server_err,
            got,
        } = send_file_to(
            &format!("tls-listen:0{}", pki.cert_opts("self")),
            &src,
            |port| format!("tls:localhost:{port},{trust}"),
        );
        assert!(client.status.success(), "{trust}: {}", stderr_text(&client));
        assert!(server.status.success(), "{trust}: {server_err}");
        assert_bytes_eq(&got, &payload, &trust);
    }
    // The report of a pinned run names the record layer that carried the bytes.
    let (listener, addr, rest) = {
        let mut server = zerocat();
        server
            .arg("pipe")
            .arg(format!("tls-listen:0{}", pki.cert_opts("self")))
            .arg(dir.path().join("json.out"));
        spawn_listening(server)
    };
    let mut cmd = zerocat();
    cmd.args(["pipe", "--stats", "json"]).arg(&src).arg(format!(
        "tls:localhost:{},pin=sha256:{}",
        port_of(&addr),
        pki.fingerprint("self").replace(':', "").to_lowercase()
    ));
    let out = run(cmd);
    assert!(out.status.success(), "{}", stderr_text(&out));
    let listener = wait_with_deadline(listener, DEADLINE);
    let server_err = String::from_utf8_lossy(&rest.join().unwrap()).into_owned();
    assert!(listener.status.success(), "{server_err}");
    let report = json_report(&out.stderr);
    assert_userspace_tls(&report["dst"]["tls"]);
    assert_eq!(report["bytes"], payload.len() as u64, "{report}");
    assert_bytes_eq(
        &std::fs::read(dir.path().join("json.out")).unwrap(),
        &payload,
        "pinned, lowercase hex",
    );
}

/// What is still refused, each in a sentence with the next step and nothing sent: a pin of
/// another certificate (the presented one's SHA-256 said), a name the certificate in
/// cafile= does not carry, an expired certificate in cafile=, and a certificate of a CA
/// that is neither in cafile= nor the system store.
#[test]
fn wrong_pins_names_dates_and_issuers_are_refused_with_sentences() {
    let Some(pki) = Pki::make() else { return };
    let payload = data(50_000);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    let self_pin = pki.fingerprint("self").replace(':', "").to_lowercase();
    let other_pin = pki.fingerprint("server").replace(':', "").to_lowercase();
    let cases = [
        (
            "self",
            format!("tls:localhost:{{}},pin=sha256:{other_pin}"),
            format!("is not the one pin= names: its SHA-256 is {self_pin}"),
        ),
        (
            "self",
            format!("tls:127.0.0.1:{{}},cafile={}", pki.path("self.pem")),
            "is not valid for name '127.0.0.1' (it carries CN=localhost)".to_string(),
        ),
        (
            "self",
            format!("tls:127.0.0.1:{{}},sni=other.example,pin=sha256:{self_pin}"),
            "is not valid for name 'other.example'".to_string(),
        ),
        (
            "old",
            format!("tls:localhost:{{}},cafile={}", pki.path("old.pem")),
            "expired on 2020-01-02 00:00:00 UTC".to_string(),
        ),
        (
            "server",
            "tls:localhost:{}".to_string(),
            "is not signed by a CA in cafile= or the system store; give ,cafile=CA.pem".to_string(),
        ),
    ];
    for (cert, client_uri, says) in cases {
        let Sent {
            client,
            server,
            server_err,
            got,
        } = send_file_to(
            &format!("tls-listen:0{}", pki.cert_opts(cert)),
            &src,
            |port| client_uri.replace("{}", port),
        );
        let err = stderr_text(&client);
        assert_eq!(client.status.code(), Some(1), "{client_uri}: {err}");
        assert!(
            err.contains("TLS handshake failed: the server's certificate "),
            "{err}"
        );
        assert!(
            err.contains(&says),
            "{client_uri}: wanted '{says}' in: {err}"
        );
        assert_sentence(&err);
        // The listener hears why in an alert, also said in a sentence.
        assert_eq!(server.status.code(), Some(1), "{server_err}");
        assert!(
            server_err.contains("the client refused this listener's certificate"),
            "{server_err}"
        );
        assert_sentence(&server_err);
        assert_eq!(got.len(), 0, "{client_uri}");
    }
}

/// A listener's cafile= holding a self-signed client certificate (`openssl req -x509`,
/// CA:TRUE) takes that client as itself; a client certificate of a CA not in cafile= is
/// still refused, the listener saying why in a sentence. (Before, the self-signed one was
/// refused: "invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))".)
#[test]
fn a_self_signed_client_certificate_in_a_listeners_cafile_is_trusted() {
    let Some(pki) = Pki::make() else { return };
    let payload = data(200_000);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    for client_cert in ["self", "client"] {
        let Sent {
            client,
            server,
            server_err,
            got,
        } = send_with_client_cert(&pki, &src, client_cert);
        if client_cert == "self" {
            assert!(client.status.success(), "{}", stderr_text(&client));
            assert!(server.status.success(), "{server_err}");
            assert_bytes_eq(&got, &payload, "a self-signed client certificate");
        } else {
            assert_eq!(server.status.code(), Some(1), "{server_err}");
            assert!(
                server_err.contains(
                    "TLS handshake failed: the client's certificate is not signed by a CA in \
                     this listener's cafile="
                ),
                "{server_err}"
            );
            assert_sentence(&server_err);
            assert_eq!(got.len(), 0);
            let err = stderr_text(&client);
            assert_eq!(client.status.code(), Some(1), "{err}");
            assert_sentence(&err);
        }
    }
}

/// `pipe SRC tls:` presenting `client_cert` to a listener whose cafile= holds only the
/// self-signed certificate (the client trusts the test CA).
fn send_with_client_cert(pki: &Pki, src: &std::path::Path, client_cert: &str) -> Sent {
    send_file(
        pki,
        src,
        &format!(",cafile={}", pki.path("self.pem")),
        |port| {
            format!(
                "tls:localhost:{port},cafile={}{}",
                pki.path("ca.pem"),
                pki.cert_opts(client_cert)
            )
        },
    )
}

/// Under TLS 1.3 a client's handshake ends before the listener has checked its
/// certificate, so the listener's refusal (an alert, then a close) arrives after the client
/// has sent its few bytes and its close_notify. A one-way `pipe FILE tls:` waits for the
/// peer's answer to its close_notify before calling the stream delivered: refused, it exits
/// 1 saying why, never 0 with nothing delivered (before: exit 0 by the second of the five
/// rounds, seen).
#[test]
fn a_refused_client_certificate_fails_a_short_one_way_client() {
    let Some(pki) = Pki::make() else { return };
    let payload = data(100);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    for round in 0..5 {
        let Sent {
            client,
            server,
            server_err,
            got,
        } = send_with_client_cert(&pki, &src, "client");
        let err = stderr_text(&client);
        assert_eq!(server.status.code(), Some(1), "{server_err}");
        assert_eq!(got.len(), 0);
        assert_eq!(client.status.code(), Some(1), "round {round}: {err}");
        assert!(err.contains("certificate"), "round {round}: {err}");
        assert_sentence(&err);
    }
}

/// Python's ssl module as the server, as the issue's runs had it: it reads to zerocat's
/// close_notify (`recv` returns b"") and closes the socket without `unwrap()`, so without a
/// close_notify of its own. `pipe FILE tls:` 40 times and `tee FILE tls: COPY` 10 times: each
/// exits 0, and the server read every byte each time (its SHA-256 compared).
#[test]
fn pipe_and_tee_to_python_ssl_that_closes_without_close_notify_exit_0() {
    let Some(pki) = Pki::make() else { return };
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("SKIPPED: python3 is not installed (apt-get install python3)");
        return;
    }
    const PIPES: usize = 40;
    const TEES: usize = 10;
    let payload = data(100_000);
    let dir = tempdir();
    let src = write_file(dir.path(), "in", &payload);
    let script = r#"
import hashlib, socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(64)
print(listener.getsockname()[1], flush=True)
for _ in range(int(sys.argv[3])):
    conn, _ = listener.accept()
    conn.settimeout(60)
    tls = ctx.wrap_socket(conn, server_side=True)
    digest = hashlib.sha256()
    while True:
        chunk = tls.recv(65536)
        if not chunk:
            break
        digest.update(chunk)
    print(digest.hexdigest(), flush=True)
    tls.close()
"#;
    let server = Command::new("python3")
        .args(["-c", script])
        .arg(pki.path("server.pem"))
        .arg(pki.path("server.key"))
        .arg((PIPES + TEES).to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed if an assertion fails before it has served every run.
    let mut server = Reaped(Some(server));
    let stdout = server.0.as_mut().unwrap().stdout.take().unwrap();
    let mut lines = std::io::BufReader::new(stdout);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut lines, &mut line).unwrap();
    let port = line.trim().to_string();
    let dst = format!("tls:localhost:{port},cafile={}", pki.path("ca.pem"));
    let mut failed = Vec::new();
    for run_no in 0..PIPES + TEES {
        let mut cmd = zerocat();
        if run_no < PIPES {
            cmd.args(["pipe", "-q"]).arg(&src).arg(&dst);
        } else {
            cmd.args(["tee", "-q"])
                .arg(&src)
                .arg(&dst)
                .arg(dir.path().join("copy"));
        }
        let out = run(cmd);
        if !out.status.success() {
            failed.push(format!("run {run_no}: {}", stderr_text(&out)));
        }
    }
    let mut digests = String::new();
    std::io::Read::read_to_string(&mut lines, &mut digests).unwrap();
    let done = wait_with_deadline(server.0.take().unwrap(), DEADLINE);
    assert!(
        done.status.success(),
        "python: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    let want = hex_sha256(&payload);
    let got: Vec<&str> = digests.lines().collect();
    assert_eq!(got.len(), PIPES + TEES, "{digests}");
    for (run_no, digest) in got.iter().enumerate() {
        assert_eq!(*digest, want, "run {run_no}: what the server read");
    }
    assert!(
        failed.is_empty(),
        "{} of {} runs failed:\n{}",
        failed.len(),
        PIPES + TEES,
        failed.join("\n")
    );
    assert_bytes_eq(
        &std::fs::read(dir.path().join("copy")).unwrap(),
        &payload,
        "tee's file sink",
    );
}

fn hex_sha256(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// An echo server on loopback: every connection gets back what it sent, then a FIN.
fn echo_server() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            thread::spawn(move || {
                let mut r = s.try_clone().unwrap();
                let _ = std::io::copy(&mut r, &mut s);
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}

/// `n` connections to `addr` that send nothing, held open by the caller.
fn silent_sockets(addr: &str, n: usize) -> Vec<TcpStream> {
    (0..n).map(|_| TcpStream::connect(addr).unwrap()).collect()
}

/// A client through a TLS relay: `zerocat relay - tls:localhost:PORT,cafile=...` with
/// `payload` on stdin; what came back on stdout, within `deadline` (None: it stalled).
fn tls_echo_client(pki: &Pki, addr: &str, payload: &[u8], deadline: Duration) -> Option<Vec<u8>> {
    let mut cmd = zerocat();
    cmd.args(["-q", "relay", "-"]).arg(format!(
        "tls:localhost:{},cafile={}",
        port_of(addr),
        pki.path("ca.pem")
    ));
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let sent = payload.to_vec();
    thread::spawn(move || {
        let _ = stdin.write_all(&sent);
    });
    // Its output is drained as it comes (a pipe holds only 64 KiB), the wait bounded.
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(deadline) {
        Ok(out) => {
            let out = out.unwrap();
            assert!(out.status.success(), "client: {}", stderr_text(&out));
            Some(out.stdout)
        }
        Err(_) => {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            None
        }
    }
}

/// The prlimit wrapper for a relay under `ulimit -n 256`, or None (said) without prlimit.
fn under_256_fds() -> Option<Vec<&'static str>> {
    if Command::new("prlimit").arg("--version").output().is_err() {
        eprintln!("SKIPPED: prlimit(1) is not installed: the ulimit -n 256 half");
        return None;
    }
    Some(vec!["prlimit", "--nofile=256"])
}

/// A relay command on `listen` to `backend`, under `wrap`, with a deadline for greetings
/// long enough that only shedding can let a client in past a flood.
fn flood_relay(wrap: &[&str], listen: &str, backend: &str) -> Command {
    let mut cmd = match wrap.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(bin());
            c
        }
        None => zerocat(),
    };
    cmd.args(["relay", "--connect-timeout", "30s", listen])
        .arg(format!("tcp:{backend}"));
    cmd
}

/// 1,100 silent sockets to a `tls-listen:` relay (also under `ulimit -n 256`): a real
/// client is served all the same, within 10 s though greetings may last 30 s. Before, the
/// 1,024 slots for handshakes in flight filled and the listener stopped accepting until
/// they expired (under 256 fds: EMFILE, and the same).
#[test]
fn a_flood_of_silent_sockets_does_not_lock_out_a_tls_client() {
    let Some(pki) = Pki::make() else { return };
    let backend = echo_server();
    let mut wraps = vec![Vec::new()];
    wraps.extend(under_256_fds());
    for wrap in wraps {
        let listen = format!("tls-listen:0,backlog=2048{}", pki.server_opts());
        let (relay, addr, _rest) = spawn_listening(flood_relay(&wrap, &listen, &backend));
        let relay = Reaped(Some(relay));
        let silent = silent_sockets(&addr, 1100);
        let payload = data(100_000);
        let got = tls_echo_client(&pki, &addr, &payload, Duration::from_secs(10));
        let got = got.unwrap_or_else(|| panic!("{wrap:?}: the client was not served in 10 s"));
        assert_bytes_eq(
            &got,
            &payload,
            &format!("{wrap:?}: echo through the TLS relay"),
        );
        drop(silent);
        drop(relay);
    }
}

/// The same flood on a `tcp-listen:...,proxy` relay: a client that sends its PROXY header
/// and payload is served and its bytes echoed.
#[test]
fn a_flood_of_silent_sockets_does_not_lock_out_a_proxy_client() {
    let backend = echo_server();
    let mut wraps = vec![Vec::new()];
    wraps.extend(under_256_fds());
    for wrap in wraps {
        let listen = "tcp-listen:127.0.0.1:0,proxy,backlog=2048";
        let (relay, addr, _rest) = spawn_listening(flood_relay(&wrap, listen, &backend));
        let relay = Reaped(Some(relay));
        let silent = silent_sockets(&addr, 1100);
        let payload = data(100_000);
        let client = TcpStream::connect(&addr).unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut w = client.try_clone().unwrap();
        let sent = payload.clone();
        let sending = thread::spawn(move || {
            w.write_all(b"PROXY TCP4 192.0.2.1 192.0.2.2 1234 80\r\n")
                .unwrap();
            w.write_all(&sent).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        let mut got = Vec::new();
        let read = (&client).read_to_end(&mut got);
        assert!(read.is_ok(), "{wrap:?}: not served in 10 s: {read:?}");
        sending.join().unwrap();
        assert_bytes_eq(
            &got,
            &payload,
            &format!("{wrap:?}: echo through the proxy relay"),
        );
        drop(silent);
        drop(relay);
    }
}

/// 500 connections that speak plaintext to a TLS listener: each is closed and counted, but
/// stderr says so in a few rate-limited lines, not 500.
#[test]
fn five_hundred_junk_handshakes_are_a_few_lines() {
    let Some(pki) = Pki::make() else { return };
    let backend = echo_server();
    let mut cmd = zerocat();
    cmd.args(["relay", "--stats", "json"])
        .arg(format!("tls-listen:0{}", pki.server_opts()))
        .arg(format!("tcp:{backend}"));
    let (relay, addr, rest) = spawn_listening(cmd);
    for _ in 0..500 {
        let mut s = TcpStream::connect(&addr).unwrap();
        let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(relay.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let _ = wait_with_deadline(relay, DEADLINE);
    let err = String::from_utf8_lossy(&rest.join().unwrap()).into_owned();
    let lines = err
        .lines()
        .filter(|l| l.contains("TLS handshake failed"))
        .count();
    assert!(lines >= 1, "{err}");
    assert!(lines <= 60, "{lines} lines for 500 junk handshakes");
    let report = json_report(err.as_bytes());
    assert_eq!(connections_count(&report), 500, "{report}");
}

fn connections_count(report: &serde_json::Value) -> u64 {
    connections_of(report).len() as u64 + report["connections_omitted"].as_u64().unwrap_or(0)
}

/// A backend that answers each of `runs` connections in two writes (header, body), then
/// closes, as a small HTTP server does; it reads the whole request first (a close with it
/// unread would be a reset). Its address.
fn two_write_backend(
    runs: usize,
    request: &'static [u8],
    header: Vec<u8>,
    body: Vec<u8>,
) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    thread::spawn(move || {
        for _ in 0..runs {
            let Ok((mut tcp, _)) = listener.accept() else {
                return;
            };
            tcp.set_read_timeout(Some(DEADLINE)).unwrap();
            let mut got = vec![0; request.len()];
            if tcp.read_exact(&mut got).is_err() {
                continue;
            }
            let _ = tcp.write_all(&header);
            let _ = tcp.write_all(&body);
        }
    });
    addr
}

/// A client whose first bytes leave with its handshake's last flight (as curl's request
/// does): rustls holds them from before the handshake, and sends them in the same write
/// as its Finished, so the relay's handshake reads both at once. The relay then holds the
/// request in rustls with nothing left on the socket: it must read it without waiting for
/// an event that never comes. 200 such clients through `tls-listen:` in front of a backend
/// that answers in two writes then closes: each gets the whole answer, and the relay's log
/// counts exactly the bytes that went each way, none undelivered.
#[test]
fn a_request_sent_with_the_clients_finished_gets_its_answer_every_time() {
    let Some(pki) = Pki::make() else { return };
    const RUNS: usize = 200;
    const REQUEST: &[u8] = b"GET /small.txt HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let body = b"hello small file\n".to_vec();
    let header = format!("HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    let answer = [header.clone(), body.clone()].concat();
    let backend = two_write_backend(RUNS, REQUEST, header, body);
    let dir = tempdir();
    let log = dir.path().join("log");
    let mut relay = zerocat();
    relay
        .args(["-q", "relay", "--log"])
        .arg(&log)
        .arg(format!("tls-listen:127.0.0.1:0{}", pki.server_opts()))
        .arg(format!("tcp:{backend}"));
    let (relay, addr, _rest) = spawn_listening(relay);
    let _reaped = Reaped(Some(relay));
    for i in 0..RUNS {
        let mut client = pki.rustls_client(&addr);
        // Generous: only a connection the relay stalls on misses it.
        client
            .sock
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        client.conn.writer().write_all(REQUEST).unwrap();
        let mut got = Vec::new();
        if let Err(e) = client.read_to_end(&mut got) {
            panic!("client {i}: {e} after {} bytes of the answer", got.len());
        }
        assert_bytes_eq(&got, &answer, &format!("client {i}"));
        client.conn.send_close_notify();
        client.flush().unwrap();
    }
    let until = Instant::now() + Duration::from_secs(20);
    let lines = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|l| l["event"] == "connection")
            .collect();
        if lines.len() >= RUNS || Instant::now() > until {
            break lines;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(lines.len(), RUNS, "log lines");
    for line in &lines {
        assert_eq!(line["ended"], "eof", "{line}");
        assert_eq!(line["a_to_b"]["bytes"], REQUEST.len(), "{line}");
        assert_eq!(line["b_to_a"]["bytes"], answer.len(), "{line}");
        assert_eq!(line["a_to_b"]["undelivered"], 0, "{line}");
        assert_eq!(line["b_to_a"]["undelivered"], 0, "{line}");
        assert_userspace_tls(&line["tls"]["a"]);
    }
}

/// Bytes the relay handed to rustls are not delivered until the records carrying them are
/// on the socket: a client that stops reading, then the relay cut by SIGTERM (`--grace
/// 0`), is told no more than the client could read — the records still queued in rustls
/// are undelivered, not counted as sent.
#[test]
fn bytes_in_records_never_sent_are_counted_undelivered() {
    let Some(pki) = Pki::make() else { return };
    const REQUEST: &[u8] = b"GET / HTTP/1.0\r\n\r\n";
    let stream = data(8 << 20);
    let backend = two_write_backend(1, REQUEST, Vec::new(), stream.clone());
    let mut relay = zerocat();
    relay
        .args(["relay", "--once", "--grace", "0", "--stats", "json"])
        .arg(format!("tls-listen:127.0.0.1:0{}", pki.server_opts()))
        .arg(format!("tcp:{backend}"));
    let (relay, addr, rest) = spawn_listening(relay);
    let pid = relay.id();
    let mut client = pki.rustls_client(&addr);
    // A small window: the relay's records wait in rustls, not in the client's kernel.
    nix::sys::socket::setsockopt(&client.sock, nix::sys::socket::sockopt::RcvBuf, &4096).unwrap();
    client.write_all(REQUEST).unwrap();
    client.flush().unwrap();
    // The relay fills the socket and rustls' queue, then stalls on the client.
    thread::sleep(Duration::from_millis(1500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let done = wait_with_deadline(relay, DEADLINE);
    let stderr = rest.join().unwrap();
    let _ = done;
    // What reached the client: it reads on to the reset (or the end).
    client
        .sock
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0; 1 << 16];
    loop {
        match client.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    assert_bytes_eq(&got, &stream[..got.len()], "what the client read");
    let report = json_report(&stderr);
    let conn = &connections_of(&report)[0];
    let delivered = conn["b_to_a"]["bytes"].as_u64().unwrap();
    let undelivered = conn["b_to_a"]["undelivered"].as_u64().unwrap();
    eprintln!(
        "reported {delivered} B delivered, {undelivered} B undelivered; the client read {}",
        got.len()
    );
    // One record the client may have had only part of is its slack.
    assert!(
        delivered <= got.len() as u64 + 17 * 1024,
        "reported {delivered} B delivered, the client could read {}: {conn}",
        got.len()
    );
    assert!(undelivered > 0, "{conn}");
    assert_userspace_tls(&conn["tls"]["a"]);
}

/// After a flood of 1,100 silent sockets to a `tls-listen:` relay is closed, the next
/// clients' few bytes come back from the echo behind it: 20 clients that send 6 B with
/// their Finished (rustls) and 5 that send them after the handshake (`zerocat relay -
/// tls:`). Before, the bytes reached the echo only once the client gave up (the audit's
/// "6 B a->b, the echo never comes back").
#[test]
fn after_a_flood_of_silent_sockets_a_short_echo_comes_back() {
    let Some(pki) = Pki::make() else { return };
    let backend = echo_server();
    let listen = format!("tls-listen:127.0.0.1:0,backlog=2048{}", pki.server_opts());
    let (relay, addr, _rest) = spawn_listening(flood_relay(&[], &listen, &backend));
    let _relay = Reaped(Some(relay));
    drop(silent_sockets(&addr, 1100));
    let payload = b"hello\n";
    for i in 0..20 {
        let mut client = pki.rustls_client(&addr);
        client
            .sock
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        client.conn.writer().write_all(payload).unwrap();
        let mut got = [0; 6];
        if let Err(e) = client.read_exact(&mut got) {
            panic!("client {i}: no echo in 10 s: {e}");
        }
        assert_bytes_eq(&got, payload, &format!("client {i}"));
        client.conn.send_close_notify();
        let _ = client.flush();
    }
    for i in 0..5 {
        let got = tls_echo_client(&pki, &addr, payload, Duration::from_secs(10));
        let got = got.unwrap_or_else(|| panic!("zerocat client {i}: no echo in 10 s"));
        assert_bytes_eq(&got, payload, &format!("zerocat client {i}"));
    }
}

/// `probe tls:` against a `tls-listen:` relay: open after the handshake, naming the version,
/// the certificate's subject and when it expires; a certificate it does not trust fails
/// the probe (exit 1), saying why.
#[test]
fn probe_completes_a_tls_handshake_and_names_version_subject_and_expiry() {
    let Some(pki) = Pki::make() else { return };
    let mut cmd = zerocat();
    cmd.arg("relay")
        .arg(format!("tls-listen:0{}", pki.server_opts()))
        .arg("exec:cat");
    let (child, addr, _stderr) = spawn_listening(cmd);
    let _relay = Reaped(Some(child));
    let target = format!(
        "tls:localhost:{},cafile={}",
        port_of(&addr),
        pki.path("ca.pem")
    );
    let mut cmd = zerocat();
    cmd.args(["probe", &target]);
    let out = run(cmd);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr_text(&out));
    assert!(text.contains(" open ("), "{text}");
    assert!(text.contains("TLSv1.3"), "{text}");
    assert!(text.contains("subject CN=localhost"), "{text}");
    assert!(text.contains("expires 20"), "{text}");

    let mut cmd = zerocat();
    cmd.args(["--stats", "json", "probe", &target]);
    let out = run(cmd);
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["state"], "open", "{line}");
    assert_eq!(line["tls"]["version"], "TLSv1.3", "{line}");
    assert_eq!(line["tls"]["subject"], "CN=localhost", "{line}");
    assert!(
        line["tls"]["not_after"].as_str().unwrap().ends_with(" UTC"),
        "{line}"
    );

    // Without the CA: the system's roots do not know it.
    let mut cmd = zerocat();
    cmd.args(["probe", &format!("tls:localhost:{}", port_of(&addr))]);
    let out = run(cmd);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains(" failed ("), "{text}");
}
