//! The fallback rule, the one place that says what an errno means: hand over to the next
//! path, or fail (and on which side, and whether it is the interruption).
//!
//! Every path ends its error arm here: the walker's paths through [`refuse_or_fail`], the
//! fan-out and the relay, which count their own bytes, through [`falls_back`].

use nix::errno::Errno;

use super::{Failure, Outcome, Reason, Side};

/// Errnos that mean "this path cannot serve these fds" — but only while nothing has moved.
/// EIO, ENOSPC, EDQUOT, EPIPE are never among them: falling back after EIO can copy stale
/// pages (coreutils), and a full disk is full whatever the path. FICLONE's refusals
/// (EOPNOTSUPP, EINVAL, EXDEV, ETXTBSY, ENOTTY, ENOSYS, EBADF, EPERM: what xcp and
/// coreutils take for "cannot clone") are all here too.
pub fn is_unsupported(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::ENOSYS
            | Errno::EINVAL
            | Errno::EXDEV
            | Errno::EOPNOTSUPP
            | Errno::EPERM
            | Errno::EBADF
            | Errno::ETXTBSY
            | Errno::EACCES
            | Errno::ENOTTY
            | Errno::ESPIPE
    )
}

/// The rule: `errno` hands over to the next path only when it is an unsupported one and
/// the path has moved nothing yet (`moved` bytes). After a byte moved, every errno is a
/// failure: the next path cannot know what the kernel half-did.
pub fn falls_back(errno: Errno, moved: u64) -> bool {
    moved == 0 && is_unsupported(errno)
}

/// The common end of every fast path's error arm: [`falls_back`], else a failure with the
/// bytes delivered so far.
pub fn refuse_or_fail(errno: Errno, moved: u64, side: Side) -> Outcome {
    if falls_back(errno, moved) {
        Outcome::Fallback(0, Reason::Errno(errno))
    } else {
        Outcome::Failed(moved, Failure::of(errno, side))
    }
}

/// Is this refusal about the pair of filesystems (or the kernel), not about the one file?
/// Then every file between the same two filesystems meets it again, and a tree copy need
/// not ask that path again. EINVAL, EBADF, EPERM… can be about one file (its flags, its
/// offset, an immutable file), so they are asked again; a 0 from copy_file_range too.
pub fn refuses_the_filesystems(reason: Reason) -> bool {
    match reason {
        Reason::Errno(errno) => matches!(
            errno,
            Errno::EXDEV | Errno::EOPNOTSUPP | Errno::ENOSYS | Errno::ENOTTY
        ),
        Reason::FirstCallReturnedZero | Reason::ReturnedZeroBeforeEnd => false,
    }
}

impl Failure {
    /// The failure an errno means: EINTR reaches here only once the stop's grace is over
    /// ([`crate::sys::process::must_stop`]), so it is the interruption, not an I/O error.
    pub fn of(errno: Errno, side: Side) -> Failure {
        match errno {
            Errno::EINTR => Failure::Interrupted,
            _ => Failure::Io(errno.into(), side),
        }
    }
}

/// Best guess at which end an errno from a two-fd call belongs to.
pub fn side_of(errno: Errno) -> Side {
    match errno {
        Errno::ENOSPC | Errno::EDQUOT | Errno::EPIPE | Errno::EFBIG => Side::Sink,
        _ => Side::Either,
    }
}

