//! Out through a proxy: the SOCKS5 (RFC 1928/1929) and HTTP CONNECT handshakes of a `tcp:`
//! connector with `,socks5=HOST:PORT` or `,connect=HOST:PORT`. The handshake is a few bytes
//! in userspace; every reply is read exactly (never past its end), so the stream that
//! follows is the socket's own and goes the usual way (splice/sendfile).

use std::fmt;
use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

use nix::sys::socket::{setsockopt, sockopt};
use nix::sys::time::TimeVal;

/// The environment variable that gives `USER:PASS` when `,proxy-auth=` does not.
pub const AUTH_ENV: &str = "ZEROCAT_PROXY_AUTH";

/// How long a proxy may take over its handshake when `--connect-timeout` does not say.
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(30);

/// The longest HTTP reply head zerocat reads from a CONNECT proxy.
const MAX_HTTP_HEAD: usize = 16 * 1024;

/// Which handshake the proxy speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Socks5,
    Connect,
}

impl Kind {
    /// The option's name, as written after the comma.
    pub fn option(self) -> &'static str {
        match self {
            Kind::Socks5 => "socks5",
            Kind::Connect => "connect",
        }
    }
}

/// `,socks5=HOST:PORT` or `,connect=HOST:PORT`, with `,proxy-auth=USER:PASS` if given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Via {
    pub kind: Kind,
    pub host: String,
    pub port: u16,
    /// `USER:PASS` from `,proxy-auth=`; [`AUTH_ENV`] is read when this is None.
    pub auth: Option<String>,
}

impl Via {
    /// The proxy as the user wrote it, for messages: `socks5 proxy 127.0.0.1:1080`.
    pub fn name(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("{} proxy {host}:{}", self.kind.option(), self.port)
    }

    /// The credentials to send: the option's, else the environment's.
    fn credentials(&self) -> Option<String> {
        self.auth
            .clone()
            .or_else(|| std::env::var(AUTH_ENV).ok().filter(|v| !v.is_empty()))
    }
}

/// A handshake that did not open the tunnel: the proxy's words, or what went wrong.
#[derive(Debug)]
pub struct Refused {
    pub words: String,
    /// A CONNECT proxy's answer other than 2xx, as it was: nc `-P` asks for a password
    /// after a 407, and says any other as nc does.
    pub answer: Option<HttpAnswer>,
}

/// An HTTP proxy's status: its code and its status line (without the CRLF).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAnswer {
    pub code: u16,
    pub line: String,
}

impl Refused {
    fn new(words: String) -> Refused {
        Refused {
            words,
            answer: None,
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.words)
    }
}

impl std::error::Error for Refused {}

/// Runs the handshake on `fd` (connected to the proxy, blocking) so that it then carries
/// the stream to `host:port`, which the proxy resolves. `deadline` bounds each read and
/// write of the handshake; the socket's timeouts are cleared after.
pub fn handshake(
    fd: BorrowedFd<'_>,
    via: &Via,
    host: &str,
    port: u16,
    deadline: Duration,
) -> Result<(), Refused> {
    let fail = |what: String| Refused::new(format!("{}: {what}", via.name()));
    set_timeouts(fd, Some(deadline)).map_err(|e| fail(format!("cannot set a timeout: {e}")))?;
    let mut shake = Handshake::new(via, host, port)?;
    // A blocking socket returns EAGAIN only when its timeout ran out.
    if !shake.advance(fd)? {
        return Err(shake.stalled(deadline));
    }
    set_timeouts(fd, None).map_err(|e| fail(format!("cannot clear the timeout: {e}")))
}

fn set_timeouts(fd: BorrowedFd<'_>, limit: Option<Duration>) -> nix::Result<()> {
    let tv = match limit {
        Some(d) => TimeVal::new(
            d.as_secs().try_into().unwrap_or(i64::MAX),
            d.subsec_micros().into(),
        ),
        None => TimeVal::new(0, 0),
    };
    setsockopt(&fd, sockopt::ReceiveTimeout, &tv)?;
    setsockopt(&fd, sockopt::SendTimeout, &tv)
}

