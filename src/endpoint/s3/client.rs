//! S3 requests over the http endpoint's client (`endpoint/http`): signed HTTP/1.1 requests
//! on kept-alive connections (`http/pool.rs`: an answer read to its end leaves its
//! connection for the next request; one the server closed while idle is replaced once),
//! over TCP, or TLS for an https endpoint
//! (`cafile=`, `verify=0`, `sni=` as `tls:` takes them), the answer's head read with
//! MSG_PEEK so the connection stays at the body's first byte. A GET's body is the http
//! endpoint's: spliced by its pump into a pipe the engine reads, and resumed after a cut
//! with `Range` + `If-Match` (`http/resume.rs`), each request signed again as it goes
//! ([`Signer`]). Small answers (XML) read whole. Retries with backoff on `SlowDown`, 500,
//! 503 and on a connection cut before an answer; every request and retry counted for the
//! report.
//!
//! The payload hash signed (`x-amz-content-sha256`): the SHA-256 of a part or a small PUT
//! over http (the server checks the bytes, which nothing else protects there);
//! `UNSIGNED-PAYLOAD` over https for the parts and PUTs staged in a memfd (TLS protects
//! them, and the part is sent with sendfile without being read once more to hash it); the
//! SHA-256 of the empty body for a GET, and of the XML for the small requests.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail};
use url::Url;

use super::config::{self, Settings};
use super::error::{self, Asked};
use super::sigv4::{self, Scope};
use super::xml;
use crate::endpoint::http::resume::{no_resume_reason, Resume, ResumePolicy, Resumer};
use crate::endpoint::http::{self, BodyPump, Framing, Response, Sent};
use crate::endpoint::{ConnectOpts, HttpOpts, S3Opts};
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
    /// A GET's body continued after a cut (`Range` + `If-Match`).
    pub resume: AtomicU64,
    /// Reconnections to continue a body that did not: refused, cut before an answer, or
    /// all of a resume that gave up (`resume` counts those that continued it).
    pub resume_failed: AtomicU64,
    /// Idle keep-alive connections found closed by the server when a request went on
    /// them: each request was sent again on a new connection (not a retry: nothing was
    /// answered, and no backoff).
    pub stale: AtomicU64,
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
            ("resumes", &self.resume),
            ("failed resume attempts", &self.resume_failed),
            ("stale connections", &self.stale),
        ]
        .into_iter()
        .map(|(n, c)| (n, c.load(Ordering::Relaxed)))
        .filter(|(_, c)| *c > 0)
        .collect()
    }
}

impl Counts {
    /// A GET body's resumes, from its pump (`resumes` that continued it, `failed` the one
    /// that gave up): each reconnection was a GET and a retry; those that did not continue
    /// the body are failed resume attempts.
    pub fn add_resumes(&self, resumes: &[Resume], failed: Option<&Resume>) {
        let continued = resumes.iter().map(|r| (r, true));
        for (resume, ok) in continued.chain(failed.map(|r| (r, false))) {
            let attempts = u64::from(resume.attempts);
            self.get.fetch_add(attempts, Ordering::Relaxed);
            self.retry.fetch_add(attempts, Ordering::Relaxed);
            self.resume.fetch_add(u64::from(ok), Ordering::Relaxed);
            self.resume_failed
                .fetch_add(u64::from(resume.failed_attempts(ok)), Ordering::Relaxed);
        }
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

    fn of(head: &http::ResponseHead) -> Head {
        Head {
            status: head.status,
            headers: head
                .headers
                .iter()
                .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned()))
                .collect(),
        }
    }
}

