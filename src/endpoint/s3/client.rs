//! S3 requests over HTTP/1.1: one signed request per connection (`Connection: close`), the
//! response head read with MSG_PEEK so the socket is left exactly at the first byte of the
//! body (a GET's body then goes through the engine, spliced, and ends at the server's close);
//! small answers (XML) read whole. Retries with backoff on `SlowDown`, 500, 503 and on a
//! connection reset before an answer; every request and retry counted for the report.
//!
//! http:// only so far; an https:// endpoint is refused in words.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail};
use nix::sys::socket::{recv, MsgFlags};

use super::config::{self, Settings, Target};
use super::error::{self, Asked};
use super::sigv4::{self, Scope};
use super::xml;
use crate::sys::memfd::Staged;

/// Requests made, by kind, for the report and `--stats json`.
#[derive(Debug, Default)]
pub struct Counts {
    pub get: AtomicU64,
    pub put: AtomicU64,
    pub part: AtomicU64,
    pub list: AtomicU64,
    /// CreateMultipartUpload, CompleteMultipartUpload, AbortMultipartUpload, CreateBucket.
    pub other: AtomicU64,
    pub retry: AtomicU64,
}

impl Counts {
    /// (name, count) of the kinds made, for the report: `[("GET", 1), ("retries", 2)]`.
    pub fn named(&self) -> Vec<(&'static str, u64)> {
        [
            ("GET", &self.get),
            ("PUT", &self.put),
            ("parts", &self.part),
            ("lists", &self.list),
            ("other", &self.other),
            ("retries", &self.retry),
        ]
        .into_iter()
        .map(|(n, c)| (n, c.load(Ordering::Relaxed)))
        .filter(|(_, c)| *c > 0)
        .collect()
    }
}

/// What a request is, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Get,
    Put,
    Part,
    List,
    Other,
}

/// The status line and headers of an answer.
#[derive(Debug, Clone, Default)]
pub struct Head {
    pub status: u16,
    pub headers: Vec<(String, String)>,
}

impl Head {
    /// A header's value (the first of that name, any case).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn content_length(&self) -> Option<u64> {
        self.get("content-length")
            .and_then(|v| v.trim().parse().ok())
    }
}

/// A request's body.
#[derive(Clone, Copy)]
pub enum Body<'a> {
    Empty,
    Bytes(&'a [u8]),
    /// A part staged in a memfd: sent with sendfile, its SHA-256 signed (http; the
    /// payload is then checked by the server, where TLS would not protect it).
    Staged(&'a Staged),
}

/// One request.
#[derive(Clone, Copy)]
pub struct Call<'a> {
    pub kind: Kind,
    pub method: &'a str,
    pub bucket: &'a str,
    pub key: &'a str,
    pub query: &'a [(String, String)],
    pub headers: &'a [(String, String)],
    pub body: Body<'a>,
}

/// Attempts of one request before its failure is final.
pub const ATTEMPTS: u32 = 5;
/// The first pause before a retry; doubled each time (0.2, 0.4, 0.8, 1.6 s).
pub const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// How long a control request may wait for its answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);
/// The most an error or XML answer may hold.
const MAX_ANSWER: usize = 16 << 20;
/// The most a response head may hold.
const MAX_HEAD: usize = 64 << 10;

/// Settings and counters shared by every request of a run.
#[derive(Debug, Clone)]
pub struct Client {
    pub settings: Arc<Settings>,
    pub counts: Arc<Counts>,
}

impl Client {
    /// The settings the AWS CLI would use here, `endpoint` from the URI's `endpoint=`.
    pub fn from_env(endpoint: Option<&str>) -> anyhow::Result<Client> {
        let settings = config::resolve(&config::Process, endpoint).map_err(|e| anyhow!(e))?;
        if settings.service.https {
            bail!(
                "s3: https endpoints ({}) are not supported yet; name an http:// endpoint \
                 with endpoint= or AWS_ENDPOINT_URL",
                settings.service.host
            );
        }
        Ok(Client {
            settings: Arc::new(settings),
            counts: Arc::new(Counts::default()),
        })
    }

