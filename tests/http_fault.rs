//! A small HTTP/1.1 object server of the tests' own, on 127.0.0.1 port 0, one thread per
//! connection, that misbehaves on purpose (issue 38): it serves one object with ETag /
//! Last-Modified and Range / If-Range, and each request in turn can be given a [`Fault`]:
//! the body cut after N bytes with a FIN or an RST, a stall, Range ignored (200), a 206
//! whose Content-Range is not what was asked, or the object replaced before the answer.
//! Every request's head is kept, so a test can check what the client asked.
//!
//! nginx is the well-behaved server; this one is for what nginx will not do on demand.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::util::{linger_zero, DEADLINE};

/// The object served, with its validators (none: a server that gives no way to resume).
#[derive(Clone)]
pub struct Object {
    pub body: Arc<Vec<u8>>,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

impl Object {
    /// `body` with a strong ETag (quoted, as sent).
    pub fn with_etag(body: Vec<u8>, etag: &str) -> Object {
        Object {
            body: Arc::new(body),
            etag: Some(format!("\"{etag}\"")),
            last_modified: None,
        }
    }

    /// `body` with only a Last-Modified, well before the Date of every answer.
    pub fn with_last_modified(body: Vec<u8>) -> Object {
        Object {
            body: Arc::new(body),
            etag: None,
            last_modified: Some("Mon, 02 Jan 2006 15:04:05 GMT".to_string()),
        }
    }

    /// `body` without ETag or Last-Modified.
    pub fn bare(body: Vec<u8>) -> Object {
        Object {
            body: Arc::new(body),
            etag: None,
            last_modified: None,
        }
    }

    fn validator_matches(&self, if_range: &str) -> bool {
        let if_range = if_range.trim();
        // A weak ETag never matches If-Range (RFC 9110 §13.1.5).
        !if_range.starts_with("W/")
            && (self.etag.as_deref() == Some(if_range)
                || self.last_modified.as_deref() == Some(if_range))
    }
}

/// What the server does to one request's answer.
#[derive(Clone)]
pub enum Fault {
    /// Answers as a good server would.
    None,
    /// Sends this many bytes of the body (counted from the first byte of this answer's
    /// body), then closes with a FIN.
    CutFin(u64),
    /// Sends this many bytes of the body, then closes with an RST.
    CutRst(u64),
    /// Sends this many bytes of the body, then nothing, the connection left open until the
    /// client goes or the server stops.
    Stall(u64),
    /// Answers a Range request with 200 and the whole object.
    IgnoreRange,
    /// Answers a Range request with a 206 whose Content-Range (and body) starts this many
    /// bytes after the offset asked (negative: before).
    WrongContentRange(i64),
    /// Replaces the object before answering, then answers as a good server would (If-Range
    /// decides, unless the server was told not to honour it).
    Replace(Object),
    /// Replaces the object, then answers this way.
    ReplaceThen(Object, Box<Fault>),
}

/// One request as the server read it.
#[derive(Clone, Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub headers: Vec<(String, String)>,
}

impl Request {
    /// The value of header `name` (case-insensitive), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// How the server frames bodies and treats If-Range, for every request.
#[derive(Clone, Copy, Default)]
pub struct Manner {
    /// `Transfer-Encoding: chunked` (chunks of `CHUNK` bytes) instead of Content-Length.
    pub chunked: bool,
    /// Serves the Range asked whatever If-Range says (a server that ignores If-Range:
    /// only the client's own check of the 206's validator stands between it and a mix).
    pub ignore_if_range: bool,
    /// Never answers 206: every request gets 200 and the whole object (python's http.server).
    pub no_ranges: bool,
}

/// Bytes per chunk of a chunked answer.
pub const CHUNK: usize = 64 * 1024;

struct Shared {
    object: Mutex<Object>,
    script: Mutex<Vec<Fault>>,
    requests: Mutex<Vec<Request>>,
    stop: AtomicBool,
    manner: Manner,
}

/// The running server; stopped (and its threads joined) when dropped.
pub struct FaultServer {
    addr: String,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl FaultServer {
    /// Serves `object`; the n-th request (from 0) gets `script[n]`, later ones `Fault::None`.
    pub fn start(object: Object, script: Vec<Fault>) -> FaultServer {
        FaultServer::start_with(object, script, Manner::default())
    }

    pub fn start_with(object: Object, script: Vec<Fault>, manner: Manner) -> FaultServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let shared = Arc::new(Shared {
            object: Mutex::new(object),
            script: Mutex::new(script.into_iter().rev().collect()),
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            manner,
        });
        let acceptor = {
            let shared = shared.clone();
            thread::spawn(move || accept_loop(listener, shared))
        };
        FaultServer {
            addr,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// "127.0.0.1:PORT"
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// `http://127.0.0.1:PORT/PATH` (the server answers every path with its object).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// Every request read so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The object served now.
    pub fn object(&self) -> Object {
        self.shared.object.lock().unwrap().clone()
    }
}

impl Drop for FaultServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr); // wakes accept()
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut conns = Vec::new();
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(conn) = conn else { continue };
        let shared = shared.clone();
        conns.push(thread::spawn(move || serve(conn, &shared)));
    }
    for c in conns {
        let _ = c.join();
    }
}

