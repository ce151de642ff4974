//! Socket options of `tcp:`, `tcp-listen:`, `udp:` (and their TLS forms): where a
//! connection leaves from (`bind=IP[:PORT]`, nc's `-s`/`-p`), which address family a name
//! may resolve to (`tcp4:`/`tcp6:`/`udp4:`/`udp6:`, `-4`/`-6`), and what the socket is set
//! to (`keepalive`, `nodelay`, `sndbuf=`, `rcvbuf=`, `bindtodevice=`, `mark=`, `tos=`,
//! `ttl=`). Parsing is pure; [`SockOpts::apply`] sets them on a fresh socket, before its
//! bind, connect or listen. A setting the kernel refuses is an error that names the option
//! (mark= without CAP_NET_ADMIN is EPERM): never skipped.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};

use nix::errno::Errno;
use nix::sys::socket::{self, sockopt, SockaddrStorage};

use super::OptionWord;

/// An address family a name may resolve to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(ip: &IpAddr) -> Family {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// "IPv4" / "IPv6", for messages.
    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }

    /// The digit of `tcp4:` / `-4`.
    pub fn digit(self) -> char {
        match self {
            Family::V4 => '4',
            Family::V6 => '6',
        }
    }
}

/// `keepalive[=IDLE[:INTVL:CNT]]`: SO_KEEPALIVE, and the TCP timers where given (seconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Keepalive {
    pub idle: Option<u32>,
    pub interval: Option<u32>,
    pub count: Option<u32>,
}

/// The socket options an endpoint asked for; the default asks nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SockOpts {
    /// `bind=IP[:PORT]`: the connection leaves from this address (port 0: any).
    pub bind: Option<SocketAddr>,
    /// `tcp4:`/`tcp6:` (or `-4`/`-6`): only addresses of this family are tried.
    pub family: Option<Family>,
    pub keepalive: Option<Keepalive>,
    pub nodelay: bool,
    pub sndbuf: Option<u32>,
    pub rcvbuf: Option<u32>,
    pub bindtodevice: Option<String>,
    pub mark: Option<u32>,
    pub tos: Option<u8>,
    pub ttl: Option<u8>,
}

const fn opt(form: &'static str, meaning: &'static str) -> OptionWord {
    OptionWord { form, meaning }
}

pub const BIND: OptionWord = opt(
    "bind=IP[:PORT]",
    "leave from this source address (and port), as nc -s/-p",
);
pub const KEEPALIVE: OptionWord = opt(
    "keepalive[=IDLE[:INTVL:CNT]]",
    "SO_KEEPALIVE; probes after IDLE s idle, INTVL s apart, CNT of them",
);
pub const NODELAY: OptionWord = opt("nodelay", "TCP_NODELAY: no Nagle delay on small writes");
pub const SNDBUF: OptionWord = opt("sndbuf=SIZE", "SO_SNDBUF (the kernel doubles it)");
pub const RCVBUF: OptionWord = opt("rcvbuf=SIZE", "SO_RCVBUF (the kernel doubles it)");
pub const BINDTODEVICE: OptionWord = opt(
    "bindtodevice=IFACE",
    "SO_BINDTODEVICE: only through this interface",
);
pub const MARK: OptionWord = opt(
    "mark=N",
    "SO_MARK for policy routing and nftables (needs CAP_NET_ADMIN)",
);
pub const TOS: OptionWord = opt("tos=N", "IP_TOS / IPV6_TCLASS, 0-255 (0x10: low delay)");
pub const TTL: OptionWord = opt("ttl=N", "IP_TTL / IPV6_UNICAST_HOPS, 1-255");

/// The words this module parses.
pub fn is_word(name: &str) -> bool {
    [
        BIND,
        KEEPALIVE,
        NODELAY,
        SNDBUF,
        RCVBUF,
        BINDTODEVICE,
        MARK,
        TOS,
        TTL,
    ]
    .iter()
    .any(|o| o.word() == name)
}

/// The family a scheme word pins: `tcp4`, `udp6`; None for any other.
pub fn family_of_word(word: &str) -> Option<Family> {
    match word.as_bytes().last() {
        Some(b'4') => Some(Family::V4),
        Some(b'6') => Some(Family::V6),
        _ => None,
    }
}

