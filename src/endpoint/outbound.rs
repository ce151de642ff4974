//! Out through a proxy: the SOCKS5 (RFC 1928/1929) and HTTP CONNECT handshakes of a `tcp:`
//! connector with `,socks5=HOST:PORT` or `,connect=HOST:PORT`. The handshake is a few bytes
//! in userspace; every reply is read exactly (never past its end), so the stream that
//! follows is the socket's own and goes the usual way (splice/sendfile).

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
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
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
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
    let fail = |what: String| Refused(format!("{}: {what}", via.name()));
    set_timeouts(fd, Some(deadline)).map_err(|e| fail(format!("cannot set a timeout: {e}")))?;
    let mut wire = Wire { fd, via, deadline };
    let auth = via.credentials();
    match via.kind {
        Kind::Socks5 => socks5(&mut wire, host, port, auth.as_deref()),
        Kind::Connect => connect(&mut wire, host, port, auth.as_deref()),
    }
    .map_err(fail)?;
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

/// The socket to the proxy, read exactly.
struct Wire<'a> {
    fd: BorrowedFd<'a>,
    via: &'a Via,
    deadline: Duration,
}

impl Wire<'_> {
    fn send(&mut self, bytes: &[u8]) -> Result<(), String> {
        crate::sys::write_all(self.fd.as_fd(), bytes).map_err(|(_, errno)| self.io_error(errno))
    }

    fn recv_exact(&mut self, buf: &mut [u8]) -> Result<(), String> {
        let mut got = 0;
        while got < buf.len() {
            match crate::sys::read(self.fd, &mut buf[got..]) {
                Ok(0) => {
                    return Err(format!(
                        "closed the connection in the middle of the handshake (after {got} of \
                         {} bytes of a reply)",
                        buf.len()
                    ))
                }
                Ok(n) => got += n,
                Err(errno) => return Err(self.io_error(errno)),
            }
        }
        Ok(())
    }

    fn io_error(&self, errno: nix::errno::Errno) -> String {
        if matches!(errno, nix::errno::Errno::EAGAIN) {
            format!(
                "no answer within {:?} (the handshake stalled)",
                self.deadline
            )
        } else {
            let _ = self.via;
            format!("handshake failed: {}", io::Error::from(errno))
        }
    }
}

fn socks5(wire: &mut Wire<'_>, host: &str, port: u16, auth: Option<&str>) -> Result<(), String> {
    wire.send(&socks5_greeting(auth.is_some()))?;
    let mut choice = [0u8; 2];
    wire.recv_exact(&mut choice)?;
    match socks5_method(choice, auth.is_some())? {
        Method::None => {}
        Method::Password => {
            let auth = auth.expect("password chosen only when offered");
            wire.send(&socks5_password(auth)?)?;
            let mut status = [0u8; 2];
            wire.recv_exact(&mut status)?;
            if status[1] != 0 {
                return Err(format!(
                    "refused the user name and password (status {})",
                    status[1]
                ));
            }
        }
    }
    wire.send(&socks5_request(host, port)?)?;
    let mut head = [0u8; 4];
    wire.recv_exact(&mut head)?;
    let rest = socks5_reply_rest(head, host, port)?;
    let rest = match rest {
        Rest::Fixed(n) => n,
        Rest::NameLength => {
            let mut len = [0u8; 1];
            wire.recv_exact(&mut len)?;
            usize::from(len[0]) + 2
        }
    };
    // The bound address: read and dropped, so the stream starts at the target's first byte.
    let mut bound = vec![0u8; rest];
    wire.recv_exact(&mut bound)
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

fn connect(wire: &mut Wire<'_>, host: &str, port: u16, auth: Option<&str>) -> Result<(), String> {
    wire.send(&connect_request(host, port, auth)?)?;
    // Byte by byte up to the blank line: the stream's first bytes may follow at once.
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_HTTP_HEAD {
            return Err(format!(
                "sent a reply head longer than {MAX_HTTP_HEAD} bytes"
            ));
        }
        wire.recv_exact(&mut byte)?;
        head.push(byte[0]);
    }
    connect_status(&head, host, port)
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

fn base64(bytes: &[u8]) -> String {
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
