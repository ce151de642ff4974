//! Pipes of zerocat's own, with their invariant (empty whenever a transfer starts), and
//! the pipe controls: size, growth toward `pipe-max-size`, dropping bytes.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::OnceLock;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::PollFlags;

/// A pipe that belongs to zerocat, grown as far as the system allows.
pub struct OwnPipe {
    pub read: OwnedFd,
    pub write: OwnedFd,
    /// Capacity in bytes (what F_SETPIPE_SZ granted).
    pub size: usize,
}

impl OwnPipe {
    pub fn new() -> nix::Result<OwnPipe> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let size = grow_pipe(write.as_fd()).unwrap_or(64 * 1024);
        Ok(OwnPipe { read, write, size })
    }

    /// Bytes sitting in the pipe (FIONREAD).
    pub fn queued(&self) -> Result<usize, Errno> {
        super::queued(self.read.as_fd())
    }

    /// The own pipe's rule: it is empty whenever a transfer starts. Bytes still here were
    /// left by a transfer whose sink failed; they belong to that sink and to no other, so
    /// they are read out and dropped, never handed to the next transfer (nor to the sink
    /// probe, which would move one of them).
    pub fn ensure_empty(&self) -> Result<(), Errno> {
        let left = self.queued()?;
        if left > 0 {
            let mut buf = vec![0u8; left.min(64 * 1024)];
            discard(self.read.as_fd(), left, &mut buf)?;
        }
        Ok(())
    }
}

/// Reads and drops up to `len` bytes at the head of pipe `fd` through `buf` (fewer at its
/// end), waiting out EAGAIN. Returns how many were dropped.
pub fn discard(fd: BorrowedFd<'_>, len: usize, buf: &mut [u8]) -> Result<usize, Errno> {
    let mut left = len;
    while left > 0 {
        let want = left.min(buf.len());
        match super::read(fd, &mut buf[..want]) {
            Ok(0) => break,
            Ok(n) => left -= n,
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => super::wait(fd, PollFlags::POLLIN)?,
            Err(e) => return Err(e),
        }
    }
    Ok(len - left)
}

/// `pipe-max-size`, read once: the most an unprivileged F_SETPIPE_SZ may ask for.
fn pipe_max_size() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1 << 20)
    })
}

/// A pipe's capacity (F_GETPIPE_SZ).
pub fn pipe_size(fd: BorrowedFd<'_>) -> Result<usize, Errno> {
    fcntl(fd.as_raw_fd(), FcntlArg::F_GETPIPE_SZ).map(|n| n as usize)
}

/// Grows a pipe someone handed us, unless it was shrunk below the default on purpose.
pub fn grow_unless_shrunk(fd: BorrowedFd<'_>) {
    if pipe_size(fd).is_ok_and(|size| size >= 64 * 1024) {
        grow_pipe(fd);
    }
}

/// Grows a pipe toward `pipe-max-size`, best effort (EPERM past a user's soft limit,
/// EBUSY below what is queued): halves the request until the kernel agrees, never
/// shrinks. Returns the size the pipe has now.
pub fn grow_pipe(fd: BorrowedFd<'_>) -> Option<usize> {
    grow_pipe_within(fd, usize::MAX)
}

/// Sets an empty pipe's capacity (F_SETPIPE_SZ; the kernel rounds it up to a power of two
/// pages). Returns the capacity granted.
pub fn set_pipe_size(fd: BorrowedFd<'_>, size: usize) -> Result<usize, Errno> {
    fcntl(fd.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(size as i32)).map(|n| n as usize)
}

/// [`grow_pipe`], to at most `limit` bytes (the kernel rounds a size up to a power of two
/// pages, so the request is the largest power of two within both limits).
pub fn grow_pipe_within(fd: BorrowedFd<'_>, limit: usize) -> Option<usize> {
    let current = pipe_size(fd).ok()?;
    let cap = pipe_max_size().min(limit);
    if cap == 0 {
        return Some(current);
    }
    let mut want = 1usize << (usize::BITS - 1 - cap.leading_zeros());
    while want > current {
        if let Ok(granted) = fcntl(fd.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(want as i32)) {
            return Some(granted as usize);
        }
        want /= 2;
    }
    Some(current)
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::io::{Read, Write};

    use super::*;

    fn put(pipe: &OwnPipe, bytes: &[u8]) {
        crate::sys::write_all(pipe.write.as_fd(), bytes).unwrap();
    }

    #[test]
    fn a_fresh_pipe_is_empty_and_grown() {
        let pipe = OwnPipe::new().unwrap();
        assert_eq!(pipe.queued(), Ok(0));
        assert!(pipe.size >= 64 * 1024, "{}", pipe.size);
        assert_eq!(pipe_size(pipe.write.as_fd()), Ok(pipe.size));
    }

    #[test]
    fn ensure_empty_leaves_nothing_for_the_next_transfer() {
        let pipe = OwnPipe::new().unwrap();
        // More than its 64 KiB read buffer: it reads in several rounds.
        let stale = vec![9u8; pipe.size.min(200_000)];
        put(&pipe, &stale);
        assert_eq!(pipe.queued(), Ok(stale.len()));
        pipe.ensure_empty().unwrap();
        assert_eq!(pipe.queued(), Ok(0));
        // An empty pipe: nothing to do, and the next bytes are the only ones there.
        pipe.ensure_empty().unwrap();
        put(&pipe, b"next");
        let mut got = [0u8; 16];
        let n = crate::sys::read(pipe.read.as_fd(), &mut got).unwrap();
        assert_eq!(&got[..n], b"next");
    }

    #[test]
    fn discard_drops_what_is_asked_and_stops_at_the_end() {
        let (read, write) = nix::unistd::pipe().unwrap();
        let mut write = File::from(write);
        write.write_all(b"0123456789").unwrap();
        let mut buf = [0u8; 3];
        assert_eq!(discard(read.as_fd(), 4, &mut buf), Ok(4));
        drop(write);
        assert_eq!(discard(read.as_fd(), 100, &mut buf), Ok(6));
        let mut rest = Vec::new();
        File::from(read).read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }

    #[test]
    fn a_pipe_shrunk_on_purpose_stays_shrunk() {
        let (read, write) = nix::unistd::pipe().unwrap();
        fcntl(write.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(4096)).unwrap();
        grow_unless_shrunk(write.as_fd());
        assert_eq!(pipe_size(read.as_fd()), Ok(4096));
    }
}
