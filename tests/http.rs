//! `http://` and `https://` endpoints against real servers on loopback: nginx (a config the
//! test writes: Range, ETag, `dav_methods PUT`, an ssl server with a test CA), and a small
//! server of the test's own for what nginx does not do on cue (chunked bodies, bad chunk
//! sizes, oversized heads, redirects, bodies longer or shorter than announced).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::http_fault::CutProxy;
use crate::rig::{Pace, Rig};
use crate::util::*;

/// An nginx of the test's own, one process (`master_process off`), serving `root` on
/// 127.0.0.1 with Range and ETag (its defaults), PUT under `/up/`, a redirect at `/moved`;
/// stopped (SIGKILL, reaped) when dropped.
struct Nginx {
    child: Child,
    port: u16,
    /// "http", or "https" for the `ssl` server.
    scheme: &'static str,
    root: PathBuf,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// None (with SKIPPED printed) when nginx is not installed.
    fn start(ssl: Option<(&str, &str)>) -> Option<Nginx> {
        let binary = nginx_binary()?;
        let dir = tempdir();
        let root = dir.path().join("www");
        std::fs::create_dir_all(root.join("up")).unwrap();
        let d = dir.path().display();
        let port = free_port();
        // The ssl server also says which name the client asked for (SNI) and which
        // certificate it gave (asked for, not required), and redirects to plain http.
        let listen = match ssl {
            Some((cert, key)) => format!(
                "listen 127.0.0.1:{port} ssl; ssl_certificate {cert}; ssl_certificate_key {key};
    ssl_verify_client optional_no_ca;
    location = /sni {{ return 200 \"$ssl_server_name\"; }}
    location = /client {{ return 200 \"$ssl_client_s_dn\"; }}
    location = /to-http {{ return 302 http://127.0.0.1:{port}/data.bin; }}"
            ),
            None => format!("listen 127.0.0.1:{port};"),
        };
        let conf = format!(
            "daemon off; master_process off; pid {d}/nginx.pid; error_log {d}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fcgi;
  uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;
  default_type application/octet-stream;
  server {{
    {listen}
    root {root};
    location /up/ {{ dav_methods PUT; create_full_put_path on; client_max_body_size 0; }}
    location = /moved {{ return 302 /data.bin; }}
    location = /loop {{ return 302 /loop; }}
  }}
}}
",
            root = root.display()
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let child = Command::new(binary)
            .arg("-p")
            .arg(dir.path())
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let mut nginx = Nginx {
            child,
            port,
            scheme: if ssl.is_some() { "https" } else { "http" },
            root,
            _dir: dir,
        };
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed() > Duration::from_secs(10) || nginx.child.try_wait().ok()?.is_some()
            {
                let log = std::fs::read_to_string(nginx._dir.path().join("error.log"))
                    .unwrap_or_default();
                panic!("nginx did not start on port {port}: {log}");
            }
            thread::sleep(Duration::from_millis(20));
        }
        Some(nginx)
    }

    fn url(&self, path: &str) -> String {
        format!("{}://127.0.0.1:{}{path}", self.scheme, self.port)
    }

    /// `data` as NAME under the root.
    fn serve(&self, name: &str, data: &[u8]) {
        std::fs::write(self.root.join(name), data).unwrap();
    }
}

/// Debian's nginx (/usr/sbin may not be on a user's PATH).
fn nginx_binary() -> Option<&'static str> {
    ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .find(|p| Path::new(p).exists())
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

macro_rules! nginx_or_skip {
    ($ssl:expr) => {
        match Nginx::start($ssl) {
            Some(n) => n,
            None => {
                eprintln!("SKIPPED: nginx is not installed (apt-get install nginx)");
                return;
            }
        }
    };
}

/// A server of the test's own: for each connection in turn, reads the request (head, and a
/// body framed by Content-Length or chunked, after answering `Expect: 100-continue`), then
/// writes the canned answer and closes. Returns each request as received (head and body).
/// A request as the server got it: its head, and its body.
type Received = (String, Vec<u8>);

fn canned(answers: Vec<Vec<u8>>) -> (u16, thread::JoinHandle<Vec<Received>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = thread::spawn(move || {
        let mut requests = Vec::new();
        for answer in answers {
            let (mut s, _) = listener.accept().unwrap();
            s.set_read_timeout(Some(DEADLINE)).unwrap();
            let (head, body) = read_request(&mut s);
            requests.push((head, body));
            let _ = s.write_all(&answer);
            let _ = s.shutdown(std::net::Shutdown::Write);
            // Read what is left so the close is a FIN, not a reset (HAZARDS §2).
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        }
        requests
    });
    (port, handle)
}

fn read_request(s: &mut TcpStream) -> Received {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if s.read(&mut byte).unwrap_or(0) == 0 {
            return (String::from_utf8_lossy(&head).into_owned(), Vec::new());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let lower = head.to_ascii_lowercase();
    if lower.contains("expect: 100-continue") {
        s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").unwrap();
    }
    let mut body = Vec::new();
    if let Some(len) = lower
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse::<usize>().unwrap())
    {
        body.resize(len, 0);
        s.read_exact(&mut body).unwrap();
    } else if lower.contains("transfer-encoding: chunked") {
        loop {
            let mut line = Vec::new();
            while !line.ends_with(b"\r\n") {
                s.read_exact(&mut byte).unwrap();
                line.push(byte[0]);
            }
            let size = usize::from_str_radix(
                std::str::from_utf8(&line)
                    .unwrap()
                    .trim()
                    .split(';')
                    .next()
                    .unwrap(),
                16,
            )
            .unwrap();
            let mut chunk = vec![0u8; size + 2];
            s.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    (head, body)
}

/// An answer with a Content-Length body.
fn answer(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// `body` in chunks of the given sizes (then the rest), with an extension and a trailer.
fn chunked(body: &[u8], sizes: &[usize]) -> Vec<u8> {
    let mut out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    let mut rest = body;
    for &size in sizes {
        let size = size.min(rest.len());
        out.extend_from_slice(format!("{size:x};ext=1\r\n").as_bytes());
        out.extend_from_slice(&rest[..size]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[size..];
    }
    if !rest.is_empty() {
        out.extend_from_slice(format!("{:X}\r\n", rest.len()).as_bytes());
        out.extend_from_slice(rest);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\nX-Trailer: yes\r\n\r\n");
    out
}

fn http_of(report: &serde_json::Value) -> &serde_json::Value {
    &report["src"]["http"]
}

#[test]
fn get_from_nginx_into_a_file_and_a_pipe_is_spliced_byte_exact() {
    let nginx = nginx_or_skip!(None);
    let payload = data(3 * 1024 * 1024 + 17);
    nginx.serve("data.bin", &payload);

    let mut rig = Rig::new();
    let out = rig.path("out.bin");
    let sink = rig.file_sink(out);
    let run = rig.args(["pipe", &nginx.url("/data.bin"), &sink]).run();
    run.assert_code(0, "GET into a file");
    run.assert_held(0, &payload, "GET into a file");
    run.assert_final_path("splice", "GET into a file");
    let http = http_of(run.report());
    assert_eq!(http["status"], 200, "{http}");
    assert_eq!(http["framing"], "content-length", "{http}");
    assert_eq!(http["content_length"], payload.len() as u64, "{http}");
    assert_eq!(http["spliced"], payload.len() as u64, "{http}");
    assert!(
        http["etag"].as_str().is_some_and(|e| e.starts_with('"')),
        "{http}"
    );

    let mut rig = Rig::bare();
    let sink = rig.stdout_sink(Pace::Full);
    let run = rig.args(["pipe", &nginx.url("/data.bin"), &sink]).run();
    run.assert_code(0, "GET into a pipe");
    run.assert_held(0, &payload, "GET into a pipe");
    assert!(
        run.stderr
            .contains("http 200 (3145745 bytes) socket -> pipe via splice"),
        "{}",
        run.stderr
    );
}

#[test]
fn copy_and_tee_take_an_http_source() {
    let nginx = nginx_or_skip!(None);
    let payload = data(1024 * 1024 + 3);
    nginx.serve("data.bin", &payload);

    let mut rig = Rig::new();
    let out = rig.path("copy.bin");
    let sink = rig.file_sink(out);
    let run = rig.args(["copy", &nginx.url("/data.bin"), &sink]).run();
    run.assert_code(0, "copy URL FILE");
    run.assert_held(0, &payload, "copy URL FILE");
    run.assert_final_path("splice", "copy URL FILE");

    let mut rig = Rig::new();
    let a = rig.path("a.bin");
    let b = rig.path("b.bin");
    let a = rig.file_sink(a);
    let b = rig.file_sink(b);
    let run = rig.args(["tee", &nginx.url("/data.bin"), &a, &b]).run();
    run.assert_code(0, "tee URL A B");
    run.assert_held(0, &payload, "tee: first sink");
    run.assert_held(1, &payload, "tee: second sink");
}

#[test]
fn a_status_not_2xx_exits_1_with_nothing_in_the_sink() {
    let nginx = nginx_or_skip!(None);
    let rig = Rig::bare();
    let out = rig.path("out.bin");
    let run = rig
        .args(["pipe", &nginx.url("/missing"), &out.display().to_string()])
        .run();
    run.assert_code(1, "404");
    assert!(run.stderr.contains("404 Not Found"), "{}", run.stderr);
    assert!(run.stderr.contains("/missing"), "{}", run.stderr);
    assert!(!out.exists(), "the sink of a 404 was created");

    let (port, server) = canned(vec![answer(
        "500 Internal Server Error",
        "",
        b"boom\x01 error body",
    )]);
    let mut rig = Rig::bare();
    let sink = rig.stdout_sink(Pace::Full);
    let run = rig
        .args(["pipe", &format!("http://127.0.0.1:{port}/x"), &sink])
        .run();
    server.join().unwrap();
    run.assert_code(1, "500");
    run.assert_held(0, b"", "500: nothing in the sink");
    assert!(
        run.stderr.contains("500 Internal Server Error"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(r"boom\u{1} error body"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_range_gets_a_206_whose_content_range_matches() {
    let nginx = nginx_or_skip!(None);
    let payload = data(100_000);
    nginx.serve("data.bin", &payload);
    let mut rig = Rig::new();
    let sink = rig.stdout_sink(Pace::Full);
    let url = format!("{},range=1000-65999", nginx.url("/data.bin"));
    let run = rig.args(["pipe", &url, &sink]).run();
    run.assert_code(0, "range");
    run.assert_held(0, &payload[1000..66000], "range");
    run.assert_final_path("splice", "range");
    assert_eq!(http_of(run.report())["status"], 206);

    // A server that ignores the range: its 200 is never written as if it were the range.
    let (port, server) = canned(vec![answer("200 OK", "", &payload)]);
    let mut rig = Rig::bare();
    let sink = rig.stdout_sink(Pace::Full);
    let url = format!("http://127.0.0.1:{port}/x,range=10-");
    let run = rig.args(["pipe", &url, &sink]).run();
    let requests = server.join().unwrap();
    run.assert_code(1, "a 200 to a range");
    run.assert_held(0, b"", "a 200 to a range");
    assert!(
        requests[0].0.contains("Range: bytes=10-\r\n"),
        "{}",
        requests[0].0
    );

    // A 206 for other bytes than asked.
    let wrong = answer(
        "206 Partial Content",
        "Content-Range: bytes 0-9/100000\r\n",
        &payload[..10],
    );
    let (port, server) = canned(vec![wrong]);
    let mut rig = Rig::bare();
    let sink = rig.stdout_sink(Pace::Full);
    let url = format!("http://127.0.0.1:{port}/x,range=10-19");
    let run = rig.args(["pipe", &url, &sink]).run();
    server.join().unwrap();
    run.assert_code(1, "a Content-Range not asked");
    run.assert_held(0, b"", "a Content-Range not asked");
    assert!(run.stderr.contains("not the 10-19 asked"), "{}", run.stderr);
    assert!(
        run.stderr.contains(&format!("http://127.0.0.1:{port}/x:")),
        "names the URL: {}",
        run.stderr
    );
}

#[test]
fn a_chunked_body_is_spliced_chunk_by_chunk() {
    let payload = data(700_001);
    let (port, server) = canned(vec![chunked(&payload, &[1, 4096, 65536, 300_000])]);
    let mut rig = Rig::new();
    let out = rig.path("out.bin");
    let sink = rig.file_sink(out);
    let run = rig
        .args(["pipe", &format!("http://127.0.0.1:{port}/c"), &sink])
        .run();
    let requests = server.join().unwrap();
    run.assert_code(0, "chunked");
    run.assert_held(0, &payload, "chunked");
    run.assert_final_path("splice", "chunked");
    let http = http_of(run.report());
    assert_eq!(http["framing"], "chunked", "{http}");
    assert_eq!(http["spliced"], payload.len() as u64, "{http}");
    let head = &requests[0].0;
    assert!(head.starts_with("GET /c HTTP/1.1\r\n"), "{head}");
    assert!(head.contains("Accept-Encoding: identity\r\n"), "{head}");
}

#[test]
fn bad_framing_exits_1_naming_the_url_with_only_the_valid_body_in_the_sink() {
    let payload = data(10_000);
    let mut bad_chunk = chunked(&payload[..5000], &[5000]);
    bad_chunk.truncate(bad_chunk.len() - b"0\r\nX-Trailer: yes\r\n\r\n".len());
    bad_chunk.extend_from_slice(b"zz\r\nnot hex\r\n");
    let mut huge_head = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..100 {
        huge_head.extend_from_slice(format!("X-Filler-{i}: {}\r\n", "y".repeat(1000)).as_bytes());
    }
    huge_head.extend_from_slice(b"Content-Length: 1\r\n\r\nA");
    let mut longer = answer("200 OK", "", &payload[..100]);
    longer.extend_from_slice(b"and more than announced");
    let mut after_last_chunk = chunked(&payload[..3000], &[1000]);
    after_last_chunk.extend_from_slice(b"and more after the last chunk");
    let mut shorter = answer("200 OK", "", &payload);
    shorter.truncate(shorter.len() - 10);
    let cases: Vec<(&str, Vec<u8>, &[u8], &str)> = vec![
        ("a bad chunk size", bad_chunk, &payload[..5000], "bad chunk size"),
        ("a head over 64 KiB", huge_head, b"", "larger than 64 KiB"),
        (
            "an invalid status line",
            b"HTTP/1.1 2x0 Fine\r\n\r\nbody".to_vec(),
            b"",
            "invalid response head",
        ),
        (
            "more body than announced",
            longer,
            &payload[..100],
            "more than its Content-Length",
        ),
        (
            "more body than its last chunk",
            after_last_chunk,
            &payload[..3000],
            "more than its last chunk",
        ),
        ("a body cut short", shorter, &payload[..9990], "9990 of its 10000 bytes"),
        (
            "Content-Length with chunked",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
                .to_vec(),
            b"",
            "both Transfer-Encoding and Content-Length",
        ),
    ];
    for (what, response, valid, said) in cases {
        let (port, server) = canned(vec![response]);
        let mut rig = Rig::new();
        let sink = rig.stdout_sink(Pace::Full);
        let url = format!("http://127.0.0.1:{port}/bad");
        let run = rig.args(["pipe", &url, &sink]).run();
        server.join().unwrap();
        run.assert_code(1, what);
        run.assert_held(0, valid, what);
        assert!(run.stderr.contains(said), "{what}: {}", run.stderr);
        assert!(run.stderr.contains(&url), "{what}: {}", run.stderr);
    }
}

#[test]
fn redirects_are_followed_but_never_from_https_to_http_nor_past_ten() {
    let nginx = nginx_or_skip!(None);
    let payload = data(5000);
    nginx.serve("data.bin", &payload);
    let mut rig = Rig::new();
    let sink = rig.stdout_sink(Pace::Full);
    let run = rig.args(["pipe", &nginx.url("/moved"), &sink]).run();
    run.assert_code(0, "302");
    run.assert_held(0, &payload, "302");
    let http = http_of(run.report());
    assert_eq!(http["redirects"], 1, "{http}");
    assert_eq!(http["url"], nginx.url("/data.bin"), "{http}");

    let rig = Rig::bare();
    let run = rig.args(["pipe", &nginx.url("/loop"), "/dev/null"]).run();
    run.assert_code(1, "a redirect loop");
    assert!(
        run.stderr.contains("more than 10 redirects"),
        "{}",
        run.stderr
    );

    // Across hosts, the user's Authorization stays behind; the other headers go.
    let (port_b, server_b) = canned(vec![answer("200 OK", "", b"from b")]);
    let to_b = answer(
        "307 Temporary Redirect",
        &format!("Location: http://localhost:{port_b}/b\r\n"),
        b"",
    );
    let (port_a, server_a) = canned(vec![to_b]);
    let mut rig = Rig::bare();
    let sink = rig.stdout_sink(Pace::Full);
    let url = format!(
        "http://127.0.0.1:{port_a}/a,header=Authorization:Bearer SECRET-TOKEN,header=X-Trace:1"
    );
    let run = rig.args(["pipe", &url, &sink]).run();
    let a = server_a.join().unwrap();
    let b = server_b.join().unwrap();
    run.assert_code(0, "cross-host redirect");
    run.assert_held(0, b"from b", "cross-host redirect");
    assert!(
        a[0].0.contains("Authorization: Bearer SECRET-TOKEN\r\n"),
        "{}",
        a[0].0
    );
    assert!(!b[0].0.contains("SECRET-TOKEN"), "{}", b[0].0);
    assert!(b[0].0.contains("X-Trace: 1\r\n"), "{}", b[0].0);
    assert!(!run.stderr.contains("SECRET-TOKEN"), "{}", run.stderr);
}

/// Issue 38 item 6: bad input is a usage error (exit 2) before any connection — a server
/// listening at the URL's port is never connected to — and before any sink is opened: no
/// file is created, nothing reaches stdout.
#[test]
fn usage_errors_exit_2_before_any_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let live = |tail: &str| format!("http://127.0.0.1:{port}/x{tail}");
    let dir = tempdir();
    let out = dir.path().join("out.bin");
    let out = out.to_str().unwrap();
    let cases: Vec<(Vec<String>, &str)> = [
        (vec!["pipe", "http:///path", out], "missing HOST"),
        (vec!["pipe", "http://", out], "missing HOST"),
        (
            vec!["pipe", "http://127.0.0.1:99999/x", out],
            "invalid port",
        ),
        (vec!["pipe", "http://127.0.0.1:0/x", out], "port 0"),
        (
            vec!["pipe", &live(",range=9-3"), out],
            "END is before START",
        ),
        (vec!["pipe", &live(",range=abc"), out], "has no '-'"),
        (vec!["pipe", &live(",range=a-"), out], "not a byte offset"),
        (
            vec!["pipe", &live(",method=DELETE"), out],
            "PUT, POST or PATCH",
        ),
        (
            vec!["pipe", &live(",cafile=/x"), out],
            "does not apply to http",
        ),
        (
            vec!["pipe", &format!("htp://127.0.0.1:{port}/x"), out],
            "did you mean 'http'",
        ),
        (vec!["copy", "-j", "2", &live(""), "-"], "'-' is a stream"),
    ]
    .into_iter()
    .map(|(args, said)| (args.into_iter().map(String::from).collect(), said))
    .collect();
    for (args, said) in cases {
        let got = run({
            let mut c = zerocat();
            c.args(&args);
            c
        });
        let what = args.join(" ");
        assert_eq!(got.status.code(), Some(2), "{what}: {}", stderr_text(&got));
        assert!(
            stderr_text(&got).contains(said),
            "{what}: {}",
            stderr_text(&got)
        );
        assert_bytes_eq(&got.stdout, b"", &what);
        assert!(!Path::new(out).exists(), "{what}: the sink was created");
    }
    assert_eq!(
        listener.accept().map(|_| ()).unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "a usage error connected to the server"
    );
}

#[test]
fn put_to_nginx_from_a_file_sends_content_length_and_from_a_stream_chunks() {
    let nginx = nginx_or_skip!(None);
    let payload = data(2 * 1024 * 1024 + 5);
    let rig = Rig::new();
    let src = rig.file("src.bin", &payload);
    let run = rig.args(["pipe", &src, &nginx.url("/up/file.bin")]).run();
    run.assert_code(0, "PUT from a file");
    run.assert_final_path("sendfile", "PUT from a file");
    assert_bytes_eq(
        &std::fs::read(nginx.root.join("up/file.bin")).unwrap(),
        &payload,
        "PUT from a file",
    );
    let http = &run.report()["dst"]["http"];
    assert_eq!(http["status"], 201, "{http}");
    assert_eq!(http["framing"], "content-length", "{http}");

    let mut rig = Rig::new();
    let src = rig.stdin(Arc::new(payload.clone()), Pace::Full);
    let run = rig.args(["pipe", &src, &nginx.url("/up/stream.bin")]).run();
    run.assert_code(0, "PUT from a stream");
    run.assert_final_path("splice", "PUT from a stream");
    assert_bytes_eq(
        &std::fs::read(nginx.root.join("up/stream.bin")).unwrap(),
        &payload,
        "PUT from a stream",
    );
    assert_eq!(run.report()["dst"]["http"]["framing"], "chunked");
}

#[test]
fn post_with_headers_from_a_file_and_the_environment() {
    let payload = data(300_000);
    let (port, server) = canned(vec![answer("200 OK", "", b"")]);
    let mut rig = Rig::new();
    let headers = rig.file(
        "headers.txt",
        b"X-From-File: yes\nAuthorization: Bearer FILE-TOKEN\n",
    );
    let src = rig.stdin(Arc::new(payload.clone()), Pace::Full);
    let url = format!(
        "http://127.0.0.1:{port}/post?x=1,method=POST,header=@{headers},header-env=X-Env:ZC_VAR"
    );
    let running = rig
        .env("ZC_VAR", "ENV-TOKEN")
        .args(["pipe", &src, &url])
        .run();
    let requests = server.join().unwrap();
    running.assert_code(0, "POST");
    let (head, body) = &requests[0];
    assert!(head.starts_with("POST /post?x=1 HTTP/1.1\r\n"), "{head}");
    assert!(head.contains("Transfer-Encoding: chunked\r\n"), "{head}");
    assert!(head.contains("X-From-File: yes\r\n"), "{head}");
    assert!(
        head.contains("Authorization: Bearer FILE-TOKEN\r\n"),
        "{head}"
    );
    assert!(head.contains("X-Env: ENV-TOKEN\r\n"), "{head}");
    assert_bytes_eq(body, &payload, "POST body");
    assert!(!running.stderr.contains("ENV-TOKEN"), "{}", running.stderr);
    assert!(!running.stderr.contains("FILE-TOKEN"), "{}", running.stderr);
    assert_eq!(running.report()["dst"]["http"]["method"], "POST");
}

/// nginx's `ssl` server with a certificate of a test CA (tests/tls.rs' `Pki`), serving
/// `payload` as /data.bin; None (SKIPPED printed) without openssl, nginx or its ssl module.
fn https_nginx(payload: &[u8]) -> Option<(crate::tls::Pki, Nginx)> {
    let Some(pki) = crate::tls::Pki::make() else {
        eprintln!("SKIPPED: openssl is not installed (apt-get install openssl)");
        return None;
    };
    let built_with = nginx_binary().map(|nginx| Command::new(nginx).arg("-V").output());
    if !built_with.is_some_and(|o| {
        o.is_ok_and(|o| String::from_utf8_lossy(&o.stderr).contains("http_ssl_module"))
    }) {
        eprintln!("SKIPPED: nginx is not installed or has no ssl module (apt-get install nginx)");
        return None;
    }
    let (cert, key) = (pki.path("server.pem"), pki.path("server.key"));
    let Some(nginx) = Nginx::start(Some((&cert, &key))) else {
        eprintln!("SKIPPED: nginx is not installed (apt-get install nginx)");
        return None;
    };
    nginx.serve("data.bin", payload);
    Some((pki, nginx))
}

/// An https side's report names its TLS session as a `tls:` side's does: the version and
/// the record layer that carried the body (rustls in userspace, or kTLS).
#[track_caller]
fn assert_tls_named(side: &serde_json::Value) {
    let tls = &side["tls"];
    assert!(
        tls["version"]
            .as_str()
            .is_some_and(|v| v.starts_with("TLSv1.")),
        "{side}"
    );
    let kernel = tls["ktls"] == true;
    assert_eq!(
        tls["path"],
        if kernel { "ktls" } else { "userspace" },
        "{side}"
    );
}

#[test]
fn https_get_and_put_against_nginx_with_a_test_ca() {
    let payload = data(2 * 1024 * 1024 + 29);
    let Some((pki, nginx)) = https_nginx(&payload) else {
        return;
    };
    let cafile = format!(",cafile={}", pki.path("ca.pem"));
    let get = format!("{}{cafile}", nginx.url("/data.bin"));

    let mut rig = Rig::new();
    let out = rig.path("out.bin");
    let sink = rig.file_sink(out);
    let run = rig.args(["pipe", &get, &sink]).run();
    run.assert_code(0, "https GET into a file");
    run.assert_held(0, &payload, "https GET into a file");
    run.assert_final_path("splice", "https GET into a file");
    let http = http_of(run.report());
    assert_eq!(http["status"], 200, "{http}");
    assert_eq!(http["url"], nginx.url("/data.bin"), "{http}");
    assert_eq!(http["spliced"], payload.len() as u64, "{http}");
    assert!(
        http["etag"].as_str().is_some_and(|e| e.starts_with('"')),
        "{http}"
    );
    assert_tls_named(&run.report()["src"]);

    let mut rig = Rig::bare();
    let sink = rig.stdout_sink(Pace::Full);
    let run = rig.args(["pipe", &get, &sink]).run();
    run.assert_code(0, "https GET into a pipe");
    run.assert_held(0, &payload, "https GET into a pipe");
    assert!(
        run.stderr
            .contains("http 200 (2097181 bytes) socket (tls: TLSv1."),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(") -> pipe via splice"),
        "{}",
        run.stderr
    );

    let rig = Rig::new();
    let src = rig.file("src.bin", &payload);
    let put = format!("{}{cafile}", nginx.url("/up/file.bin"));
    let run = rig.args(["pipe", &src, &put]).run();
    run.assert_code(0, "https PUT from a file");
    run.assert_final_path("sendfile", "https PUT from a file");
    assert_bytes_eq(
        &std::fs::read(nginx.root.join("up/file.bin")).unwrap(),
        &payload,
        "https PUT from a file",
    );
    let http = &run.report()["dst"]["http"];
    assert_eq!(http["status"], 201, "{http}");
    assert_eq!(http["framing"], "content-length", "{http}");
    assert_tls_named(&run.report()["dst"]);

    let mut rig = Rig::new();
    let src = rig.stdin(Arc::new(payload.clone()), Pace::Full);
    let put = format!("{}{cafile}", nginx.url("/up/stream.bin"));
    let run = rig.args(["pipe", &src, &put]).run();
    run.assert_code(0, "https PUT from a stream");
    assert_bytes_eq(
        &std::fs::read(nginx.root.join("up/stream.bin")).unwrap(),
        &payload,
        "https PUT from a stream",
    );
    assert_eq!(run.report()["dst"]["http"]["framing"], "chunked");
}

/// An https body cut mid-stream (a FIN from a proxy of the test's own, no close_notify) is
/// resumed as a plain one is: Range + If-Range on a new TLS connection, nginx's 206
/// spliced into the same pipe.
#[test]
fn an_https_body_cut_mid_stream_resumes_into_the_same_pipe() {
    let payload = data(3 * 1024 * 1024 + 1);
    let Some((pki, nginx)) = https_nginx(&payload) else {
        return;
    };
    let proxy = CutProxy::start(&format!("127.0.0.1:{}", nginx.port), vec![900_000]);
    let url = format!(
        "https://{}/data.bin,cafile={}",
        proxy.addr(),
        pki.path("ca.pem")
    );
    let mut rig = Rig::new().args(["pipe", "--retry-wait", "10ms"]);
    let sink = rig.stdout_sink(Pace::Full);
    let run = rig.args([url, sink]).run();
    run.assert_code(0, "https, cut");
    run.assert_held(0, &payload, "https, cut");
    run.assert_final_path("splice", "https, cut");
    let http = http_of(run.report());
    let resumes = http["resumes"].as_array().unwrap();
    assert_eq!(resumes.len(), 1, "{http}");
    let offset = resumes[0]["offset"].as_u64().unwrap();
    assert!(offset > 0 && offset < 900_000, "{http}");
    assert_eq!(proxy.connections(), 2, "{http}");
    assert_tls_named(&run.report()["src"]);
}

#[test]
fn https_trust_sni_client_certificates_and_no_redirect_to_http() {
    let payload = data(100_000);
    let Some((pki, nginx)) = https_nginx(&payload) else {
        return;
    };
    let cafile = format!(",cafile={}", pki.path("ca.pem"));
    let fetch = |url: String| {
        let mut rig = Rig::bare();
        let sink = rig.stdout_sink(Pace::Full);
        rig.args(["pipe", &url, &sink]).run()
    };

    // The system's roots do not hold the test CA: refused in words, nothing written.
    let run = fetch(nginx.url("/data.bin"));
    run.assert_code(1, "an untrusted certificate");
    run.assert_held(0, b"", "an untrusted certificate");
    assert!(
        run.stderr.contains("is not signed by a CA in cafile="),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(&nginx.url("")), "{}", run.stderr);

    // verify=0 takes it, and says so.
    let run = fetch(format!("{},verify=0", nginx.url("/data.bin")));
    run.assert_code(0, "verify=0");
    run.assert_held(0, &payload, "verify=0");
    assert!(
        run.stderr
            .contains("verify=0: the server's certificate is not verified"),
        "{}",
        run.stderr
    );

    // sni= is the name sent and checked: nginx echoes it; a name the certificate does not
    // carry is refused.
    let run = fetch(format!("{}{cafile},sni=localhost", nginx.url("/sni")));
    run.assert_code(0, "sni=localhost");
    run.assert_held(0, b"localhost", "sni=localhost");
    let run = fetch(format!("{}{cafile},sni=wrong.example", nginx.url("/sni")));
    run.assert_code(1, "sni=wrong.example");
    run.assert_held(0, b"", "sni=wrong.example");
    assert!(run.stderr.contains("not valid for name"), "{}", run.stderr);

    // pin= trusts that very certificate, without cafile=; another one's pin is refused.
    let pinned = |name: &str| {
        format!(
            "{},pin=sha256:{}",
            nginx.url("/data.bin"),
            pki.fingerprint(name)
        )
    };
    let run = fetch(pinned("server"));
    run.assert_code(0, "pin=");
    run.assert_held(0, &payload, "pin=");
    let run = fetch(pinned("client"));
    run.assert_code(1, "a wrong pin=");
    run.assert_held(0, b"", "a wrong pin=");

    // cert=/key= is the client certificate nginx sees.
    let run = fetch(format!(
        "{}{cafile},cert={},key={}",
        nginx.url("/client"),
        pki.path("client.pem"),
        pki.path("client.key")
    ));
    run.assert_code(0, "cert=");
    run.assert_held(0, b"CN=client", "cert=");
    let run = fetch(format!("{}{cafile}", nginx.url("/client")));
    run.assert_code(0, "no cert=");
    run.assert_held(0, b"", "no cert=");

    // A redirect from https to http is never followed.
    let run = fetch(format!("{}{cafile}", nginx.url("/to-http")));
    run.assert_code(1, "https -> http");
    run.assert_held(0, b"", "https -> http");
    assert!(
        run.stderr.contains("zerocat never follows https to http"),
        "{}",
        run.stderr
    );
}

/// Issue 38 item 6: a token given with `header=@FILE`, `header-env=`, `header=` or as the
/// URL's password reaches the server and nothing else — not the report (text or JSON), not
/// an error (a refused status, a usage error), not `relay --log`, not the command line of
/// zerocat or of its child (read by the child itself, while zerocat runs). An inline
/// `header=` is in zerocat's own argv by its nature: the file and the environment are the
/// ways to keep a token out of `ps`.
#[test]
fn tokens_reach_the_server_and_nothing_else() {
    let tokens = ["FILE-TOKEN", "ENV-TOKEN", "INLINE-TOKEN", "URL-TOKEN"];
    let assert_hidden = |text: &str, what: &str| {
        for token in tokens {
            assert!(!text.contains(token), "{what} shows {token}: {text}");
        }
    };
    // The 401's body echoes what it was sent, as debugging servers do: shown escaped in the
    // error, but not the secrets.
    let (port, server) = canned(vec![
        answer("200 OK", "", b"the body"),
        answer(
            "401 Unauthorized",
            "",
            b"you sent Authorization: Bearer ENV-TOKEN, X-Inline: INLINE-TOKEN, \
              X-File-Token: FILE-TOKEN, Basic dXNlcjpVUkwtVE9LRU4=; go away",
        ),
    ]);
    let rig = Rig::new().env("ZC_TOKEN", "Bearer ENV-TOKEN");
    let headers = rig.file("headers.txt", b"X-File-Token: FILE-TOKEN\n");
    let url = format!(
        "http://user:URL-TOKEN@127.0.0.1:{port}/x,header=@{headers},\
         header-env=Authorization:ZC_TOKEN,header=X-Inline:INLINE-TOKEN"
    );
    let body = rig.path("body.bin");
    let argv = rig.path("argv.txt");
    let child = format!(
        "sh:cat >'{}'; tr '\\0' ' ' </proc/$PPID/cmdline >'{}'; tr '\\0' ' ' </proc/self/cmdline >>'{}'",
        body.display(),
        argv.display(),
        argv.display()
    );
    let fetched = rig.args(["pipe", &url, &child]).run();
    fetched.assert_code(0, "tokens");
    assert_eq!(std::fs::read(&body).unwrap(), b"the body");
    assert_hidden(&fetched.stderr, "the report");
    let argv = std::fs::read_to_string(&argv).unwrap();
    assert!(argv.contains("header-env=Authorization:ZC_TOKEN"), "{argv}");
    for token in ["FILE-TOKEN", "ENV-TOKEN"] {
        assert!(
            !argv.contains(token),
            "a command line shows {token}: {argv}"
        );
    }

    // Refused: the error names the URL, not its credentials.
    let refused = Rig::bare()
        .env("ZC_TOKEN", "Bearer ENV-TOKEN")
        .args(["pipe", &url, "/dev/null"])
        .run();
    refused.assert_code(1, "401");
    assert!(
        refused.stderr.contains("401 Unauthorized"),
        "{}",
        refused.stderr
    );
    assert_hidden(&refused.stderr, "the error of a 401");
    assert!(refused.stderr.contains("go away"), "{}", refused.stderr);
    assert!(
        !refused.stderr.contains("dXNlcjpVUkwtVE9LRU4="),
        "{}",
        refused.stderr
    );
    let requests = server.join().unwrap();
    for (head, _) in &requests {
        assert!(
            head.contains("Authorization: Bearer ENV-TOKEN\r\n"),
            "{head}"
        );
        assert!(head.contains("X-File-Token: FILE-TOKEN\r\n"), "{head}");
        assert!(head.contains("X-Inline: INLINE-TOKEN\r\n"), "{head}");
    }

    // Usage errors quote the argument with its secrets hidden.
    let inline = "header=Authorization:Bearer INLINE-TOKEN";
    for arg in [
        format!("htp://127.0.0.1:{port}/x,{inline}"),
        format!("htps://user:URL-TOKEN@127.0.0.1:{port}/x"),
        format!("http://127.0.0.1:{port}/x,{inline},range=abc"),
        "http://user:URL-TOKEN@127.0.0.1:99999/x".to_string(),
        "http://127.0.0.1:1/x,header=Bearer INLINE-TOKEN:x".to_string(),
    ] {
        let out = run({
            let mut c = zerocat();
            c.args(["pipe", &arg, "/dev/null"]);
            c
        });
        assert_eq!(out.status.code(), Some(2), "{arg}: {}", stderr_text(&out));
        assert_hidden(&stderr_text(&out), &arg);
    }
    let dir = tempdir();
    let log = dir.path().join("log.jsonl");
    let out = run({
        let mut c = zerocat();
        c.arg("relay").arg("--log").arg(&log).args([
            "tcp-listen:127.0.0.1:0",
            &format!("http://127.0.0.1:1/x,{inline}"),
        ]);
        c
    });
    assert_eq!(out.status.code(), Some(2), "{}", stderr_text(&out));
    assert_hidden(&stderr_text(&out), "relay's refusal");
    assert_hidden(
        &std::fs::read_to_string(&log).unwrap_or_default(),
        "relay's log",
    );
}

/// An http(s) sink in `copy` (FILE URL) and among `tee`'s sinks: PUT, byte-exact.
#[test]
fn copy_and_tee_put_to_nginx() {
    let nginx = nginx_or_skip!(None);
    let payload = data(1024 * 1024 + 7);
    let rig = Rig::new();
    let src = rig.file("src.bin", &payload);
    let run = rig.args(["copy", &src, &nginx.url("/up/copy.bin")]).run();
    run.assert_code(0, "copy FILE URL");
    assert_eq!(
        run.report()["dst"]["http"]["status"],
        201,
        "{}",
        run.report()
    );
    assert_bytes_eq(
        &std::fs::read(nginx.root.join("up/copy.bin")).unwrap(),
        &payload,
        "copy FILE URL",
    );

    let mut rig = Rig::new();
    let src = rig.stdin(Arc::new(payload.clone()), Pace::Full);
    let out = rig.path("tee.bin");
    let file = rig.file_sink(out);
    let run = rig
        .args(["tee", &src, &nginx.url("/up/tee.bin"), &file])
        .run();
    run.assert_code(0, "tee - URL FILE");
    run.assert_held(0, &payload, "tee - URL FILE: the file");
    let sink = &run.report()["sinks"][0];
    assert_eq!(sink["http"]["status"], 201, "{sink}");
    assert_eq!(sink["http"]["framing"], "chunked", "{sink}");
    assert_bytes_eq(
        &std::fs::read(nginx.root.join("up/tee.bin")).unwrap(),
        &payload,
        "tee - URL FILE: the upload",
    );
}

/// A body framed by neither Content-Length nor chunked ends at the server's close: taken
/// whole, and said unverified (nothing to check its length by).
#[test]
fn a_body_to_the_close_is_taken_and_said_unverified() {
    let payload = data(200_003);
    let mut response = b"HTTP/1.0 200 OK\r\nServer: old\r\n\r\n".to_vec();
    response.extend_from_slice(&payload);
    let (port, server) = canned(vec![response.clone(), response]);
    let url = format!("http://127.0.0.1:{port}/old");
    let mut rig = Rig::new();
    let sink = rig.stdout_sink(Pace::Full);
    let run = rig.args(["pipe", &url, &sink]).run();
    run.assert_code(0, "to the close");
    run.assert_held(0, &payload, "to the close");
    run.assert_final_path("splice", "to the close");
    let http = http_of(run.report());
    assert_eq!(http["framing"], "close", "{http}");
    assert_eq!(http["unverified"], true, "{http}");
    assert_eq!(http["reason"], "OK", "{http}");
    assert_eq!(http["content_length"], serde_json::Value::Null, "{http}");

    let rig = Rig::bare();
    let run = rig.args(["pipe", &url, "/dev/null"]).run();
    server.join().unwrap();
    run.assert_code(0, "to the close, text");
    assert!(
        run.stderr.contains("http 200 (to the close, unverified)"),
        "{}",
        run.stderr
    );
}

/// Proxies as curl takes them: `http_proxy` (lower case only) carries an http URL in
/// absolute form, with the proxy URL's credentials as Proxy-Authorization; `https_proxy`
/// tunnels https with CONNECT (the TLS still end to end, trusted by cafile=); `no_proxy`
/// skips them; `,socks5=` goes through a SOCKS5 proxy. tinyproxy (which wants bob:s3cret)
/// and microsocks, as tests/outbound.rs starts them.
#[test]
fn proxies_of_the_environment_and_socks5_carry_http_and_https() {
    let payload = data(1024 * 1024 + 11);
    let plain = nginx_or_skip!(None);
    plain.serve("data.bin", &payload);
    let Some((pki, secure)) = https_nginx(&payload) else {
        return;
    };
    let dir = tempdir();
    let (Some(tiny), Some(socks)) = (
        crate::outbound::tinyproxy(dir.path(), secure.port),
        crate::outbound::Microsocks::start(None),
    ) else {
        eprintln!("SKIPPED: tinyproxy or microsocks is not installed");
        return;
    };
    let proxy = format!("http://bob:s3cret@127.0.0.1:{}", tiny.port);
    let https_url = format!("{},cafile={}", secure.url("/data.bin"), pki.path("ca.pem"));
    let fetch = |url: &str, env: &[(&str, &str)]| {
        let mut rig = Rig::new();
        for (name, value) in env {
            rig = rig.env(name, value);
        }
        let sink = rig.stdout_sink(Pace::Full);
        rig.args(["pipe", url, &sink]).run()
    };
    let get = plain.url("/data.bin");
    let socks_url = format!("{get},socks5=127.0.0.1:{}", socks.port);
    let cases = [
        ("http_proxy", &get, vec![("http_proxy", proxy.as_str())]),
        ("https_proxy", &https_url, vec![("https_proxy", &proxy)]),
        (
            "no_proxy",
            &get,
            vec![
                ("http_proxy", "http://127.0.0.1:1"),
                ("no_proxy", "127.0.0.1"),
            ],
        ),
        // curl reads no HTTP_PROXY (a CGI request's Proxy: header may set it).
        (
            "HTTP_PROXY",
            &get,
            vec![("HTTP_PROXY", "http://127.0.0.1:1")],
        ),
        (
            "socks5=",
            &socks_url,
            vec![("http_proxy", "http://127.0.0.1:1")],
        ),
    ];
    for (what, url, env) in cases {
        let run = fetch(url, &env);
        run.assert_code(0, what);
        run.assert_held(0, &payload, what);
        assert_eq!(http_of(run.report())["status"], 200, "{what}");
        assert!(!run.stderr.contains("s3cret"), "{what}: {}", run.stderr);
    }

    // The same runs with the proxy down fail: they went through it. Without the
    // credentials tinyproxy wants: its 407.
    let bare = format!("http://127.0.0.1:{}", tiny.port);
    let closed = "http://127.0.0.1:1";
    let socks_closed = format!("{},socks5=127.0.0.1:1", plain.url("/data.bin"));
    for (what, url, env, said) in [
        (
            "http_proxy down",
            plain.url("/data.bin"),
            ("http_proxy", closed),
            "cannot reach",
        ),
        (
            "https_proxy down",
            https_url.clone(),
            ("https_proxy", closed),
            "cannot reach",
        ),
        (
            "socks5= down",
            socks_closed,
            ("no_proxy", "*"),
            "cannot reach",
        ),
        (
            "http_proxy, no credentials",
            plain.url("/data.bin"),
            ("http_proxy", &bare),
            "407",
        ),
        (
            "https_proxy, no credentials",
            https_url.clone(),
            ("https_proxy", &bare),
            "407",
        ),
    ] {
        let run = fetch(&url, &[env]);
        run.assert_code(1, what);
        run.assert_held(0, b"", what);
        assert!(run.stderr.contains(said), "{what}: {}", run.stderr);
    }
}