impl super::Endpoint {
    /// The socket options of a `tcp:`, `tls:`, `tcp-listen:`, `tls-listen:` or `udp:`.
    pub fn sock_opts(&self) -> Option<&SockOpts> {
        match self {
            super::Endpoint::Tcp { connect, .. } => Some(&connect.sock),
            super::Endpoint::TcpListen { listen, .. } => Some(&listen.sock),
            super::Endpoint::Udp { sock, .. } => Some(sock),
            _ => None,
        }
    }

    /// This endpoint with its addresses pinned to `family` (`tcp4:`, `-4`; None: as it
    /// is), checked: a literal HOST or `bind=` of the other family is an error, before any
    /// fd opens. An endpoint with no address of its own is as it was.
    pub fn pin_family(mut self, family: Option<Family>) -> Result<super::Endpoint, String> {
        match &mut self {
            super::Endpoint::Tcp { host, connect, .. } => connect.sock.pin(family, Some(host))?,
            super::Endpoint::TcpListen { host, listen, .. } => {
                listen.sock.pin(family, host.as_deref())?
            }
            super::Endpoint::Udp { host, sock, .. } => sock.pin(family, Some(host))?,
            _ => {}
        }
        Ok(self)
    }
}

/// The largest SO_SNDBUF/SO_RCVBUF asked for: the kernel doubles an int.
const BUF_MAX: u64 = (i32::MAX / 2) as u64;
/// The largest TCP_KEEPIDLE and TCP_KEEPINTVL (MAX_TCP_KEEPIDLE), TCP_KEEPCNT (MAX_TCP_KEEPCNT).
const KEEP_SECS_MAX: u32 = 32_767;
const KEEP_COUNT_MAX: u32 = 127;
/// IFNAMSIZ less its NUL.
const IFNAME_MAX: usize = 15;

impl SockOpts {
    /// Any option asked (a family alone is no socket option).
    pub fn any(&self) -> bool {
        *self
            != SockOpts {
                family: self.family,
                ..SockOpts::default()
            }
    }

    /// Parses `name=value` (`name` lowercase, already checked to be one the scheme takes).
    pub fn set(&mut self, name: &str, value: Option<&str>) -> Result<(), String> {
        let flag = |value: Option<&str>| match value {
            None => Ok(()),
            Some(_) => Err(format!("option '{name}' is a flag and takes no value")),
        };
        match name {
            "bind" => self.bind = Some(parse_bind(value)?),
            "keepalive" => self.keepalive = Some(parse_keepalive(value)?),
            "nodelay" => {
                flag(value)?;
                self.nodelay = true;
            }
            "sndbuf" | "rcvbuf" => {
                let expected = format!("expected {name}=SIZE, e.g. {name}=256k");
                let text = needs(name, value, &expected)?;
                let size =
                    crate::units::parse_bytes(text).map_err(|e| format!("option '{name}': {e}"))?;
                if size == 0 || size > BUF_MAX {
                    return Err(format!(
                        "option '{name}': {text} is out of range (1 byte to 1G); {expected}"
                    ));
                }
                let size = Some(size as u32);
                if name == "sndbuf" {
                    self.sndbuf = size;
                } else {
                    self.rcvbuf = size;
                }
            }
            "bindtodevice" => {
                let expected = "expected bindtodevice=IFACE, e.g. bindtodevice=eth0";
                let iface = needs(name, value, expected)?;
                if iface.len() > IFNAME_MAX
                    || iface
                        .bytes()
                        .any(|b| b == b'/' || b == b':' || !b.is_ascii_graphic())
                {
                    return Err(format!(
                        "option 'bindtodevice': '{iface}' is no interface name (at most 15 \
                         characters, no '/', ':' or space); {expected}"
                    ));
                }
                self.bindtodevice = Some(iface.to_string());
            }
            "mark" => {
                let expected = "expected mark=N, a 32-bit number (decimal or 0x hex)";
                self.mark = Some(parse_number(name, value, expected, u32::MAX.into())? as u32);
            }
            "tos" => {
                let expected = "expected tos=N from 0 to 255 (decimal or 0x hex, e.g. tos=0x10)";
                self.tos = Some(parse_number(name, value, expected, 255)? as u8);
            }
            "ttl" => {
                let expected = "expected ttl=N from 1 to 255";
                let ttl = parse_number(name, value, expected, 255)?;
                if ttl == 0 {
                    return Err(format!("option 'ttl': 0 is no hop limit; {expected}"));
                }
                self.ttl = Some(ttl as u8);
            }
            _ => unreachable!("sockopt::is_word admitted '{name}'"),
        }
        Ok(())
    }

