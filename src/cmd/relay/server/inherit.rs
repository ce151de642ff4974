//! `-` (stdin and stdout) and `fd:N` as a side of the relay.

use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

use super::Peer;
use crate::endpoint::Endpoint;
use crate::sys::socket::set_nonblocking;

/// Opens `-` (stdin + stdout) or `fd:N` as one side: duplicated, non-blocking (the old
/// flags are put back at the end: O_NONBLOCK is shared with whoever gave us the fd).
pub(super) fn inherit(endpoint: &Endpoint, peer: &mut Peer) -> anyhow::Result<()> {
    if let Endpoint::Pty { link } = endpoint {
        // A new terminal: its master both ways (zerocat's own: no flags to put back).
        let master = crate::endpoint::pty::open(link.as_deref())?;
        set_nonblocking(master.as_raw_fd())?;
        peer.wfd = Some(master.try_clone()?);
        peer.fd = Some(master);
        peer.socket = false;
        return Ok(());
    }
    let (read, write) = match endpoint {
        Endpoint::Stdio => (0, Some(1)),
        Endpoint::Fd(n) => (*n, None),
        other => anyhow::bail!("relay cannot use {other} as a side"),
    };
    let dup = |fd: RawFd| -> anyhow::Result<OwnedFd> {
        crate::endpoint::take_fd(fd).map_err(|e| anyhow::anyhow!("cannot use fd {fd}: {e}"))
    };
    let rfd = dup(read)?;
    let flags = set_nonblocking(rfd.as_raw_fd())?;
    shared_flags::remember(read, flags);
    peer.restore.push((rfd.as_raw_fd(), flags));
    peer.socket = crate::sys::fdkind::FdInfo::of(rfd.as_fd())
        .map(|i| i.kind == crate::sys::fdkind::FdKind::Socket)
        .unwrap_or(false);
    if let Some(w) = write {
        let wfd = dup(w)?;
        let flags = set_nonblocking(wfd.as_raw_fd())?;
        shared_flags::remember(w, flags);
        peer.restore.push((wfd.as_raw_fd(), flags));
        peer.wfd = Some(wfd);
        // stdout is only written: never half-close a socket we only hold one way.
        peer.socket = false;
    }
    peer.fd = Some(rfd);
    Ok(())
}

/// The file status flags of inherited fds, put back on every way out: the normal end of the
/// connection ([`super::Server::finish`]), a panic (a hook), and a signal whose default action kills
/// (SIGHUP, SIGQUIT: a handler puts the flags back, then dies of the signal as before).
/// O_NONBLOCK lives on the file description, which the shell that gave us stdin/stdout still
/// uses: left set, its next read fails with EAGAIN. SIGINT/SIGTERM end through `finish`.
pub(super) mod shared_flags {
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::Once;

    use nix::libc;

    /// (fd, flags) pairs; fd -1 is a free slot. Atomics: a signal handler reads them.
    static SAVED: [(AtomicI32, AtomicI32); 2] = [
        (AtomicI32::new(-1), AtomicI32::new(0)),
        (AtomicI32::new(-1), AtomicI32::new(0)),
    ];

    pub(super) fn remember(fd: i32, flags: nix::fcntl::OFlag) {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(install);
        for (slot_fd, slot_flags) in &SAVED {
            if slot_fd.load(Ordering::SeqCst) == -1 {
                slot_flags.store(flags.bits(), Ordering::SeqCst);
                slot_fd.store(fd, Ordering::SeqCst);
                return;
            }
        }
    }

    /// The flags are back (the connection ended): nothing left to restore.
    pub(in crate::cmd::relay::server) fn forget() {
        for (slot_fd, _) in &SAVED {
            slot_fd.store(-1, Ordering::SeqCst);
        }
    }

    /// Async-signal-safe: atomics and fcntl only.
    fn restore() {
        for (slot_fd, slot_flags) in &SAVED {
            let fd = slot_fd.load(Ordering::SeqCst);
            if fd >= 0 {
                // SAFETY: F_SETFL on an fd number; at worst EBADF.
                unsafe { libc::fcntl(fd, libc::F_SETFL, slot_flags.load(Ordering::SeqCst)) };
            }
        }
    }

    extern "C" fn on_fatal_signal(signal: libc::c_int) {
        restore();
        // A terminal in raw mode (`-,raw`) is put back too: this handler replaced its.
        crate::sys::terminal::put_back();
        // SA_RESETHAND put the default action back; the signal is blocked while this runs,
        // so it kills us as soon as the handler returns.
        // SAFETY: raise is async-signal-safe.
        unsafe { libc::raise(signal) };
    }

    fn install() {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        for signal in [libc::SIGHUP, libc::SIGQUIT] {
            // SAFETY: a zeroed sigaction with a handler that is async-signal-safe.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_fatal_signal as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESETHAND;
                libc::sigemptyset(&mut action.sa_mask);
                let mut old: libc::sigaction = std::mem::zeroed();
                libc::sigaction(signal, std::ptr::null(), &mut old);
                // An ignored signal stays ignored (nohup).
                if old.sa_sigaction != libc::SIG_IGN {
                    libc::sigaction(signal, &action, std::ptr::null_mut());
                }
            }
        }
    }
}
