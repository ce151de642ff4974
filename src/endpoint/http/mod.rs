//! `http://` and `https://` endpoints: HTTP/1.1 over the connectors `tcp:` and `tls:` already
//! have (every outbound and TLS option), a real parser for what comes back (httparse), and a
//! body that is spliced: socket -> pipe in a pump thread of this module, pipe -> sink by the
//! engine's own chain (so `pipe`, `tee` and `copy` see a pipe, as `tls:` shows them a
//! socketpair).
//!
//! - `target.rs`: the URL and its options (`HttpOpts`), pure; `http_proxy`/`no_proxy`.
//! - `request.rs`: the request head, as bytes.
//! - `head.rs`: reading a response head off a socket without taking a byte of the body
//!   (MSG_PEEK, then exactly the head), at most [`MAX_HEAD`] bytes; [`ResponseHead`].
//! - `pool.rs`: keep-alive, idle connections for the next request to the same server.
//! - `body.rs`: the body's framing ([`Framing`]: Content-Length, chunked, until close) and
//!   the pumps: a GET body into a pipe, a PUT body out of one (chunked) or a file
//!   (Content-Length, the engine's sendfile straight into the socket).
//!
//! The client API other endpoints build on (s3:, resume, ranged `copy -j`):
//! [`Client::exchange`] sends one request (with extra headers), follows redirects, and hands
//! back a [`Response`]: the parsed head, the final URL and the open connection positioned at
//! the first byte of the body. [`Response::into_body`] then starts the pump that splices
//! exactly the body (never a byte past its framing) into a pipe the engine reads.

mod body;
mod head;
mod open;
pub mod pool;
mod request;
pub mod resume;
mod target;

use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use nix::poll::PollFlags;
use url::Url;

pub use super::{parse_range, redact_url, split_header, ByteRange, HeaderSpec, HttpOpts};
pub use body::{finish_connection, BodyPump, Framing, PumpEnd, UploadPump, PUMP_FINISH};
pub use head::{ResponseHead, MAX_HEAD};
pub use open::{open, resolve_headers, HttpEnd, HttpSummary};
pub use request::host_header;
pub use target::env_proxy;

use super::tls::Session;
use super::{ConnectOpts, Endpoint, Role};

/// How many redirects are followed (curl's `--max-redirs` default is 50; 10 is what the
/// issue and browsers' habits ask for).
pub const MAX_REDIRECTS: u32 = 10;
/// How long a PUT waits for `100 Continue` before it sends the body anyway (curl: 1 s;
/// HAZARDS §3: some servers never answer it).
pub const EXPECT_WAIT: Duration = Duration::from_secs(1);
/// How long a finished upload waits for the server's answer.
pub const ANSWER_WAIT: Duration = Duration::from_secs(30);

/// What a request carries after its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestBody {
    None,
    /// `Content-Length: N`: the caller writes exactly N bytes into the connection.
    Length(u64),
    /// `Transfer-Encoding: chunked`: the caller writes chunks ([`UploadPump`]).
    Chunked,
    /// `Content-Length: N` without `Expect: 100-continue`: the caller writes the N bytes
    /// right after the head (S3's XML bodies and parts: a server that never answers 100
    /// would cost [`EXPECT_WAIT`] a request, and s3s-fs hangs on an empty body that asks).
    Direct(u64),
}

/// One request: what [`Client::exchange`] sends.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub url: Url,
    /// Headers beyond Accept-Encoding, Connection and the body's framing (Range, If-Range,
    /// Authorization, x-amz-*...); a Host, User-Agent or Accept here replaces zerocat's.
    /// Values may be secrets: never shown.
    pub headers: Vec<(String, String)>,
    pub body: RequestBody,
    /// The request-target as sent, when not the URL's path and query: an S3 key such as
    /// `a/../b` is a name, which a URL would resolve to `b`. Dropped at a redirect.
    pub target: Option<String>,
}

/// What a service built on HTTP adds to each exchange (S3): its signature, put on a request
/// just before it goes, its final headers in (so a resume or a redirect long after the first
/// request carries a fresh date and the headers it added, Range and If-Match, signed with
/// the rest); and its words for an error answer.
pub trait Service: Send + Sync + std::fmt::Debug {
    /// Adds the signature's headers to `request` (replacing any of an earlier signing).
    fn sign(&self, request: &mut Request);

    /// How messages name the object at `url` (S3: `s3://BUCKET/KEY`, never the http URL
    /// that carries it); None: the URL, its password hidden.
    fn name(&self, url: &Url) -> Option<String> {
        let _ = url;
        None
    }

