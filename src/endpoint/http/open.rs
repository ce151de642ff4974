//! An `http(s)://` endpoint opened for its role: a GET whose body's pump feeds a pipe (a
//! source), or an upload (a sink) the engine writes into, and what finishing either says.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use anyhow::{bail, Context};
use nix::poll::PollFlags;
use url::Url;

use super::body::{finish_connection, BodyPump, PumpEnd, UploadPump, PUMP_FINISH};
use super::resume::{no_resume_reason, Resume, Resumer};
use super::{read_answer, Client, Connection, Request, RequestBody, ResponseHead, Sent};
use crate::endpoint::{redact_url, ByteRange, HeaderSpec, HttpOpts};
use crate::endpoint::{Opened, Role};
use crate::exit::UsageError;
use crate::sys::ktls::TlsInfo;

/// How long zerocat waits for the first bytes of an error body, to show them.
const ERROR_BODY_WAIT: Duration = Duration::from_millis(500);
/// How many bytes of an error body are shown (escaped) in the message.
const ERROR_BODY_SHOWN: usize = 200;

/// The exchange behind an opened `http(s)://` endpoint, finished once its fd is closed.
#[derive(Debug)]
pub enum HttpEnd {
    /// A GET: its body's pump.
    Download(BodyPump),
    /// An upload from a stream: chunks pumped from the pipe the engine writes.
    Upload(UploadPump),
    /// An upload of a known length the engine writes straight into the connection (of
    /// which the opened fd is a duplicate); the answer is read at the finish.
    Sized {
        conn: Box<Connection>,
        url: Url,
        method: String,
        tls: Option<TlsInfo>,
        cut: std::sync::atomic::AtomicBool,
    },
}

/// What an exchange came to, for the report and the exit code.
#[derive(Debug, Clone)]
pub struct HttpSummary {
    pub method: String,
    /// The status of the response whose body moved, or of the upload's answer (0: none).
    pub status: u16,
    pub reason: String,
    /// The URL that answered, after redirects (password hidden).
    pub url: String,
    pub etag: Option<String>,
    pub redirects: u32,
    /// "content-length", "chunked", "close" (a download), or the upload's framing.
    pub framing: &'static str,
    /// Content-Length, when announced.
    pub length: Option<u64>,
    /// What the pump moved: spliced, and by read/write.
    pub spliced: u64,
    pub copied: u64,
    /// A body that ended at the server's close, with no length to check.
    pub unverified: bool,
    pub tls: Option<TlsInfo>,
    /// Why the exchange failed, URL named, if it did.
    pub error: Option<String>,
    /// Where a body cut short continued (`resume.rs`).
    pub resumes: Vec<Resume>,
    /// Why the body could not have been resumed, when it could not.
    pub resume_off: Option<&'static str>,
}

impl HttpEnd {
    /// The run failed: an upload is not completed (a chunked one gets no last chunk, a
    /// sized one is closed without its answer, short of its length). Call before the
    /// opened fd is closed.
    pub fn cut(&self) {
        match self {
            HttpEnd::Download(_) => {}
            HttpEnd::Upload(pump) => pump.cut(),
            HttpEnd::Sized { cut, .. } => cut.store(true, std::sync::atomic::Ordering::SeqCst),
        }
    }