/// Reads one request head (up to 64 KiB); None when the client sent none.
fn read_head(conn: &mut TcpStream) -> Option<Request> {
    conn.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut buf = Vec::new();
    let mut byte = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        if buf.len() > 64 * 1024 {
            return None;
        }
        match conn.read(&mut byte) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&byte[..n]),
        }
    }
    let text = String::from_utf8_lossy(&buf).into_owned();
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let target = first.next()?.to_string();
    let headers = lines
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Some(Request {
        method,
        target,
        headers,
    })
}

/// `bytes=START-` or `bytes=START-END`: (start, end inclusive).
fn parse_range(value: &str) -> Option<(u64, Option<u64>)> {
    let (start, end) = value.strip_prefix("bytes=")?.split_once('-')?;
    let start = start.trim().parse().ok()?;
    let end = match end.trim() {
        "" => None,
        e => Some(e.parse().ok()?),
    };
    Some((start, end))
}

fn serve(mut conn: TcpStream, shared: &Shared) {
    let Some(req) = read_head(&mut conn) else {
        return;
    };
    shared.requests.lock().unwrap().push(req.clone());
    let mut fault = shared.script.lock().unwrap().pop().unwrap_or(Fault::None);
    loop {
        match fault {
            Fault::Replace(new) => {
                *shared.object.lock().unwrap() = new;
                fault = Fault::None;
            }
            Fault::ReplaceThen(new, then) => {
                *shared.object.lock().unwrap() = new;
                fault = *then;
            }
            _ => break,
        }
    }
    let object = shared.object.lock().unwrap().clone();
    let len = object.body.len() as u64;
    let manner = shared.manner;

    // Which part of the object this answer carries, and how it is labelled.
    let asked = req.header("Range").and_then(parse_range);
    let if_range_ok = match req.header("If-Range") {
        None => true,
        Some(v) => manner.ignore_if_range || object.validator_matches(v),
    };
    let ranged =
        asked.is_some() && if_range_ok && !manner.no_ranges && !matches!(fault, Fault::IgnoreRange);
    let mut status = "200 OK";
    let (mut start, mut end) = (0u64, len); // end exclusive
    let mut content_range = None;
    if ranged {
        let (s, e) = asked.unwrap();
        if s >= len {
            let head = format!(
                "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{len}\r\n\
                 Content-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let _ = conn.write_all(head.as_bytes());
            return;
        }
        let shift = match fault {
            Fault::WrongContentRange(d) => d,
            _ => 0,
        };
        start = (s as i64 + shift).clamp(0, len as i64 - 1) as u64;
        end = e.map_or(len, |e| (e + 1).min(len));
        status = "206 Partial Content";
        content_range = Some(format!("bytes {start}-{}/{len}", end - 1));
    }
    let body = &object.body[start as usize..end as usize];

    let mut head = format!("HTTP/1.1 {status}\r\nServer: zerocat-test-fault\r\n");
    head += "Date: Thu, 26 Nov 2026 12:00:00 GMT\r\n";
    head += "Accept-Ranges: bytes\r\n";
    if let Some(etag) = &object.etag {
        head += &format!("ETag: {etag}\r\n");
    }
    if let Some(lm) = &object.last_modified {
        head += &format!("Last-Modified: {lm}\r\n");
    }
    if let Some(cr) = &content_range {
        head += &format!("Content-Range: {cr}\r\n");
    }
    if manner.chunked {
        head += "Transfer-Encoding: chunked\r\n";
    } else {
        head += &format!("Content-Length: {}\r\n", body.len());
    }
    head += "Connection: close\r\n\r\n";
    if conn.write_all(head.as_bytes()).is_err() || req.method == "HEAD" {
        return;
    }

    let cut = match fault {
        Fault::CutFin(n) | Fault::CutRst(n) | Fault::Stall(n) => Some(n.min(body.len() as u64)),
        _ => None,
    };
    let sent = cut.unwrap_or(body.len() as u64) as usize;
    let ok = if manner.chunked {
        write_chunked(&mut conn, &body[..sent], cut.is_none())
    } else {
        conn.write_all(&body[..sent]).is_ok()
    };
    if !ok {
        return;
    }
    match fault {
        Fault::CutRst(_) => {
            // Unread input in the receive queue also makes close() send an RST; linger 0
            // makes it certain.
            linger_zero(&conn);
        }
        Fault::CutFin(_) => {
            let _ = conn.shutdown(Shutdown::Write);
            drain_until_closed(&mut conn, shared);
        }
        Fault::Stall(_) => {
            let _ = conn.flush();
            drain_until_closed(&mut conn, shared);
        }
        _ => {
            let _ = conn.shutdown(Shutdown::Write);
            drain_until_closed(&mut conn, shared);
        }
    }
}

/// Writes `body` as chunks of `CHUNK` bytes; the last-chunk only when `last` (a cut
/// stream stops inside a chunk: its announced size is the full chunk).
fn write_chunked(conn: &mut TcpStream, body: &[u8], last: bool) -> bool {
    for piece in body.chunks(CHUNK) {
        let announced = if last { piece.len() } else { CHUNK };
        let ok = conn
            .write_all(format!("{announced:x}\r\n").as_bytes())
            .and_then(|_| conn.write_all(piece))
            .and_then(|_| {
                if piece.len() == announced {
                    conn.write_all(b"\r\n")
                } else {
                    Ok(())
                }
            });
        if ok.is_err() {
            return false;
        }
    }
    !last || conn.write_all(b"0\r\n\r\n").is_ok()
}

/// Waits, reading and dropping what the client sends, until it closes or the server stops
/// (closing first with unread bytes would turn the FIN into an RST).
fn drain_until_closed(conn: &mut TcpStream, shared: &Shared) {
    conn.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    while !shared.stop.load(Ordering::SeqCst) && started.elapsed() < DEADLINE {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return,
        }
    }
}