/// A handshake in progress, driven by [`Handshake::advance`] on a blocking socket
/// ([`handshake`]) or a non-blocking one (the relay's event loop, at each readiness).
/// It reads exactly the bytes each reply has, never more.
#[derive(Debug)]
pub struct Handshake {
    name: String,
    target: (String, u16),
    auth: Option<String>,
    stage: Stage,
    out: Vec<u8>,
    sent: usize,
    /// The bytes of the current reply part, up to `want`.
    got: Vec<u8>,
    want: usize,
    /// The HTTP reply head so far.
    head: Vec<u8>,
    /// The HTTP proxy's status, once its head is read.
    answer: Option<HttpAnswer>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Method,
    AuthStatus,
    ReplyHead,
    ReplyNameLength,
    ReplyAddress,
    HttpHead,
    Done,
}

impl Handshake {
    /// The first message, ready to send.
    pub fn new(via: &Via, host: &str, port: u16) -> Result<Handshake, Refused> {
        let name = via.name();
        let auth = via.credentials();
        let (out, stage, want) = match via.kind {
            Kind::Socks5 => (socks5_greeting(auth.is_some()), Stage::Method, 2),
            Kind::Connect => (
                connect_request(host, port, auth.as_deref())
                    .map_err(|e| Refused::new(format!("{name}: {e}")))?,
                Stage::HttpHead,
                1,
            ),
        };
        Ok(Handshake {
            name,
            target: (host.to_string(), port),
            auth,
            stage,
            out,
            sent: 0,
            got: Vec::new(),
            want,
            head: Vec::new(),
            answer: None,
        })
    }

    /// Moves the handshake on as far as `fd` allows: true when it is done (the stream's
    /// first byte is the next one `fd` reads), false when `fd` would block (EAGAIN).
    pub fn advance(&mut self, fd: BorrowedFd<'_>) -> Result<bool, Refused> {
        let mut buf = [0u8; 512];
        loop {
            if self.sent < self.out.len() {
                match crate::sys::write(fd, &self.out[self.sent..]) {
                    Ok(n) => self.sent += n,
                    Err(nix::errno::Errno::EAGAIN) => return Ok(false),
                    Err(nix::errno::Errno::EINTR) if !crate::sys::process::must_stop() => {}
                    Err(errno) => return Err(self.failed(errno)),
                }
                continue;
            }
            if self.stage == Stage::Done {
                return Ok(true);
            }
            let room = (self.want - self.got.len()).min(buf.len());
            match crate::sys::read(fd, &mut buf[..room]) {
                Ok(0) => {
                    return Err(self.refuse(format!(
                        "closed the connection in the middle of the handshake ({} of {} \
                         bytes of a reply part read)",
                        self.got.len(),
                        self.want
                    )))
                }
                Ok(n) => self.received(&buf[..n])?,
                Err(nix::errno::Errno::EAGAIN) => return Ok(false),
                Err(nix::errno::Errno::EINTR) if !crate::sys::process::must_stop() => {}
                Err(errno) => return Err(self.failed(errno)),
            }
        }
    }

    /// The error of a handshake that took longer than `limit`.
    pub fn stalled(&self, limit: Duration) -> Refused {
        self.refuse(format!(
            "no complete answer within {} (the handshake stalled)",
            crate::units::human_duration(limit.as_secs_f64())
        ))
    }

    fn failed(&self, errno: nix::errno::Errno) -> Refused {
        self.refuse(format!("handshake failed: {}", io::Error::from(errno)))
    }

    fn refuse(&self, what: String) -> Refused {
        Refused {
            words: format!("{}: {what}", self.name),
            answer: self.answer.clone(),
        }
    }

    fn received(&mut self, bytes: &[u8]) -> Result<(), Refused> {
        self.got.extend_from_slice(bytes);
        if self.got.len() < self.want {
            return Ok(());
        }
        let part = std::mem::take(&mut self.got);
        self.step(&part).map_err(|e| self.refuse(e))
    }

