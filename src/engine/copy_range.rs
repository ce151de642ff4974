//! copy_file_range(2): file to file inside the kernel (and a server-side copy or a reflink
//! where the filesystem offers one).

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::poll::PollFlags;
use nix::sys::stat::fstat;
use nix::unistd::{lseek, Whence};

use super::{pump, Outcome, Reason};
use crate::engine::meter::Meter;
use crate::sys;

/// Moves bytes with copy_file_range until EOF or `limit` bytes. `size`: the source's size
/// when it was opened, where known.
pub fn copy_upto(
    src: BorrowedFd<'_>,
    size: Option<u64>,
    dst: BorrowedFd<'_>,
    meter: &Meter,
    limit: u64,
) -> Outcome {
    // A 0 is not always EOF. On the first call: procfs/sysfs, overlayfs and CIFS have said
    // 0 for files with data (golang/go#44272, docker/for-linux#1015). Later, short of the
    // source's size: a short copy by FUSE or CIFS. Either way the next path carries on.
    // Once this call moved the whole size the source was opened with, the 0 is the end and
    // needs no lseek and fstat to say so (two of a small file's eleven syscalls).
    let distrust_zero = |moved: u64| {
        if moved == 0 {
            Some(Reason::FirstCallReturnedZero)
        } else if size.is_some_and(|size| moved >= size) {
            None
        } else if before_the_end(src) {
            Some(Reason::ReturnedZeroBeforeEnd)
        } else {
            None
        }
    };
    let room = || sys::wait(dst, PollFlags::POLLOUT);
    pump(meter, distrust_zero, sys::MAX_CHUNK, limit, room, |len| {
        sys::copy_file_range(src, dst, len)
    })
}

/// Is the source's offset short of its size? (Unknown: no, the 0 is taken as EOF.)
fn before_the_end(src: BorrowedFd<'_>) -> bool {
    let offset = lseek(src.as_raw_fd(), 0, Whence::SeekCur);
    match (offset, fstat(src.as_raw_fd())) {
        (Ok(offset), Ok(st)) => offset < st.st_size,
        _ => false,
    }
}
