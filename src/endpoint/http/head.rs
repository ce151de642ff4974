//! The response head: read off the connection without taking a byte of the body, parsed
//! with httparse (hyper's parser: a zero-copy, fuzzed, RFC 9112 parser of heads only, which
//! is what zerocat wants: the body is never in userspace).
//!
//! How it reads exactly the head: it peeks (MSG_PEEK) what has arrived and parses it. When
//! the head is complete, it takes exactly its bytes; when not, everything peeked is head,
//! so it takes all of it and peeks again (which then waits for new bytes). The socket is
//! left at the first byte of the body, for the pump to splice.

use std::os::fd::{AsRawFd, BorrowedFd};

use anyhow::{anyhow, bail};
use nix::errno::Errno;
use nix::sys::socket::{recv, MsgFlags};

use super::body::Framing;

/// The largest response head zerocat reads (status line and headers): beyond it, the
/// server is refused.
pub const MAX_HEAD: usize = 64 * 1024;
/// The most header lines one head may hold.
const MAX_HEADERS: usize = 1024;

/// A response's status line and headers, and how its body is framed.
#[derive(Debug, Clone)]
pub struct ResponseHead {
    pub status: u16,
    pub reason: String,
    /// Every header in order, names as sent; values as bytes.
    pub headers: Vec<(String, Vec<u8>)>,
    pub framing: Framing,
    /// The server keeps the connection open after this answer (HTTP/1.1 without
    /// `Connection: close`, or HTTP/1.0 with `keep-alive`).
    pub persistent: bool,
}

impl ResponseHead {
    /// The first header called `name` (any case), when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
            .map(str::trim)
    }

    /// The ETag, as sent (quotes and `W/` kept).
    pub fn etag(&self) -> Option<&str> {
        self.header("etag")
    }

    /// `Content-Range: bytes START-END/SIZE` of a 206: (START, END, SIZE or None for `*`).
    pub fn content_range(&self) -> Option<(u64, u64, Option<u64>)> {
        let value = self.header("content-range")?;
        let rest = value.strip_prefix("bytes ")?.trim();
        let (span, size) = rest.split_once('/')?;
        let (start, end) = span.split_once('-')?;
        let size = match size {
            "*" => None,
            n => Some(n.parse().ok()?),
        };
        Some((start.parse().ok()?, end.parse().ok()?, size))
    }

    /// The Location of a redirect that is to be followed (301, 302, 303, 307, 308).
    pub fn redirect_location(&self) -> Option<&str> {
        matches!(self.status, 301 | 302 | 303 | 307 | 308)
            .then(|| self.header("location"))
            .flatten()
            .filter(|l| !l.is_empty())
    }

    /// The comma-separated values of every header called `name`, trimmed, lower case,
    /// empty ones dropped.
    fn tokens(&self, name: &str) -> Vec<String> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(|&b| b == b','))
            .map(|v| String::from_utf8_lossy(v).trim().to_ascii_lowercase())
            .filter(|v| !v.is_empty())
            .collect()
    }

    /// Whether the connection may carry another request once this answer's body is read
    /// to its end: the server keeps it open and the body ends by its framing, not at a
    /// close.
    pub fn keeps_alive(&self) -> bool {
        self.persistent && self.framing != Framing::UntilClose
    }

    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// "404 Not Found"
    pub fn status_line(&self) -> String {
        if self.reason.is_empty() {
            self.status.to_string()
        } else {
            format!("{} {}", self.status, self.reason)
        }
    }
}

/// Reads one response head from `fd` for a request of `method` (`url` names it in
/// errors). 1xx heads are skipped, but for a `100 Continue` when `continue_ok`.
pub fn read(
    fd: BorrowedFd<'_>,
    url: &str,
    method: &str,
    continue_ok: bool,
) -> anyhow::Result<ResponseHead> {
    loop {
        let head = read_one(fd, url, method)?;
        match head.status {
            100 if continue_ok => return Ok(head),
            101 => {
                bail!("{url}: the server switches protocols (101), which zerocat does not speak")
            }
            100..=199 => continue,
            _ => return Ok(head),
        }
    }
}

