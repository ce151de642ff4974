//! FICLONE: the destination shares the source's extents (XFS with reflink=1, btrfs, bcachefs,
//! OCFS2). Nothing is copied, so a 1 GiB clone takes milliseconds; it is all or nothing and
//! ignores file offsets, so it only ever runs as the first path of a whole-file copy.

use std::os::fd::AsRawFd;

use nix::errno::Errno;

use super::{refuse_or_fail, side_of, Ends, Failure, Outcome, Side};
use crate::engine::meter::Meter;
use crate::sys;

pub fn clone(ends: &Ends<'_>, meter: &Meter) -> Outcome {
    loop {
        match sys::ficlone(ends.src, ends.dst) {
            Ok(_) => break,
            Err(Errno::EINTR) => continue,
            // Nothing moves before FICLONE answers: the rule decides alone.
            Err(e) => return refuse_or_fail(e, 0, side_of(e)),
        }
    }
    // The clone replaced the whole destination: it now holds the source's size. A clone
    // that says so but left less is not trusted (never exit 0 with the bytes missing).
    match nix::sys::stat::fstat(ends.dst.as_raw_fd()) {
        Ok(st) => {
            let size = st.st_size as u64;
            if let Some(expected) = ends.src_info.size.filter(|&e| size < e) {
                let why = format!(
                    "FICLONE reported success, but the destination holds {size} of {expected} bytes"
                );
                return Outcome::Failed(0, Failure::Io(std::io::Error::other(why), Side::Sink));
            }
            meter.add_unpaced(size);
            Outcome::Ended(size)
        }
        Err(e) => Outcome::Failed(0, Failure::of(e, Side::Sink)),
    }
}
