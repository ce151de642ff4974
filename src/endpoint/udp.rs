//! UDP endpoints: `udp:HOST:PORT` is a connected datagram socket; `udp-listen:[HOST:]PORT`
//! binds, announces itself like a stream listener, and (as a source) connects to the first
//! peer that sends, so the kernel drops the datagrams of any other (nc -u -l).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, OwnedFd};

use anyhow::{anyhow, Context};
use nix::errno::Errno;
use nix::sys::socket::{
    self, AddressFamily, MsgFlags, SockFlag, SockType, SockaddrLike, SockaddrStorage,
};

use super::access::Access;
use super::listener::format_sockaddr;
use super::sockopt::SockOpts;

/// The host `udp-listen:` binds when the URI names none: never expose a port by default.
const DEFAULT_LISTEN_HOST: &str = "127.0.0.1";

fn resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    let addrs: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
    if addrs.is_empty() {
        return Err(io::Error::new(io::ErrorKind::NotFound, "no addresses"));
    }
    Ok(addrs)
}

fn datagram_socket(addr: &SocketAddr, flags: SockFlag) -> Result<OwnedFd, Errno> {
    let family = if addr.is_ipv4() {
        AddressFamily::Inet
    } else {
        AddressFamily::Inet6
    };
    socket::socket(
        family,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC | flags,
        None,
    )
}

/// A UDP socket connected to the first address of `host` (of the family `sock` wants)
/// that takes it, its socket options set and `bind=` bound first.
pub(super) fn connect(host: &str, port: u16, sock: &SockOpts) -> anyhow::Result<OwnedFd> {
    let mut last = Errno::EADDRNOTAVAIL;
    let addrs: Vec<SocketAddr> = resolve(host, port)?
        .into_iter()
        .filter(|a| sock.admits(a))
        .collect();
    if let (true, Some(family)) = (addrs.is_empty(), sock.wanted_family()) {
        return Err(anyhow!("'{host}' has no {} address", family.name()));
    }
    for addr in addrs {
        let fd = datagram_socket(&addr, SockFlag::empty())?;
        sock.apply(&fd, addr.is_ipv6(), false)?;
        match socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(addr)) {
            Ok(()) => return Ok(fd),
            Err(e) => last = e,
        }
    }
    Err(io::Error::from(last).into())
}

/// A bound UDP socket, announced as `zerocat: listening on ADDR` (port 0 picks one).
pub(super) fn bind(host: Option<&str>, port: u16) -> anyhow::Result<OwnedFd> {
    let host = host.unwrap_or(DEFAULT_LISTEN_HOST);
    let addr = *resolve(host, port)?
        .first()
        .ok_or_else(|| anyhow!("no address"))?;
    let fd = datagram_socket(&addr, SockFlag::empty())?;
    socket::bind(fd.as_raw_fd(), &SockaddrStorage::from(addr))?;
    let local: SockaddrStorage = socket::getsockname(fd.as_raw_fd())?;
    let shown = format_sockaddr(&local).unwrap_or_else(|| addr.to_string());
    super::announce_listening(&shown);
    Ok(fd)
}

/// Wait for the first datagram (left queued for the copy to read) from a sender `access`
/// admits, and connect to it: from then on the socket takes only that peer's datagrams.
/// A refused sender's datagram is taken off the queue unread and said on stderr; how many
/// were is returned, for the report's `refused`.
pub fn await_first_peer(fd: &OwnedFd, access: &Access) -> anyhow::Result<u64> {
    let mut refused = 0;
    loop {
        let peer = peek_peer(fd)?;
        let ip = format_sockaddr(&peer).and_then(|s| s.parse::<SocketAddr>().ok().map(|a| a.ip()));
        if let Err(reason) = access.check(ip) {
            // Dropped: a zero-length read takes the datagram whole (its bytes unread).
            let _ = socket::recv(fd.as_raw_fd(), &mut [], MsgFlags::MSG_TRUNC);
            eprintln!(
                "zerocat: dropped a datagram from {}: {reason}",
                format_sockaddr(&peer).unwrap_or_default()
            );
            refused += 1;
            continue;
        }
        socket::connect(fd.as_raw_fd(), &peer).context("cannot connect to the first peer")?;
        return Ok(refused);
    }
}

fn peek_peer(fd: &OwnedFd) -> anyhow::Result<SockaddrStorage> {
    let mut byte = [0u8; 1];
    loop {
        let mut iov = [io::IoSliceMut::new(&mut byte)];
        match socket::recvmsg::<SockaddrStorage>(
            fd.as_raw_fd(),
            &mut iov,
            None,
            MsgFlags::MSG_PEEK | MsgFlags::MSG_TRUNC,
        ) {
            Ok(msg) => {
                return msg
                    .address
                    .filter(|a| a.family().is_some())
                    .ok_or_else(|| anyhow!("a datagram came with no sender address"))
            }
            Err(Errno::EINTR) if !crate::sys::process::interrupted() => {}
            Err(Errno::EINTR) => {
                return Err(crate::exit::Interrupted(
                    "interrupted while waiting for a datagram".into(),
                )
                .into())
            }
            Err(e) => return Err(io::Error::from(e).into()),
        }
    }
}

/// A UDP socket connected to `addr` (a relay session's upstream), non-blocking, with the
/// socket options of `sock` (checked at the relay's start: [`SockOpts::probe`]).
pub fn connect_to(addr: &SocketAddr, sock: &SockOpts) -> Result<OwnedFd, Errno> {
    let fd = datagram_socket(addr, SockFlag::SOCK_NONBLOCK)?;
    sock.apply(&fd, addr.is_ipv6(), false)
        .map_err(|refused| refused.errno)?;
    socket::connect(fd.as_raw_fd(), &SockaddrStorage::from(*addr))?;
    Ok(fd)
}

impl super::Endpoint {
    /// `udp-listen:`: the bound socket, announced like a stream listener; a relay answers
    /// every client from it.
    pub fn bind_datagram(&self) -> anyhow::Result<OwnedFd> {
        match self {
            super::Endpoint::UdpListen { host, port, .. } => {
                bind(host.as_deref(), *port).with_context(|| format!("cannot listen on {self}"))
            }
            _ => Err(anyhow!("{self} is not a udp-listen: endpoint")),
        }
    }

    /// `udp:HOST:PORT`: the address sessions connect to (the host resolved now, once).
    pub fn datagram_target(&self) -> anyhow::Result<SocketAddr> {
        match self {
            super::Endpoint::Udp {
                host, port, sock, ..
            } => resolve(host, *port)
                .with_context(|| format!("cannot resolve {self}"))?
                .into_iter()
                .find(|a| sock.admits(a))
                .ok_or_else(|| anyhow!("cannot resolve {self}: no addresses")),
            _ => Err(anyhow!("{self} is not a udp: endpoint")),
        }
    }
}