/// A request's body.
#[derive(Clone, Copy)]
pub enum Body<'a> {
    Empty,
    Bytes(&'a [u8]),
    /// A part staged in a memfd: sent with sendfile; its SHA-256 signed over http (the
    /// server then checks the bytes, which nothing else protects there), `UNSIGNED-PAYLOAD`
    /// over https (TLS protects them).
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

/// Settings and counters shared by every request of a run.
#[derive(Debug, Clone)]
pub struct Client {
    pub settings: Arc<Settings>,
    pub counts: Arc<Counts>,
    /// How connections are made: an https endpoint's `tls:` options.
    transport: HttpOpts,
    /// How a GET's body cut short is resumed (`--retries`, `--retry-wait`,
    /// `--idle-timeout`).
    pub resume: ResumePolicy,
}

impl Client {
    /// The settings the AWS CLI would use here, `opts.endpoint` from the URI's
    /// `endpoint=`, the URI's TLS options for an https endpoint.
    pub fn from_opts(opts: &S3Opts) -> anyhow::Result<Client> {
        let settings =
            config::resolve(&config::Process, opts.endpoint.as_deref()).map_err(|e| anyhow!(e))?;
        let tls_given = opts.tls != crate::endpoint::TlsOpts::default();
        if tls_given && !settings.service.https {
            bail!(
                "s3: cafile=, verify=, sni= and pin= are for an https:// endpoint; the endpoint is \
                 http://{}:{}",
                settings.service.host,
                settings.service.port
            );
        }
        let transport = HttpOpts {
            connect: ConnectOpts {
                tls: settings.service.https.then(|| opts.tls.clone()),
                ..ConnectOpts::default()
            },
            ..HttpOpts::default()
        };
        Ok(Client {
            settings: Arc::new(settings),
            counts: Arc::new(Counts::default()),
            transport,
            resume: opts.resume,
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
        self.with_retries(call, |mut response| {
            let body = read_small(&mut response);
            let head = Head::of(&response.head);
            release(response, body.is_ok());
            Ok((head, body?))
        })
    }

    /// A GET whose body is the caller's: the read end of the pipe the http endpoint's
    /// pump splices the body into (resumed after a cut with `Range` + `If-Match` of its
    /// ETag, under [`Client::resume`]), the pump, and the object's length (Content-Length,
    /// which S3 always sends).
    pub fn open_body(&self, call: &Call) -> anyhow::Result<(OwnedFd, BodyPump, u64)> {
        let (client, request) = self.http_request(call)?;
        let response = self.with_retries(call, Ok)?;
        let Framing::Length(length) = response.head.framing else {
            bail!(
                "s3://{}/{}: the answer has no Content-Length",
                call.bucket,
                call.key
            );
        };
        // The pump waits for the body with --idle-timeout, not with a control request's
        // timeout.
        answer_timeout(response.conn.fd.as_fd(), None);
        let resume_off = no_resume_reason(&response.head, &self.resume);
        let resumer = Resumer::new(&client, &request, &response.head, 0, &self.resume);
        let (fd, mut pump) = response.into_resumable_body(resumer)?;
        pump.resume_off = resume_off;
        Ok((fd, pump, length))
    }

    /// The http client and request that carry `call`: the path as S3 encodes it (sent as
    /// it is, never resolved as a URL would), the payload hash, and a [`Signer`] that
    /// signs each request as it goes (a resume too, with its Range and If-Match).
    pub fn http_request(&self, call: &Call) -> anyhow::Result<(http::Client, http::Request)> {
        let target = self.settings.service.target(call.bucket, call.key);
        let https = target.https;
        let length = match call.body {
            Body::Empty => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::Staged(s) => s.len() as u64,
        };
        let payload_hash = match call.body {
            Body::Empty => sigv4::EMPTY_SHA256.to_owned(),
            Body::Bytes(b) => sigv4::sha256_hex(b),
            Body::Staged(_) if https => sigv4::UNSIGNED_PAYLOAD.to_owned(),
            Body::Staged(s) => sigv4::sha256_hex_pieces(|add| s.each_window(add))
                .map_err(|e| anyhow!("s3://{}/{}: hashing a part: {e}", call.bucket, call.key))?,
        };
        let query = sigv4::canonical_query(call.query);
        let request_target = if query.is_empty() {
            target.path.clone()
        } else {
            format!("{}?{query}", target.path)
        };
        let scheme = if https { "https" } else { "http" };
        let url = Url::parse(&format!("{scheme}://{}{}", target.host_header, target.path))
            .or_else(|_| Url::parse(&format!("{scheme}://{}/", target.host_header)))
            .expect("a host S3's endpoint parser took");
        let mut headers = vec![("x-amz-content-sha256".to_owned(), payload_hash)];
        headers.extend(call.headers.iter().cloned());
        let body = match (call.body, call.method) {
            (Body::Empty, "PUT" | "POST") => http::RequestBody::Direct(0),
            (Body::Empty, _) => http::RequestBody::None,
            _ => http::RequestBody::Direct(length),
        };
        let request = http::Request {
            method: call.method.to_owned(),
            url,
            headers,
            body,
            target: Some(request_target),
        };
        let client = http::Client {
            opts: self.transport.clone(),
            service: Some(Arc::new(Signer {
                settings: self.settings.clone(),
                uri: format!("s3://{}/{}", call.bucket, call.key),
                bucket: call.bucket.to_owned(),
                path: target.path,
                query: call.query.to_vec(),
            })),
            precondition: http::Precondition::IfMatch,
            keep_alive: true,
        };
        Ok((client, request))
    }

    fn with_retries<T>(
        &self,
        call: &Call,
        mut done: impl FnMut(Response) -> anyhow::Result<T>,
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
            let mut response = match self.send(call) {
                Ok(sent) => sent,
                // A connection cut before an answer: the request may be retried (S3's
                // requests here are idempotent: a GET, a PUT of the same bytes, a part).
                Err(Unanswered::Cut(_)) if attempt < ATTEMPTS => continue,
                Err(Unanswered::Cut(e) | Unanswered::Unreached(e)) => bail!(
                    "s3://{}/{}: {} {}:{}: {e:#}",
                    call.bucket,
                    call.key,
                    call.method,
                    self.settings.service.host,
                    self.settings.service.port
                ),
            };
            if response.head.is_success() {
                return done(response).map_err(|e| {
                    anyhow!(
                        "s3://{}/{}: reading the answer: {e:#}",
                        call.bucket,
                        call.key
                    )
                });
            }
            let body = read_small(&mut response);
            let status = response.head.status;
            let whole = body.is_ok();
            release(response, whole);
            let body = body.unwrap_or_default();
            let code = xml::error(&body).map(|e| e.code);
            if attempt < ATTEMPTS && error::is_retryable(status, code.as_deref()) {
                continue;
            }
            return Err(self.failure(call, status, &body));
        }
        unreachable!("the last attempt returns")
    }

    /// One attempt: connect (an idle connection of the pool when there is one), send the
    /// signed request and its body, read the answer's head. A connection of the pool the
    /// server had closed while idle (nothing answered) is replaced by a new one once: every
    /// body here can be sent again (bytes, or a file or memfd part by sendfile), and is.
    fn send(&self, call: &Call) -> Result<Response, Unanswered> {
        let (client, request) = self.http_request(call).map_err(Unanswered::Unreached)?;
        let conn = client
            .connect_for(&request.url)
            .map_err(Unanswered::Unreached)?;
        let reused = conn.reused;
        match send_on(&client, conn, &request, call) {
            Err(e) if reused && http::pool::is_unanswered(&e) => {
                self.counts.stale.fetch_add(1, Ordering::Relaxed);
                let conn = client
                    .connect_new(&request.url)
                    .map_err(Unanswered::Unreached)?;
                send_on(&client, conn, &request, call).map_err(Unanswered::Cut)
            }
            sent => sent.map_err(Unanswered::Cut),
        }
    }
}

/// Sends `request` (`call`'s) and its body on `conn`, and reads the answer's head.
fn send_on(
    client: &http::Client,
    conn: http::Connection,
    request: &http::Request,
    call: &Call,
) -> anyhow::Result<Response> {
    answer_timeout(conn.fd.as_fd(), Some(ANSWER_TIMEOUT));
    let (conn, url) = match client.send_on(conn, request)? {
        Sent::Answered(response) => return Ok(response),
        Sent::Continue(conn, url) => (conn, url),
    };
    write_body(conn.fd.as_fd(), call.body).map_err(|e| {
        http::pool::unanswered(format!(
            "{}: cannot send the body: {e}",
            http::redact_url(&url)
        ))
    })?;
    let head = http::read_answer(&conn, &url, call.method)?;
    Ok(Response {
        conn,
        head,
        url,
        redirects: 0,
    })
}

/// The connection of an answer whose body was read (`whole`: exactly to its end) back to
/// the pool, when the server keeps it open; else closed.
fn release(response: Response, whole: bool) {
    let keeps_alive = whole && response.head.keeps_alive();
    http::pool::release(response.conn, keeps_alive);
}

/// Why an attempt got no answer.
enum Unanswered {
    /// No connection was made (refused, no route, a TLS handshake refused): not retried.
    Unreached(anyhow::Error),
    /// The connection was cut or stayed silent after the request went: retried.
    Cut(anyhow::Error),
}

/// Signs each request of one [`Call`] as it goes (SigV4): the path and query as S3
/// encodes them, every header the request carries (a resume's Range and If-Match too),
/// and the Host the http client sends; a fresh `x-amz-date` each time, so a resume long
/// after the first request is not refused as expired.
#[derive(Debug)]
struct Signer {
    settings: Arc<Settings>,
    /// `s3://BUCKET/KEY` and the bucket, for an error in words.
    uri: String,
    bucket: String,
    path: String,
    query: Vec<(String, String)>,
}

impl http::Service for Signer {
    fn name(&self, _url: &Url) -> Option<String> {
        Some(self.uri.clone())
    }

    fn refusal(&self, status: u16, body: &[u8]) -> Option<String> {
        let parsed = xml::error(body);
        Some(error::in_words(
            status,
            parsed.as_ref(),
            Asked {
                uri: &self.uri,
                bucket: &self.bucket,
                credentials: self
                    .settings
                    .credentials
                    .as_ref()
                    .map(|c| c.source.as_str()),
            },
        ))
    }

    fn sign(&self, request: &mut http::Request) {
        request.headers.retain(|(n, _)| {
            !["authorization", "x-amz-date", "x-amz-security-token"]
                .iter()
                .any(|h| h.eq_ignore_ascii_case(n))
        });
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let amz_date = sigv4::amz_date(now);
        request
            .headers
            .push(("x-amz-date".into(), amz_date.clone()));
        let credentials = self.settings.credentials.as_ref();
        if let Some(token) = credentials.and_then(|c| c.session_token()) {
            request
                .headers
                .push(("x-amz-security-token".into(), token.to_owned()));
        }
        let Some(credentials) = credentials else {
            return;
        };
        let payload_hash = request
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("x-amz-content-sha256"))
            .map_or(sigv4::EMPTY_SHA256.to_owned(), |(_, v)| v.clone());
        let mut signed = vec![("host".to_owned(), http::host_header(&request.url))];
        signed.extend(request.headers.iter().cloned());
        let signature = sigv4::sign(
            credentials,
            Scope {
                region: &self.settings.region,
                service: "s3",
            },
            &amz_date,
            &sigv4::Request {
                method: &request.method,
                path: &self.path,
                query: &self.query,
                headers: &signed,
                payload_hash: &payload_hash,
            },
        );
        request
            .headers
            .push(("authorization".into(), signature.authorization));
    }
}

/// SO_RCVTIMEO on a connection: how long a control request waits for its answer (None: no
/// limit, for a body the pump watches itself).
fn answer_timeout(fd: BorrowedFd<'_>, limit: Option<Duration>) {
    let tv = limit.map_or(nix::sys::time::TimeVal::new(0, 0), |d| {
        nix::sys::time::TimeVal::new(d.as_secs() as i64, 0)
    });
    let _ = nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::ReceiveTimeout, &tv);
}

