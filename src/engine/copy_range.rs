//! copy_file_range(2): file to file inside the kernel (and a server-side copy or a reflink
//! where the filesystem offers one).

use std::os::fd::BorrowedFd;

use nix::poll::PollFlags;

use super::{pump, sys, Outcome};
use crate::progress::Meter;

pub fn copy(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, meter: &Meter) -> Outcome {
    copy_upto(src, dst, meter, u64::MAX)
}

/// [`copy`], stopping after `limit` bytes.
pub fn copy_upto(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, meter: &Meter, limit: u64) -> Outcome {
    // A first 0 is not trusted as EOF: procfs/sysfs, overlayfs and CIFS have said 0 for
    // files with data (golang/go#44272, docker/for-linux#1015).
    let room = || sys::wait(dst, PollFlags::POLLOUT);
    pump(meter, true, sys::MAX_CHUNK, limit, room, |len| {
        sys::copy_file_range(src, dst, len)
    })
}
