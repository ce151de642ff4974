//! The plain read/write loop: works for every pair of fds, and is the path every chain
//! ends in. One buffer, each byte copied once (no buffered reader in between).

use std::os::fd::BorrowedFd;

use nix::errno::Errno;
use nix::poll::PollFlags;

use super::{chunk, next_len, sys, Failure, Outcome, Side};
use crate::progress::Meter;

/// Large enough to take a grown pipe's whole content in one read.
pub const BUFFER_SIZE: usize = 1 << 20;

pub fn copy(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, meter: &Meter) -> Outcome {
    copy_upto(src, dst, meter, u64::MAX)
}

/// [`copy`], stopping after `limit` bytes.
pub fn copy_upto(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, meter: &Meter, limit: u64) -> Outcome {
    let mut buf = vec![0u8; chunk(limit, BUFFER_SIZE)];
    let mut moved = 0u64;
    loop {
        let len = match next_len(moved, limit, buf.len(), meter) {
            Ok(len) => len,
            Err(done) => return done,
        };
        let n = match sys::read(src, &mut buf[..len]) {
            Ok(0) => return Outcome::Ended(moved),
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) => match sys::wait(src, PollFlags::POLLIN) {
                Ok(()) => continue,
                Err(e) => return Outcome::Failed(moved, Failure::Io(e.into(), Side::Source)),
            },
            Err(e) => return Outcome::Failed(moved, Failure::Io(e.into(), Side::Source)),
        };
        if let Err((done, e)) = sys::write_all(dst, &buf[..n]) {
            meter.add(done as u64);
            return Outcome::Failed(moved + done as u64, Failure::Io(e.into(), Side::Sink));
        }
        moved += n as u64;
        meter.add(n as u64);
    }
}