    fn count(&self, kind: Kind) {
        let c = &self.counts;
        match kind {
            Kind::Get => &c.get,
            Kind::Put => &c.put,
            Kind::Part => &c.part,
            Kind::List => &c.list,
            Kind::Other => &c.other,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    /// The words for an error answer to `call`.
    pub fn failure(&self, call: &Call, status: u16, body: &[u8]) -> anyhow::Error {
        let uri = format!("s3://{}/{}", call.bucket, call.key);
        let parsed = xml::error(body);
        anyhow!(error::in_words(
            status,
            parsed.as_ref(),
            Asked {
                uri: &uri,
                bucket: call.bucket,
                credentials: self
                    .settings
                    .credentials
                    .as_ref()
                    .map(|c| c.source.as_str()),
            },
        ))
    }

    /// Make the request, retrying what S3 asks to retry; the answer's head and its body
    /// (small: XML or nothing). An error answer is an error in words.
    pub fn call(&self, call: &Call) -> anyhow::Result<(Head, Vec<u8>)> {
        self.with_retries(call, |stream, head| {
            let body = read_body(stream, &head)?;
            Ok((head, body))
        })
    }

    /// A GET whose body is the caller's: the connected socket, left at the body's first
    /// byte, and its length (Content-Length, which S3 always sends).
    pub fn open_body(&self, call: &Call) -> anyhow::Result<(TcpStream, Head, u64)> {
        let (stream, head) = self.with_retries(call, |stream, head| {
            let s = stream.try_clone()?;
            Ok((s, head))
        })?;
        let length = head.content_length().ok_or_else(|| {
            anyhow!(
                "s3://{}/{}: the answer has no Content-Length",
                call.bucket,
                call.key
            )
        })?;
        stream.set_read_timeout(None)?;
        Ok((stream, head, length))
    }

    fn with_retries<T>(
        &self,
        call: &Call,
        mut done: impl FnMut(&mut TcpStream, Head) -> io::Result<T>,
    ) -> anyhow::Result<T> {
        let mut pause = FIRST_BACKOFF;
        for attempt in 1..=ATTEMPTS {
            if attempt > 1 {
                // No retry once the run is stopping; a first attempt still goes (the
                // AbortMultipartUpload of an interrupted run).
                if crate::sys::process::must_stop() {
                    bail!("s3://{}/{}: interrupted", call.bucket, call.key);
                }
                self.counts.retry.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(pause);
                pause *= 2;
            }
            self.count(call.kind);
            let (mut stream, head) = match self.send(call) {
                Ok(sent) => sent,
                // A connection cut before an answer: the request may be retried (S3's
                // requests here are idempotent: a GET, a PUT of the same bytes, a part).
                Err(e) if attempt < ATTEMPTS && retryable_io(&e) => continue,
                Err(e) => bail!(
                    "s3://{}/{}: {} {}:{}: {e}",
                    call.bucket,
                    call.key,
                    call.method,
                    self.settings.service.host,
                    self.settings.service.port
                ),
            };
            if (200..300).contains(&head.status) {
                return done(&mut stream, head).map_err(|e| {
                    anyhow!("s3://{}/{}: reading the answer: {e}", call.bucket, call.key)
                });
            }
            let body = read_body(&mut stream, &head).unwrap_or_default();
            let code = xml::error(&body).map(|e| e.code);
            if attempt < ATTEMPTS && error::is_retryable(head.status, code.as_deref()) {
                continue;
            }
            return Err(self.failure(call, head.status, &body));
        }
        unreachable!("the last attempt returns")
    }

    /// One attempt: connect, send the signed request and its body, read the answer's head.
    fn send(&self, call: &Call) -> io::Result<(TcpStream, Head)> {
        let target = self.settings.service.target(call.bucket, call.key);
        let (payload_hash, length) = match call.body {
            Body::Empty => (sigv4::EMPTY_SHA256.to_owned(), 0),
            Body::Bytes(b) => (sigv4::sha256_hex(b), b.len()),
            Body::Staged(s) => (
                s.with_bytes(sigv4::sha256_hex).map_err(io::Error::from)?,
                s.len(),
            ),
        };
        let head = self.request_head(call, &target, &payload_hash, length);
        let mut stream = connect(&target)?;
        stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
        stream.write_all(head.as_bytes())?;
        match call.body {
            Body::Empty => {}
            Body::Bytes(b) => stream.write_all(b)?,
            Body::Staged(s) => {
                s.rewind()?;
                let mut left = s.len();
                while left > 0 {
                    match crate::sys::sendfile(s.fd(), stream.as_fd(), left) {
                        Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                        Ok(n) => left -= n,
                        Err(nix::errno::Errno::EINTR) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
            }
        }
        let head = read_head(&stream)?;
        Ok((stream, head))
    }

    /// The request line and headers, signed unless anonymous.
    fn request_head(
        &self,
        call: &Call,
        target: &Target,
        payload_hash: &str,
        length: usize,
    ) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let amz_date = sigv4::amz_date(now);
        let mut headers: Vec<(String, String)> = vec![
            ("host".into(), target.host_header.clone()),
            ("x-amz-content-sha256".into(), payload_hash.to_owned()),
            ("x-amz-date".into(), amz_date.clone()),
        ];
        headers.extend(call.headers.iter().cloned());
        let credentials = self.settings.credentials.as_ref();
        if let Some(token) = credentials.and_then(|c| c.session_token()) {
            headers.push(("x-amz-security-token".into(), token.to_owned()));
        }
        let query = sigv4::canonical_query(call.query);
        let mut text = format!(
            "{} {}{}{} HTTP/1.1\r\n",
            call.method,
            target.path,
            if query.is_empty() { "" } else { "?" },
            query
        );
        if let Some(credentials) = credentials {
            let signed = sigv4::sign(
                credentials,
                Scope {
                    region: &self.settings.region,
                    service: "s3",
                },
                &amz_date,
                &sigv4::Request {
                    method: call.method,
                    path: &target.path,
                    query: call.query,
                    headers: &headers,
                    payload_hash,
                },
            );
            headers.push(("authorization".into(), signed.authorization));
        }
        for (name, value) in &headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        if length > 0 || matches!(call.method, "PUT" | "POST") {
            text.push_str(&format!("content-length: {length}\r\n"));
        }
        text.push_str("user-agent: zerocat/");
        text.push_str(env!("CARGO_PKG_VERSION"));
        text.push_str("\r\nconnection: close\r\n\r\n");
        text
    }
}

fn retryable_io(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::UnexpectedEof
    )
}

fn connect(target: &Target) -> io::Result<TcpStream> {
    let mut last = None;
    for addr in (target.connect_host.as_str(), target.port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(10)) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("the host has no address")))
}