/// A TCP proxy of the tests' own in front of a real server (python's http.server): the
/// n-th connection's answer is cut with a FIN after `cuts[n]` bytes (its head included);
/// later connections pass whole. Stopped when dropped.
pub struct CutProxy {
    addr: String,
    connections: Arc<Mutex<usize>>,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl CutProxy {
    pub fn start(upstream: &str, cuts: Vec<u64>) -> CutProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let connections = Arc::new(Mutex::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let acceptor = {
            let (connections, stop) = (connections.clone(), stop.clone());
            let upstream = upstream.to_string();
            thread::spawn(move || {
                let mut conns = Vec::new();
                for client in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let n = {
                        let mut count = connections.lock().unwrap();
                        *count += 1;
                        *count - 1
                    };
                    let (upstream, cut) = (upstream.clone(), cuts.get(n).copied());
                    conns.push(thread::spawn(move || forward(client, &upstream, cut)));
                }
                for c in conns {
                    let _ = c.join();
                }
            })
        };
        CutProxy {
            addr,
            connections,
            stop,
            acceptor: Some(acceptor),
        }
    }

    /// "127.0.0.1:PORT"
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The connections accepted so far.
    pub fn connections(&self) -> usize {
        *self.connections.lock().unwrap()
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.addr);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

/// The client's bytes to `upstream` as they come; the answer back, at most `cut` bytes,
/// then a FIN to the client.
fn forward(mut client: TcpStream, upstream: &str, cut: Option<u64>) {
    let Ok(mut up) = TcpStream::connect(upstream) else {
        return;
    };
    let _ = up.set_read_timeout(Some(DEADLINE));
    let _ = client.set_read_timeout(Some(DEADLINE));
    let (Ok(mut from_client), Ok(mut to_up)) = (client.try_clone(), up.try_clone()) else {
        return;
    };
    let requests = thread::spawn(move || {
        let _ = std::io::copy(&mut from_client, &mut to_up);
        let _ = to_up.shutdown(Shutdown::Write);
    });
    let mut buf = [0u8; 16 * 1024];
    let mut sent = 0u64;
    let limit = cut.unwrap_or(u64::MAX);
    while sent < limit {
        let n = match up.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n.min((limit - sent) as usize),
        };
        if client.write_all(&buf[..n]).is_err() {
            break;
        }
        sent += n as u64;
    }
    let _ = client.shutdown(Shutdown::Write);
    // Everything the client sends is read (by `requests`) until it closes: the FIN stays
    // a FIN.
    let _ = requests.join();
}

