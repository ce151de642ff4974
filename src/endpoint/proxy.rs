//! The PROXY protocol, versions 1 and 2 (HAProxy's doc/proxy-protocol.txt): the header a
//! load balancer sends before the stream to say who the client is. Pure: bytes in, a
//! header out, and the header to send for a pair of addresses.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The twelve bytes every version 2 header starts with.
const V2_SIGNATURE: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// A version 1 header, CRLF included, is at most 107 bytes (the spec's worst case).
const V1_MAX: usize = 107;
/// The most a header may take, TLVs included: beyond, it is "oversized" and the connection
/// is closed (a version 2 length may say up to 65,535; no balancer sends that much).
pub const MAX_HEADER: usize = 16 + 4096;
/// `sun_path` as version 2 carries it.
const UNIX_LEN: usize = 108;

/// Which header a connector sends (`proxy=v1`, `proxy=v2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        })
    }
}

/// The two ends of a client's connection, as a header carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addresses {
    /// Not known, or not sayable (a header sends LOCAL / UNKNOWN).
    Unknown,
    /// The client (`src`) and the address it connected to (`dst`).
    Inet { src: SocketAddr, dst: SocketAddr },
    /// Socket paths (version 2 only), each up to 108 bytes, without the NULs.
    Unix { src: Vec<u8>, dst: Vec<u8> },
}

impl Addresses {
    /// The client as reports print it (`192.0.2.1:5555`, a path); None when unknown.
    pub fn source(&self) -> Option<String> {
        match self {
            Addresses::Unknown => None,
            Addresses::Inet { src, .. } => Some(src.to_string()),
            Addresses::Unix { src, .. } if src.is_empty() => None,
            Addresses::Unix { src, .. } => Some(String::from_utf8_lossy(src).into_owned()),
        }
    }
}

/// A complete header at the start of a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub version: Version,
    /// Its length in bytes: the stream's payload starts after it.
    pub len: usize,
    /// The client's addresses; None when the header says to use the connection's own
    /// (version 2 LOCAL, version 1 UNKNOWN, an unspecified family).
    pub addresses: Option<Addresses>,
}

/// Reads the header at the start of `buf`: `Ok(None)` while what is there is a correct
/// beginning of one and more bytes are needed; an error text for anything else.
pub fn parse(buf: &[u8]) -> Result<Option<Header>, String> {
    if buf.is_empty() {
        return Ok(None);
    }
    let n = buf.len().min(V2_SIGNATURE.len());
    if buf[..n] == V2_SIGNATURE[..n] {
        return parse_v2(buf);
    }
    let n = buf.len().min(6);
    if buf[..n] == b"PROXY "[..n] {
        return parse_v1(buf);
    }
    Err(format!(
        "the stream does not start with a PROXY header (it starts with {:?})",
        String::from_utf8_lossy(&buf[..buf.len().min(16)])
    ))
}

fn parse_v1(buf: &[u8]) -> Result<Option<Header>, String> {
    let window = &buf[..buf.len().min(V1_MAX)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        if buf.len() >= V1_MAX {
            return Err(format!("version 1 header longer than {V1_MAX} bytes"));
        }
        return Ok(None);
    };
    if lf == 0 || window[lf - 1] != b'\r' {
        return Err("version 1 header does not end with CRLF".into());
    }
    let line = std::str::from_utf8(&window[6..lf - 1])
        .map_err(|_| "version 1 header is not ASCII".to_string())?;
    let header = |addresses| {
        Ok(Some(Header {
            version: Version::V1,
            len: lf + 1,
            addresses,
        }))
    };
    let fields: Vec<&str> = line.split(' ').collect();
    match fields[0] {
        // UNKNOWN: the rest of the line is to be ignored, the connection's own ends used.
        "UNKNOWN" => header(None),
        proto @ ("TCP4" | "TCP6") => {
            let [_, src, dst, sport, dport] = fields[..] else {
                return Err(format!(
                    "version 1 {proto} header needs 4 fields (SRC DST SPORT DPORT), got '{line}'"
                ));
            };
            let ip = |text: &str| -> Result<IpAddr, String> {
                let parsed = if proto == "TCP4" {
                    text.parse::<Ipv4Addr>().map(IpAddr::V4)
                } else {
                    text.parse::<Ipv6Addr>().map(IpAddr::V6)
                };
                parsed.map_err(|_| format!("'{text}' is not an {proto} address"))
            };
            let src = SocketAddr::new(ip(src)?, v1_port(sport)?);
            let dst = SocketAddr::new(ip(dst)?, v1_port(dport)?);
            header(Some(Addresses::Inet { src, dst }))
        }
        other => Err(format!(
            "version 1 protocol '{other}' is not TCP4, TCP6 or UNKNOWN"
        )),
    }
}

/// A port as version 1 writes it: decimal digits, 0 to 65535.
fn v1_port(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(port) if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => Ok(port),
        _ => Err(format!("'{text}' is not a port (0-65535)")),
    }
}

