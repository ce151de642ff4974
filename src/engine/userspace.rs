//! The plain read/write loop: works for every pair of fds, and is the path every chain
//! ends in. One buffer, each byte copied once (no buffered reader in between).

use std::cell::RefCell;
use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::poll::PollFlags;
use nix::unistd::Whence;

use super::{chunk, next_len, Failure, Outcome, Side};
use crate::engine::dump::Tapped;
use crate::engine::meter::Meter;
use crate::sys;

/// Large enough to take a grown pipe's whole content in one read.
pub const BUFFER_SIZE: usize = 1 << 20;

/// The largest UDP payload over IPv4 (65,535 - 8 UDP - 20 IP header bytes).
pub const DATAGRAM_MAX: usize = 65_507;

/// Moves bytes with read/write until EOF or `limit` bytes.
pub fn copy_upto(src: BorrowedFd<'_>, dst: BorrowedFd<'_>, meter: &Meter, limit: u64) -> Outcome {
    copy_with(src, dst, meter, limit, None, BUFFER_SIZE, None)
}

/// [`copy_upto`], each buffer written also copied into `--dump`'s tap.
pub fn copy_tapped(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    meter: &Meter,
    limit: u64,
    tap: Option<&RefCell<Tapped>>,
) -> Outcome {
    copy_with(src, dst, meter, limit, None, BUFFER_SIZE, tap)
}

/// [`copy_upto`] into a datagram socket: each read (at most `size` bytes, by default
/// [`DATAGRAM_MAX`]) is written as one datagram.
pub fn copy_datagrams(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    meter: &Meter,
    limit: u64,
    size: Option<usize>,
    tap: Option<&RefCell<Tapped>>,
) -> Outcome {
    copy_with(
        src,
        dst,
        meter,
        limit,
        None,
        size.unwrap_or(DATAGRAM_MAX),
        tap,
    )
}

/// From a datagram socket: each read takes one whole datagram (into a buffer of the
/// largest, whatever a pace or a limit would allow: a read shorter than the datagram cuts
/// it, and the kernel drops the rest), written whole — into a datagram sink, in pieces of
/// at most `size` (its `,size=N`), so nothing is lost. An empty datagram is the end; with
/// `quiet`, so is that long without a datagram (`--idle-timeout`).
pub fn copy_from_datagrams(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    meter: &Meter,
    limit: u64,
    size: Option<usize>,
    quiet: Option<std::time::Duration>,
    tap: Option<&RefCell<Tapped>>,
) -> Outcome {
    let mut buf = vec![0u8; DATAGRAM_MAX];
    let mut written = 0u64;
    loop {
        // For the stop flag and the pace; the read itself is always whole.
        if let Err(done) = next_len(written, limit, buf.len(), meter) {
            return done;
        }
        if let Some(quiet) = quiet {
            match sys::wait_within(src, PollFlags::POLLIN, quiet) {
                Ok(true) => {}
                Ok(false) => return Outcome::Ended(written),
                Err(e) => return Outcome::Failed(written, Failure::of(e, Side::Source)),
            }
        }
        let n = match read_step(src, &mut buf) {
            Ok(Some(0)) => return Outcome::Ended(written),
            Ok(Some(n)) => n,
            Ok(None) => continue,
            Err(e) => return Outcome::Failed(written, Failure::of(e, Side::Source)),
        };
        for piece in buf[..n].chunks(size.unwrap_or(n).max(1)) {
            if let Err((done, e)) = sys::write_all(dst, piece) {
                meter.add(done as u64);
                return Outcome::Failed(written + done as u64, Failure::of(e, Side::Sink));
            }
            written += piece.len() as u64;
            meter.add(piece.len() as u64);
            if let Some(tap) = tap {
                tap.borrow_mut().wrote(piece);
            }
        }
    }
}

/// The zero-detecting block of `--sparse=always`: whole filesystem blocks become holes.
const ZERO_BLOCK: usize = 4096;

/// `--sparse=always` inside one data extent of a regular-file sink: [`copy_upto`], except
/// that each whole block of zeros is seeked over instead of written, and added to
/// `skipped`. The outcome counts the bytes written; with the blocks skipped, that is what
/// left the source. Paced and interrupted like every path, through `next_len`; the pace
/// counts written bytes only (a skipped block costs the sink nothing).
pub fn copy_skipping_zeros(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    meter: &Meter,
    limit: u64,
    skipped: &mut u64,
) -> Outcome {
    copy_with(src, dst, meter, limit, Some(skipped), BUFFER_SIZE, None)
}