    /// The endpoint's family as its scheme word or `-4`/`-6` pinned it, checked against
    /// `bind=` and a literal HOST: an address of the other family is a usage error (said
    /// before any fd opens).
    pub fn pin(&mut self, family: Option<Family>, host: Option<&str>) -> Result<(), String> {
        if family.is_some() {
            self.family = family;
        }
        let literal = host.and_then(|h| h.parse::<IpAddr>().ok());
        if let (Some(family), Some(ip)) = (self.family, literal) {
            if Family::of(&ip) != family {
                return Err(format!(
                    "{ip} is an {} address, and this endpoint is {} only",
                    Family::of(&ip).name(),
                    family.name()
                ));
            }
        }
        if let Some(bind) = self.bind {
            let bound = Family::of(&bind.ip());
            if let Some(family) = self.family.filter(|f| *f != bound) {
                return Err(format!(
                    "option 'bind': {} is an {} address, and this endpoint is {} only",
                    bind.ip(),
                    bound.name(),
                    family.name()
                ));
            }
            if let Some(ip) = literal.filter(|ip| Family::of(ip) != bound) {
                return Err(format!(
                    "option 'bind': {} is an {} address and {ip} an {} one: a connection \
                     leaves from an address of its destination's family",
                    bind.ip(),
                    bound.name(),
                    Family::of(&ip).name()
                ));
            }
        }
        Ok(())
    }

    /// The family an address must have to be tried: the pinned one, else `bind=`'s.
    pub fn wanted_family(&self) -> Option<Family> {
        self.family.or(self.bind.map(|b| Family::of(&b.ip())))
    }

    /// Keeps the resolved addresses this endpoint may use (its family, `bind=`'s).
    pub fn admits(&self, addr: &SocketAddr) -> bool {
        self.wanted_family()
            .is_none_or(|family| family == Family::of(&addr.ip()))
    }