    /// The service's words for an error answer of `status` whose body begins with `body`
    /// (S3's XML error: "no such object (NoSuchKey)"); None: the status line says it.
    fn refusal(&self, status: u16, body: &[u8]) -> Option<String> {
        let _ = (status, body);
        None
    }
}

/// How a ranged request is held to the version of the object the first answer was:
/// `If-Range` (a plain HTTP server: a changed object comes back whole, as a 200) or
/// `If-Match` (S3, whose documented conditions are If-Match and If-Unmodified-Since: a
/// changed object is a 412). Either way the other version is refused, never appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precondition {
    #[default]
    IfRange,
    IfMatch,
}

impl Precondition {
    /// The header that makes a ranged request conditional on `validator`.
    pub fn header(self, validator: &resume::Validator) -> (&'static str, String) {
        let value = validator.if_range().to_string();
        match (self, validator) {
            (Precondition::IfRange, _) => ("If-Range", value),
            (Precondition::IfMatch, resume::Validator::ETag(_)) => ("If-Match", value),
            (Precondition::IfMatch, resume::Validator::LastModified(_)) => {
                ("If-Unmodified-Since", value)
            }
        }
    }

    /// Whether `name` is a header this module adds for a precondition (taken out of a
    /// request before another is added).
    pub fn is_precondition_header(name: &str) -> bool {
        ["if-range", "if-match", "if-unmodified-since"]
            .iter()
            .any(|h| h.eq_ignore_ascii_case(name))
    }
}

/// A connection to an HTTP server: the fd to read and write (a TCP socket, a kTLS socket,
/// or the socketpair of the userspace TLS bridge) and the TLS stream behind it.
#[derive(Debug)]
pub struct Connection {
    pub fd: OwnedFd,
    pub tls: Option<Session>,
    /// The server and way to it, when the connection may go back to the pool
    /// ([`pool::release`]) after an answer read to its end.
    pub origin: Option<std::sync::Arc<pool::Origin>>,
    /// Taken from the pool: it carried a request before.
    pub reused: bool,
}

/// A response whose head was read: the connection is at the first byte of the body.
#[derive(Debug)]
pub struct Response {
    pub conn: Connection,
    pub head: ResponseHead,
    /// The URL that answered (after redirects).
    pub url: Url,
    pub redirects: u32,
}

/// How to reach servers: the endpoint's options (tls:, outbound), shared by every request
/// of one endpoint.
#[derive(Debug, Clone)]
pub struct Client {
    pub opts: HttpOpts,
    /// Signs every request this client sends (S3), redirects and resumes included, and
    /// says its error answers.
    pub service: Option<std::sync::Arc<dyn Service>>,
    /// How ranged requests (resumes, `copy -j`) are held to one version.
    pub precondition: Precondition,
    /// Requests ask to keep the connection open, and a connection whose answer was read
    /// to its end carries the next request to the same server ([`pool`]).
    pub keep_alive: bool,
}

impl Client {
    pub fn new(opts: HttpOpts) -> Client {
        Client {
            opts,
            service: None,
            precondition: Precondition::IfRange,
            keep_alive: true,
        }
    }

    /// How messages name `url`: the service's name for it ([`Service::name`]), else the
    /// URL with its password hidden.
    pub fn shown(&self, url: &Url) -> String {
        self.service
            .as_ref()
            .and_then(|s| s.name(url))
            .unwrap_or_else(|| redact_url(url))
    }

