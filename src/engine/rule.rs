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

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::fs::{File, OpenOptions};
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::fd::AsFd;

    use super::*;
    use crate::engine::meter::Meter;
    use crate::engine::{pump, transfer, DataPath, Ends};
    use crate::sys::fdkind::FdInfo;

    const UNSUPPORTED: [Errno; 10] = [
        Errno::ENOSYS,
        Errno::EINVAL,
        Errno::EXDEV,
        Errno::EOPNOTSUPP,
        Errno::EPERM,
        Errno::EBADF,
        Errno::ETXTBSY,
        Errno::EACCES,
        Errno::ENOTTY,
        Errno::ESPIPE,
    ];

    /// Never a reason to try another path: the data or the sink is at fault.
    const ALWAYS_ERRORS: [Errno; 7] = [
        Errno::EIO,
        Errno::ENOSPC,
        Errno::EDQUOT,
        Errno::EPIPE,
        Errno::EFBIG,
        Errno::ECONNRESET,
        Errno::EAGAIN,
    ];

    #[test]
    fn an_unsupported_errno_falls_back_only_before_any_byte_moved() {
        for errno in UNSUPPORTED {
            assert!(is_unsupported(errno), "{errno}");
            assert!(falls_back(errno, 0), "{errno}");
            let outcome = refuse_or_fail(errno, 0, Side::Sink);
            assert!(
                matches!(outcome, Outcome::Fallback(0, Reason::Errno(e)) if e == errno),
                "{outcome:?}"
            );
            for moved in [1, 4096, u64::MAX] {
                assert!(!falls_back(errno, moved), "{errno} after {moved}");
                let outcome = refuse_or_fail(errno, moved, Side::Source);
                assert!(
                    matches!(&outcome, Outcome::Failed(n, Failure::Io(e, Side::Source))
                        if *n == moved && e.raw_os_error() == Some(errno as i32)),
                    "{outcome:?}"
                );
            }
        }
    }

    #[test]
    fn io_errors_a_full_disk_and_a_gone_peer_never_fall_back() {
        for errno in ALWAYS_ERRORS {
            assert!(!is_unsupported(errno), "{errno}");
            let outcome = refuse_or_fail(errno, 0, side_of(errno));
            assert!(
                matches!(outcome, Outcome::Failed(0, Failure::Io(..))),
                "{outcome:?}"
            );
        }
    }

    #[test]
    fn eintr_is_the_interruption_not_an_io_error() {
        assert!(matches!(
            Failure::of(Errno::EINTR, Side::Sink),
            Failure::Interrupted
        ));
        assert!(matches!(
            refuse_or_fail(Errno::EINTR, 0, Side::Source),
            Outcome::Failed(0, Failure::Interrupted)
        ));
        assert!(matches!(
            Failure::of(Errno::EIO, Side::Source),
            Failure::Io(_, Side::Source)
        ));
    }

    #[test]
    fn a_full_or_gone_sink_is_the_sinks_fault() {
        for errno in [Errno::ENOSPC, Errno::EDQUOT, Errno::EPIPE, Errno::EFBIG] {
            assert_eq!(side_of(errno), Side::Sink, "{errno}");
        }
        for errno in [Errno::EIO, Errno::EINVAL, Errno::ECONNRESET] {
            assert_eq!(side_of(errno), Side::Either, "{errno}");
        }
    }

    #[test]
    fn a_refusal_remembered_for_the_filesystems_is_one_the_rule_falls_back_on() {
        for errno in [
            Errno::EXDEV,
            Errno::EOPNOTSUPP,
            Errno::ENOSYS,
            Errno::ENOTTY,
        ] {
            assert!(refuses_the_filesystems(Reason::Errno(errno)), "{errno}");
            assert!(is_unsupported(errno), "{errno}");
        }
        for errno in [Errno::EINVAL, Errno::EBADF, Errno::EPERM, Errno::EIO] {
            assert!(!refuses_the_filesystems(Reason::Errno(errno)), "{errno}");
        }
        assert!(!refuses_the_filesystems(Reason::FirstCallReturnedZero));
        assert!(!refuses_the_filesystems(Reason::ReturnedZeroBeforeEnd));
    }

    #[test]
    fn a_loop_that_moved_bytes_fails_on_an_errno_it_would_have_fallen_back_on() {
        // The loop of the single-call paths, fed the kernel's answers one by one.
        let answers = Cell::new(0);
        let outcome = pump(
            &Meter::new(),
            |_| None,
            1 << 20,
            u64::MAX,
            || Ok(()),
            |_| {
                answers.set(answers.get() + 1);
                match answers.get() {
                    1 => Ok(5),
                    2 => Err(Errno::EINTR), // retried
                    _ => Err(Errno::EINVAL),
                }
            },
        );
        assert!(
            matches!(&outcome, Outcome::Failed(5, Failure::Io(e, Side::Either))
                if e.raw_os_error() == Some(Errno::EINVAL as i32)),
            "{outcome:?}"
        );
    }

    fn file_with(bytes: &[u8]) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        f
    }

    fn ends<'a>(src: &'a impl AsFd, dst: &'a impl AsFd) -> Ends<'a> {
        Ends {
            src: src.as_fd(),
            src_info: FdInfo::of(src.as_fd()).unwrap(),
            dst: dst.as_fd(),
            dst_info: FdInfo::of(dst.as_fd()).unwrap(),
            reserve: 0,
            tap: None,
        }
    }

    #[test]
    fn the_kernel_refusing_a_pipe_source_hands_every_byte_to_the_next_path() {
        // copy_file_range from a pipe: EINVAL before anything moved.
        let (src, w) = nix::unistd::pipe().unwrap();
        File::from(w).write_all(b"through a pipe").unwrap();
        let mut dst = file_with(b"");
        let chain = [DataPath::CopyFileRange, DataPath::Userspace];
        let (record, failure) = transfer(&ends(&src, &dst), &chain, None, &Meter::new());
        assert!(failure.is_none(), "{failure:?}");
        assert_eq!(
            record.paths,
            [(DataPath::CopyFileRange, 0), (DataPath::Userspace, 14)]
        );
        assert_eq!(record.fallbacks.len(), 1);
        assert_eq!(record.fallbacks[0].reason, Reason::Errno(Errno::EINVAL));
        let mut got = String::new();
        dst.seek(SeekFrom::Start(0)).unwrap();
        dst.read_to_string(&mut got).unwrap();
        assert_eq!(got, "through a pipe");
    }

    #[test]
    fn an_append_only_sink_refuses_sendfile_and_userspace_carries_on() {
        let src = file_with(b"appended");
        let path = tempfile::NamedTempFile::new().unwrap();
        let dst = OpenOptions::new().append(true).open(path.path()).unwrap();
        let chain = [DataPath::Sendfile, DataPath::Userspace];
        let (record, failure) = transfer(&ends(&src, &dst), &chain, None, &Meter::new());
        assert!(failure.is_none(), "{failure:?}");
        assert_eq!(
            record.paths,
            [(DataPath::Sendfile, 0), (DataPath::Userspace, 8)]
        );
        assert_eq!(record.fallbacks[0].reason, Reason::Errno(Errno::EINVAL));
        assert_eq!(std::fs::read(path.path()).unwrap(), b"appended");
    }

    #[test]
    fn a_forced_path_the_kernel_refuses_is_an_error_with_nothing_moved() {
        let (src, w) = nix::unistd::pipe().unwrap();
        File::from(w).write_all(b"stays").unwrap();
        let dst = file_with(b"");
        let chain = [DataPath::CopyFileRange];
        let (record, failure) = transfer(&ends(&src, &dst), &chain, None, &Meter::new());
        assert!(
            matches!(&failure, Some(Failure::Io(e, Side::Either))
                if e.raw_os_error() == Some(Errno::EINVAL as i32)),
            "{failure:?}"
        );
        assert_eq!(record.bytes(), 0);
        assert_eq!(record.fallbacks[0].to, None);
        assert_eq!(dst.metadata().unwrap().len(), 0);
    }
}