    /// Sets every option asked on a fresh socket (`ipv6`: of AF_INET6; `tcp`: a stream
    /// socket), then binds to `bind=`: before its connect or listen. The error names the
    /// option the kernel refused.
    pub fn apply(&self, fd: impl AsFd, ipv6: bool, tcp: bool) -> Result<(), Refused> {
        let fd = fd.as_fd();
        let refused = |option: String| move |errno: Errno| Refused { option, errno };
        if let Some(mark) = self.mark {
            socket::setsockopt(&fd, sockopt::Mark, &mark)
                .map_err(refused(format!("mark={mark}")))?;
        }
        if let Some(iface) = &self.bindtodevice {
            socket::setsockopt(&fd, sockopt::BindToDevice, &std::ffi::OsString::from(iface))
                .map_err(refused(format!("bindtodevice={iface}")))?;
        }
        if let Some(tos) = self.tos {
            let value = nix::libc::c_int::from(tos);
            let set = if ipv6 {
                socket::setsockopt(&fd, sockopt::Ipv6TClass, &value)
            } else {
                socket::setsockopt(&fd, sockopt::IpTos, &value)
            };
            set.map_err(refused(format!("tos={tos}")))?;
        }
        if let Some(ttl) = self.ttl {
            let value = nix::libc::c_int::from(ttl);
            let set = if ipv6 {
                socket::setsockopt(&fd, sockopt::Ipv6Ttl, &value)
            } else {
                socket::setsockopt(&fd, sockopt::Ipv4Ttl, &value)
            };
            set.map_err(refused(format!("ttl={ttl}")))?;
        }
        if let Some(size) = self.sndbuf {
            socket::setsockopt(&fd, sockopt::SndBuf, &(size as usize))
                .map_err(refused(format!("sndbuf={size}")))?;
        }
        if let Some(size) = self.rcvbuf {
            socket::setsockopt(&fd, sockopt::RcvBuf, &(size as usize))
                .map_err(refused(format!("rcvbuf={size}")))?;
        }
        if let (Some(keep), true) = (self.keepalive, tcp) {
            let word = format!("keepalive{}", KeepaliveValue(keep));
            socket::setsockopt(&fd, sockopt::KeepAlive, &true).map_err(refused(word.clone()))?;
            if let Some(idle) = keep.idle {
                socket::setsockopt(&fd, sockopt::TcpKeepIdle, &idle)
                    .map_err(refused(word.clone()))?;
            }
            if let Some(interval) = keep.interval {
                socket::setsockopt(&fd, sockopt::TcpKeepInterval, &interval)
                    .map_err(refused(word.clone()))?;
            }
            if let Some(count) = keep.count {
                socket::setsockopt(&fd, sockopt::TcpKeepCount, &count)
                    .map_err(refused(word.clone()))?;
            }
        }
        if self.nodelay && tcp {
            socket::setsockopt(&fd, sockopt::TcpNoDelay, &true)
                .map_err(refused("nodelay".to_string()))?;
        }
        if let Some(bind) = self.bind {
            socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(bind))
                .map_err(refused(format!("bind={}", BindValue(bind))))?;
        }
        Ok(())
    }

    /// [`SockOpts::apply`] on a throwaway socket of `addr`'s family, so a relay says a
    /// refused option once at its start, not at every connection.
    pub fn probe(&self, addr: &SocketAddr, tcp: bool) -> Result<(), Refused> {
        if !self.any() {
            return Ok(());
        }
        let family = if addr.is_ipv6() {
            socket::AddressFamily::Inet6
        } else {
            socket::AddressFamily::Inet
        };
        let kind = if tcp {
            socket::SockType::Stream
        } else {
            socket::SockType::Datagram
        };
        let fd = socket::socket(family, kind, socket::SockFlag::SOCK_CLOEXEC, None).map_err(
            |errno| Refused {
                option: "(a socket to try the options on)".into(),
                errno,
            },
        )?;
        // A bind= with a fixed port is left out: the connections will bind it in turn.
        let unbound = SockOpts {
            bind: self.bind.filter(|b| b.port() == 0),
            ..self.clone()
        };
        unbound.apply(&fd, addr.is_ipv6(), tcp)
    }

    /// What `-v` says was set: `bind=127.0.0.2, nodelay, keepalive=30:5:4`; None when
    /// nothing was asked.
    pub fn describe(&self) -> Option<String> {
        let words = self.words();
        (!words.is_empty()).then(|| words.join(", "))
    }

    /// The options as the canonical URI writes them, in order (without the family, which
    /// its scheme word carries).
    fn words(&self) -> Vec<String> {
        let mut words = Vec::new();
        if let Some(bind) = self.bind {
            words.push(format!("bind={}", BindValue(bind)));
        }
        if let Some(keep) = self.keepalive {
            words.push(format!("keepalive{}", KeepaliveValue(keep)));
        }
        if self.nodelay {
            words.push("nodelay".into());
        }
        if let Some(size) = self.sndbuf {
            words.push(format!("sndbuf={size}"));
        }
        if let Some(size) = self.rcvbuf {
            words.push(format!("rcvbuf={size}"));
        }
        if let Some(iface) = &self.bindtodevice {
            words.push(format!("bindtodevice={iface}"));
        }
        if let Some(mark) = self.mark {
            words.push(format!("mark={mark}"));
        }
        if let Some(tos) = self.tos {
            words.push(format!("tos={tos}"));
        }
        if let Some(ttl) = self.ttl {
            words.push(format!("ttl={ttl}"));
        }
        words
    }

    /// Writes `,word` for each option (Display of an endpoint).
    pub fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for word in self.words() {
            write!(f, ",{word}")?;
        }
        Ok(())
    }
}

/// A socket option the kernel refused (or a `bind=` it could not bind): an error that
/// names it, never an option skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// As written: `mark=1`, `bind=127.0.0.2:4000`.
    pub option: String,
    pub errno: Errno,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let option = &self.option;
        let hint = match self.errno {
            Errno::EPERM if option.starts_with("mark") => " (SO_MARK needs CAP_NET_ADMIN)",
            Errno::EPERM if option.starts_with("bindtodevice") => {
                " (SO_BINDTODEVICE needs CAP_NET_RAW before Linux 5.7)"
            }
            Errno::ENODEV => " (no such interface)",
            Errno::EADDRNOTAVAIL => " (no interface of this machine has that address)",
            Errno::EADDRINUSE => " (that source address and port are taken)",
            _ => "",
        };
        let what = if option.starts_with("bind=") {
            "cannot bind"
        } else {
            "the kernel refused it"
        };
        write!(
            f,
            "option '{option}': {what}{hint}: {}",
            io::Error::from(self.errno)
        )
    }
}

impl std::error::Error for Refused {}

/// `bind=`'s value as written: `127.0.0.2`, `127.0.0.2:4000`, `[::1]:4000`.
struct BindValue(SocketAddr);

