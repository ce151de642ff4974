//! Socket (and fd status) calls: those the relay makes on the fds it polls, and making a
//! stream socket, MPTCP where asked and the kernel takes it.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI32, Ordering};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::libc;
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType};

/// Sets O_NONBLOCK on `fd`; returns the flags it had (to restore on a shared stdio fd).
pub fn set_nonblocking(fd: RawFd) -> Result<OFlag, Errno> {
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    if !flags.contains(OFlag::O_NONBLOCK) {
        fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    }
    Ok(flags)
}

/// Closes a socket with SO_LINGER {1, 0}: the peer gets RST, not FIN — an abort is
/// never mistaken for a clean end.
pub fn abort_socket(fd: OwnedFd) {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let _ = set_option(fd.as_fd(), libc::SOL_SOCKET, libc::SO_LINGER, &linger);
    drop(fd);
}

/// setsockopt(2) with `value` as the option's whole value (nix has no TCP_NOTSENT_LOWAT,
/// UDP_GRO or SO_RCVBUFFORCE, and its SO_LINGER wants a socket type of its own).
pub(super) fn set_option<T>(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> Result<(), Errno> {
    // SAFETY: the kernel reads size_of::<T>() bytes from a valid reference; the caller
    // passes the type the option takes (an int, a linger).
    let ret = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    Errno::result(ret).map(drop)
}

/// Caps what a TCP socket holds unsent at `bytes` (TCP_NOTSENT_LOWAT): past it a write
/// says EAGAIN, and EPOLLOUT comes once the unsent queue is below half of it. Any other
/// socket refuses (ENOPROTOOPT, EOPNOTSUPP) and stays as it was. `usize::MAX` lifts the
/// cap (the kernel's default is no cap).
pub fn limit_unsent(fd: BorrowedFd<'_>, bytes: usize) -> Result<(), Errno> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_option(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, &value)
}

/// Sends the ACK a TCP socket holds back now, and the next ones at once (TCP_QUICKACK,
/// which the kernel may turn off again later). Any other socket refuses, and nothing is
/// done.
pub fn ack_at_once(fd: BorrowedFd<'_>) {
    let _ = set_option(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_QUICKACK,
        &(1 as libc::c_int),
    );
}

/// A TCP socket, MPTCP included (SO_PROTOCOL); false for anything else, a non-socket included.
pub fn is_tcp(fd: BorrowedFd<'_>) -> bool {
    let mut protocol: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_PROTOCOL writes one int into a buffer of that size.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PROTOCOL,
            (&mut protocol as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    ret == 0 && (protocol == libc::IPPROTO_TCP || protocol == IPPROTO_MPTCP)
}

/// IPPROTO_MPTCP (linux/in.h); not in every libc crate.
const IPPROTO_MPTCP: libc::c_int = 262;
/// TCP_IS_MPTCP (linux/tcp.h, Linux 5.16): 1 while a socket speaks MPTCP.
const TCP_IS_MPTCP: libc::c_int = 43;

/// What became of `,mptcp` on one connection: the report says it, as it says a path's
/// fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mptcp {
    /// The connection speaks MPTCP.
    Active,
    /// The socket was MPTCP, the connection plain TCP: the peer did not offer MPTCP (the
    /// kernel's own fallback, at the handshake).
    PeerWithout,
    /// socket(IPPROTO_MPTCP) was refused with this errno: a plain TCP socket instead.
    Refused(Errno),
}

impl Mptcp {
    /// What runs, in one word: "mptcp" or "tcp".
    pub fn word(self) -> &'static str {
        match self {
            Mptcp::Active => "mptcp",
            Mptcp::PeerWithout | Mptcp::Refused(_) => "tcp",
        }
    }

    /// Why MPTCP does not run, short: the errno that refused an MPTCP socket, or "peer"
    /// (the peer did not offer MPTCP); None when it runs.
    pub fn fallback(self) -> Option<String> {
        match self {
            Mptcp::Active => None,
            Mptcp::PeerWithout => Some("peer".to_string()),
            Mptcp::Refused(errno) => Some(format!("{errno:?}")),
        }
    }

    /// For the text report: "mptcp", "tcp: mptcp refused, ENOPROTOOPT", "tcp: the peer
    /// has no MPTCP".
    pub fn describe(self) -> String {
        match self {
            Mptcp::Active => "mptcp".to_string(),
            Mptcp::PeerWithout => "tcp: the peer has no MPTCP".to_string(),
            Mptcp::Refused(errno) => format!("tcp: mptcp refused, {errno:?}"),
        }
    }

    /// A connected or accepted socket of an endpoint that asked for MPTCP: whether it
    /// speaks it, and if not, why (the kernel's refusal of MPTCP sockets, else the peer).
    pub fn of(fd: BorrowedFd<'_>) -> Mptcp {
        if speaks_mptcp(fd) {
            return Mptcp::Active;
        }
        match MPTCP_REFUSED.load(Ordering::Relaxed) {
            0 => Mptcp::PeerWithout,
            raw => Mptcp::Refused(Errno::from_raw(raw)),
        }
    }
}

