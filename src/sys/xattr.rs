//! Extended attributes of an open file: the validator `copy --resume URL FILE` keeps with
//! a partial download (`user.zerocat.etag`).

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd};

use nix::errno::Errno;
use nix::libc;

/// Sets attribute `name` of `fd` to `value`.
pub fn set(fd: BorrowedFd<'_>, name: &str, value: &[u8]) -> Result<(), Errno> {
    let name = CString::new(name).map_err(|_| Errno::EINVAL)?;
    // SAFETY: a valid fd, a NUL-terminated name, a buffer of the length given.
    let r = unsafe {
        libc::fsetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            value.as_ptr().cast(),
            value.len(),
            0,
        )
    };
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// Attribute `name` of `fd`: None when the file has none (ENODATA); the filesystem's
/// refusal (ENOTSUP...) as an error.
pub fn get(fd: BorrowedFd<'_>, name: &str) -> Result<Option<Vec<u8>>, Errno> {
    let name = CString::new(name).map_err(|_| Errno::EINVAL)?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: a valid fd, a NUL-terminated name, a buffer of the length given.
    let r = unsafe {
        libc::fgetxattr(
            fd.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if r < 0 {
        return match Errno::last() {
            Errno::ENODATA => Ok(None),
            e => Err(e),
        };
    }
    buf.truncate(r as usize);
    Ok(Some(buf))
}

/// Removes attribute `name` of `fd` (none there is no error).
pub fn remove(fd: BorrowedFd<'_>, name: &str) -> Result<(), Errno> {
    let name = CString::new(name).map_err(|_| Errno::EINVAL)?;
    // SAFETY: a valid fd and a NUL-terminated name.
    let r = unsafe { libc::fremovexattr(fd.as_raw_fd(), name.as_ptr()) };
    if r < 0 && Errno::last() != Errno::ENODATA {
        Err(Errno::last())
    } else {
        Ok(())
    }
}