    /// One whole reply part read: what comes next.
    fn step(&mut self, part: &[u8]) -> Result<(), String> {
        let (host, port) = (self.target.0.as_str(), self.target.1);
        let send = |shake: &mut Handshake, msg: Vec<u8>| {
            shake.out = msg;
            shake.sent = 0;
        };
        match self.stage {
            Stage::Method => match socks5_method([part[0], part[1]], self.auth.is_some())? {
                Method::None => {
                    let request = socks5_request(host, port)?;
                    send(self, request);
                    (self.stage, self.want) = (Stage::ReplyHead, 4);
                }
                Method::Password => {
                    let auth = self.auth.as_deref().unwrap_or_default();
                    let message = socks5_password(auth)?;
                    send(self, message);
                    (self.stage, self.want) = (Stage::AuthStatus, 2);
                }
            },
            Stage::AuthStatus => {
                if part[1] != 0 {
                    return Err(format!(
                        "refused the user name and password (status {})",
                        part[1]
                    ));
                }
                let request = socks5_request(host, port)?;
                send(self, request);
                (self.stage, self.want) = (Stage::ReplyHead, 4);
            }
            Stage::ReplyHead => {
                match socks5_reply_rest([part[0], part[1], part[2], part[3]], host, port)? {
                    Rest::Fixed(n) => (self.stage, self.want) = (Stage::ReplyAddress, n),
                    Rest::NameLength => (self.stage, self.want) = (Stage::ReplyNameLength, 1),
                }
            }
            Stage::ReplyNameLength => {
                (self.stage, self.want) = (Stage::ReplyAddress, usize::from(part[0]) + 2)
            }
            // The bound address: dropped, so the stream starts at the target's first byte.
            Stage::ReplyAddress => self.stage = Stage::Done,
            Stage::HttpHead => {
                // Byte by byte up to the blank line: the stream may follow at once.
                self.head.extend_from_slice(part);
                if self.head.ends_with(b"\r\n\r\n") {
                    self.answer = http_answer(&self.head);
                    connect_status(&self.head, host, port)?;
                    self.stage = Stage::Done;
                } else if self.head.len() >= MAX_HTTP_HEAD {
                    return Err(format!(
                        "sent a reply head longer than {MAX_HTTP_HEAD} bytes"
                    ));
                }
            }
            Stage::Done => {}
        }
        Ok(())
    }
}

/// The method chosen by the proxy's first reply.
#[derive(Debug, PartialEq, Eq)]
enum Method {
    None,
    Password,
}

/// How many bytes of a SOCKS5 reply follow its first four.
#[derive(Debug, PartialEq, Eq)]
enum Rest {
    Fixed(usize),
    /// A domain name: one length byte, then that many bytes and the port.
    NameLength,
}

fn socks5_greeting(with_auth: bool) -> Vec<u8> {
    // Offer only what will be sent: a proxy that asks no password gets none.
    vec![5, 1, if with_auth { 2 } else { 0 }]
}

fn socks5_method(reply: [u8; 2], offered_auth: bool) -> Result<Method, String> {
    if reply[0] != 5 {
        return Err(format!(
            "does not speak SOCKS5 (answered version byte {:#04x})",
            reply[0]
        ));
    }
    match reply[1] {
        0 => Ok(Method::None),
        2 if offered_auth => Ok(Method::Password),
        0xff if offered_auth => {
            Err("refused user name/password authentication (no acceptable method)".into())
        }
        0xff => Err(format!(
            "asks for authentication (no acceptable method): give ,proxy-auth=USER:PASS or \
             {AUTH_ENV}"
        )),
        other => Err(format!("chose method {other:#04x}, which was not offered")),
    }
}

fn socks5_password(auth: &str) -> Result<Vec<u8>, String> {
    let (user, pass) = split_auth(auth)?;
    if user.len() > 255 || pass.len() > 255 {
        return Err("a SOCKS5 user name or password is at most 255 bytes".into());
    }
    let mut msg = vec![1, user.len() as u8];
    msg.extend_from_slice(user.as_bytes());
    msg.push(pass.len() as u8);
    msg.extend_from_slice(pass.as_bytes());
    Ok(msg)
}

