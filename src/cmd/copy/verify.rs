//! `--verify`: after a file is copied (by any path, a reflink too), both are read back and
//! compared, [`VERIFY_BLOCK`] at a time; a difference fails the file, naming the offset of
//! its first differing byte.
//!
//! A direct compare, not a hash: on a 1 GiB file, warm cache, this machine, reading both in
//! 4 MiB blocks and comparing took 0.41 s (median of 3; 1 MiB: 0.54 s), BLAKE3 of both 1.18 s
//! one-threaded and 1.15 s with mmap and rayon. Both read every byte twice; the compare
//! does no more than that, and it can say where the copy differs, which a hash cannot.
//!
//! With `--sync` the destination has been fdatasync'ed before: its cached pages are then
//! dropped (POSIX_FADV_DONTNEED) so the compare reads what the disk holds.

use std::fs;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::time::Instant;

use nix::errno::Errno;
use nix::fcntl::{posix_fadvise, PosixFadviseAdvice};

use super::entry::{Entry, Status};
use crate::exit::UsageError;

/// How much of each file is read and compared at a time.
const VERIFY_BLOCK: usize = 4 << 20;

/// Refuses `--verify` into a destination that cannot be read back (a FIFO, a socket, a
/// character device), before anything is written.
pub(super) fn check_destination(dest: &Path) -> Result<(), UsageError> {
    let Ok(meta) = fs::metadata(dest) else {
        return Ok(());
    };
    let ft = meta.file_type();
    let kind = if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_char_device() {
        "a character device"
    } else {
        return Ok(());
    };
    Err(UsageError(format!(
        "--verify: the destination '{}' is {kind}: what was written to it cannot be read back",
        dest.display()
    )))
}

/// Reads `src` and `dst` from offset 0 and compares them. `whole`: the destination must end
/// where the source does (a regular file); otherwise only the source's length is compared
/// (a block device is longer). `from_disk`: drop the destination's cached pages first.
/// The bytes compared and the time go into `e`.
pub(super) fn verify(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    whole: bool,
    from_disk: bool,
    e: &mut Entry,
) -> Result<(), Status> {
    let started = Instant::now();
    if from_disk {
        posix_fadvise(
            dst.as_raw_fd(),
            0,
            0,
            PosixFadviseAdvice::POSIX_FADV_DONTNEED,
        )
        .map_err(|err| format!("--verify: cannot drop the cached destination: {err}"))?;
    }
    let result = compare(src, dst, whole, &mut e.verified_bytes);
    e.verify_seconds = Some(started.elapsed().as_secs_f64());
    match result {
        Ok(()) => Ok(()),
        Err(Mismatch::Differs(at)) => Err(Status::Failed(format!(
            "--verify: the copy differs from the source at offset {at} (the source changed while it was copied, or the copy is corrupt)"
        ))),
        Err(Mismatch::Length { at, src_longer }) => Err(Status::Failed(format!(
            "--verify: the copy differs from the source at offset {at}: the {} ends there",
            if src_longer { "copy" } else { "source" }
        ))),
        Err(Mismatch::Read(err, side)) => Err(Status::Failed(format!(
            "--verify: cannot read the {side} back: {err}"
        ))),
        Err(Mismatch::Interrupted) => Err(Status::Interrupted),
    }
}

enum Mismatch {
    Differs(u64),
    Length { at: u64, src_longer: bool },
    Read(Errno, &'static str),
    Interrupted,
}

impl Mismatch {
    fn read(err: Errno, side: &'static str) -> Mismatch {
        match err {
            Errno::EINTR => Mismatch::Interrupted,
            err => Mismatch::Read(err, side),
        }
    }
}

fn compare(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    whole: bool,
    verified: &mut u64,
) -> Result<(), Mismatch> {
    let mut a = vec![0u8; VERIFY_BLOCK];
    let mut b = vec![0u8; VERIFY_BLOCK];
    let mut offset = 0u64;
    loop {
        if crate::sys::process::interrupted() {
            return Err(Mismatch::Interrupted);
        }
        let n =
            crate::sys::pread_full(src, &mut a, offset).map_err(|e| Mismatch::read(e, "source"))?;
        // One byte more than the source gave, when it ended: a longer copy shows.
        let want = if n < a.len() && whole { n + 1 } else { n };
        let m = crate::sys::pread_full(dst, &mut b[..want], offset)
            .map_err(|e| Mismatch::read(e, "copy"))?;
        let common = n.min(m);
        if a[..common] != b[..common] {
            let i = a.iter().zip(&b[..common]).position(|(x, y)| x != y);
            return Err(Mismatch::Differs(offset + i.unwrap_or(0) as u64));
        }
        *verified += common as u64;
        if n != m {
            return Err(Mismatch::Length {
                at: offset + common as u64,
                src_longer: n > m,
            });
        }
        if n < a.len() {
            return Ok(());
        }
        offset += n as u64;
    }
}
