//! Process-wide setup: signal dispositions and the standard fds.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::fcntl::{fcntl, open, FcntlArg, OFlag};
use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
use nix::sys::stat::Mode;

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: nix::libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set a flag the copy loops check; installed without SA_RESTART, so a
/// blocked syscall returns EINTR and the loop notices. SIGPIPE is ignored whoever started
/// us, so a vanished reader is an EPIPE handled per sink.
pub fn install_signal_handlers() {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    let ignore = SigAction::new(SigHandler::SigIgn, SaFlags::empty(), SigSet::empty());
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        let _ = sigaction(Signal::SIGINT, &action);
        let _ = sigaction(Signal::SIGTERM, &action);
        let _ = sigaction(Signal::SIGPIPE, &ignore);
    }
}

/// True once SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Started with `>&-`, the next open() would return fd 1 and "stdout" would write into
/// that file (HAZARDS). Park /dev/null on any closed standard fd, opened the wrong way
/// round, so using it fails with EBADF instead of touching anything.
pub fn reserve_standard_fds() {
    for fd in 0..=2 {
        if fcntl(fd, FcntlArg::F_GETFD).is_ok() {
            continue;
        }
        let flags = if fd == 0 {
            OFlag::O_WRONLY
        } else {
            OFlag::O_RDONLY
        };
        // open() returns the lowest free fd, which is this one.
        let _ = open("/dev/null", flags, Mode::empty());
    }
}