    /// Waits for the pump (or reads the upload's answer) and says what the exchange did.
    /// The opened fd must be closed first.
    pub fn finish(self) -> HttpSummary {
        match self {
            HttpEnd::Download(pump) => {
                let head = pump.head.clone();
                let (url, redirects, tls) =
                    (redact_url(&pump.url), pump.redirects, pump.tls.clone());
                let resume_off = pump.resume_off;
                let end = pump.finish(PUMP_FINISH);
                let mut s = summary("GET", Some(&head), url, redirects, tls, end);
                s.resume_off = resume_off;
                s
            }
            HttpEnd::Upload(pump) => {
                let (url, tls) = (redact_url(&pump.url), pump.tls.clone());
                let method = pump.method.clone();
                let mut end = pump.finish(PUMP_FINISH);
                let answer = end.answer.take();
                let mut s = summary(&method, answer.as_ref(), url, 0, tls, end);
                s.framing = "chunked";
                s.length = None;
                s
            }
            HttpEnd::Sized {
                conn,
                url,
                method,
                tls,
                cut,
            } => {
                let mut end = PumpEnd::default();
                if cut.into_inner() {
                    // Short of its Content-Length: reset, so the server keeps nothing.
                    let Connection {
                        fd, tls: session, ..
                    } = *conn;
                    if let Some(session) = &session {
                        session.cut();
                    }
                    crate::sys::socket::abort_socket(fd);
                    if let Some(session) = session {
                        let _ = session.finish(PUMP_FINISH);
                    }
                    end.error = Some(format!(
                        "{}: the upload was cut short of its Content-Length",
                        redact_url(&url)
                    ));
                    let mut s = summary(&method, None, redact_url(&url), 0, tls, end);
                    s.framing = "content-length";
                    return s;
                }
                let answer = match read_answer(&conn, &url, &method) {
                    Ok(head) => Some(head),
                    Err(e) => {
                        end.error = Some(format!("{e:#}"));
                        None
                    }
                };
                finish_connection(*conn);
                let mut s = summary(&method, answer.as_ref(), redact_url(&url), 0, tls, end);
                s.framing = "content-length";
                s
            }
        }
    }
}

fn summary(
    method: &str,
    head: Option<&ResponseHead>,
    url: String,
    redirects: u32,
    tls: Option<TlsInfo>,
    end: PumpEnd,
) -> HttpSummary {
    let mut error = end.error;
    if let (None, Some(head)) = (&error, head) {
        if !head.is_success() {
            error = Some(format!("{url}: the server answered {}", head.status_line()));
        }
    }
    HttpSummary {
        method: method.to_string(),
        status: head.map_or(0, |h| h.status),
        reason: head.map_or(String::new(), |h| h.reason.clone()),
        url,
        etag: head.and_then(|h| h.etag()).map(str::to_string),
        redirects,
        framing: head.map_or("none", |h| h.framing.word()),
        length: head.and_then(|h| match h.framing {
            super::Framing::Length(n) => Some(n),
            _ => None,
        }),
        spliced: end.spliced,
        copied: end.copied,
        unverified: end.unverified,
        tls,
        error,
        resumes: end.resumes,
        resume_off: None,
    }
}

/// The headers of `,header=`/`header-env=`, read now (files, the environment).
pub fn resolve_headers(opts: &HttpOpts) -> anyhow::Result<Vec<(String, String)>> {
    let mut headers = Vec::new();
    for spec in &opts.headers {
        match spec {
            HeaderSpec::Given { name, value } => headers.push((name.clone(), value.clone())),
            HeaderSpec::File(path) => headers.extend(super::read_header_file(path)?),
            HeaderSpec::Env { name, var } => {
                let value = std::env::var(var).map_err(|_| {
                    UsageError(format!(
                        "header-env={name}:{var}: the environment has no {var} (or it is not \
                         UTF-8)"
                    ))
                })?;
                if value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
                    return Err(UsageError(format!(
                        "header-env={name}:{var}: the value of {var} holds a line break"
                    ))
                    .into());
                }
                headers.push((name.clone(), value.trim().to_string()));
            }
        }
    }
    Ok(headers)
}