/// Writes a request's body into the connection: bytes, or a staged part with sendfile.
fn write_body(fd: BorrowedFd<'_>, body: Body) -> std::io::Result<()> {
    match body {
        Body::Empty => Ok(()),
        Body::Bytes(b) => crate::sys::write_all(fd, b).map_err(|(_, e)| e.into()),
        Body::Staged(s) => {
            s.rewind()?;
            let mut left = s.len();
            while left > 0 {
                match crate::sys::sendfile(s.fd(), fd, left) {
                    Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                    Ok(n) => left -= n,
                    Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(())
        }
    }
}

/// A small answer's body: Content-Length bytes, chunks to the last one and its trailers,
/// or up to the close; Ok only when read exactly to its end (nothing after it taken).
fn read_small(response: &mut Response) -> anyhow::Result<Vec<u8>> {
    let fd = response.conn.fd.as_fd();
    let framing = response.head.framing;
    let limit = match framing {
        Framing::Length(n) if n > MAX_ANSWER as u64 => {
            bail!("an answer of {n} bytes, over {} MiB", MAX_ANSWER >> 20)
        }
        Framing::Length(n) => n as usize,
        Framing::Chunked | Framing::UntilClose => MAX_ANSWER,
    };
    let mut all = vec![0u8; limit.min(64 << 10)];
    let mut got = 0;
    while got < limit {
        if framing == Framing::Chunked {
            // The server keeps the connection open after the last chunk: stop there.
            if let Some((body, used)) = dechunk(&all[..got])? {
                if used != got {
                    bail!("more bytes after the chunked answer's end");
                }
                return Ok(body);
            }
        }
        if got == all.len() {
            all.resize((all.len() * 2).min(limit), 0);
        }
        match crate::sys::read(fd, &mut all[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(nix::errno::Errno::EINTR) => {}
            Err(nix::errno::Errno::EAGAIN) => {
                bail!("no answer within {} s", ANSWER_TIMEOUT.as_secs())
            }
            Err(e) => bail!("{e}"),
        }
    }
    all.truncate(got);
    match framing {
        Framing::Length(n) if (got as u64) < n => {
            bail!("the answer ended at {got} of {n} bytes")
        }
        Framing::Chunked => match dechunk(&all)? {
            Some((body, used)) if used == got => Ok(body),
            _ => bail!("a chunked answer cut short, or longer than its chunks"),
        },
        _ => Ok(all),
    }
}

/// The body of a chunked answer and how many bytes it took with its trailers, once
/// `bytes` holds it whole; None while it does not yet.
fn dechunk(mut bytes: &[u8]) -> std::io::Result<Option<(Vec<u8>, usize)>> {
    let bad = || std::io::Error::other("a malformed chunked answer");
    let whole = bytes.len();
    let mut out = Vec::new();
    loop {
        let Some(line_end) = find_crlf(bytes) else {
            return Ok(None);
        };
        let size_text = std::str::from_utf8(&bytes[..line_end]).map_err(|_| bad())?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| bad())?;
        bytes = &bytes[line_end + 2..];
        if size == 0 {
            break;
        }
        if bytes.len() < size + 2 {
            return Ok(None);
        }
        if &bytes[size..size + 2] != b"\r\n" {
            return Err(bad());
        }
        out.extend_from_slice(&bytes[..size]);
        bytes = &bytes[size + 2..];
    }
    // Trailer lines, up to an empty one.
    loop {
        let Some(line_end) = find_crlf(bytes) else {
            return Ok(None);
        };
        bytes = &bytes[line_end + 2..];
        if line_end == 0 {
            return Ok(Some((out, whole - bytes.len())));
        }
    }
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests;
