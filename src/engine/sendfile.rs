//! sendfile(2): a regular file into a socket (or any fd that takes spliced pages).

use std::os::fd::BorrowedFd;

use super::{pump, sys, Outcome};
use crate::progress::Meter;

/// One sendfile call moves at most 2,147,479,552 bytes (HAZARDS).
const SENDFILE_CHUNK: usize = 0x7fff_f000;

pub fn copy(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, meter: &Meter) -> Outcome {
    pump(dst, meter, false, SENDFILE_CHUNK, |len| {
        sys::sendfile(src, dst, len)
    })
}
