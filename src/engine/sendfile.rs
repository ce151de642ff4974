//! sendfile(2): a regular file into a socket (or any fd that takes spliced pages).

use std::os::fd::BorrowedFd;

use nix::poll::PollFlags;

use super::{pump, Outcome};
use crate::engine::meter::Meter;
use crate::sys;

/// One sendfile call moves at most 2,147,479,552 bytes (HAZARDS).
const SENDFILE_CHUNK: usize = 0x7fff_f000;

/// Moves bytes with sendfile until EOF or `limit` bytes.
pub fn copy_upto(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, meter: &Meter, limit: u64) -> Outcome {
    let room = || sys::wait(dst, PollFlags::POLLOUT);
    pump(
        meter,
        |_| None,
        SENDFILE_CHUNK,
        limit,
        room,
        |len| sys::sendfile(src, dst, len),
    )
}