/// A plain client for the server's own tests: the whole answer (head and body) to a GET
/// with these extra header lines.
fn get(addr: &str, extra: &str) -> (String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(s, "GET /obj HTTP/1.1\r\nHost: {addr}\r\n{extra}\r\n").unwrap();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let body = all.split_off(split);
    (String::from_utf8(all).unwrap(), body)
}

// The server's own checks: it must misbehave exactly as told, or the tests that use it
// prove nothing.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::data;

    #[test]
    fn serves_ranges_and_honours_if_range() {
        let body = data(1000);
        let srv = FaultServer::start(Object::with_etag(body.clone(), "v1"), vec![]);
        let (head, got) = get(srv.addr(), "");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("ETag: \"v1\""), "{head}");
        assert_eq!(got, body);
        let (head, got) = get(srv.addr(), "Range: bytes=100-\r\nIf-Range: \"v1\"\r\n");
        assert!(head.starts_with("HTTP/1.1 206"), "{head}");
        assert!(head.contains("Content-Range: bytes 100-999/1000"), "{head}");
        assert_eq!(got, &body[100..]);
        let (head, got) = get(srv.addr(), "Range: bytes=100-\r\nIf-Range: \"v0\"\r\n");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(got, body);
        assert_eq!(srv.requests()[1].header("if-range"), Some("\"v1\""));
    }

    #[test]
    fn cuts_stalls_and_lies_as_told() {
        let body = data(300_000);
        let replaced = data(300_001);
        let srv = FaultServer::start(
            Object::with_etag(body.clone(), "v1"),
            vec![
                Fault::CutFin(1000),
                Fault::CutRst(2000),
                Fault::IgnoreRange,
                Fault::WrongContentRange(7),
                Fault::Replace(Object::with_etag(replaced.clone(), "v2")),
            ],
        );
        let (_, got) = get(srv.addr(), "");
        assert_eq!(got, &body[..1000]);
        let mut s = TcpStream::connect(srv.addr()).unwrap();
        write!(s, "GET / HTTP/1.1\r\n\r\n").unwrap();
        let mut all = Vec::new();
        let err = s.read_to_end(&mut all).expect_err("an RST");
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
        let (head, got) = get(srv.addr(), "Range: bytes=10-\r\n");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(got, body);
        let (head, got) = get(srv.addr(), "Range: bytes=10-\r\n");
        assert!(
            head.contains("Content-Range: bytes 17-299999/300000"),
            "{head}"
        );
        assert_eq!(got, &body[17..]);
        let (head, got) = get(srv.addr(), "Range: bytes=10-\r\nIf-Range: \"v1\"\r\n");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("ETag: \"v2\""), "{head}");
        assert_eq!(got, replaced);
    }

    #[test]
    fn chunked_cut_has_no_last_chunk() {
        let body = data(3 * CHUNK + 5);
        let manner = Manner {
            chunked: true,
            ..Manner::default()
        };
        let srv = FaultServer::start_with(
            Object::with_etag(body.clone(), "v1"),
            vec![Fault::CutFin(CHUNK as u64 + 10), Fault::None],
            manner,
        );
        let (head, got) = get(srv.addr(), "");
        assert!(head.contains("Transfer-Encoding: chunked"), "{head}");
        assert!(!got.ends_with(b"0\r\n\r\n"));
        assert_eq!(got.len(), CHUNK + 10 + 2 * "10000\r\n".len() + 2);
        let (_, got) = get(srv.addr(), "");
        assert!(got.ends_with(b"\r\n0\r\n\r\n"));
    }

    #[test]
    fn stall_holds_the_connection_open() {
        let srv = FaultServer::start(Object::bare(data(5000)), vec![Fault::Stall(100)]);
        let mut s = TcpStream::connect(srv.addr()).unwrap();
        write!(s, "GET / HTTP/1.1\r\n\r\n").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut all = Vec::new();
        let err = s.read_to_end(&mut all).expect_err("a stall, not an end");
        assert!(matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ));
        assert!(all.ends_with(&data(5000)[..100]));
    }
}