impl fmt::Display for BindValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.0.ip(), self.0.port()) {
            (IpAddr::V4(ip), 0) => write!(f, "{ip}"),
            (IpAddr::V6(ip), 0) => write!(f, "[{ip}]"),
            _ => write!(f, "{}", self.0),
        }
    }
}

/// `keepalive`'s value as written: nothing, `=30`, `=30:5:4`.
struct KeepaliveValue(Keepalive);

impl fmt::Display for KeepaliveValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let k = self.0;
        match (k.idle, k.interval, k.count) {
            (None, None, None) => Ok(()),
            (Some(idle), None, None) => write!(f, "={idle}"),
            (idle, interval, count) => {
                let part = |n: Option<u32>| n.map(|n| n.to_string()).unwrap_or_default();
                write!(f, "={}:{}:{}", part(idle), part(interval), part(count))
            }
        }
    }
}

fn needs<'a>(name: &str, value: Option<&'a str>, expected: &str) -> Result<&'a str, String> {
    value
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("option '{name}' needs a value; {expected}"))
}

/// A number in decimal or `0x` hex, at most `max`.
fn parse_number(name: &str, value: Option<&str>, expected: &str, max: u64) -> Result<u64, String> {
    let text = needs(name, value, expected)?;
    let parsed = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u64::from_str_radix(hex, 16).ok()
        }
        Some(_) => None,
        None if text.bytes().all(|b| b.is_ascii_digit()) => text.parse().ok(),
        None => None,
    };
    match parsed {
        Some(n) if n <= max => Ok(n),
        _ => Err(format!(
            "option '{name}': '{text}' is not valid; {expected}"
        )),
    }
}

/// `bind=IP[:PORT]`: `127.0.0.2`, `127.0.0.2:4000`, `::1`, `[::1]`, `[::1]:4000`. An address,
/// not a name: a source address is one of this machine's.
fn parse_bind(value: Option<&str>) -> Result<SocketAddr, String> {
    let expected = "expected bind=IP or bind=IP:PORT (IPv6 in brackets with a port: \
                    bind=[::1]:4000), an address of this machine";
    let text = needs("bind", value, expected)?;
    let bad = || format!("option 'bind': '{text}' is not an address; {expected}");
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, 0));
    }
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        let ip: std::net::Ipv6Addr = inner.parse().map_err(|_| bad())?;
        return Ok(SocketAddr::new(IpAddr::V6(ip), 0));
    }
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .map_or_else(
            || host.parse::<std::net::Ipv4Addr>().map(IpAddr::V4).ok(),
            |h| h.parse::<std::net::Ipv6Addr>().map(IpAddr::V6).ok(),
        )
        .ok_or_else(bad)?;
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let port: u16 = port
        .parse()
        .map_err(|_| format!("option 'bind': port {port} is out of range (0-65535)"))?;
    Ok(SocketAddr::new(host, port))
}

/// `keepalive`, `keepalive=IDLE`, `keepalive=IDLE:INTVL:CNT` (seconds, seconds, probes;
/// a part left empty keeps the kernel's: `keepalive=::3`).
fn parse_keepalive(value: Option<&str>) -> Result<Keepalive, String> {
    let expected = "expected keepalive, keepalive=IDLE or keepalive=IDLE:INTVL:CNT (seconds, \
                    seconds, probes; e.g. keepalive=60:10:5)";
    let Some(text) = value else {
        return Ok(Keepalive::default());
    };
    let parts: Vec<&str> = text.split(':').collect();
    if text.is_empty() || !(parts.len() == 1 || parts.len() == 3) {
        return Err(format!(
            "option 'keepalive': '{text}' is not valid; {expected}"
        ));
    }
    let part = |i: usize, max: u32| -> Result<Option<u32>, String> {
        match parts.get(i).copied() {
            None | Some("") => Ok(None),
            Some(p) => match p.parse::<u32>() {
                Ok(n) if (1..=max).contains(&n) && p.bytes().all(|b| b.is_ascii_digit()) => {
                    Ok(Some(n))
                }
                _ => Err(format!(
                    "option 'keepalive': '{p}' is not valid (1 to {max}); {expected}"
                )),
            },
        }
    };
    Ok(Keepalive {
        idle: part(0, KEEP_SECS_MAX)?,
        interval: part(1, KEEP_SECS_MAX)?,
        count: part(2, KEEP_COUNT_MAX)?,
    })
}

#[cfg(test)]
mod tests;