/// The CONNECT request; a name goes as a domain address, for the proxy to resolve.
fn socks5_request(host: &str, port: u16) -> Result<Vec<u8>, String> {
    let mut msg = vec![5, 1, 0];
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => {
            msg.push(1);
            msg.extend_from_slice(&ip.octets());
        }
        Ok(std::net::IpAddr::V6(ip)) => {
            msg.push(4);
            msg.extend_from_slice(&ip.octets());
        }
        Err(_) => {
            if host.is_empty() || host.len() > 255 {
                return Err(format!(
                    "the target name '{host}' does not fit a SOCKS5 request (1 to 255 bytes)"
                ));
            }
            msg.push(3);
            msg.push(host.len() as u8);
            msg.extend_from_slice(host.as_bytes());
        }
    }
    msg.extend_from_slice(&port.to_be_bytes());
    Ok(msg)
}

fn socks5_reply_rest(head: [u8; 4], host: &str, port: u16) -> Result<Rest, String> {
    if head[0] != 5 {
        return Err(format!(
            "answered the request with version byte {:#04x}, not SOCKS5",
            head[0]
        ));
    }
    if head[1] != 0 {
        return Err(format!(
            "refused the connection to {}: {} (SOCKS5 reply {})",
            target_name(host, port),
            socks5_reply_words(head[1]),
            head[1]
        ));
    }
    match head[3] {
        1 => Ok(Rest::Fixed(4 + 2)),
        4 => Ok(Rest::Fixed(16 + 2)),
        3 => Ok(Rest::NameLength),
        other => Err(format!(
            "answered an unknown address type {other:#04x} in its reply"
        )),
    }
}

/// RFC 1928 §6's REP codes in words.
fn socks5_reply_words(rep: u8) -> &'static str {
    match rep {
        1 => "general SOCKS server failure",
        2 => "connection not allowed by ruleset",
        3 => "network unreachable",
        4 => "host unreachable",
        5 => "connection refused",
        6 => "TTL expired",
        7 => "command not supported",
        8 => "address type not supported",
        _ => "unassigned reply code",
    }
}

fn target_name(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn connect_request(host: &str, port: u16, auth: Option<&str>) -> Result<Vec<u8>, String> {
    let target = target_name(host, port);
    let mut msg = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(auth) = auth {
        split_auth(auth)?;
        msg.push_str("Proxy-Authorization: Basic ");
        msg.push_str(&base64(auth.as_bytes()));
        msg.push_str("\r\n");
    }
    msg.push_str("\r\n");
    Ok(msg.into_bytes())
}

/// The status of a reply head that begins `HTTP/1.x NNN`.
fn http_answer(head: &[u8]) -> Option<HttpAnswer> {
    let line = head.split(|&b| b == b'\n').next()?;
    let line = String::from_utf8_lossy(line).trim_end().to_string();
    let code = line
        .strip_prefix("HTTP/1.")?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(HttpAnswer { code, line })
}

/// Accepts a 2xx status line; anything else is refused with the status line quoted.
fn connect_status(head: &[u8], host: &str, port: u16) -> Result<(), String> {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line).trim_end().to_string();
    let mut words = line.split_whitespace();
    let version = words.next().unwrap_or_default();
    let code = words.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.")
        || code.len() != 3
        || !code.bytes().all(|b| b.is_ascii_digit())
    {
        return Err(format!(
            "does not speak HTTP (answered '{}')",
            line.escape_debug()
        ));
    }
    if code.starts_with('2') {
        Ok(())
    } else {
        Err(format!(
            "refused the connection to {}: '{}'",
            target_name(host, port),
            line.escape_debug()
        ))
    }
}

fn split_auth(auth: &str) -> Result<(&str, &str), String> {
    auth.split_once(':')
        .ok_or_else(|| "proxy credentials are USER:PASS (no ':' found)".to_string())
}

/// RFC 4648 base64 with padding: Basic credentials (here and http:), WebSocket keys.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