fn read_one(fd: BorrowedFd<'_>, url: &str, method: &str) -> anyhow::Result<ResponseHead> {
    // The server's head and body are often two writes, its body held by Nagle until the
    // head is ACKed: ACK at once (a new connection does, a kept-alive one would delay it
    // 40 ms). Not a TCP socket (the TLS bridge's socketpair): nothing to do.
    crate::sys::socket::ack_at_once(fd);
    let mut taken: Vec<u8> = Vec::new();
    let mut peeked = vec![0u8; MAX_HEAD + 1];
    loop {
        let room = MAX_HEAD + 1 - taken.len();
        let n = retry_eintr(|| recv(fd.as_raw_fd(), &mut peeked[..room], MsgFlags::MSG_PEEK))
            .map_err(|e| match e {
                Errno::ECONNRESET | Errno::EPIPE if taken.is_empty() => {
                    super::pool::unanswered(format!("{url}: cannot read the response: {e}"))
                }
                _ => anyhow!("{url}: cannot read the response: {e}"),
            })?;
        if n == 0 {
            if taken.is_empty() {
                return Err(super::pool::unanswered(format!(
                    "{url}: the server closed the connection without answering"
                )));
            }
            bail!(
                "{url}: the server closed the connection in the middle of the response head \
                 (after {} bytes)",
                taken.len()
            );
        }
        let mut all = taken.clone();
        all.extend_from_slice(&peeked[..n]);
        let mut headers = vec![httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(&all) {
            Ok(httparse::Status::Complete(len)) => {
                if len > MAX_HEAD {
                    bail!(too_large(url));
                }
                let head = make_head(&response, url, method)?;
                take(fd, len - taken.len(), url)?;
                return Ok(head);
            }
            Ok(httparse::Status::Partial) => {
                if all.len() > MAX_HEAD {
                    bail!(too_large(url));
                }
                take(fd, n, url)?;
                taken = all;
            }
            Err(httparse::Error::TooManyHeaders) => {
                bail!("{url}: the response has more than {MAX_HEADERS} header lines")
            }
            Err(e) => {
                let start = String::from_utf8_lossy(&all[..all.len().min(80)]).into_owned();
                bail!(
                    "{url}: invalid response head ({e}): \"{}\"",
                    start.escape_debug()
                )
            }
        }
    }
}

fn too_large(url: &str) -> String {
    format!(
        "{url}: the response head is larger than {} KiB",
        MAX_HEAD / 1024
    )
}

/// Takes exactly `len` bytes (already peeked) off the socket.
fn take(fd: BorrowedFd<'_>, mut len: usize, url: &str) -> anyhow::Result<()> {
    let mut sink = vec![0u8; len.min(MAX_HEAD + 1)];
    while len > 0 {
        let n = retry_eintr(|| recv(fd.as_raw_fd(), &mut sink[..len], MsgFlags::MSG_WAITALL))
            .map_err(|e| anyhow!("{url}: cannot read the response: {e}"))?;
        if n == 0 {
            bail!("{url}: the connection ended in the middle of the response head");
        }
        len -= n;
    }
    Ok(())
}

pub(super) fn retry_eintr<T>(mut call: impl FnMut() -> Result<T, Errno>) -> Result<T, Errno> {
    loop {
        match call() {
            Err(Errno::EINTR) if !crate::sys::process::must_stop() => {}
            other => return other,
        }
    }
}

fn make_head(
    response: &httparse::Response<'_, '_>,
    url: &str,
    method: &str,
) -> anyhow::Result<ResponseHead> {
    let status = response.code.expect("a complete response has a status");
    let headers: Vec<(String, Vec<u8>)> = response
        .headers
        .iter()
        .map(|h| (h.name.to_string(), h.value.to_vec()))
        .collect();
    let mut head = ResponseHead {
        status,
        reason: response.reason.unwrap_or("").to_string(),
        headers,
        framing: Framing::Length(0),
        persistent: false,
    };
    let connection = head.tokens("connection");
    head.persistent = match response.version {
        Some(1) => !connection.iter().any(|t| t == "close"),
        _ => connection.iter().any(|t| t == "keep-alive"),
    };
    head.framing = framing(&head, method).map_err(|why| anyhow!("{url}: {why}"))?;
    Ok(head)
}

/// How the body of this response ends (RFC 9112 §6.3).
fn framing(head: &ResponseHead, method: &str) -> Result<Framing, String> {
    if method.eq_ignore_ascii_case("HEAD")
        || (100..200).contains(&head.status)
        || matches!(head.status, 204 | 304)
    {
        return Ok(Framing::Length(0));
    }
    let codings = head.tokens("transfer-encoding");
    let lengths = head.tokens("content-length");
    if !codings.is_empty() {
        if !lengths.is_empty() {
            // The request-smuggling shape (RFC 9112 §6.3, HAZARDS §3): refused.
            return Err(
                "the response has both Transfer-Encoding and Content-Length: refused".into(),
            );
        }
        return match codings.as_slice() {
            [only] if only == "chunked" => Ok(Framing::Chunked),
            _ => Err(format!(
                "the response's Transfer-Encoding is '{}': zerocat asked for identity and \
                 takes only chunked",
                codings.join(", ")
            )),
        };
    }
    let mut length = None;
    for text in lengths {
        let n: u64 = text
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| text.parse().ok())
            .flatten()
            .ok_or_else(|| format!("the response's Content-Length '{text}' is no number"))?;
        if length.is_some_and(|l| l != n) {
            return Err("the response has two different Content-Lengths: refused".into());
        }
        length = Some(n);
    }
    Ok(match length {
        Some(n) => Framing::Length(n),
        None => Framing::UntilClose,
    })
}
