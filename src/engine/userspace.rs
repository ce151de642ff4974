//! The plain read/write loop: works for every pair of fds, and is the path every chain
//! ends in. One buffer, each byte copied once (no buffered reader in between).

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::poll::PollFlags;
use nix::unistd::Whence;

use super::{chunk, next_len, Failure, Outcome, Side};
use crate::engine::meter::Meter;
use crate::sys;

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
                Err(e) => return Outcome::Failed(moved, Failure::of(e, Side::Source)),
            },
            Err(e) => return Outcome::Failed(moved, Failure::of(e, Side::Source)),
        };
        if let Err((done, e)) = sys::write_all(dst, &buf[..n]) {
            meter.add(done as u64);
            return Outcome::Failed(moved + done as u64, Failure::of(e, Side::Sink));
        }
        moved += n as u64;
        meter.add(n as u64);
    }
}

/// The zero-detecting block of `--sparse=always`: whole filesystem blocks become holes.
pub const ZERO_BLOCK: usize = 4096;

/// `--sparse=always` inside one data extent of a regular-file sink: [`copy_upto`], except
/// that each whole block of zeros is seeked over instead of written, and added to
/// `skipped`. The outcome counts the bytes written; with the blocks skipped, that is what
/// left the source. Paced and interrupted like every path, through [`next_len`]; the pace
/// counts written bytes only (a skipped block costs the sink nothing).
pub fn copy_skipping_zeros(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    meter: &Meter,
    limit: u64,
    skipped: &mut u64,
) -> Outcome {
    let mut buf = vec![0u8; chunk(limit, BUFFER_SIZE)];
    let mut written = 0u64;
    let mut zeros = 0u64;
    loop {
        // `limit` is what may leave the source: the skipped blocks are part of it.
        let len = match next_len(written, limit - zeros, buf.len(), meter) {
            Ok(len) => len,
            Err(done) => return done,
        };
        let n = match sys::read(src, &mut buf[..len]) {
            Ok(0) => return Outcome::Ended(written),
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) => match sys::wait(src, PollFlags::POLLIN) {
                Ok(()) => continue,
                Err(e) => return Outcome::Failed(written, Failure::of(e, Side::Source)),
            },
            Err(e) => return Outcome::Failed(written, Failure::of(e, Side::Source)),
        };
        for block in buf[..n].chunks(ZERO_BLOCK) {
            let result = if block.len() == ZERO_BLOCK && block.iter().all(|&b| b == 0) {
                nix::unistd::lseek(dst.as_raw_fd(), ZERO_BLOCK as i64, Whence::SeekCur)
                    .map(|_| {
                        zeros += ZERO_BLOCK as u64;
                        *skipped += ZERO_BLOCK as u64;
                    })
                    .map_err(|e| (0, e))
            } else {
                sys::write_all(dst, block).map(|()| {
                    written += block.len() as u64;
                    meter.add(block.len() as u64);
                })
            };
            if let Err((done, e)) = result {
                meter.add(done as u64);
                let failure = Failure::of(e, Side::Sink);
                return Outcome::Failed(written + done as u64, failure);
            }
        }
    }
}