    /// Connects to `url`'s server (through `socks5=`/`connect=` or the proxy the environment
    /// names, with `retry=`, `mptcp`, and TLS for https with every `tls:` option), sends
    /// `request`'s head, and reads the response head; 1xx answers are skipped. For a body
    /// of [`RequestBody::Length`]/[`RequestBody::Chunked`] it asks `Expect: 100-continue`
    /// and returns `Ok(Sent::Continue)` once the server says go (or says nothing for
    /// [`EXPECT_WAIT`]): the caller then writes the body and reads the answer with
    /// [`read_answer`]. Redirects (3xx with Location) are followed up to
    /// [`MAX_REDIRECTS`]: 307/308 keep the method and body, 301/302/303 turn into a GET
    /// without one (as curl and browsers do), https -> http is refused, and headers the user
    /// gave go to another host only if they carry no credentials (Authorization, Cookie
    /// are dropped, as curl does). Any status is returned as it is: the caller decides
    /// (see [`ResponseHead::is_success`]).
    pub fn exchange(&self, request: &Request) -> anyhow::Result<Sent> {
        let mut request = request.clone();
        let origin = request.url.clone();
        let mut redirects = 0;
        loop {
            let sent = self.exchange_once(&request)?;
            let response = match sent {
                Sent::Continue(conn, url) => return Ok(Sent::Continue(conn, url)),
                Sent::Answered(mut response) => {
                    response.redirects = redirects;
                    response
                }
            };
            let Some(location) = response.head.redirect_location() else {
                return Ok(Sent::Answered(response));
            };
            let shown = redact_url(&request.url);
            if redirects == MAX_REDIRECTS {
                bail!(
                    "{shown}: more than {MAX_REDIRECTS} redirects (the last to {})",
                    redact_text(location)
                );
            }
            let next = request.url.join(location).with_context(|| {
                format!(
                    "{shown}: the server redirects to '{}', which is no URL",
                    redact_text(location)
                )
            })?;
            if request.url.scheme() == "https" && next.scheme() != "https" {
                bail!(
                    "{shown}: the server redirects to {}: zerocat never follows https to {}",
                    redact_url(&next),
                    next.scheme()
                );
            }
            if !matches!(next.scheme(), "http" | "https") {
                bail!(
                    "{shown}: the server redirects to {}, which is not http(s)",
                    redact_url(&next)
                );
            }
            let status = response.head.status;
            drop(response);
            if !matches!(status, 307 | 308) {
                // 301/302/303: a GET of the new place, without a body (RFC 9110 §15.4).
                request.method = "GET".to_string();
                request.body = RequestBody::None;
            }
            request.target = None;
            if !same_origin(&origin, &next) {
                request
                    .headers
                    .retain(|(name, _)| !is_credential_header(name));
            }
            request.url = next;
            redirects += 1;
        }
    }

    fn exchange_once(&self, request: &Request) -> anyhow::Result<Sent> {
        let conn = self.connect_for(&request.url)?;
        let reused = conn.reused;
        match self.send_on(conn, request) {
            // An idle connection the server had closed: the head goes again on a new one
            // (no body was sent yet: a body is the caller's, after Continue).
            Err(e) if reused && pool::is_unanswered(&e) => {
                let conn = self.connect_new(&request.url)?;
                self.send_on(conn, request)
            }
            sent => sent,
        }
    }

    /// A connection to the server (or proxy) of `url`, TLS included: an idle one of the
    /// pool ([`Connection::reused`]) when this client keeps connections alive, else a new
    /// one. The first half of [`Client::exchange`], no redirect followed. A failure here
    /// sent nothing.
    pub fn connect_for(&self, url: &Url) -> anyhow::Result<Connection> {
        if self.keep_alive {
            if let Some(conn) = pool::take(&self.origin(url)?) {
                return Ok(conn);
            }
        }
        self.connect_new(url)
    }

    /// A new connection to the server (or proxy) of `url`, never one of the pool.
    pub fn connect_new(&self, url: &Url) -> anyhow::Result<Connection> {
        let route = target::route(url, &self.opts)?;
        let mut conn = connect(&route, &self.opts, url)?;
        if self.keep_alive {
            conn.origin = Some(std::sync::Arc::new(self.origin(url)?));
        }
        Ok(conn)
    }

    /// What a connection for `url` is interchangeable by ([`pool::Origin`]).
    fn origin(&self, url: &Url) -> anyhow::Result<pool::Origin> {
        Ok(pool::Origin {
            scheme: url.scheme().to_string(),
            host: target::host_of(url),
            port: url.port_or_known_default().unwrap_or(80),
            route: target::route(url, &self.opts)?,
            connect: self.opts.connect.clone(),
        })
    }

