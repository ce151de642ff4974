//! A memfd as a staging buffer in the page cache: filled from a pipe with splice, sent with
//! sendfile, read in place through a read-only mapping (to hash it), rewound to send again.
//! No byte passes through a user buffer.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr;

use nix::errno::Errno;
use nix::libc;
use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
use nix::unistd::{lseek, Whence};

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

    /// `f` over the bytes in place (a read-only shared mapping; nothing is copied).
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> Result<R, Errno> {
        if self.len == 0 {
            return Ok(f(&[]));
        }
        // SAFETY: a fresh read-only mapping of `len` bytes of a memfd that holds them; no
        // one writes the memfd while it is mapped (its owner holds `&self`), and the
        // mapping is removed before returning.
        unsafe {
            let at = libc::mmap(
                ptr::null_mut(),
                self.len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                self.fd.as_raw_fd(),
                0,
            );
            if at == libc::MAP_FAILED {
                return Err(Errno::last());
            }
            let result = f(std::slice::from_raw_parts(at as *const u8, self.len));
            libc::munmap(at, self.len);
            Ok(result)
        }
    }
}