fn parse_v2(buf: &[u8]) -> Result<Option<Header>, String> {
    if buf.len() < 16 {
        return Ok(None);
    }
    let (version, command) = (buf[12] >> 4, buf[12] & 0x0f);
    if version != 2 {
        return Err(format!("version 2 signature with version {version}"));
    }
    let len = 16 + usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    if len > MAX_HEADER {
        return Err(format!(
            "version 2 header of {len} bytes; at most {MAX_HEADER} are taken"
        ));
    }
    if buf.len() < len {
        return Ok(None);
    }
    let header = |addresses| {
        Ok(Some(Header {
            version: Version::V2,
            len,
            addresses,
        }))
    };
    let body = &buf[16..len];
    let (family, transport) = (buf[13] >> 4, buf[13] & 0x0f);
    match command {
        // LOCAL: the balancer's own connection (a health check): use the real ends.
        0 => return header(None),
        1 => {}
        other => return Err(format!("version 2 command {other} is not LOCAL or PROXY")),
    }
    if transport > 1 {
        return Err(format!(
            "version 2 transport {transport} is not a stream (only STREAM is relayed)"
        ));
    }
    let need = |n: usize, what: &str| {
        if body.len() < n {
            Err(format!(
                "version 2 {what} addresses need {n} bytes; the header holds {}",
                body.len()
            ))
        } else {
            Ok(())
        }
    };
    let port = |at: usize| u16::from_be_bytes([body[at], body[at + 1]]);
    match family {
        0 => header(None),
        1 => {
            need(12, "IPv4")?;
            let ip = |at: usize| {
                IpAddr::V4(Ipv4Addr::new(
                    body[at],
                    body[at + 1],
                    body[at + 2],
                    body[at + 3],
                ))
            };
            header(Some(Addresses::Inet {
                src: SocketAddr::new(ip(0), port(8)),
                dst: SocketAddr::new(ip(4), port(10)),
            }))
        }
        2 => {
            need(36, "IPv6")?;
            let ip = |at: usize| {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&body[at..at + 16]);
                IpAddr::V6(Ipv6Addr::from(octets))
            };
            header(Some(Addresses::Inet {
                src: SocketAddr::new(ip(0), port(32)),
                dst: SocketAddr::new(ip(16), port(34)),
            }))
        }
        3 => {
            need(2 * UNIX_LEN, "UNIX")?;
            let path = |at: usize| {
                let raw = &body[at..at + UNIX_LEN];
                let end = raw.iter().position(|&b| b == 0).unwrap_or(UNIX_LEN);
                raw[..end].to_vec()
            };
            header(Some(Addresses::Unix {
                src: path(0),
                dst: path(UNIX_LEN),
            }))
        }
        other => Err(format!("version 2 address family {other} is unknown")),
    }
}

/// The header that tells a backend about `addresses`. What a version cannot say (version 1
/// and unix paths; nothing known) goes as UNKNOWN (v1) or LOCAL (v2): the backend then
/// uses the connection's own addresses.
pub fn encode(version: Version, addresses: &Addresses) -> Vec<u8> {
    // A dual-stack listener sees IPv4 clients as ::ffff:a.b.c.d: say them as IPv4.
    let unmap = |a: SocketAddr| match a.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
            None => a,
        },
        IpAddr::V4(_) => a,
    };
    let inet = match addresses {
        Addresses::Inet { src, dst } => {
            let (src, dst) = (unmap(*src), unmap(*dst));
            Some(if src.is_ipv4() == dst.is_ipv4() {
                (src, dst)
            } else {
                // One of each: both as IPv6.
                let six = |a: SocketAddr| match a.ip() {
                    IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), a.port()),
                    IpAddr::V6(_) => a,
                };
                (six(src), six(dst))
            })
        }
        _ => None,
    };
    match version {
        Version::V1 => match inet {
            Some((src, dst)) => format!(
                "PROXY {} {} {} {} {}\r\n",
                if src.is_ipv4() { "TCP4" } else { "TCP6" },
                src.ip(),
                dst.ip(),
                src.port(),
                dst.port()
            )
            .into_bytes(),
            None => b"PROXY UNKNOWN\r\n".to_vec(),
        },
        Version::V2 => {
            let mut out = V2_SIGNATURE.to_vec();
            let (command, family, body): (u8, u8, Vec<u8>) = match (inet, addresses) {
                (Some((src, dst)), _) => {
                    let mut body = Vec::with_capacity(36);
                    let family = match (src.ip(), dst.ip()) {
                        (IpAddr::V4(s), IpAddr::V4(d)) => {
                            body.extend_from_slice(&s.octets());
                            body.extend_from_slice(&d.octets());
                            0x11
                        }
                        (IpAddr::V6(s), IpAddr::V6(d)) => {
                            body.extend_from_slice(&s.octets());
                            body.extend_from_slice(&d.octets());
                            0x21
                        }
                        _ => unreachable!("both ends are of one family above"),
                    };
                    body.extend_from_slice(&src.port().to_be_bytes());
                    body.extend_from_slice(&dst.port().to_be_bytes());
                    (0x21, family, body)
                }
                (None, Addresses::Unix { src, dst }) => {
                    let mut body = vec![0u8; 2 * UNIX_LEN];
                    let n = src.len().min(UNIX_LEN);
                    body[..n].copy_from_slice(&src[..n]);
                    let n = dst.len().min(UNIX_LEN);
                    body[UNIX_LEN..UNIX_LEN + n].copy_from_slice(&dst[..n]);
                    (0x21, 0x31, body)
                }
                (None, _) => (0x20, 0x00, Vec::new()),
            };
            out.push(command);
            out.push(family);
            out.extend_from_slice(&(body.len() as u16).to_be_bytes());
            out.extend_from_slice(&body);
            out
        }
    }
}

#[cfg(test)]
mod tests;