    /// Sends `request` on `conn` (from [`Client::connect_for`]) and reads the answer's head,
    /// as [`Client::exchange`] does, no redirect followed. A failure here is of a
    /// connection that was made: the server cut it or never answered.
    pub fn send_on(&self, conn: Connection, request: &Request) -> anyhow::Result<Sent> {
        let signed;
        let request = match &self.service {
            Some(service) => {
                let mut r = request.clone();
                service.sign(&mut r);
                signed = r;
                &signed
            }
            None => request,
        };
        let shown = redact_url(&request.url);
        let route = target::route(&request.url, &self.opts)?;
        let head = request::head(request, &route, self.keep_alive);
        crate::sys::write_all(conn.fd.as_fd(), &head).map_err(|(_, errno)| {
            pool::unanswered(format!(
                "{shown}: cannot send the request: {}",
                std::io::Error::from(errno)
            ))
        })?;
        if let RequestBody::Direct(_) = request.body {
            return Ok(Sent::Continue(conn, request.url.clone()));
        }
        if request.body != RequestBody::None {
            let answered = crate::sys::wait_within(conn.fd.as_fd(), PollFlags::POLLIN, EXPECT_WAIT)
                .map_err(std::io::Error::from)
                .with_context(|| format!("{shown}: waiting for 100 Continue"))?;
            if !answered {
                return Ok(Sent::Continue(conn, request.url.clone()));
            }
            let head = head::read(conn.fd.as_fd(), &shown, &request.method, true)?;
            if head.status == 100 {
                return Ok(Sent::Continue(conn, request.url.clone()));
            }
            return Ok(Sent::Answered(Response {
                conn,
                head,
                url: request.url.clone(),
                redirects: 0,
            }));
        }
        let head = head::read(conn.fd.as_fd(), &shown, &request.method, false)?;
        Ok(Sent::Answered(Response {
            conn,
            head,
            url: request.url.clone(),
            redirects: 0,
        }))
    }
}

/// What sending a request came to.
#[derive(Debug)]
pub enum Sent {
    /// The server answered (a body-less request always ends here).
    Answered(Response),
    /// The server waits for the body: write it on this connection (at this URL, after
    /// redirects), then [`read_answer`].
    Continue(Connection, Url),
}

/// The answer to an uploaded body: the response head, 1xx skipped.
pub fn read_answer(conn: &Connection, url: &Url, method: &str) -> anyhow::Result<ResponseHead> {
    let shown = redact_url(url);
    match crate::sys::wait_within(conn.fd.as_fd(), PollFlags::POLLIN, ANSWER_WAIT) {
        Ok(true) => {}
        Ok(false) => bail!(
            "{shown}: no answer within {} s after the body",
            ANSWER_WAIT.as_secs()
        ),
        Err(e) => return Err(anyhow!("{shown}: waiting for the answer: {e}")),
    }
    head::read(conn.fd.as_fd(), &shown, method, false)
}

/// How long an error answer's body is waited for, to be said.
const REFUSAL_WAIT: Duration = Duration::from_secs(2);
/// The most of an error answer's body read to be said.
const REFUSAL_BODY: usize = 64 << 10;

impl Client {
    /// An error answer in words: the service's (S3's XML error, read from the body) when
    /// it has some, else the status line. The body is read here, never into a sink.
    pub fn refusal(&self, response: Response) -> String {
        let shown = self.shown(&response.url);
        let plain = format!(
            "{shown}: the server answered {}",
            response.head.status_line()
        );
        let Some(service) = &self.service else {
            return plain;
        };
        let want = match response.head.framing {
            Framing::Length(n) => (n as usize).min(REFUSAL_BODY),
            _ => REFUSAL_BODY,
        };
        let fd = response.conn.fd.as_fd();
        let mut body = vec![0u8; want];
        let mut got = 0;
        while got < want
            && crate::sys::wait_within(fd, PollFlags::POLLIN, REFUSAL_WAIT).unwrap_or(false)
        {
            match crate::sys::read(fd, &mut body[got..]) {
                Ok(0) | Err(_) => break,
                Ok(n) => got += n,
            }
        }
        body.truncate(got);
        service
            .refusal(response.head.status, &body)
            .unwrap_or(plain)
    }
}

impl Response {
    /// Starts the pump that splices this response's body, framed, into a new pipe; the
    /// pipe's read end is the source the engine sees. See [`BodyPump`].
    pub fn into_body(self) -> anyhow::Result<(OwnedFd, BodyPump)> {
        body::start_source(self, None)
    }

    /// [`Response::into_body`], whose pump continues a body cut short with `resumer`
    /// (`resume.rs`).
    pub fn into_resumable_body(
        self,
        resumer: Option<resume::Resumer>,
    ) -> anyhow::Result<(OwnedFd, BodyPump)> {
        body::start_source(self, resumer)
    }
}

/// Whether two URLs are the same origin for credentials: scheme, host and port.
fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

/// Headers that carry credentials: not sent to another host after a redirect (curl
/// CVE-2018-1000007), never shown.
pub fn is_credential_header(name: &str) -> bool {
    ["authorization", "cookie", "proxy-authorization"]
        .iter()
        .any(|h| h.eq_ignore_ascii_case(name))
}