/// Opens `url` for `role`: see [`HttpEnd`].
pub fn open(
    url: &Url,
    opts: &HttpOpts,
    role: Role,
    upload_len: Option<u64>,
) -> anyhow::Result<Opened> {
    let mut headers = resolve_headers(opts)?;
    let secrets = super::secrets_of(&headers, url);
    let client = Client::new(opts.clone());
    let shown = redact_url(url);
    match role {
        Role::Source => {
            if let Some(range) = &opts.range {
                headers.push(("Range".to_string(), range.header()));
            }
            let request = Request {
                method: "GET".to_string(),
                url: url.clone(),
                headers,
                body: RequestBody::None,
                target: None,
            };
            let Sent::Answered(response) = client.exchange(&request)? else {
                unreachable!("a request without a body is answered")
            };
            if !response.head.is_success() {
                let said = error_body(&response.conn, &secrets);
                bail!(
                    "{}: the server answered {}{said}",
                    redact_url(&response.url),
                    response.head.status_line()
                );
            }
            if let Some(range) = &opts.range {
                check_range(range, &response.head, &redact_url(&response.url))?;
            }
            // A body cut short is asked again from where it stopped (resume.rs), when the
            // answer gives a validator to hold the rest to the same version.
            let start = opts.range.as_ref().map_or(0, |r| r.start);
            let resume_off = no_resume_reason(&response.head, &opts.resume);
            let resumer = Resumer::new(&client, &request, &response.head, start, &opts.resume);
            let (fd, mut pump) = response.into_resumable_body(resumer)?;
            pump.resume_off = resume_off;
            Ok(opened(fd, HttpEnd::Download(pump)))
        }
        Role::Sink => {
            if opts.range.is_some() {
                return Err(UsageError(format!("{shown}: range= is for a source (a GET)")).into());
            }
            let method = opts.method.clone().unwrap_or_else(|| "PUT".to_string());
            let request = Request {
                method: method.clone(),
                url: url.clone(),
                headers,
                body: upload_len.map_or(RequestBody::Chunked, RequestBody::Length),
                target: None,
            };
            match client.exchange(&request)? {
                Sent::Continue(conn, url) => {
                    let tls = conn.tls.as_ref().map(|s| s.info.clone());
                    if upload_len.is_some() {
                        let fd = conn
                            .fd
                            .try_clone()
                            .with_context(|| format!("{shown}: cannot duplicate the connection"))?;
                        return Ok(opened(
                            fd,
                            HttpEnd::Sized {
                                conn: Box::new(conn),
                                url,
                                method,
                                tls,
                                cut: false.into(),
                            },
                        ));
                    }
                    let (fd, pump) = UploadPump::start(conn, url, method)?;
                    Ok(opened(fd, HttpEnd::Upload(pump)))
                }
                Sent::Answered(response) => {
                    let said = error_body(&response.conn, &secrets);
                    bail!(
                        "{}: the server answered {} before the body{said}",
                        redact_url(&response.url),
                        response.head.status_line()
                    )
                }
            }
        }
    }
}

fn opened(fd: OwnedFd, end: HttpEnd) -> Opened {
    Opened {
        http: Some(end),
        ..Opened::plain(fd)
    }
}

/// A 206's Content-Range must start where the range asked and end no later; a 200 is the
/// whole object, which only a range from 0 to the end may take.
fn check_range(range: &ByteRange, head: &ResponseHead, url: &str) -> anyhow::Result<()> {
    match head.status {
        206 => {
            let Some((start, end, _)) = head.content_range() else {
                bail!(
                    "{url}: a 206 without a Content-Range zerocat understands ({:?})",
                    head.header("content-range").unwrap_or("")
                );
            };
            if start != range.start || range.end.is_some_and(|asked| end > asked) || end < start {
                bail!(
                    "{url}: the server sent bytes {start}-{end}, not the {} asked",
                    range
                );
            }
            if let super::Framing::Length(n) = head.framing {
                if n != end - start + 1 {
                    bail!("{url}: Content-Range {start}-{end} and Content-Length {n} do not agree");
                }
            }
            Ok(())
        }
        _ if range.start == 0 && range.end.is_none() => Ok(()),
        status => bail!(
            "{url}: the server answered {status} to range={range}: it sent the whole object, \
             not the range (nothing written)"
        ),
    }
}

/// The first bytes of an error's body, escaped, as the message shows them: read with a
/// short wait, never into the sink; a server that echoes the request shows no `secrets`.
fn error_body(conn: &Connection, secrets: &[String]) -> String {
    let fd = conn.fd.as_fd();
    if !crate::sys::wait_within(fd, PollFlags::POLLIN, ERROR_BODY_WAIT).unwrap_or(false) {
        return String::new();
    }
    let mut buf = [0u8; ERROR_BODY_SHOWN];
    let n = nix::sys::socket::recv(
        fd.as_raw_fd(),
        &mut buf,
        nix::sys::socket::MsgFlags::MSG_DONTWAIT,
    )
    .unwrap_or(0);
    let text = super::scrub(&String::from_utf8_lossy(&buf[..n]), secrets);
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    format!(" (the body begins: \"{}\")", text.escape_debug())
}
