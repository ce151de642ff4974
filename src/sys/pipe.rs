//! Pipes of zerocat's own, and growing any pipe toward `pipe-max-size`.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::OnceLock;

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};

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
        let mut left = self.queued()?;
        if left == 0 {
            return Ok(());
        }
        let mut buf = vec![0u8; left.min(64 * 1024)];
        while left > 0 {
            let want = left.min(buf.len());
            match super::read(self.read.as_fd(), &mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => left -= n,
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
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

/// Grows a pipe toward `pipe-max-size`, best effort (EPERM past a user's soft limit,
/// EBUSY below what is queued): halves the request until the kernel agrees, never
/// shrinks. Returns the size the pipe has now.
pub fn grow_pipe(fd: BorrowedFd<'_>) -> Option<usize> {
    let current = fcntl(fd.as_raw_fd(), FcntlArg::F_GETPIPE_SZ).ok()? as usize;
    let mut want = pipe_max_size();
    while want > current {
        if let Ok(granted) = fcntl(fd.as_raw_fd(), FcntlArg::F_SETPIPE_SZ(want as i32)) {
            return Some(granted as usize);
        }
        want /= 2;
    }
    Some(current)
}