/// What a request carries that a message must not show, should the server echo it: every
/// value of the user's headers (as the endpoint's display hides them) and each of its
/// words long enough to be a token, the URL's password and its Basic credentials.
pub fn secrets_of(headers: &[(String, String)], url: &Url) -> Vec<String> {
    let mut secrets: Vec<String> = Vec::new();
    for (_, value) in headers {
        secrets.push(value.clone());
        secrets.extend(
            value
                .split_whitespace()
                .filter(|w| w.len() >= SECRET_WORD)
                .map(str::to_string),
        );
    }
    if let Some(password) = url.password() {
        secrets.push(password.to_string());
    }
    if let Some(credentials) = target::userinfo(url) {
        secrets.extend(credentials.split_once(':').map(|(_, p)| p.to_string()));
        secrets.push(target::base64(credentials.as_bytes()));
    }
    secrets.retain(|s| s.len() >= SECRET_PREFIX);
    // The longest first: a value is hidden whole before its words are.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets
}

/// A header value's word this long may be a token.
const SECRET_WORD: usize = 8;
/// The shortest secret (or cut-off start of one, at the end of a text) hidden.
const SECRET_PREFIX: usize = 4;

/// `text` with every one of `secrets` as `***`, and a secret's start that `text` ends with
/// (a text cut short in the middle of it) too.
pub fn scrub(text: &str, secrets: &[String]) -> String {
    let mut text = text.to_string();
    for secret in secrets {
        text = text.replace(secret.as_str(), "***");
    }
    for secret in secrets {
        let cut = (SECRET_PREFIX..secret.len())
            .rev()
            .filter(|&n| secret.is_char_boundary(n))
            .find(|&n| text.ends_with(&secret[..n]));
        if let Some(n) = cut {
            text.truncate(text.len() - n);
            text.push_str("***");
        }
    }
    text
}

/// A Location or other server text as a message may show it: a URL's password hidden.
fn redact_text(text: &str) -> String {
    match Url::parse(text) {
        Ok(url) => redact_url(&url),
        Err(_) => text.escape_debug().to_string(),
    }
}

/// Opens the connection `route` names: a `tcp:`/`tls:` endpoint made of it, so every
/// connector option works as it does there.
fn connect(route: &target::Route, opts: &HttpOpts, url: &Url) -> anyhow::Result<Connection> {
    let mut connect: ConnectOpts = opts.connect.clone();
    if connect.via.is_none() {
        connect.via = route.tunnel.clone();
    }
    // A request is a head and then a body, two writes: on a kept-alive connection Nagle
    // would hold the body until the head's ACK, which the server delays (40 ms a request;
    // curl sets TCP_NODELAY too).
    connect.sock.nodelay = true;
    connect.tls = route.tls.clone();
    let endpoint = Endpoint::Tcp {
        host: route.host.clone(),
        port: route.port,
        connect,
    };
    let opened = endpoint
        .open(Role::Source)
        .with_context(|| format!("cannot reach {}", redact_url(url)))?;
    Ok(Connection {
        fd: opened.fd,
        tls: opened.tls,
        origin: None,
        reused: false,
    })
}

/// A header file of `header=@FILE`: read when the endpoint opens.
pub fn read_header_file(path: &PathBuf) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the headers of header=@{}", path.display()))?;
    let mut headers = Vec::new();
    for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        let (name, value) = super::split_header(line).map_err(|e| {
            anyhow!(
                "header=@{}: a line is no 'Name: value' ({e})",
                path.display()
            )
        })?;
        headers.push((name.to_string(), value.to_string()));
    }
    Ok(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echoed_secret_is_hidden_whole_in_words_and_cut_short() {
        let url = Url::parse("http://user:pa%3Ass@h/x").unwrap();
        let headers = [
            (
                "Authorization".to_string(),
                "Bearer abcdefgh123".to_string(),
            ),
            ("X-Trace".to_string(), "1".to_string()),
        ];
        let secrets = secrets_of(&headers, &url);
        assert_eq!(
            scrub("got Authorization: Bearer abcdefgh123.", &secrets),
            "got Authorization: ***."
        );
        assert_eq!(scrub("token abcdefgh123!", &secrets), "token ***!");
        assert_eq!(
            scrub("X-Trace: 1, tail abcdef", &secrets),
            "X-Trace: 1, tail ***"
        );
        // The password as sent (decoded) and its Basic credentials.
        assert_eq!(scrub("pw pa:ss", &secrets), "pw ***");
        assert_eq!(scrub("Basic dXNlcjpwYTpzcw==", &secrets), "Basic ***");
    }
}
