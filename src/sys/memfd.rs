//! A memfd as a staging buffer in the page cache: filled from a pipe with splice, sent with
//! sendfile, read in place through a read-only mapping (to hash it), rewound to send again.
//! No byte passes through a user buffer. A regular file can stand in for one, to be sent
//! as it is ([`Staged::holding`]).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr;

use nix::errno::Errno;
use nix::libc;
use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
use nix::unistd::{lseek, Whence};

/// The most [`Staged::each_window`] maps at once.
pub const WINDOW: usize = 1 << 20;

/// A memfd and how many bytes it holds.
pub struct Staged {
    fd: OwnedFd,
    len: usize,
}

impl Staged {
    pub fn new(name: &std::ffi::CStr) -> Result<Staged, Errno> {
        Ok(Staged {
            fd: memfd_create(name, MemFdCreateFlag::MFD_CLOEXEC)?,
            len: 0,
        })
    }

    /// Bytes already in a regular file, `len` of them from its start, to send as they are
    /// (a small file put as one object: no memfd, no pipe, no copy). Only the reading half
    /// is used: [`Staged::rewind`], [`Staged::each_window`], [`Staged::fd`].
    pub fn holding(file: OwnedFd, len: usize) -> Staged {
        Staged { fd: file, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Empty it for the next part (the pages are freed).
    pub fn clear(&mut self) -> Result<(), Errno> {
        nix::unistd::ftruncate(&self.fd, 0)?;
        lseek(self.fd.as_raw_fd(), 0, Whence::SeekSet)?;
        self.len = 0;
        Ok(())
    }

    /// Splice from `pipe` until it holds `limit` bytes or the pipe's writers are gone.
    /// Returns whether the pipe ended (EOF). EINTR is retried; a caller that must stop on a
    /// signal checks between parts.
    pub fn fill_from(&mut self, pipe: BorrowedFd<'_>, limit: usize) -> Result<bool, Errno> {
        while self.len < limit {
            match super::splice(
                pipe,
                self.fd.as_fd(),
                (limit - self.len).min(super::MAX_CHUNK),
            ) {
                Ok(0) => return Ok(true),
                Ok(n) => self.len += n,
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// Back to the first byte, to send it (again).
    pub fn rewind(&self) -> Result<(), Errno> {
        lseek(self.fd.as_raw_fd(), 0, Whence::SeekSet).map(drop)
    }

    /// `f` over the bytes in place, [`WINDOW`] bytes at a time: a read-only shared mapping
    /// of each window, removed before the next, so reading a part of any size adds one
    /// window to the process's RSS, never the part (a 10 GiB upload's parts of 16 MiB, four
    /// in flight, hashed whole took the peak RSS to 64 MiB). Nothing is copied.
    pub fn each_window(&self, mut f: impl FnMut(&[u8])) -> Result<(), Errno> {
        let mut at = 0;
        while at < self.len {
            let n = (self.len - at).min(WINDOW);
            // SAFETY: a fresh read-only mapping of `n` bytes at `at` (a multiple of WINDOW,
            // so of the page size) of a memfd that holds them; no one writes the memfd while
            // it is mapped (its owner holds `&self`), and the mapping is removed before the
            // next one and before returning.
            unsafe {
                let map = libc::mmap(
                    ptr::null_mut(),
                    n,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    self.fd.as_raw_fd(),
                    at as libc::off_t,
                );
                if map == libc::MAP_FAILED {
                    return Err(Errno::last());
                }
                f(std::slice::from_raw_parts(map as *const u8, n));
                libc::munmap(map, n);
            }
            at += n;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_window_hands_over_every_byte_in_order_a_window_at_a_time() {
        let mut staged = Staged::new(c"zerocat-test").unwrap();
        let bytes: Vec<u8> = (0..WINDOW * 2 + 12_345).map(|i| (i % 251) as u8).collect();
        let mut written = 0;
        while written < bytes.len() {
            written += nix::unistd::write(&staged.fd, &bytes[written..]).unwrap();
        }
        staged.len = bytes.len();
        let mut seen = Vec::new();
        let mut sizes = Vec::new();
        staged
            .each_window(|w| {
                sizes.push(w.len());
                seen.extend_from_slice(w);
            })
            .unwrap();
        assert_eq!(sizes, [WINDOW, WINDOW, 12_345]);
        assert!(
            seen == bytes,
            "the windows' bytes differ from what was written"
        );
    }
}
