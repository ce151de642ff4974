//! Socket (and fd status) calls the relay makes on the fds it polls.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::libc;

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
/// and its SO_LINGER wants a socket type of its own).
fn set_option<T>(
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

/// A TCP socket (SO_PROTOCOL); false for anything else, a non-socket included.
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
    ret == 0 && protocol == libc::IPPROTO_TCP
}