/// The errno socket(IPPROTO_MPTCP) was refused with, 0 until one was. The answer is the
/// kernel's (built without MPTCP, or `net.mptcp.enabled = 0` for this network namespace),
/// the same for every socket of the run: asked once, then plain TCP without asking again.
static MPTCP_REFUSED: AtomicI32 = AtomicI32::new(0);

/// An errno of socket(IPPROTO_MPTCP) that means "no MPTCP here", so plain TCP serves:
/// ENOPROTOOPT (net.mptcp.enabled = 0), EPROTONOSUPPORT (a kernel without MPTCP), EINVAL
/// (older kernels' word for the same), EAFNOSUPPORT. Nothing has moved yet: a fallback,
/// never a failure (any other errno is the failure TCP would have had too).
fn mptcp_unsupported(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::ENOPROTOOPT | Errno::EPROTONOSUPPORT | Errno::EINVAL | Errno::EAFNOSUPPORT
    )
}

/// A stream socket of `family`; with `mptcp`, an MPTCP one where the kernel makes it,
/// else plain TCP with the errno that refused MPTCP beside it.
pub fn stream_socket(
    family: AddressFamily,
    flags: SockFlag,
    mptcp: bool,
) -> Result<(OwnedFd, Option<Errno>), Errno> {
    let plain = || socket::socket(family, SockType::Stream, flags, None);
    let inet = matches!(family, AddressFamily::Inet | AddressFamily::Inet6);
    if !mptcp || !inet {
        return plain().map(|fd| (fd, None));
    }
    if let raw @ 1.. = MPTCP_REFUSED.load(Ordering::Relaxed) {
        return plain().map(|fd| (fd, Some(Errno::from_raw(raw))));
    }
    // SAFETY: socket(2) with plain integer arguments; the fd it returns is ours alone.
    let raw = unsafe {
        libc::socket(
            family as libc::c_int,
            libc::SOCK_STREAM | flags.bits(),
            IPPROTO_MPTCP,
        )
    };
    match Errno::result(raw) {
        // SAFETY: socket(2) just returned this fd; nothing else owns it.
        Ok(raw) => Ok((unsafe { OwnedFd::from_raw_fd(raw) }, None)),
        Err(errno) if mptcp_unsupported(errno) => {
            MPTCP_REFUSED.store(errno as i32, Ordering::Relaxed);
            plain().map(|fd| (fd, Some(errno)))
        }
        Err(errno) => Err(errno),
    }
}

/// The socket speaks MPTCP now (TCP_IS_MPTCP); false for plain TCP, a fallen-back
/// connection, or a kernel that does not know the option.
pub fn speaks_mptcp(fd: BorrowedFd<'_>) -> bool {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: TCP_IS_MPTCP writes one int into a buffer of that size.
    let ret = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            TCP_IS_MPTCP,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    ret == 0 && value == 1
}