thread_local! {
    /// The buffer of this thread's last copy, kept for its next: a MiB is mapped by malloc
    /// on its own, so each short transfer (`--keep-open`'s connections) paid an mmap, a
    /// page fault and an munmap for it.
    static SPARE: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The one read/write loop of both: with `skipped`, blocks of zeros are seeked over.
fn copy_with(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    meter: &Meter,
    limit: u64,
    skipped: Option<&mut u64>,
    buffer_size: usize,
    tap: Option<&RefCell<Tapped>>,
) -> Outcome {
    let len = chunk(limit, buffer_size);
    let mut buf = SPARE.take();
    if buf.len() < len {
        buf = vec![0u8; len];
    }
    let outcome = copy_through(src, dst, meter, limit, skipped, &mut buf[..len], tap);
    SPARE.set(buf);
    outcome
}

/// [`copy_with`]'s loop, through `buf`.
fn copy_through(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    meter: &Meter,
    limit: u64,
    mut skipped: Option<&mut u64>,
    buf: &mut [u8],
    tap: Option<&RefCell<Tapped>>,
) -> Outcome {
    let mut written = 0u64;
    let mut zeros = 0u64;
    loop {
        // `limit` is what may leave the source: the skipped blocks are part of it.
        let len = match next_len(written, limit - zeros, buf.len(), meter) {
            Ok(len) => len,
            Err(done) => return done,
        };
        let n = match read_step(src, &mut buf[..len]) {
            Ok(Some(0)) => return Outcome::Ended(written),
            Ok(Some(n)) => n,
            Ok(None) => continue,
            Err(e) => return Outcome::Failed(written, Failure::of(e, Side::Source)),
        };
        let block_size = if skipped.is_some() { ZERO_BLOCK } else { n };
        for block in buf[..n].chunks(block_size) {
            let result = match skipped.as_deref_mut() {
                Some(skipped) if block.len() == ZERO_BLOCK && block.iter().all(|&b| b == 0) => {
                    nix::unistd::lseek(dst.as_raw_fd(), ZERO_BLOCK as i64, Whence::SeekCur)
                        .map(|_| {
                            zeros += ZERO_BLOCK as u64;
                            *skipped += ZERO_BLOCK as u64;
                        })
                        .map_err(|e| (0, e))
                }
                _ => sys::write_all(dst, block).map(|()| {
                    written += block.len() as u64;
                    meter.add(block.len() as u64);
                    if let Some(tap) = tap {
                        tap.borrow_mut().wrote(block);
                    }
                }),
            };
            if let Err((done, e)) = result {
                meter.add(done as u64);
                return Outcome::Failed(written + done as u64, Failure::of(e, Side::Sink));
            }
        }
    }
}

/// One read in a loop whose top checks the stop flag ([`next_len`]). `Ok(None)`: go round
/// again — EINTR, or a non-blocking source someone handed us that was empty and now has
/// data or its end.
pub(crate) fn read_step(src: BorrowedFd<'_>, buf: &mut [u8]) -> Result<Option<usize>, Errno> {
    match sys::read(src, buf) {
        Ok(n) => Ok(Some(n)),
        Err(Errno::EINTR) => Ok(None),
        Err(Errno::EAGAIN) => sys::wait(src, PollFlags::POLLIN).map(|()| None),
        Err(e) => Err(e),
    }
}

/// One read of up to `len` bytes from `src` (a pipe) into `buf` and a write of all of
/// them to `dst`: how bytes leave a pipe of ours, or the source's pipe, for a sink that
/// takes no splice. Returns the bytes read (0 at EOF); on error, the bytes read (all gone
/// from `src`), the bytes written, and the errno.
pub(crate) fn read_write(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    len: usize,
    buf: &mut [u8],
) -> Result<usize, (usize, usize, Errno)> {
    let want = len.min(buf.len());
    let n = loop {
        match sys::read(src, &mut buf[..want]) {
            Ok(n) => break n,
            Err(Errno::EINTR) if !crate::sys::process::must_stop() => {}
            Err(Errno::EAGAIN) => sys::wait(src, PollFlags::POLLIN).map_err(|e| (0, 0, e))?,
            Err(e) => return Err((0, 0, e)),
        }
    };
    sys::write_all(dst, &buf[..n]).map_err(|(written, e)| (n, written, e))?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn whole_blocks_of_zeros_are_seeked_over_and_the_rest_written() {
        let mut bytes = vec![1u8; ZERO_BLOCK];
        bytes.extend(vec![0u8; 2 * ZERO_BLOCK]);
        bytes.extend(vec![0u8; 100]); // a short block of zeros is written
        let mut src = tempfile::tempfile().unwrap();
        src.write_all(&bytes).unwrap();
        src.seek(SeekFrom::Start(0)).unwrap();
        let mut dst = tempfile::tempfile().unwrap();
        let (meter, mut skipped) = (Meter::new(), 0);
        let limit = bytes.len() as u64;
        let outcome = copy_skipping_zeros(src.as_fd(), dst.as_fd(), &meter, limit, &mut skipped);
        assert!(matches!(outcome, Outcome::Ended(4196)), "{outcome:?}");
        assert_eq!((skipped, meter.delivered()), (2 * ZERO_BLOCK as u64, 4196));
        let mut got = Vec::new();
        dst.seek(SeekFrom::Start(0)).unwrap();
        dst.read_to_end(&mut got).unwrap();
        assert_eq!(got, bytes);
    }

    #[test]
    fn copy_upto_stops_at_its_limit() {
        let mut src = tempfile::tempfile().unwrap();
        src.write_all(b"0123456789").unwrap();
        src.seek(SeekFrom::Start(0)).unwrap();
        let mut dst = tempfile::tempfile().unwrap();
        let outcome = copy_upto(src.as_fd(), dst.as_fd(), &Meter::new(), 4);
        assert!(matches!(outcome, Outcome::Ended(4)), "{outcome:?}");
        let mut got = String::new();
        dst.seek(SeekFrom::Start(0)).unwrap();
        dst.read_to_string(&mut got).unwrap();
        assert_eq!(got, "0123");
    }
}