/// Read the response head and nothing past it: peek until the blank line is in, then
/// read exactly that much.
fn read_head(stream: &TcpStream) -> io::Result<Head> {
    let mut buf = vec![0u8; MAX_HEAD];
    let mut seen = 0;
    loop {
        // Wait for more than was seen (MSG_WAITALL), else a peek returns at once.
        let want = (seen + 1).min(buf.len());
        let n = loop {
            match recv(
                stream.as_raw_fd(),
                &mut buf[..want],
                MsgFlags::MSG_PEEK | MsgFlags::MSG_WAITALL,
            ) {
                Ok(n) => break n,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(nix::errno::Errno::EAGAIN) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "no answer from the server",
                    ))
                }
                Err(e) => return Err(e.into()),
            }
        };
        if n <= seen {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection before its answer",
            ));
        }
        // Peek everything there is now, not one byte more than waited for.
        let n = match recv(stream.as_raw_fd(), &mut buf, MsgFlags::MSG_PEEK) {
            Ok(m) => m.max(n),
            Err(_) => n,
        };
        seen = n;
        if let Some(end) = find_blank_line(&buf[..n]) {
            let mut exact = vec![0u8; end];
            (&*stream).read_exact(&mut exact)?;
            return parse_head(&exact);
        }
        if n == buf.len() {
            return Err(io::Error::other("the answer's head is over 64 KiB"));
        }
    }
}

fn find_blank_line(bytes: &[u8]) -> Option<usize> {
    bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|at| at + 4)
}

fn parse_head(bytes: &[u8]) -> io::Result<Head> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(bytes) {
        Ok(httparse::Status::Complete(_)) => Ok(Head {
            status: response.code.unwrap_or(0),
            headers: response
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_owned(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect(),
        }),
        Ok(httparse::Status::Partial) => Err(io::Error::other("a partial answer head")),
        Err(e) => Err(io::Error::other(format!("a malformed answer head: {e}"))),
    }
}

/// A small answer's body: Content-Length bytes, chunks, or up to the close.
fn read_body(stream: &mut TcpStream, head: &Head) -> io::Result<Vec<u8>> {
    let chunked = head
        .get("transfer-encoding")
        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
    let mut all = Vec::new();
    stream.take(MAX_ANSWER as u64).read_to_end(&mut all)?;
    if chunked {
        return dechunk(&all);
    }
    if let Some(length) = head.content_length() {
        if (all.len() as u64) < length {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the answer ended at {} of {length} bytes", all.len()),
            ));
        }
        all.truncate(length as usize);
    }
    Ok(all)
}

fn dechunk(mut bytes: &[u8]) -> io::Result<Vec<u8>> {
    let bad = || io::Error::other("a malformed chunked answer");
    let mut out = Vec::new();
    loop {
        let line_end = find_crlf(bytes).ok_or_else(bad)?;
        let size_text = std::str::from_utf8(&bytes[..line_end]).map_err(|_| bad())?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| bad())?;
        bytes = &bytes[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if bytes.len() < size + 2 {
            return Err(bad());
        }
        out.extend_from_slice(&bytes[..size]);
        bytes = &bytes[size + 2..];
    }
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests;
